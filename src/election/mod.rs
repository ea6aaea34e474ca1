//! Leader election on top of the campaign engine: one [`Election`] per candidate, with
//! events for terms and leader changes, observation of the current leader, the leader
//! gauge, and a user actor that runs only while leading.
//!
//! | file | holds |
//! |---|---|
//! | `handle.rs` | [`Election`], the election face of the campaign engine |
//! | `event.rs` | [`ElectionEvent`] and [`LeaderInfo`] |
//! | `options.rs` | [`ElectionOptions`], client-go's timings and rules |
//! | `observer.rs` | who leads: `LeaderChanged` for every candidate |
//! | `leader_gauge.rs` | `mongolock_leader{election}` |
//! | `health.rs` | [`ElectionHealth`], a liveness check for leaders |

mod event;
mod handle;
mod health;
mod leader_gauge;
mod observer;
mod options;

pub use event::{ElectionEvent, LeaderInfo};
pub use handle::Election;
pub use health::ElectionHealth;
pub use options::ElectionOptions;
