//! The lock actors' timers: one task per manager keeps every pending timer in a map ordered
//! by due time and sends each due message to its actor. A pending timer costs a map entry
//! (a few dozen bytes) instead of a sleeping task (about 430 bytes), which matters when one
//! process holds tens of thousands of leases. Setting a timer again or cancelling it removes
//! the previous entry, so nothing outlives its purpose.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicU64, Ordering};

use ractor::{ActorRef, Message};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Sends one due message.
type Fire = Box<dyn FnOnce() + Send>;

/// Replaces timer `id`'s pending entry, if any, with `set` (`None`: cancels it).
struct Command {
    id: u64,
    set: Option<(Instant, Fire)>,
}

/// The timer service of one manager, shared by its actors; it ends when every handle is gone.
#[derive(Clone)]
pub(crate) struct Timers {
    commands: mpsc::UnboundedSender<Command>,
    next_id: Arc<AtomicU64>,
    /// How many timers are pending, for the leak checks of the crate's tests.
    #[cfg(test)]
    pending: Arc<AtomicUsize>,
}

impl Timers {
    /// Starts the service task.
    pub(crate) fn start() -> Self {
        let (commands, incoming) = mpsc::unbounded_channel();
        #[cfg(test)]
        let pending = Arc::new(AtomicUsize::new(0));
        tokio::spawn(run(
            incoming,
            #[cfg(test)]
            pending.clone(),
        ));
        Self {
            commands,
            next_id: Arc::new(AtomicU64::new(0)),
            #[cfg(test)]
            pending,
        }
    }

    /// A new timer, idle until [`Timer::set`].
    pub(crate) fn timer<M: Message>(&self) -> Timer<M> {
        Timer {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            timers: self.clone(),
            armed: false,
            message: std::marker::PhantomData,
        }
    }

    /// How many timers are pending (the service's count, as of its last command), apart
    /// from the service: reading it does not keep the service running.
    #[cfg(test)]
    pub(crate) fn count(&self) -> Arc<AtomicUsize> {
        self.pending.clone()
    }
}

/// One cancellable timer of an actor: at most one message pending at a time.
pub(crate) struct Timer<M: Message> {
    id: u64,
    timers: Timers,
    armed: bool,
    message: std::marker::PhantomData<fn() -> M>,
}

impl<M: Message> Timer<M> {
    /// Tells this timer apart from every other of its service: a message that carries it
    /// is recognised as stale once its timer is gone.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Sends `message()` to `actor` at `at`, replacing whatever this timer had pending.
    pub(crate) fn set(
        &mut self,
        actor: &ActorRef<M>,
        at: Instant,
        message: impl FnOnce() -> M + Send + 'static,
    ) {
        let actor = actor.clone();
        let fire: Fire = Box::new(move || {
            // A stopped actor has nothing left to time.
            let _ = actor.send_message(message());
        });
        self.armed = true;
        // The service stops only once every handle (this one included) is gone.
        let set = Some((at, fire));
        let _ = self.timers.commands.send(Command { id: self.id, set });
    }

    /// Drops the pending message, if any.
    pub(crate) fn cancel(&mut self) {
        if std::mem::take(&mut self.armed) {
            let _ = self.timers.commands.send(Command {
                id: self.id,
                set: None,
            });
        }
    }
}

impl<M: Message> Drop for Timer<M> {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The service: pending timers by due time, with an index by id for replacing and cancelling.
async fn run(
    mut incoming: mpsc::UnboundedReceiver<Command>,
    #[cfg(test)] pending: Arc<AtomicUsize>,
) {
    let mut due: BTreeMap<(Instant, u64), Fire> = BTreeMap::new();
    let mut by_id: HashMap<u64, Instant> = HashMap::new();
    loop {
        let next = due.first_key_value().map(|(&(at, _), _)| at);
        // Due timers first (then the next command), so that a busy command queue can never
        // hold back a due timer; the fixed order also keeps runs reproducible.
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                while let Some(entry) = due.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let ((_, id), fire) = entry.remove_entry();
                    by_id.remove(&id);
                    fire();
                }
            }
            command = incoming.recv() => {
                let Some(Command { id, set }) = command else { return };
                if let Some(at) = by_id.remove(&id) {
                    due.remove(&(at, id));
                }
                if let Some((at, fire)) = set {
                    by_id.insert(id, at);
                    due.insert((at, id), fire);
                }
            }
        }
        #[cfg(test)]
        pending.store(due.len(), Ordering::Relaxed);
    }
}

/// Also for the other lock tests: [`probe`].
#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use ractor::{Actor, ActorProcessingErr, ActorRef};
    use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

    use super::*;

    /// An actor that passes on every message it gets, to the receiver [`probe`] returns.
    struct Probe<M>(std::marker::PhantomData<fn() -> M>);

    impl<M: Message> Actor for Probe<M> {
        type Msg = M;
        type State = UnboundedSender<M>;
        type Arguments = UnboundedSender<M>;

        async fn pre_start(
            &self,
            _: ActorRef<M>,
            seen: Self::State,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(seen)
        }

        async fn handle(
            &self,
            _: ActorRef<M>,
            message: M,
            seen: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            let _ = seen.send(message);
            Ok(())
        }
    }

    /// A running [`Probe`] and what it receives.
    pub(in crate::lock) async fn probe<M: Message>() -> (ActorRef<M>, UnboundedReceiver<M>) {
        let (seen, received) = mpsc::unbounded_channel();
        let (probe, _) = Actor::spawn(None, Probe(std::marker::PhantomData), seen)
            .await
            .unwrap();
        (probe, received)
    }

    #[tokio::test(start_paused = true)]
    async fn timers_fire_in_order_and_replaced_or_cancelled_ones_never() {
        let timers = Timers::start();
        let (probe, mut received) = probe::<u32>().await;
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        let [mut first, mut second, mut dropped, mut cancelled] = [(); 4].map(|()| timers.timer());
        first.set(&probe, at(3), || 1);
        first.set(&probe, at(2), || 2); // replaces 1
        second.set(&probe, at(1), || 3);
        dropped.set(&probe, at(1), || 4);
        drop(dropped);
        cancelled.set(&probe, at(1), || 5);
        cancelled.cancel();
        assert_eq!(received.recv().await, Some(3));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert_eq!(received.recv().await, Some(2));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            received.try_recv().is_err(),
            "a replaced or cancelled timer fired"
        );
        assert_eq!(timers.count().load(Ordering::Relaxed), 0);
        probe.stop(None);
    }
}
