//! Lifecycle binding: a user actor that runs only while the campaign holds the lock.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ractor::{ActorCell, SpawnErr};

/// Spawns the bound actor for a term: `(token, supervisor) -> the actor's cell`.
pub(crate) type SpawnBound = Box<
    dyn Fn(u64, ActorCell) -> Pin<Box<dyn Future<Output = Result<ActorCell, SpawnErr>> + Send>>
        + Send
        + Sync,
>;

pub(crate) struct Binding {
    pub(crate) spawn: SpawnBound,
    /// The actor of the current term, if one is running.
    pub(crate) running: Option<ActorCell>,
}

impl Binding {
    pub(crate) fn new(spawn: SpawnBound) -> Self {
        Self {
            spawn,
            running: None,
        }
    }

    /// Stops the term's actor without waiting: for a lost term, where waiting cannot help
    /// (the fencing token covers writes still in flight).
    pub(crate) fn stop(&mut self) {
        if let Some(actor) = self.running.take() {
            actor.stop(Some("lock no longer held".to_owned()));
        }
    }

    /// Stops the term's actor and waits until it is gone — its current message handled,
    /// `post_stop` run — for at most `within`: a voluntary hand-over must not let the old
    /// term's work overlap the next holder's.
    pub(crate) async fn drain(&mut self, within: Duration) {
        let Some(actor) = self.running.take() else {
            return;
        };
        let stopped = actor
            .stop_and_wait(Some("handing the lock over".to_owned()), Some(within))
            .await;
        if let Err(error) = stopped {
            tracing::warn!(actor = %actor.get_id(), %error, "the bound actor did not stop in time; handing the lock over anyway");
        }
    }
}
