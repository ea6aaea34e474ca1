//! [`LockChange`]: what happened to a watched lock.

use std::time::Duration;

use crate::name::LockName;
use crate::store::request::HolderId;

/// What happened to a watched lock.
///
/// ```
/// use mongolock::{HolderId, LockChange, LockName};
///
/// let change = LockChange::Acquired {
///     name: LockName::new("orders")?,
///     holder: Some(HolderId::from_string("web-1".into())),
///     token: 17,
/// };
/// assert_eq!(change.name().as_str(), "orders");
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockChange {
    /// The lock's state when the watch began, or after it had to read the records again
    /// because it may have missed changes (its feed restarted, or its reader fell behind):
    /// one per holding (each permit of a semaphore, each reader of a reader/writer lock),
    /// or one with `holder: None` when nobody holds it.
    Current {
        /// The lock.
        name: LockName,
        /// The holder of an unexpired lease, `None` when the lock is free.
        holder: Option<HolderId>,
        /// The holding's fencing token; when free, the last grant's (0 when the store has
        /// no record).
        token: u64,
        /// Time left on the holding's lease by the store's clock, `None` when free.
        expires_in: Option<Duration>,
    },
    /// A new grant: `holder` holds the lock under `token` (after it was free, after the
    /// previous lease [expired](Self::Expired), or handed over within one manager), or one
    /// more place of a semaphore or reader/writer lock beside the holders it has.
    Acquired {
        /// The lock.
        name: LockName,
        /// The new holder (`None` only if it could not be read).
        holder: Option<HolderId>,
        /// The grant's fencing token.
        token: u64,
    },
    /// The holder released the lock (or its place in a shared lock: the other holders
    /// keep theirs).
    Released {
        /// The lock.
        name: LockName,
        /// Who released it, if known.
        holder: Option<HolderId>,
        /// The released grant's token.
        token: u64,
    },
    /// An operator freed the lock without its holder (`mongolock release --force`).
    ForceReleased {
        /// The lock.
        name: LockName,
        /// Whose lease was cleared, if known.
        holder: Option<HolderId>,
        /// The cleared grant's token.
        token: u64,
    },
    /// The lease ran out without a renewal or a release: its holder stopped renewing. An
    /// [`Acquired`](Self::Acquired) by another holder follows when someone takes it over.
    Expired {
        /// The lock.
        name: LockName,
        /// Whose lease ran out, if known.
        holder: Option<HolderId>,
        /// The expired grant's token.
        token: u64,
    },
    /// The record of a held lock was deleted (by an operator): its holder learns of it at
    /// its next renewal. The clean-up of a free lock's record (a TTL index, a sweeper) is
    /// not reported.
    Deleted {
        /// The lock.
        name: LockName,
    },
}

impl LockChange {
    /// The lock the change is about.
    ///
    /// ```
    /// use mongolock::{LockChange, LockName};
    /// let deleted = LockChange::Deleted { name: LockName::new("a")? };
    /// assert_eq!(deleted.name().as_str(), "a");
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn name(&self) -> &LockName {
        match self {
            Self::Current { name, .. }
            | Self::Acquired { name, .. }
            | Self::Released { name, .. }
            | Self::ForceReleased { name, .. }
            | Self::Expired { name, .. }
            | Self::Deleted { name } => name,
        }
    }
}
