//! Fan-out of campaign events: a broadcast channel for tasks, and callbacks that forward to
//! user actors. Neither can block the campaign: the channel drops events for a lagging
//! receiver, actor sends never wait, and a panicking callback is removed.

use std::panic::AssertUnwindSafe;

use tokio::sync::broadcast;

use super::event::CampaignEvent;
use crate::name::LockName;

/// Forwards one event; returns `false` when its target is gone and it should be removed.
pub(crate) type EventSink<E> = Box<dyn FnMut(E) -> bool + Send>;

/// How many events a slow channel subscriber may fall behind before it skips ahead.
pub(crate) const CHANNEL_CAPACITY: usize = 64;

pub(crate) struct EventSinks<E> {
    /// The lock the events are about, for the log.
    lock: LockName,
    channel: broadcast::Sender<E>,
    actors: Vec<EventSink<E>>,
}

impl<E: CampaignEvent> EventSinks<E> {
    pub(crate) fn new(lock: LockName, channel: broadcast::Sender<E>) -> Self {
        Self {
            lock,
            channel,
            actors: Vec::new(),
        }
    }

    pub(crate) fn add_actor(&mut self, sink: EventSink<E>) {
        self.actors.push(sink);
    }

    pub(crate) fn publish(&mut self, event: E) {
        // Terms starting and ending (elected, deposed with why, released) are what an
        // operator reads the log for.
        tracing::info!(lock = %self.lock, ?event, "campaign event");
        // No receivers is fine: nobody subscribed to the channel.
        let _ = self.channel.send(event.clone());
        self.actors.retain_mut(|sink| {
            match std::panic::catch_unwind(AssertUnwindSafe(|| sink(event.clone()))) {
                Ok(alive) => alive,
                Err(_) => {
                    tracing::error!("an event subscriber panicked; it was removed");
                    false
                }
            }
        });
    }
}
