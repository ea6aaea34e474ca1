//! [`Campaign`]: the handle on the campaign engine that the public faces wrap —
//! [`BackgroundLock`](super::background::BackgroundLock) with lock events, and
//! [`Election`](crate::election::Election) with election events.

use std::future::Future;
use std::sync::Arc;

use ractor::{ActorCell, ActorRef, ActorRuntime, Message, SpawnErr};
use tokio::sync::{broadcast, oneshot};

use super::actor::{CampaignActor, CampaignArgs};
use super::event::CampaignEvent;
use super::message::{CampaignMsg, TermState};
use super::sinks::{CHANNEL_CAPACITY, EventSink};
use crate::error::LockError;
use crate::lock::{Lock, Runtime, ShutdownHook};

/// Keeps trying to hold one lock — whenever it is free, again after a loss — and reports
/// what happens as events instead of blocking, like the Java fenced-lock manager's
/// `acquireLockAsync`. Renewal stays in the lock runtime: nothing a campaign's subscribers
/// or bound actor do can delay it.
///
/// Clones share one campaign; dropping the last clone releases the lock and stops.
pub(crate) struct Campaign<E: CampaignEvent> {
    lock: Lock,
    engine: Arc<Engine<E>>,
}

/// The actor and its event channel; the campaign stops when the last face is dropped.
struct Engine<E: CampaignEvent> {
    actor: ActorRef<CampaignMsg<E>>,
    channel: broadcast::Sender<E>,
    /// The lock's runtime and this campaign's drain-at-shutdown registration.
    runtime: Arc<Runtime>,
    shutdown_hook: u64,
}

impl<E: CampaignEvent> Campaign<E> {
    /// Creates the campaign actor without waiting for it to start (callable from sync code
    /// inside a Tokio runtime); messages sent meanwhile queue up. `retry_after` is the pause
    /// after a failed acquisition before the next one.
    pub(crate) fn spawn(lock: Lock, retry_after: std::time::Duration) -> Result<Self, LockError> {
        let (channel, _) = broadcast::channel(CHANNEL_CAPACITY);
        let args = CampaignArgs {
            lock: lock.clone(),
            channel: channel.clone(),
            retry_after,
        };
        let (actor, _) = ActorRuntime::spawn_instant(None, CampaignActor::<E>::default(), args)
            .map_err(|_| LockError::ActorFailed(lock.name().clone()))?;
        // At shutdown the campaign hands over like a resign — bound actor drained, then
        // released — before the runtime releases the locks, and then stops for good.
        let stopping = actor.clone();
        let hook: ShutdownHook = Box::new(move || {
            Box::pin(async move {
                let (reply, answer) = oneshot::channel();
                if stopping
                    .send_message(CampaignMsg::Shutdown { reply })
                    .is_ok()
                {
                    let _ = answer.await;
                }
            })
        });
        let runtime = lock.runtime().clone();
        let shutdown_hook = runtime.before_shutdown(hook);
        Ok(Self {
            lock,
            engine: Arc::new(Engine {
                actor,
                channel,
                runtime,
                shutdown_hook,
            }),
        })
    }

    /// The lock this campaign is for.
    pub(crate) fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Starts trying to hold the lock (no-op when already started); returns at once.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the manager has shut down.
    pub(crate) fn start(&self) -> Result<(), LockError> {
        self.send(CampaignMsg::Start { reply: None })
    }

    /// Starts if needed and waits until the lock is held; returns its fencing token (at once
    /// if it is held already).
    ///
    /// # Errors
    ///
    /// [`LockError::CampaignStopped`] if [`stop`](Self::stop) is called first,
    /// [`LockError::Shutdown`] if the manager shuts down.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the campaign running; it still holds the lock
    /// once it gets it.
    pub(crate) async fn wait_acquired(&self) -> Result<u64, LockError> {
        let (reply, answer) = oneshot::channel();
        self.send(CampaignMsg::Start { reply: Some(reply) })?;
        answer.await.map_err(|_| LockError::Shutdown)?
    }

