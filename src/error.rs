//! The error vocabulary every layer shares: [`LockError`] for callers, [`LossReason`] for a
//! hold that ended without a release, and [`StoreError`] for backends.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::kind::LockKind;
use crate::name::{InvalidName, LockName};

/// A backend's own error as the [`source`](std::error::Error::source) of a
/// [`StoreError::Backend`] or [`StoreError::Rejected`], shared so that [`StoreError`] stays
/// `Clone`. Backends build it through [`StoreError::backend_caused_by`] and
/// [`StoreError::rejected_caused_by`]; users reach it as the error's source, so it belongs
/// with the backend contract in [`store`](crate::store).
pub type BackendCause = Arc<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong when using locks. Each variant says what to do about it.
///
/// ```
/// use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await.unwrap();
/// match manager.lock("") {
///     Err(LockError::InvalidName { reason, .. }) => assert_eq!(reason, "it is empty"),
///     other => panic!("unexpected {other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock name cannot be used; nothing was written.
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The name (shortened if long).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The options cannot work together; fix the named setting.
    #[error("invalid lock options: {0}")]
    InvalidOptions(String),
    /// The lock was not acquired within the given time; nothing is held.
    #[error("lock not acquired within {0:?}")]
    Timeout(Duration),
    /// The manager was shut down; start a new one.
    #[error("the lock manager has shut down")]
    Shutdown,
    /// The actor running this lock failed while serving the request. The supervisor replaces
    /// it; retrying is safe.
    #[error("the runtime actor for lock {0:?} failed; retry the call")]
    ActorFailed(LockName),
    /// The campaign was stopped (resign / stop) before the lock was acquired.
    #[error("the campaign was stopped before the lock was acquired")]
    CampaignStopped,
    /// The lock was lost (see the reason) before this call, or while
    /// [`run_locked`](crate::Lock::run_locked)'s work ran (the work was stopped); nothing was
    /// released.
    #[error("the lock was lost: {0}")]
    Lost(LossReason),
    /// The name is already in use as another kind of lock (or as a semaphore of another
    /// count) while its record exists: nothing was written. Use the kind the record has,
    /// change a semaphore's count with
    /// [`Semaphore::set_permits`](crate::Semaphore::set_permits), or pick another name.
    ///
    /// ```
    /// use mongolock::{LockError, LockKind, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let _permit = manager.semaphore("imports", 3)?.acquire().await?;
    /// let asked_for_five = manager.semaphore("imports", 5)?.try_acquire().await;
    /// assert!(matches!(
    ///     asked_for_five,
    ///     Err(LockError::KindMismatch { found: LockKind::Semaphore { permits: 3 }, .. })
    /// ));
    /// # Ok(()) }
    /// ```
    #[error("lock {name:?} is {found}, not {asked}; nothing was written")]
    KindMismatch {
        /// The lock name.
        name: String,
        /// What the name's record is.
        found: LockKind,
        /// What the call asked for.
        asked: LockKind,
    },
    /// The store failed (for a one-shot call such as `try_acquire`, `release` or `inspect`).
    #[error(transparent)]
    Store(StoreError),
    /// A fenced write was refused and nothing was written: the protected document already
    /// records a larger fencing token, so a newer holder of the lock has written it since
    /// `token` was issued. Whatever this holder was told so far, it no longer holds the lock
    /// and must stop acting on the resource (see the `FencedCollection` of
    /// [`store`](crate::store), feature `mongodb`).
    ///
    /// ```
    /// use mongolock::LockError;
    /// let err = LockError::Fenced { token: 7, recorded: 9 };
    /// assert_eq!(
    ///     err.to_string(),
    ///     "write fenced off: fencing token 7 is older than token 9, which a newer holder of \
    ///      the lock already wrote; nothing was written and this holder must stop"
    /// );
    /// ```
    #[error(
        "write fenced off: fencing token {token} is older than token {recorded}, which a newer \
         holder of the lock already wrote; nothing was written and this holder must stop"
    )]
    Fenced {
        /// The token the refused write carried.
        token: u64,
        /// The larger token the protected document records.
        recorded: u64,
    },
}

