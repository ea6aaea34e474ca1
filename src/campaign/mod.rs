//! The campaign engine: keep trying to hold one lock, report what happens as events, and
//! run a user actor only while it is held. [`BackgroundLock`] is the engine's face for plain
//! locks; elections (in `election`) wrap the same engine.
//!
//! | file | holds |
//! |---|---|
//! | `handle.rs` | [`Campaign`], the public face shared by background locks and elections |
//! | `background.rs` | [`BackgroundLock`] and [`LockEvent`] |
//! | `event.rs` | [`CampaignEvent`], how the engine's moments become a face's events |
//! | `actor.rs` | the campaign actor: campaign, publish, bind |
//! | `message.rs` | its messages |
//! | `sinks.rs` | event fan-out that can never block the engine |
//! | `binding.rs` | the user actor bound to a term |

mod actor;
mod background;
mod binding;
mod event;
mod handle;
mod message;
mod sinks;

pub use background::{BackgroundLock, LockEvent};
pub use event::CampaignEvent;
pub(crate) use event::sealed as sealed_event;
pub use handle::Campaign;
pub(crate) use handle::Publisher;
pub(crate) use sinks::EventSink;
