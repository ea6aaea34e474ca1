use std::time::Duration;

/// Why a [`LockStore`](crate::store::LockStore) call failed.
///
/// The runtime treats every variant except [`StoreError::Unsupported`] and
/// [`StoreError::InvalidConfig`] as transient: it retries until the lock's local renew
/// deadline passes, and only then reports a loss.
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
    /// The backend reported an error (network, server, authentication…).
    #[error("store backend error: {0}")]
    Backend(String),
    /// The store implementation panicked; the runtime caught it.
    #[error("store call panicked: {0}")]
    Panicked(String),
    /// The server cannot run this store (for example MongoDB older than 5.0).
    #[error("unsupported server: {0}")]
    Unsupported(String),
    /// The store was configured with a value it cannot use (for example a bad collection name).
    #[error("invalid store configuration: {0}")]
    InvalidConfig(String),
}

impl StoreError {
    /// Whether retrying the same call later may succeed.
    ///
    /// ```
    /// use mongolock::StoreError;
    /// assert!(!StoreError::Unsupported("MongoDB 4.4".into()).is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        !matches!(self, Self::Unsupported(_) | Self::InvalidConfig(_))
    }
}
