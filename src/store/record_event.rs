//! [`RecordEvent`]: what a store tells a watcher about the records of the names it watches
//! ([`LockStore::watch_records`](super::LockStore::watch_records)).

use std::time::Duration;

use super::request::HolderId;
use crate::name::LockName;

/// How many record events may wait unread in a store's record feed; a feed that finds it
/// full drops events and sends [`RecordEvent::Resync`] once there is room again.
pub const RECORD_FEED_CAPACITY: usize = 1024;

/// One change to a watched lock record, in the order the store applied them.
///
/// A feed reports writes; a lease that runs out is no write, so expiry is for the watcher
/// to notice from `lease_left`. Times are durations from when the store made the change, by
/// its own clock, so a watcher never needs the store's clock.
///
/// ```
/// use mongolock::store::RecordEvent;
/// use mongolock::{HolderId, LockName};
/// use std::time::Duration;
///
/// let granted = RecordEvent::Granted {
///     name: LockName::new("orders")?,
///     holder: Some(HolderId::from_string("web-1".into())),
///     token: 17,
///     lease_left: Duration::from_secs(30),
/// };
/// assert_eq!(granted.name().map(LockName::as_str), Some("orders"));
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordEvent {
    /// A new grant (a new lease and token): an acquisition of a free or expired lock, or a
    /// hand-over between holders of one manager.
    Granted {
        /// The lock.
        name: LockName,
        /// The new holder; `None` when the store only knows it is the same as the previous
        /// grant's (a hand-over within one manager).
        holder: Option<HolderId>,
        /// The grant's fencing token.
        token: u64,
        /// The lease's length from the grant.
        lease_left: Duration,
    },
    /// The current grant was renewed.
    Renewed {
        /// The lock.
        name: LockName,
        /// The lease's length from the renewal.
        lease_left: Duration,
    },
    /// The current grant was released.
    Released {
        /// The lock.
        name: LockName,
        /// By an operator (`mongolock release --force`), not by its holder.
        forced: bool,
    },
    /// The record was deleted (by an operator, a TTL monitor or a sweeper).
    Deleted {
        /// The lock.
        name: LockName,
    },
    /// The feed may have missed events (it restarted, or its reader fell behind): read the
    /// records again.
    Resync,
}

impl RecordEvent {
    /// The name the event is about (`None` for [`Resync`](Self::Resync)).
    ///
    /// ```
    /// assert_eq!(mongolock::store::RecordEvent::Resync.name(), None);
    /// ```
    pub fn name(&self) -> Option<&LockName> {
        match self {
            Self::Granted { name, .. }
            | Self::Renewed { name, .. }
            | Self::Released { name, .. }
            | Self::Deleted { name } => Some(name),
            Self::Resync => None,
        }
    }
}