    /// Stops any bound actor, releases the lock if held, and stops trying.
    /// [`start`](Self::start) again to resume.
    ///
    /// # Errors
    ///
    /// What releasing the lock returned: [`LockError::Lost`] if the hold had been lost.
    pub(crate) async fn stop(&self) -> Result<(), LockError> {
        let (reply, answer) = oneshot::channel();
        self.send(CampaignMsg::Stop { reply: Some(reply) })?;
        answer.await.map_err(|_| LockError::Shutdown)?
    }

    /// Events from now on. A receiver that falls more than 64 events behind skips ahead
    /// (`RecvError::Lagged`) rather than slowing anything down.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<E> {
        self.engine.channel.subscribe()
    }

    /// Delivers every event to `actor` as `to_message(event)`. Sends never wait; a mapping
    /// that panics is removed and logged.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the campaign has stopped.
    pub(crate) fn subscribe_actor<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl Fn(E) -> M + Send + 'static,
    ) -> Result<(), LockError> {
        let actor = actor.clone();
        self.add_sink(Box::new(move |event| {
            actor.send_message(to_message(event)).is_ok()
        }))
    }

    /// Runs a user actor only while the lock is held: `spawn(token, supervisor)` is called
    /// on every acquisition and must spawn the actor linked to `supervisor`; it is stopped
    /// when the lock is lost or released. If the actor stops on its own, the lock is
    /// released and tried for again. Starts trying at once.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the campaign has stopped.
    pub(crate) fn run_while_held<F, Fut>(&self, spawn: F) -> Result<(), LockError>
    where
        F: Fn(u64, ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        self.send(CampaignMsg::Bind(Box::new(move |token, supervisor| {
            Box::pin(spawn(token, supervisor))
        })))
    }

    /// The current term, if the lock is held.
    pub(crate) async fn probe(&self) -> Result<Option<TermState>, LockError> {
        let (reply, answer) = oneshot::channel();
        self.send(CampaignMsg::Probe { reply })?;
        answer.await.map_err(|_| LockError::Shutdown)
    }

    /// Adds an in-process sink that sees every event in order (the leader gauge).
    pub(crate) fn add_sink(&self, sink: EventSink<E>) -> Result<(), LockError> {
        self.send(CampaignMsg::Subscribe(sink))
    }

    /// Publishes an event that does not come from the engine itself (a leader change),
    /// in order with the engine's own.
    pub(crate) fn publisher(&self) -> Publisher<E> {
        Publisher {
            actor: self.engine.actor.clone(),
        }
    }

    fn send(&self, message: CampaignMsg<E>) -> Result<(), LockError> {
        self.engine
            .actor
            .send_message(message)
            .map_err(|_| LockError::Shutdown)
    }
}

/// Publishes events into a campaign without keeping it alive: once the last face is
/// dropped and the campaign stops, [`publish`](Self::publish) returns `false`.
pub(crate) struct Publisher<E: CampaignEvent> {
    actor: ActorRef<CampaignMsg<E>>,
}

impl<E: CampaignEvent> Publisher<E> {
    pub(crate) fn publish(&self, event: E) -> bool {
        self.actor.send_message(CampaignMsg::Publish(event)).is_ok()
    }
}

impl<E: CampaignEvent> Clone for Campaign<E> {
    fn clone(&self) -> Self {
        Self {
            lock: self.lock.clone(),
            engine: self.engine.clone(),
        }
    }
}

impl<E: CampaignEvent> Drop for Engine<E> {
    fn drop(&mut self) {
        // The last face is gone: release and stop (nobody could observe or steer it).
        self.runtime.forget_before_shutdown(self.shutdown_hook);
        let _ = self.actor.send_message(CampaignMsg::Stop { reply: None });
    }
}

impl<E: CampaignEvent> std::fmt::Debug for Campaign<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Campaign")
            .field("lock", self.lock.name())
            .finish()
    }
}
