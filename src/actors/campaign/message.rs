//! The messages of a campaign actor.

use tokio::sync::oneshot;

use super::binding::SpawnBound;
use super::sinks::ActorSink;
use crate::store::LockRecord;
use crate::{LockError, LockGuard, LossReason};

pub(crate) enum CampaignMsg<E> {
    /// Start (or keep) campaigning; `reply` gets the token once held.
    Start {
        reply: Option<oneshot::Sender<Result<u64, LockError>>>,
    },
    /// Stop campaigning and release what is held.
    Stop {
        reply: Option<oneshot::Sender<Result<(), LockError>>>,
    },
    /// Forward events to a user actor.
    Subscribe(ActorSink<E>),
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
    ObserveDue,
    Observed(Result<Option<LockRecord>, LockError>),
}
