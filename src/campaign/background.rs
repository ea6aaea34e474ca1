//! [`BackgroundLock`]: a campaign whose events are plain lock events, for callers that want
//! a lock held whenever possible without blocking on it.

use super::event::{CampaignEvent, sealed};
use super::handle::Campaign;
use crate::error::{LockError, LossReason};
use crate::lock::Lock;

/// A lock acquired asynchronously: once started it keeps trying to hold the lock whenever
/// it is free — again after a loss — and reports through [`LockEvent`]s instead of blocking,
/// like the Java fenced-lock manager's `acquireLockAsync` with `lockAcquired` /
/// `lockReleased` callbacks. Dropping the last clone releases the lock and stops. See
/// [`Campaign`] for its methods.
///
/// ```
/// use mongolock::{LockEvent, LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let background = manager.lock("compaction")?.background()?;
/// let token = background.acquired().await?;
/// background.stop().await?;
/// # Ok(()) }
/// ```
pub type BackgroundLock = Campaign<LockEvent>;

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

impl sealed::Sealed for LockEvent {}

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
}

impl Lock {
    /// A [`BackgroundLock`] for this lock: acquisition that reports
    /// through events instead of blocking, and can run an actor only while held.
    ///
    /// # Errors
    ///
    /// [`LockError::ActorFailed`] if the campaign actor cannot be started.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let background = manager.lock("compaction")?.background()?;
    /// let token = background.acquired().await?;
    /// # Ok(()) }
    /// ```
    pub fn background(&self) -> Result<BackgroundLock, LockError> {
        let (_, longest_backoff) = self.options().busy_wait();
        Campaign::spawn(self.clone(), longest_backoff)
    }
}