/// Why a held lock was lost, as reported by [`LockGuard::lost`](crate::LockGuard::lost).
///
/// A manual release never produces a loss. Every other way a hold can end does, so a holder
/// is never left believing it still holds a lock it does not.
///
/// ```
/// use mongolock::LossReason;
/// assert_eq!(LossReason::Superseded.as_str(), "superseded");
/// assert_eq!(LossReason::Superseded.to_string(), "the lock was taken over or its record deleted");
/// assert_eq!(LossReason::ForceReleased.to_string(), "an operator force-released the lock");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// A renewal found the record no longer carries our lease: another owner took it over
    /// (after our lease expired on the store) or the record was deleted.
    Superseded,
    /// An operator force-released the lock while this holder held it (`mongolock release
    /// --force`, `MongoStore::force_release` with the `mongodb` feature): the
    /// record's `forcedRelease` trace names this holder's lease. Another process may take
    /// the lock at once, so the holder must stop at once.
    ForceReleased,
    /// The local renew deadline passed while a renewal was still unanswered (store hung or
    /// unreachable). Measured from when the last successful renewal was *sent*, so it fires
    /// before the lease can expire on the store.
    DeadlineExceeded,
    /// The local renew deadline passed while the store kept answering renewals with errors.
    StoreErrors {
        /// The last error the store returned.
        last_error: String,
    },
    /// The manager was shut down while the lock was held; the lock was released.
    Shutdown,
    /// The runtime actor that renewed this lock failed; renewal has stopped.
    RuntimeFailed,
}

impl LossReason {
    /// A short, stable label (used as the `reason` label of the loss metric).
    ///
    /// ```
    /// assert_eq!(mongolock::LossReason::DeadlineExceeded.as_str(), "deadline_exceeded");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Superseded => "superseded",
            Self::ForceReleased => "force_released",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::StoreErrors { .. } => "store_errors",
            Self::Shutdown => "shutdown",
            Self::RuntimeFailed => "runtime_failed",
        }
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Superseded => f.write_str("the lock was taken over or its record deleted"),
            Self::ForceReleased => f.write_str("an operator force-released the lock"),
            Self::DeadlineExceeded => {
                f.write_str("no renewal was confirmed before the local renew deadline")
            }
            Self::StoreErrors { last_error } => write!(
                f,
                "renewals failed until the local renew deadline (last error: {last_error})"
            ),
            Self::Shutdown => f.write_str("the lock manager shut down"),
            Self::RuntimeFailed => f.write_str("the lock's runtime actor failed"),
        }
    }
}

