//! Leader election on top of the lock runtime: one [`Election`] per candidate, with events
//! for terms and leader changes, observation of the current leader, and a user actor that
//! runs only while leading.

mod event;
mod handle;
mod options;

pub use event::{ElectionEvent, LeaderInfo};
pub use handle::Election;
pub use options::ElectionOptions;
