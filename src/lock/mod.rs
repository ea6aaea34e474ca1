//! The lock runtime: the [`Lock`] handle callers use, the [`LockGuard`] a grant hands out,
//! the loss protocol ([`LossSignal`]), and the actors behind them — one supervisor per
//! manager and one actor per active lock name.
//!
//! | file | holds |
//! |---|---|
//! | `handle.rs` | [`Lock`]: acquire, try, inspect; the first request goes through the supervisor, later ones straight to the actor |
//! | `guard.rs` | [`LockGuard`]: token, loss, release on drop (for every kind) |
//! | `semaphore.rs` | [`Semaphore`]: up to N holders of a name |
//! | `rw_lock.rs` | [`RwLock`]: readers or one writer, fair to both |
//! | `multi_lock.rs` | [`MultiLock`], [`MultiLockGuard`]: several locks all or nothing, released in one call |
//! | `run.rs` | [`Lock::run_locked`]: run a future while holding the lock |
//! | `loss_signal/` | the loss protocol: the runtime's sending half, [`LossSignal`] and the warning before a loss, [`AtRisk`] (`tests.rs`: its tests) |
//! | `runtime.rs` | what handles share: supervisor, store, holder id, per-name claims |
//! | `supervisor.rs` | registry name → actor, failure isolation |
//! | `route.rs` | the direct route from handles to an actor, and the count that lets an idle actor stop without losing a request |
//! | `engine/` | the per-name actor, one for every kind, and everything only it uses: the acquisition for local waiters (attempts, backoff, fairness, the waiters' queue), the held leases, their release (its own table) |
//! | `message.rs` | the per-name actor's messages |
//! | `renewer/` | batched renewals: one store call for the leases due together, in three lanes (its own table) |
//! | `orphan.rs` | releasing grants no guard will own |
//! | `cleanup.rs` | the releases of leases nobody owns, which a shutdown waits for |
//! | `store_call.rs` | store calls off the message loop, bounded and panic-safe |
//! | `timer.rs` | the manager's timer service: cancellable timers as map entries, not sleeping tasks |

mod cleanup;
mod engine;
mod guard;
mod handle;
mod loss_signal;
mod message;
mod multi_lock;
mod orphan;
mod renewer;
mod route;
mod run;
mod runtime;
mod rw_lock;
mod semaphore;
mod store_call;
mod supervisor;
mod timer;

pub use guard::LockGuard;
pub use handle::Lock;
pub(crate) use loss_signal::HoldChange;
pub use loss_signal::{AtRisk, LossSignal};
pub use multi_lock::{MultiLock, MultiLockGuard};
pub(crate) use runtime::{Runtime, ShutdownHook};
pub use rw_lock::RwLock;
pub use semaphore::Semaphore;
