//! The campaign engine: keep trying to hold one lock, report what happens as events, and
//! run a user actor only while it is held. [`BackgroundLock`] is the engine's face for plain
//! locks; elections (in `election`) wrap the same engine.
//!
//! | file | holds |
//! |---|---|
//! | `background.rs` | [`BackgroundLock`] and [`LockEvent`], the public face for plain locks |
//! | `handle.rs` | `Campaign`, the handle on the engine that faces wrap |
//! | `event.rs` | `CampaignEvent`, how the engine's moments become a face's events |
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
pub(crate) use event::CampaignEvent;
pub(crate) use handle::{Campaign, Publisher};
pub(crate) use sinks::EventSink;
