//! The messages of a campaign actor.

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::binding::SpawnBound;
use super::sinks::EventSink;
use crate::error::{LockError, LossReason};
use crate::lock::LockGuard;

pub(crate) enum CampaignMsg<E> {
    /// Start (or keep) campaigning; `reply` gets the token once held.
    Start {
        reply: Option<oneshot::Sender<Result<u64, LockError>>>,
    },
    /// Stop campaigning and release what is held.
    Stop {
        reply: Option<oneshot::Sender<Result<(), LockError>>>,
    },
    /// The manager shuts down: end the term as [`Stop`](Self::Stop) does, then stop the
    /// actor for good (it could never hold the lock again).
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// Forward events to a user actor (or an in-process sink such as the leader gauge).
    Subscribe(EventSink<E>),
    /// Publish an event that comes from outside the engine (a leader change).
    Publish(E),
    /// The current term's token and when its last confirmed renewal was sent, if held.
    Probe {
        reply: oneshot::Sender<Option<(u64, Instant)>>,
    },
    /// Run a user actor only while held (and start campaigning).
    Bind(SpawnBound),
    // --- from the campaign's own tasks and timers ---
    AcquireDone {
        attempt: u64,
        result: Result<LockGuard, LockError>,
    },
    Lost {
        token: u64,
        reason: LossReason,
    },
    RetryDue,
    /// The bound actor of the term with `token` has finished starting.
    BoundStarted {
        token: u64,
    },
}
