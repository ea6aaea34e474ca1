use std::time::Duration;

use crate::{LossReason, StoreError};

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
    ShutDown,
    /// The actor running this lock failed while serving the request. The supervisor replaces
    /// it; retrying is safe.
    #[error("the runtime actor for lock {0:?} failed; retry the call")]
    ActorFailed(String),
    /// The campaign was stopped (resign / stop) before the lock was acquired.
    #[error("the campaign was stopped before the lock was acquired")]
    CampaignStopped,
    /// The lock was lost before this call (see the reason); nothing was released.
    #[error("the lock was already lost: {0}")]
    Lost(LossReason),
    /// The store failed (for a one-shot call such as `try_acquire`, `release` or `inspect`).
    #[error(transparent)]
    Store(#[from] StoreError),
}
