//! A lease this process holds: its token, the local loss deadline, and the loss signal.

use std::sync::Arc;

use tokio::time::Instant;

use ractor::ActorRef;

use super::guard::LockGuard;
use super::loss_signal::{HoldStatusSender, LossSignal};
use super::message::LockMsg;
use crate::error::{LossReason, StoreError};
use crate::metrics::LockMetrics;
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{LeaseId, LeaseKey};

pub(crate) struct Hold {
    pub(crate) lease: LeaseId,
    pub(crate) token: u64,
    /// The last fencing token the store reserved for this lease's grant: local holders after
    /// this one take the tokens up to it, with no store call.
    pub(crate) reserved_until: u64,
    pub(crate) options: Arc<LockOptions>,
    /// The acquisition's metrics (its handle's label policy).
    pub(crate) metrics: LockMetrics,
    pub(crate) acquired_at: Instant,
    /// When the holder must consider the lock lost: the send time of the last successful
    /// acquire/extend plus the renew deadline. Counting from the *send* time (not the reply)
    /// keeps it before the store-side expiry, which the store computed later than that.
    pub(crate) deadline: Instant,
    /// When the next renewal is due (unless one is in flight).
    pub(crate) next_renewal: Instant,
    pub(crate) renewal_in_flight: bool,
    pub(crate) last_error: Option<StoreError>,
    status: HoldStatusSender,
}

impl Hold {
    pub(crate) fn new(
        lease: LeaseId,
        token: u64,
        reserved_until: u64,
        options: Arc<LockOptions>,
        metrics: LockMetrics,
        sent_at: Instant,
    ) -> Self {
        let deadline = sent_at + options.renew_deadline();
        let next_renewal = sent_at + options.extension_cadence();
        Self {
            lease,
            token,
            reserved_until,
            options,
            metrics,
            acquired_at: Instant::now(),
            deadline,
            next_renewal,
            renewal_in_flight: false,
            last_error: None,
            status: HoldStatusSender::new(sent_at),
        }
    }

    /// Whether the lease can pass to a local waiter asking for `options` without a store
    /// call: a reserved token is left, and the waiter's lease terms are this lease's.
    pub(crate) fn can_pass_locally(&self, options: &LockOptions) -> bool {
        self.token < self.reserved_until
            && options.expiry() == self.options.expiry()
            && options.extension_cadence() == self.options.extension_cadence()
            && options.renew_deadline() == self.options.renew_deadline()
    }

    /// Passes the lease to the next local holder, with the next reserved token: the lease,
    /// its deadline and any renewal in flight carry on; this hold's guards see a release.
    pub(crate) fn pass_locally(self, options: Arc<LockOptions>, metrics: LockMetrics) -> Self {
        let next = Self {
            lease: self.lease,
            token: self.token + 1,
            reserved_until: self.reserved_until,
            options,
            metrics,
            acquired_at: Instant::now(),
            deadline: self.deadline,
            next_renewal: self.next_renewal,
            renewal_in_flight: self.renewal_in_flight,
            last_error: self.last_error,
            status: self.status.successor(),
        };
        self.status.released();
        next
    }

    /// A guard of this hold for its caller, answering to `actor`.
    pub(crate) fn guard(&self, name: &LockName, actor: &ActorRef<LockMsg>) -> LockGuard {
        LockGuard::new(
            name.clone(),
            self.token,
            self.lease,
            actor.clone(),
            self.loss_signal(),
        )
    }

    /// A receiver for a new guard of this hold.
    pub(crate) fn loss_signal(&self) -> LossSignal {
        self.status.subscribe()
    }

    pub(crate) fn key(&self, name: &LockName) -> LeaseKey {
        LeaseKey {
            name: name.clone(),
            lease: self.lease,
        }
    }

    /// A renewal sent at `sent_at` succeeded.
    pub(crate) fn confirm(&mut self, sent_at: Instant) {
        self.deadline = self.deadline.max(sent_at + self.options.renew_deadline());
        self.last_error = None;
        self.status.confirmed(sent_at);
    }

    /// When the next renewal should be sent after one sent at `sent_at` succeeded.
    pub(crate) fn next_renewal_after(&self, sent_at: Instant) -> Instant {
        sent_at + self.options.extension_cadence()
    }

    /// When to retry a renewal that failed now: a quarter cadence later, never past the
    /// deadline (the deadline timer decides the loss).
    pub(crate) fn retry_renewal_at(&self) -> Instant {
        let retry = (self.options.extension_cadence() / 4).max(std::time::Duration::from_millis(1));
        (Instant::now() + retry).min(self.deadline)
    }

    /// Why the lock is lost if the deadline passes now.
    pub(crate) fn deadline_reason(&self) -> LossReason {
        match (&self.last_error, self.renewal_in_flight) {
            (Some(error), false) => LossReason::StoreErrors {
                last_error: error.report(),
            },
            _ => LossReason::DeadlineExceeded,
        }
    }

    /// Tells every guard of this hold that it is lost.
    pub(crate) fn signal_loss(self, reason: LossReason) {
        self.status.lost(reason);
    }

    /// Ends the hold by release: not a loss, so loss watchers never fire.
    pub(crate) fn mark_released(self) {
        self.status.released();
    }
}
