//! The public API: [`LockManager`] → [`Lock`] → [`LockGuard`], with their options, names,
//! errors and loss reasons.

mod background;
mod error;
mod guard;
mod lock;
mod loss;
mod loss_signal;
mod manager;
mod name;
mod options;

pub use background::{BackgroundLock, LockEvent};
pub use error::LockError;
pub use guard::LockGuard;
pub use lock::Lock;
pub use loss::LossReason;
pub use loss_signal::LossSignal;
pub use manager::LockManager;
pub use name::{LockName, MAX_LOCK_NAME_BYTES};
pub use options::LockOptions;
