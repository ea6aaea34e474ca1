//! What kind of lock a name is ([`LockKind`]) and what one acquisition asks of it
//! ([`Access`]): the vocabulary the store, the runtime and the errors share.

use std::fmt;

/// The most permits a semaphore may have, and the most readers a reader/writer lock admits
/// at once.
///
/// Every holder of a shared lock is one entry in the name's single record, and every
/// acquisition, renewal and release rewrites that record on the server in one atomic update
/// whose cost grows with the number of entries. A thousand entries of about 120 bytes keep
/// the record near 128 KiB, far under MongoDB's 16 MiB document limit, and each update
/// well under a millisecond of server time; beyond that, one hot name would cost every
/// holder of it more per renewal than a whole batch of mutex renewals. Spread wider
/// concurrency over several names.
///
/// ```
/// assert_eq!(mongolock::MAX_PERMITS, 1000);
/// ```
pub const MAX_PERMITS: u32 = 1000;

/// What kind of lock a name is. The first grant fixes it in the name's record, and while
/// that record exists every acquisition must ask for the same kind (and a semaphore for the
/// same count); a mismatch is refused with a typed error and writes nothing.
///
/// ```
/// use mongolock::LockKind;
/// assert_eq!(LockKind::Semaphore { permits: 3 }.to_string(), "a semaphore of 3 permits");
/// assert_eq!(LockKind::Mutex.to_string(), "a lock");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// One holder at a time ([`Lock`](crate::Lock)).
    Mutex,
    /// Up to `permits` holders at a time ([`Semaphore`](crate::Semaphore)).
    Semaphore {
        /// How many holders it admits at once.
        permits: u32,
    },
    /// Any number of readers, or one writer ([`RwLock`](crate::RwLock)).
    ReadWrite,
}

impl LockKind {
    /// Whether several holders can share a name of this kind (its record keeps a list of
    /// holders rather than one lease).
    ///
    /// ```
    /// use mongolock::LockKind;
    /// assert!(!LockKind::Mutex.is_shared());
    /// assert!(LockKind::ReadWrite.is_shared());
    /// ```
    pub fn is_shared(self) -> bool {
        !matches!(self, Self::Mutex)
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mutex => f.write_str("a lock"),
            Self::Semaphore { permits: 1 } => f.write_str("a semaphore of 1 permit"),
            Self::Semaphore { permits } => write!(f, "a semaphore of {permits} permits"),
            Self::ReadWrite => f.write_str("a reader/writer lock"),
        }
    }
}

/// What one acquisition asks for: the whole of a mutex, one permit of a semaphore, or a
/// reader's or the writer's side of a reader/writer lock.
///
/// ```
/// use mongolock::{Access, LockKind};
/// assert_eq!(Access::Read.kind(), LockKind::ReadWrite);
/// assert_eq!(Access::Permit { permits: 8 }.kind(), LockKind::Semaphore { permits: 8 });
/// assert!(Access::Write.excludes_all());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Access {
    /// The one holder of a mutex.
    #[default]
    Exclusive,
    /// One permit of a semaphore of `permits`.
    Permit {
        /// The semaphore's count, which must match the record's.
        permits: u32,
    },
    /// A reader: shares the name with other readers, excludes the writer.
    Read,
    /// The writer: excludes readers and other writers.
    Write,
}

impl Access {
    /// The kind of lock this access is to.
    ///
    /// ```
    /// use mongolock::{Access, LockKind};
    /// assert_eq!(Access::Exclusive.kind(), LockKind::Mutex);
    /// ```
    pub fn kind(self) -> LockKind {
        match self {
            Self::Exclusive => LockKind::Mutex,
            Self::Permit { permits } => LockKind::Semaphore { permits },
            Self::Read | Self::Write => LockKind::ReadWrite,
        }
    }

    /// Whether a holder with this access is the name's only holder.
    ///
    /// ```
    /// use mongolock::Access;
    /// assert!(Access::Exclusive.excludes_all());
    /// assert!(!Access::Read.excludes_all());
    /// ```
    pub fn excludes_all(self) -> bool {
        matches!(self, Self::Exclusive | Self::Write)
    }

    /// In arrival order, whether a waiter for this access waits behind an earlier waiter
    /// for `earlier`: readers do not wait behind readers (consecutive readers go in
    /// together); every other access waits behind every earlier waiter of its lock.
    pub(crate) fn waits_behind(self, earlier: Access) -> bool {
        !matches!((self, earlier), (Self::Read, Self::Read))
    }

    /// A short, stable label (`exclusive`, `permit`, `read`, `write`), for metrics and
    /// records.
    ///
    /// ```
    /// assert_eq!(mongolock::Access::Read.as_str(), "read");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exclusive => "exclusive",
            Self::Permit { .. } => "permit",
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exclusive => f.write_str("the lock"),
            Self::Permit { permits } => write!(f, "a permit of {permits}"),
            Self::Read => f.write_str("a read lock"),
            Self::Write => f.write_str("the write lock"),
        }
    }
}
