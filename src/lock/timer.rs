//! One cancellable timer: scheduling it again or cancelling it stops the previous one, so no
//! sleeping task outlives its purpose (a renewal timer of a released hold, the idle timer of
//! an actor that got busy again).

use ractor::{ActorRef, Message};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(crate) struct Timer<M: Message> {
    pending: Option<JoinHandle<Result<(), ractor::MessagingErr<M>>>>,
}

impl<M: Message> Default for Timer<M> {
    fn default() -> Self {
        Self { pending: None }
    }
}

impl<M: Message> Timer<M> {
    /// Sends `message()` to `actor` at `at`, replacing whatever this timer had pending.
    pub(crate) fn set(
        &mut self,
        actor: &ActorRef<M>,
        at: Instant,
        message: impl FnOnce() -> M + Send + 'static,
    ) {
        self.cancel();
        let delay = at.saturating_duration_since(Instant::now());
        self.pending = Some(actor.send_after(delay, message));
    }

    /// Drops the pending message, if any, and its sleeping task.
    pub(crate) fn cancel(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.abort();
        }
    }
}

impl<M: Message> Drop for Timer<M> {
    fn drop(&mut self) {
        self.cancel();
    }
}
