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
//! ## Where things are
//!
//! Every public type has one path. What the lock API hands out or takes — the manager, locks,
//! guards, options, elections, errors, events, the two stores — is at the crate root. Five
//! modules hold what only some users need:
//!
//! - [`store`] — the backend contract ([`store::LockStore`]), its requests and answers and
//!   the backend's own error a [`StoreError`] carries ([`store::BackendCause`]), for
//!   implementing a backend or calling one directly;
//! - `fence` (feature `mongodb`) — writes a stale holder cannot apply, for the data the lock
//!   protects;
//! - [`metrics`] — metric names and buckets, and the Prometheus exporter (feature
//!   `prometheus`);
//! - `testing` (feature `testing`) — fault injection for your own tests;
//! - `history` (feature `history`) — the rules a recorded history of a lock's holders
//!   obeys, for checking your own.
//!
//! [`guide`] holds the longer documentation: safety, elections, options, operations,
//! MongoDB, fairness, performance and how it is tested.
//!
//! ## Features
//!
//! - `mongodb` (default) — `MongoStore` and `fence`, the production backend.
//! - `prometheus` — `metrics::install_prometheus_exporter`, a one-call exporter.
//! - `testing` — `testing::FaultyStore` and test hooks; never for production code.
//! - `history` — `history`, the rules a checker of recorded histories applies (on with
//!   `testing` and `cli`).
//! - `cli` — the `mongolock` command-line tool (Unix).
//!
//! ## Public dependencies
//!
//! Types of these crates appear in this crate's API, so they are re-exported: name them as
//! `mongolock::ractor`, `mongolock::tokio`, `mongolock::mongodb` and `mongolock::uuid` (or
//! depend on the same major versions) so that the types match; with another major version
//! the types differ and calls do not compile.
//!
//! | crate | version | where it shows |
//! |---|---|---|
//! | `ractor` | 0.16 | `ActorRef` given to `guard.notify` and `subscribe_actor`; `ActorCell` / `SpawnErr` in `run_while_leader` / `run_while_held` |
//! | `tokio` | 1 (≥ 1.40) | the runtime everything runs on; `broadcast::Receiver` from `subscribe()` |
//! | `mongodb` | 3 (≥ 3.2) | `MongoStore::new(Database)`, `MongoStore::builder(Database)`, `with_write_concern(WriteConcern)`, `FencedCollection::new(Collection)` |
//! | `uuid` | 1 | `LeaseId::as_uuid` / `LeaseId::from_uuid` |
//! | `metrics` | 0.24 | no type in the API, but metrics are recorded through the `metrics` 0.24 facade: an exporter built on another major version sees none of them |
//!
//! Implementing your own [`store::LockStore`] takes the `#[async_trait]` attribute
//! (`async-trait` 0.1).
//!
//! ```
//! use mongolock::ractor::ActorRef;
//! use mongolock::tokio::sync::broadcast;
//! use mongolock::{ElectionEvent, LossReason};
//!
//! fn wire(_loss_to: ActorRef<LossReason>, _events: broadcast::Receiver<ElectionEvent>) {}
//! ```
//!
//! ## Versioning
//!
//! Until 1.0, a minor version (0.x) may break the API and a patch version (0.x.y) never
//! does. `public-api.txt` in the repository lists every public path; a change to it is a
//! change to the API, reviewed as such.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(clippy::unwrap_used, clippy::expect_used)]

mod campaign;
mod election;
mod error;
#[cfg(feature = "mongodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "mongodb")))]
pub mod fence;
pub mod guide;
#[cfg(feature = "history")]
#[cfg_attr(docsrs, doc(cfg(feature = "history")))]
pub mod history;
mod kind;
mod lock;
mod manager;
pub mod metrics;
mod name;
mod options;
mod random;
pub mod store;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod watch;

pub use campaign::{BackgroundLock, LockEvent};
pub use election::{Election, ElectionEvent, ElectionHealth, ElectionOptions, LeaderInfo};
pub use error::{LockError, LossReason, StoreError};
pub use kind::{Access, LockKind, MAX_PERMITS};
pub use lock::{AtRisk, Lock, LockGuard, LossSignal, MultiLock, MultiLockGuard, RwLock, Semaphore};
pub use manager::{LockManager, LockManagerBuilder};
pub use name::{InvalidName, LockName, MAX_LOCK_NAME_BYTES};
pub use options::{
    Fairness, LockNameLabel, LockOptions, MAX_LEASE_DURATION, MIN_LEASE_DURATION,
    MIN_SETTING_DURATION,
};
pub use store::memory::MemoryStore;
#[cfg(feature = "mongodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "mongodb")))]
pub use store::mongo::{MongoStore, MongoStoreBuilder};
pub use store::outcome::{Holding, LockRecord, QueuedWaiter};
pub use store::request::HolderId;
pub use watch::{LockChange, LockWatch};

// The README's examples compile and run as doc tests too.
#[cfg(all(doctest, feature = "mongodb"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// Crates whose types appear in the public API (`ActorRef`, `broadcast::Receiver`, `Database`,
// `WriteConcern`, `Uuid`), re-exported so users can name exactly the versions we were built
// with.
#[cfg(feature = "mongodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "mongodb")))]
pub use mongodb;
pub use ractor;
pub use tokio;
pub use uuid;