/// Why a [`LockStore`](crate::store::LockStore) call failed.
///
/// The runtime retries transient errors ([`is_transient`](Self::is_transient)) until the
/// lock's local renew deadline passes, and only then reports a loss; a permanent one
/// ([`Rejected`](Self::Rejected), [`Unsupported`](Self::Unsupported),
/// [`InvalidConfig`](Self::InvalidConfig)) fails waiting callers at once.
///
/// ```
/// use mongolock::StoreError;
/// use std::time::Duration;
///
/// let err = StoreError::Timeout(Duration::from_millis(250));
/// assert!(err.is_transient());
/// assert_eq!(err.to_string(), "store call timed out after 250ms");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The call did not complete within the time the runtime allowed it (always shorter than
    /// the remaining lease). The outcome is unknown: the runtime releases the lease id it sent.
    #[error("store call timed out after {0:?}")]
    Timeout(Duration),
    /// The backend failed in a way that may pass (network, a primary stepping down, a
    /// malformed answer…). The backend's own error, if any, is the [`source`](std::error::Error::source).
    #[error("store backend error: {message}")]
    Backend {
        /// What failed, in the backend's words.
        message: String,
        /// The backend's error (for MongoDB, the driver's `mongodb::error::Error`).
        #[source]
        source: Option<BackendCause>,
    },
    /// The backend refused the request for a reason retrying cannot fix (an invalid
    /// namespace, missing privileges, a value the server rejects). Waiters fail at once with
    /// this error instead of retrying. The backend's own error is the
    /// [`source`](std::error::Error::source).
    #[error("store rejected the request: {message}")]
    Rejected {
        /// What was refused and why.
        message: String,
        /// The backend's error (for MongoDB, the driver's `mongodb::error::Error`).
        #[source]
        source: Option<BackendCause>,
    },
    /// The store implementation panicked; the runtime caught it.
    #[error("store call panicked: {0}")]
    Panicked(String),
    /// The server cannot run this store (for example MongoDB older than 5.0).
    #[error("unsupported server: {0}")]
    Unsupported(String),
    /// The store was configured with a value it cannot use (for example a bad collection name).
    #[error("invalid store configuration: {0}")]
    InvalidConfig(String),
    /// The name's record is another kind of lock than the request asked for (or a semaphore
    /// of another count); nothing was written. The runtime reports it as
    /// [`LockError::KindMismatch`].
    #[error("lock {name:?} is {found}, not {asked}")]
    KindMismatch {
        /// The lock name.
        name: String,
        /// What the record is.
        found: LockKind,
        /// What the request asked for.
        asked: LockKind,
    },
}

impl StoreError {
    /// Whether retrying the same call later may succeed.
    ///
    /// ```
    /// use mongolock::StoreError;
    /// assert!(!StoreError::Unsupported("MongoDB 4.4".into()).is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        !matches!(
            self,
            Self::Rejected { .. }
                | Self::Unsupported(_)
                | Self::InvalidConfig(_)
                | Self::KindMismatch { .. }
        )
    }

    /// A transient backend error with a message only.
    ///
    /// ```
    /// use mongolock::StoreError;
    /// let err = StoreError::backend("connection reset");
    /// assert!(err.is_transient());
    /// assert_eq!(err.to_string(), "store backend error: connection reset");
    /// ```
    pub fn backend(message: impl Into<String>) -> Self {
        Self::Backend {
            message: message.into(),
            source: None,
        }
    }

    /// A transient backend error that keeps the backend's own error as its source.
    ///
    /// ```
    /// use mongolock::StoreError;
    /// use std::error::Error;
    /// let io = std::io::Error::other("connection reset");
    /// let err = StoreError::backend_caused_by("MongoDB extend (update) failed", io);
    /// assert_eq!(err.source().unwrap().to_string(), "connection reset");
    /// ```
    pub fn backend_caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// A permanent refusal that keeps the backend's own error as its source.
    ///
    /// ```
    /// use mongolock::StoreError;
    /// let err = StoreError::rejected_caused_by("bad namespace", std::io::Error::other("InvalidNamespace"));
    /// assert!(!err.is_transient());
    /// ```
    pub fn rejected_caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Rejected {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// This error and its chain of sources on one line (`a: b: c`), for logs and loss
    /// reasons that keep only text.
    ///
    /// ```
    /// use mongolock::StoreError;
    /// let err = StoreError::backend_caused_by("extend failed", std::io::Error::other("reset"));
    /// assert_eq!(err.report(), "store backend error: extend failed: reset");
    /// ```
    pub fn report(&self) -> String {
        let mut text = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(cause) = next {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            next = cause.source();
        }
        text
    }
}

impl From<InvalidName> for LockError {
    fn from(invalid: InvalidName) -> Self {
        let (name, reason) = invalid.into_parts();
        LockError::InvalidName { name, reason }
    }
}

impl From<StoreError> for LockError {
    /// A kind mismatch is the caller's to fix, so it becomes [`LockError::KindMismatch`];
    /// every other store error stays [`LockError::Store`].
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::KindMismatch { name, found, asked } => {
                LockError::KindMismatch { name, found, asked }
            }
            other => LockError::Store(other),
        }
    }
}
