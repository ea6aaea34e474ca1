//! # mongolock
//!
//! A distributed lock manager runtime on actors ([`ractor`]), backed by MongoDB.
//!
//! - **Leases with fencing tokens.** Every grant carries a token larger than any issued for
//!   that name before — across release, expiry takeover and deletion of the record.
//! - **Loss is signalled first.** A holder is told it lost the lock from a local deadline
//!   counted from when its last successful renewal was *sent*, before the lease can expire on
//!   the store, even if a store call hangs. Renewal runs in the runtime, never behind user work.
//! - **Server time only.** Expiry is computed by the store's clock (`$$NOW` on MongoDB).
//! - **Owner-checked** release and extension; cancel-safe acquisition with no phantom holds.
//! - **Actors.** A supervisor owns the store; each active lock name has its own actor that
//!   queues local waiters (one store poller per name per process), backs off with jitter,
//!   renews on a cadence and reports loss by message passing.
//! - **Metrics** through the [`metrics`](https://docs.rs/metrics) facade (see [`metrics`]).
//!
//! ```
//! use mongolock::{LockManager, LockOptions, MemoryStore};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
//! let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
//! let lock = manager.lock("orders")?;
//! let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
//! println!("token {}", guard.token());
//! guard.release().await?;
//! manager.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod actors;
mod api;
#[cfg(all(feature = "cli", unix))]
#[doc(hidden)]
pub mod cli;
pub mod election;
pub mod metrics;
pub mod store;

pub use api::{
    BackgroundLock, Lock, LockError, LockEvent, LockGuard, LockManager, LockName, LockOptions,
    LossReason, LossSignal, MAX_LOCK_NAME_BYTES,
};
pub use election::{Election, ElectionEvent, ElectionOptions, LeaderInfo};
#[cfg(feature = "mongodb")]
pub use store::MongoStore;
pub use store::{LockStore, MemoryStore, StoreError};
