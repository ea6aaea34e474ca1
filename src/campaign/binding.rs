//! Lifecycle binding: a user actor that runs only while the campaign holds the lock.

use std::future::Future;
use std::pin::Pin;

use ractor::{ActorCell, SpawnErr};

/// Spawns the bound actor for a hold with this fencing token, linked to the given
/// supervisor (the campaign actor), and returns its cell.
pub(crate) type SpawnBound = Box<
    dyn Fn(u64, ActorCell) -> Pin<Box<dyn Future<Output = Result<ActorCell, SpawnErr>> + Send>>
        + Send
        + Sync,
>;

pub(crate) struct Binding {
    pub(crate) spawn: SpawnBound,
    /// The running bound actor, while the lock is held.
    pub(crate) running: Option<ActorCell>,
}

impl Binding {
    pub(crate) fn new(spawn: SpawnBound) -> Self {
        Self {
            spawn,
            running: None,
        }
    }

    /// Stops the bound actor, if running (on loss, release or stop).
    pub(crate) fn stop(&mut self) {
        if let Some(actor) = self.running.take() {
            actor.stop(Some("lock no longer held".to_owned()));
        }
    }
}
