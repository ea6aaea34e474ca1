//! The acquisition's data: its phases, each owning what only it uses, and the attempt in
//! flight (what `acquisition.rs` moves, and what the actor's state holds).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::attempt::Deferred;
use super::backoff::Backoff;
use super::waiters::NextWaiter;
use crate::kind::Access;
use crate::lock::message::{LockMsg, TryReply};
use crate::lock::timer::Timer;
use crate::metrics::LockMetrics;
use crate::options::LockOptions;
use crate::store::{LeaseId, WaitingForRelease};

/// The acquisition's phase; each phase owns what only it uses, its timer included (a
/// timer is cancelled with the phase that set it, and a message it already sent is
/// recognised as stale by the timer's id).
pub(super) enum Phase {
    Idle {
        /// The idle stop, armed while the actor is unused.
        idle_stop: Option<Timer<LockMsg>>,
    },
    Attempting {
        attempt: Attempt,
        /// A release was seen while the attempt was in flight: if the attempt finds the
        /// name held, it was sent before the release, so the next one goes out at once.
        woken: bool,
        /// The refusals since the waiters' last grant by an attempt (an attempt's grant or
        /// an idle pause starts afresh). A hand-over's grant, made beside a backoff, keeps
        /// it: restarting it there made no difference that P3 could show, on the memory
        /// store or the test server (`benches/HISTORY.md#p3-hand-over-backoff`).
        backoff: Backoff,
    },
    BackingOff {
        backoff: Backoff,
        /// Sends the next attempt's `RetryDue`.
        retry: Timer<LockMsg>,
        /// Stepping back so other processes get a turn (the fairness bound): a release does
        /// not cut this wait short, or this process would take the name straight back.
        yielding: bool,
        /// Counts this actor as wanting the store's release feed while another process
        /// holds the name.
        _waiting: Option<WaitingForRelease>,
    },
}

impl Default for Phase {
    fn default() -> Self {
        Self::Idle { idle_stop: None }
    }
}

impl Phase {
    pub(super) fn is_idle(&self) -> bool {
        matches!(self, Self::Idle { .. })
    }
}

/// One attempt (or the grant part of a hand-over) in flight, for a waiter of `access`.
pub(super) struct Attempt {
    pub(super) lease: LeaseId,
    pub(super) access: Access,
    pub(super) options: Arc<LockOptions>,
    pub(super) metrics: LockMetrics,
    /// Set when the attempt serves a `try_acquire` rather than the waiter queue.
    pub(super) for_try: Option<TryReply>,
    /// In arrival order, the arrival the store was asked to grant for: the grant goes only
    /// to a waiter that had asked by then. If that waiter left, a later one taking the
    /// grant would overtake whoever asked in between elsewhere; it goes back to the store
    /// (a hand-over, decided by the line) instead.
    pub(super) arrived_by: Option<Instant>,
    /// Set while the attempt may still be waiting for renewals that fell behind.
    pub(super) deferred: Option<Deferred>,
    /// How long a refusal keeps this manager listed on the record (the request's
    /// `retry_within`): a waiter waits quietly only as long as its listing lasts, or a
    /// release would wake nobody while it sleeps.
    pub(super) listed_for: Duration,
}

impl Attempt {
    pub(super) fn new(lease: LeaseId, next: NextWaiter, for_try: Option<TryReply>) -> Self {
        Self {
            lease,
            access: next.access,
            arrived_by: next.options.in_arrival_order().then_some(next.requested_at),
            options: next.options,
            metrics: next.metrics,
            for_try,
            deferred: None,
            listed_for: Duration::ZERO,
        }
    }
}
