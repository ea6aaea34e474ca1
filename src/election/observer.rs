//! Holder observation: every candidate and observer of an election learns who leads
//! (`LeaderChanged`) by looking at the lock record every retry period, and at once after
//! its own term starts or ends.

use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};

use super::event::{ElectionEvent, LeaderInfo};
use crate::campaign::Publisher;
use crate::error::LockError;
use crate::lock::Lock;
use crate::store::request::HolderId;

/// Starts observing; stops by itself once the election's campaign has stopped (its event
/// channel closes, or publishing fails) or the manager has shut down.
pub(crate) fn spawn(
    lock: Lock,
    publisher: Publisher<ElectionEvent>,
    mut events: broadcast::Receiver<ElectionEvent>,
    every: Duration,
) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_seen: Option<Option<(HolderId, u64)>> = None;
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Err(RecvError::Closed) => return,
                    // Our own report, nothing new to look at.
                    Ok(ElectionEvent::LeaderChanged { .. }) => continue,
                    // A term of ours started or ended, or we missed some: look now.
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                },
                _ = ticks.tick() => {}
            }
            let record = match lock.inspect().await {
                Ok(record) => record,
                // The manager shut down: nothing to observe for any more.
                Err(LockError::Shutdown) => return,
                Err(error) => {
                    tracing::debug!(lock = %lock.name(), %error, "could not observe the lock holder");
                    continue;
                }
            };
            let seen = record
                .as_ref()
                .and_then(|r| r.holder().cloned().map(|holder| (holder, r.token)));
            if last_seen.as_ref() == Some(&seen) {
                continue;
            }
            last_seen = Some(seen);
            let leader = record.as_ref().and_then(LeaderInfo::from_record);
            if !publisher.publish(ElectionEvent::LeaderChanged { leader }) {
                return;
            }
        }
    });
}
