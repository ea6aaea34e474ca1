//! Fault injection and hooks for tests of code that uses mongolock, and for the crate's own
//! (feature `testing`). Never enable the feature in production code.
//!
//! - [`FaultyStore`] wraps any store and makes its calls hang, fail or stall on command.
//! - [`seed_random`] makes a current-thread runtime under paused time replay a schedule.
//! - [`inject_actor_panic`], [`pending_timers`] and [`requests_routed_by_supervisor`] reach
//!   into the runtime to provoke a failure or count what it keeps.

mod faulty_store;

pub use faulty_store::FaultyStore;

use std::sync::atomic::Ordering;

use crate::error::LockError;
use crate::lock::Lock;
use crate::manager::LockManager;

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

/// How many lock-actor timers of `manager` are pending (one per held lock, one per actor
/// backing off or idle), as its timer service last counted.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let _guard = manager.lock("orders")?.acquire().await?;
/// tokio::time::sleep(std::time::Duration::from_millis(1)).await;
/// assert_eq!(mongolock::testing::pending_timers(&manager), 1);
/// # Ok(()) }
/// ```
pub fn pending_timers(manager: &LockManager) -> usize {
    manager.runtime().pending_timers.load(Ordering::Relaxed)
}

/// How many requests `manager`'s lock handles sent through its supervisor because they knew
/// no open route to the lock's actor (the first request of a handle, or one after the actor
/// stopped).
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let lock = manager.lock("orders")?;
/// lock.acquire().await?.release().await?;
/// lock.acquire().await?.release().await?;
/// assert_eq!(mongolock::testing::requests_routed_by_supervisor(&manager), 1);
/// # Ok(()) }
/// ```
pub fn requests_routed_by_supervisor(manager: &LockManager) -> u64 {
    manager
        .runtime()
        .routed_by_supervisor
        .load(Ordering::Relaxed)
}
