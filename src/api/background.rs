use std::future::Future;
use std::sync::Arc;

use ractor::{ActorCell, ActorRef, Message, SpawnErr};
use tokio::sync::broadcast;

use crate::actors::campaign::{CampaignEvent, CampaignHandle};
use crate::store::LockRecord;
use crate::{Lock, LockError, LossReason};

/// What happens to a [`BackgroundLock`].
///
/// ```
/// use mongolock::LockEvent;
/// let event = LockEvent::Acquired { token: 1 };
/// assert!(matches!(event, LockEvent::Acquired { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockEvent {
    /// The lock is held with this fencing token.
    Acquired {
        /// Fencing token of this hold.
        token: u64,
    },
    /// The hold with this token was lost; the background lock keeps trying.
    Lost {
        /// Fencing token of the lost hold.
        token: u64,
        /// Why it was lost.
        reason: LossReason,
    },
    /// The hold with this token was released (stop, or a bound actor ended).
    Released {
        /// Fencing token of the released hold.
        token: u64,
    },
}

impl CampaignEvent for LockEvent {
    fn acquired(token: u64) -> Self {
        Self::Acquired { token }
    }
    fn lost(token: u64, reason: LossReason) -> Self {
        Self::Lost { token, reason }
    }
    fn released(token: u64) -> Self {
        Self::Released { token }
    }
    fn holder_changed(_: Option<&LockRecord>) -> Option<Self> {
        None
    }
}

/// A lock acquired asynchronously: once started it keeps trying to hold the lock whenever
/// it is free — again after a loss — and reports through events instead of blocking, like
/// the Java fenced-lock manager's `acquireLockAsync` with `lockAcquired` / `lockReleased`
/// callbacks. Dropping the last clone releases the lock and stops.
///
/// ```
/// use mongolock::{LockEvent, LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let background = manager.lock("compaction")?.background()?;
/// let mut events = background.subscribe();
/// background.start()?;
/// assert!(matches!(events.recv().await, Ok(LockEvent::Acquired { .. })));
/// background.stop().await?;
/// assert!(matches!(events.recv().await, Ok(LockEvent::Released { .. })));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct BackgroundLock {
    lock: Lock,
    handle: Arc<CampaignHandle<LockEvent>>,
}

impl BackgroundLock {
    pub(crate) fn new(lock: Lock) -> Result<Self, LockError> {
        let retry = lock.options().busy_wait_max;
        let handle = CampaignHandle::spawn(lock.clone(), None, retry)?;
        Ok(Self {
            lock,
            handle: Arc::new(handle),
        })
    }

    /// The lock this runs for.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// assert_eq!(background.lock().name().as_str(), "compaction");
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Starts trying to hold the lock (no-op when already started); returns at once.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// background.start()?;
    /// # Ok(()) }
    /// ```
    pub fn start(&self) -> Result<(), LockError> {
        self.handle.start_in_background()
    }

    /// Starts if needed and waits until the lock is held; returns its fencing token.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// let token = background.acquired().await?;
    /// assert!(token > 0);
    /// # Ok(()) }
    /// ```
    pub async fn acquired(&self) -> Result<u64, LockError> {
        self.handle.start().await
    }

    /// Releases the lock if held and stops trying. [`start`](Self::start) again to resume.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// background.acquired().await?;
    /// background.stop().await?;
    /// assert!(!background.lock().is_held_by_this_manager().await?);
    /// # Ok(()) }
    /// ```
    pub async fn stop(&self) -> Result<(), LockError> {
        self.handle.stop().await
    }

    /// Events from now on. A receiver that falls more than 64 events behind skips ahead
    /// (`RecvError::Lagged`) rather than slowing anything down.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// let mut events = background.subscribe();
    /// background.start()?;
    /// println!("{:?}", events.recv().await);
    /// # Ok(()) }
    /// ```
    pub fn subscribe(&self) -> broadcast::Receiver<LockEvent> {
        self.handle.subscribe()
    }

    /// Delivers every event to `actor` as `to_message(event)`. Sends never wait; a mapping
    /// that panics is removed and logged.
    ///
    /// ```
    /// # use mongolock::{LockEvent, LockManager, LockOptions, MemoryStore};
    /// # use ractor::{Actor, ActorProcessingErr, ActorRef};
    /// # struct Worker;
    /// # impl Actor for Worker {
    /// #     type Msg = LockEvent; type State = (); type Arguments = ();
    /// #     async fn pre_start(&self, _: ActorRef<LockEvent>, _: ()) -> Result<(), ActorProcessingErr> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let (worker, _) = Actor::spawn(None, Worker, ()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// background.subscribe_actor(&worker, |event| event)?;
    /// background.start()?;
    /// # Ok(()) }
    /// ```
    pub fn subscribe_actor<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl Fn(LockEvent) -> M + Send + 'static,
    ) -> Result<(), LockError> {
        self.handle.subscribe_actor(actor, to_message)
    }

    /// Runs a user actor only while the lock is held: `spawn(token, supervisor)` is called
    /// on every acquisition and must spawn the actor linked to `supervisor`; it is stopped
    /// when the lock is lost or released. If the actor stops on its own, the lock is
    /// released and tried for again. Starts trying at once.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// use ractor::{Actor, ActorProcessingErr, ActorRef};
    ///
    /// struct Compactor;
    /// impl Actor for Compactor {
    ///     type Msg = ();
    ///     type State = ();
    ///     type Arguments = u64; // the fencing token
    ///     async fn pre_start(&self, _: ActorRef<()>, token: u64) -> Result<(), ActorProcessingErr> {
    ///         println!("compacting under token {token}");
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// background.run_while_held(|token, supervisor| async move {
    ///     let (actor, _) = Actor::spawn_linked(None, Compactor, token, supervisor).await?;
    ///     Ok(actor.get_cell())
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run_while_held<F, Fut>(&self, spawn: F) -> Result<(), LockError>
    where
        F: Fn(u64, ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        self.handle.bind(spawn)
    }
}

impl std::fmt::Debug for BackgroundLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundLock")
            .field("lock", &self.lock.name())
            .finish()
    }
}
