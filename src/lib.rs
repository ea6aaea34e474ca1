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
//!
//! ## Layout
//!
//! Each folder depends only on those listed before it:
//!
//! 1. vocabulary — `name` ([`LockName`]), `error` ([`LockError`], [`LossReason`],
//!    [`StoreError`]), `options` ([`LockOptions`]);
//! 2. [`store`] (the [`LockStore`] contract and its backends) and [`metrics`];
//! 3. `lock` — the runtime: [`Lock`], [`LockGuard`], [`LossSignal`] and their actors;
//! 4. [`campaign`] — keep holding a lock: [`BackgroundLock`];
//! 5. [`election`] — [`Election`] on the campaign engine;
//! 6. `manager` — [`LockManager`], which starts it all.
//!
//! ## Features
//!
//! - `mongodb` (default) — `MongoStore`, the production backend.
//! - `prometheus` — `metrics::install_prometheus_exporter`, a one-call exporter.
//! - `cli` — the `mongolock` command-line tool (Unix).
//!
//! ## Public dependencies
//!
//! Types of these crates appear in this crate's API, so they are re-exported: name them as
//! `mongolock::ractor`, `mongolock::tokio`, `mongolock::mongodb` and `mongolock::uuid` (or
//! depend on the same major versions: ractor 0.16, tokio 1, mongodb 3, uuid 1) so that the
//! types match.
//!
//! ```
//! use mongolock::ractor::ActorRef;
//! use mongolock::tokio::sync::broadcast;
//! use mongolock::{ElectionEvent, LossReason};
//!
//! fn wire(_loss_to: ActorRef<LossReason>, _events: broadcast::Receiver<ElectionEvent>) {}
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(clippy::unwrap_used, clippy::expect_used)]

pub mod campaign;
pub mod election;
mod error;
mod lock;
mod manager;
pub mod metrics;
mod name;
mod options;
mod random;
pub mod store;

pub use campaign::{BackgroundLock, LockEvent};
pub use election::{Election, ElectionEvent, ElectionOptions, LeaderInfo};
pub use error::{LockError, LossReason, StoreError};
pub use lock::{Lock, LockGuard, LossSignal};
pub use manager::LockManager;
pub use name::{LockName, MAX_LOCK_NAME_BYTES};
pub use options::{LockOptions, MAX_EXPIRY, MIN_EXPIRY, MIN_STEP};
#[cfg(feature = "mongodb")]
pub use store::MongoStore;
pub use store::{LockStore, MemoryStore};

// Crates whose types appear in the public API (`ActorRef`, `broadcast::Receiver`, `Database`,
// `WriteConcern`, `Uuid`), re-exported so users can name exactly the versions we were built
// with.
#[cfg(feature = "mongodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "mongodb")))]
pub use mongodb;
pub use ractor;
pub use tokio;
pub use uuid;

/// Hooks for the crate's own tests (feature `test-hooks`); not part of the API.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod testing {
    /// Seeds the runtime's randomness (backoff jitter, lease ids) on the calling thread: a
    /// current-thread runtime under paused time then replays a schedule exactly.
    pub fn seed_random(seed: u64) {
        crate::random::seed_thread(seed);
    }
}
