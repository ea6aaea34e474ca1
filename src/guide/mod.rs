//! The guide: what the API reference does not say in one place. Each page is a module with
//! no items; its code compiles and runs as a doc test.
//!
//! | page | for whom |
//! |---|---|
//! | [`safety`] | everyone: the guarantees, their one exception, the assumptions, fenced writes, how they are tested |
//! | [`options`] | tuning leases, renewal and backoff; manager settings |
//! | [`elections`] | leader election, and embedding in actor applications |
//! | [`primitives`] | semaphores, reader/writer locks and multi-locks: guarantees, fairness, fencing, counts |
//! | [`operations`] | operators: the `mongolock` command-line tool, metrics, the dashboard, tracing |
//! | [`mongodb`] | running against MongoDB: versions, commands, documents, failover, the test server's differences |
//! | [`production`] | operators: replica sets, Atlas, sharding, `mongolock doctor` and `check`, capacity |
//! | [`fairness`] | how waiters in several processes get their turn |
//! | [`performance`] | measured figures and capacity arithmetic |
//! | [`architecture`] | contributors: the actors, the layers, how the pieces keep the guarantees |
//! | [`testing`] | contributors: the test suites, the simulator and the fault checker |

#[doc = include_str!("safety.md")]
pub mod safety {}

#[doc = include_str!("options.md")]
pub mod options {}

#[doc = include_str!("elections.md")]
pub mod elections {}

#[doc = include_str!("primitives.md")]
pub mod primitives {}

#[doc = include_str!("operations.md")]
pub mod operations {}

#[doc = include_str!("mongodb.md")]
pub mod mongodb {}

#[doc = include_str!("production.md")]
pub mod production {}

#[doc = include_str!("fairness.md")]
pub mod fairness {}

#[doc = include_str!("performance.md")]
pub mod performance {}

#[doc = include_str!("architecture.md")]
pub mod architecture {}

#[doc = include_str!("testing.md")]
pub mod testing {}
