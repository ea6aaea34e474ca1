//! [`BackgroundLock`]: a lock held whenever possible without blocking on it, reporting
//! [`LockEvent`]s — the campaign engine's face for plain locks.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use ractor::{ActorCell, ActorRef, Message, SpawnErr};
use tokio::sync::broadcast;

use super::event::CampaignEvent;
use super::handle::Campaign;
use crate::error::{LockError, LossReason};
use crate::lock::Lock;

/// A lock acquired asynchronously: once started it keeps trying to hold the lock whenever
/// it is free — again after a loss — and reports through [`LockEvent`]s instead of blocking,
/// like the Java fenced-lock manager's `acquireLockAsync` with `lockAcquired` /
/// `lockReleased` callbacks. Renewal stays in the lock runtime: nothing its subscribers or
/// bound actor do can delay it.
///
/// Create it with [`Lock::background`]. Clones share one background lock; dropping the last
/// clone releases the lock and stops.
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
    campaign: Campaign<LockEvent>,
}

/// What happens to a [`BackgroundLock`]. Its `Display` is a line for logs.
///
/// ```
/// use mongolock::{LockEvent, LossReason};
/// let event = LockEvent::Acquired { token: 1 };
/// assert!(matches!(event, LockEvent::Acquired { .. }));
/// assert_eq!(event.to_string(), "acquired (token 1)");
/// let lost = LockEvent::Lost { token: 1, reason: LossReason::ForceReleased };
/// assert_eq!(lost.to_string(), "lost (token 1): an operator force-released the lock");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockEvent {
    /// The lock is held with this fencing token.
    Acquired {
        /// Fencing token of this hold.
        token: u64,
    },
    /// The hold with this token is at risk: its renewals are failing, and unless one is
    /// confirmed within `time_left` it is lost (a warning; see [`AtRisk`](crate::AtRisk)).
    AtRisk {
        /// Fencing token of the hold.
        token: u64,
        /// How long until the loss deadline, when the warning was given.
        time_left: Duration,
    },
    /// The hold with this token was at risk, and a renewal has been confirmed.
    Recovered {
        /// Fencing token of the hold.
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

impl fmt::Display for LockEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Acquired { token } => write!(f, "acquired (token {token})"),
            Self::AtRisk { token, time_left } => write!(
                f,
                "at risk (token {token}): renewals failing, lost in {} ms unless one \
                 is confirmed",
                time_left.as_millis()
            ),
            Self::Recovered { token } => {
                write!(f, "recovered (token {token}): a renewal was confirmed")
            }
            Self::Lost { token, reason } => write!(f, "lost (token {token}): {reason}"),
            Self::Released { token } => write!(f, "released (token {token})"),
        }
    }
}

impl CampaignEvent for LockEvent {
    fn acquired(token: u64) -> Self {
        Self::Acquired { token }
    }
    fn at_risk(token: u64, time_left: Duration) -> Self {
        Self::AtRisk { token, time_left }
    }
    fn recovered(token: u64) -> Self {
        Self::Recovered { token }
    }
    fn lost(token: u64, reason: LossReason) -> Self {
        Self::Lost { token, reason }
    }
    fn released(token: u64) -> Self {
        Self::Released { token }
    }
}

impl Lock {
    /// A [`BackgroundLock`] for this lock: acquisition that reports through events instead
    /// of blocking, and can run an actor only while held.
    ///
    /// # Errors
    ///
    /// [`LockError::ActorFailed`] if the background lock's actor cannot be started.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// let token = background.wait_acquired().await?;
    /// # Ok(()) }
    /// ```
    pub fn background(&self) -> Result<BackgroundLock, LockError> {
        let (_, longest_backoff) = self.options().retry_backoff();
        Ok(BackgroundLock {
            campaign: Campaign::spawn(self.clone(), longest_backoff)?,
        })
    }
}

impl BackgroundLock {
    /// The lock this background lock holds.
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
        self.campaign.lock()
    }

    /// Starts trying to hold the lock (no-op when already started); returns at once.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the manager has shut down.
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
        self.campaign.start()
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
    /// Cancel safe: dropping the future leaves the background lock running; it still holds
    /// the lock once it gets it.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// let token = background.wait_acquired().await?;
    /// assert!(token > 0);
    /// # Ok(()) }
    /// ```
    pub async fn wait_acquired(&self) -> Result<u64, LockError> {
        self.campaign.wait_acquired().await
    }

    /// Stops any bound actor, releases the lock if held, and stops trying.
    /// [`start`](Self::start) again to resume.
    ///
    /// # Errors
    ///
    /// What releasing the lock returned: [`LockError::Lost`] if the hold had been lost.
    ///
    /// # Cancel safety
    ///
    /// Stopping is sent before the first await: dropping the future still stops the
    /// background lock and releases; only the release's answer is lost.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// background.wait_acquired().await?;
    /// background.stop().await?;
    /// assert!(!background.lock().is_held_by_this_manager().await?);
    /// # Ok(()) }
    /// ```
    pub async fn stop(&self) -> Result<(), LockError> {
        self.campaign.stop().await
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
        self.campaign.subscribe()
    }

    /// Delivers every event to `actor` as `to_message(event)`. Sends never wait; a mapping
    /// that panics is removed and logged.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the background lock has stopped.
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
        self.campaign.subscribe_actor(actor, to_message)
    }

    /// Runs a user actor only while the lock is held: `spawn(token, supervisor)` is called
    /// on every acquisition and must spawn the actor linked to `supervisor`; it is stopped
    /// when the lock is lost or released. It starts on its own task, so a slow `pre_start`
    /// delays no loss report. If the actor stops on its own, the lock is released and tried
    /// for again. Starts trying at once.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the background lock has stopped.
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
        self.campaign.run_while_held(spawn)
    }
}

impl std::fmt::Debug for BackgroundLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundLock")
            .field("lock", self.campaign.lock().name())
            .finish_non_exhaustive()
    }
}
