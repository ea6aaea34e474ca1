//! The messages of a campaign actor.

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::binding::SpawnBound;
use super::sinks::EventSink;
use crate::error::LockError;
use crate::lock::{AtRisk, HoldChange, LockGuard};

/// What a probe sees of the current term.
pub(crate) struct TermState {
    pub(crate) token: u64,
    /// When its last confirmed renewal was sent.
    pub(crate) renewed_at: Instant,
    /// Its renewal trouble, if it is at risk.
    pub(crate) risk: Option<AtRisk>,
}

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
    /// The current term, if the lock is held.
    Probe {
        reply: oneshot::Sender<Option<TermState>>,
    },
    /// Run a user actor only while held (and start campaigning).
    Bind(SpawnBound),
    // --- from the campaign's own tasks and timers ---
    AcquireDone {
        attempt: u64,
        result: Result<LockGuard, LockError>,
    },
    /// The hold of the term with `token` changed: at risk, recovered, or lost.
    HoldChanged {
        token: u64,
        change: HoldChange,
    },
    RetryDue,
    /// The bound actor of the term with `token` has finished starting.
    BoundStarted {
        token: u64,
    },
}
