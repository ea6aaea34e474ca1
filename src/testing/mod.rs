//! Fault injection and hooks for tests of code that uses mongolock, and for the crate's own
//! (feature `testing`). Never enable the feature in production code.
//!
//! - [`FaultyStore`] wraps any store and makes its calls hang, fail or stall on command.
//! - [`seed_random`] makes a current-thread runtime under paused time replay a schedule.
//! - [`inject_actor_panic`] reaches into the runtime to provoke a failure.

mod faulty_store;

pub use faulty_store::FaultyStore;

use crate::error::LockError;
use crate::lock::Lock;

/// Seeds the runtime's randomness (backoff jitter, lease ids) on the calling thread: a
/// current-thread runtime under paused time then replays a schedule exactly from the seed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// mongolock::testing::seed_random(42);
/// # }
/// ```
pub fn seed_random(seed: u64) {
    crate::random::seed_thread(seed);
}

/// Makes the actor of `lock`'s name panic: its holders are told
/// [`LossReason::RuntimeFailed`](crate::LossReason::RuntimeFailed), its waiters get
/// [`LockError::ActorFailed`], and the next request starts a fresh actor.
///
/// # Errors
///
/// [`LockError::Shutdown`] after the manager has shut down.
///
/// ```
/// use mongolock::{LockManager, LockOptions, LossReason, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let lock = manager.lock("orders")?;
/// let guard = lock.acquire().await?;
/// mongolock::testing::inject_actor_panic(&lock)?;
/// assert_eq!(guard.lost().await, LossReason::RuntimeFailed);
/// # Ok(()) }
/// ```
pub fn inject_actor_panic(lock: &Lock) -> Result<(), LockError> {
    lock.inject_actor_panic()
}
