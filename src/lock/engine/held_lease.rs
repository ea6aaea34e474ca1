//! A lease this process holds: its token, the local loss deadline, the renewal bookkeeping
//! and the loss signal. The actor asks it questions (is it still valid? when is its timer
//! due?) and tells it what happened (a renewal was sent, confirmed, failed); the fields stay
//! behind those methods so every rule about a hold's validity lives in this file.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use ractor::ActorRef;

use crate::error::{LockError, LossReason, StoreError};
use crate::kind::Access;
use crate::lock::guard::LockGuard;
use crate::lock::loss_signal::{AtRisk, HoldStatusSender};
use crate::lock::message::LockMsg;
use crate::lock::orphan;
use crate::lock::renewer::Renewer;
use crate::lock::renewer::renewal::Renewal;
use crate::metrics::{AttemptResult, LockMetrics, RenewalResult, StoreOp};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{ExtendOutcome, ExtendRequest, LeaseId, LeaseKey, LockStore, ReleaseOutcome};

pub(crate) struct HeldLease {
    lease: LeaseId,
    /// What the lease holds. Anything but a mutex's [`Access::Exclusive`] is one holder of
    /// a shared record (a semaphore's or reader/writer lock's): its key says so to the store.
    access: Access,
    token: u64,
    /// The last fencing token the store reserved for this lease's grant: local holders after
    /// this one, and readers joining its grant, take the tokens up to it, with no store call.
    reserved_until: u64,
    /// The last token handed to a guard of this lease: the grant's own, or that of the last
    /// reader who joined the grant (see [`HeldLease::joiner_guard`]).
    last_given: u64,
    /// The guards holding this lease and not yet let go: one, or more once readers joined.
    guards: u32,
    /// Until when local holders may follow this one with no store call: the grant's sending
    /// plus the fairness bound. Past it, only the store can say whether other processes
    /// have waited too long.
    passes_locally_until: Instant,
    options: Arc<LockOptions>,
    /// The acquisition's metrics (its handle's label policy).
    metrics: LockMetrics,
    acquired_at: Instant,
    /// When the holder must consider the lock lost: the send time of the last successful
    /// acquire/extend plus the renew deadline. Counting from the *send* time (not the reply)
    /// keeps it before the store-side expiry, which the store computed later than that.
    deadline: Instant,
    /// Renewals asked so far, and how many of them a confirmation has settled: the answer
    /// to a renewal asked before the last confirmation came is out of date (see
    /// [`HeldLease::apply_renewal`]).
    renewals_asked: u64,
    renewals_settled: u64,
    renewals: Renewals,
    status: HoldStatusSender,
}

/// Where the hold's renewals stand. The hold is at risk in the last two: a renewal came back
/// without confirming the lease (an error, or no answer in time) since the last
/// confirmation, and as the lease may be gone, only a store call may pass it on.
enum Renewals {
    /// Confirmed; the next renewal goes at `at`.
    Scheduled { at: Instant },
    /// Confirmed until now, and a renewal is out. Still unanswered at `silent_at` (halfway
    /// from its sending to the deadline), it puts the hold at risk and is sent again: a
    /// store that stops answering is warned of while time is left, not only at the loss.
    Out { silent_at: Instant },
    /// At risk since `since`; the next renewal goes at `at`. `last_error` is the last error
    /// the store reported (not our own timeout), for the loss reason.
    Retrying {
        since: Instant,
        at: Instant,
        last_error: Option<StoreError>,
    },
    /// At risk since `since`, and a renewal is out (a retry, or one sent again beside a
    /// silent one).
    RetryOut { since: Instant },
}

impl Renewals {
    /// Since when the hold is at risk, if it is.
    fn at_risk_since(&self) -> Option<Instant> {
        match self {
            Self::Retrying { since, .. } | Self::RetryOut { since } => Some(*since),
            Self::Scheduled { .. } | Self::Out { .. } => None,
        }
    }
}

/// What the hold's one timer found due.
pub(crate) enum LeaseDue {
    /// The loss deadline passed.
    Deadline,
    /// The renewal in flight has gone unanswered for half the time it had until the
    /// deadline: the store is silent, the hold at risk, and the renewal is sent again.
    Silent,
    /// A renewal is due now.
    Renewal,
    /// Nothing yet (the timer is re-armed for [`HeldLease::timer_at`]).
    Nothing,
}

impl HeldLease {
    pub(crate) fn new(
        lease: LeaseId,
        (token, reserved_until): (u64, u64),
        options: Arc<LockOptions>,
        metrics: LockMetrics,
        sent_at: Instant,
    ) -> Self {
        let deadline = sent_at + options.renew_deadline();
        let status = HoldStatusSender::new(sent_at).with_renew_deadline(options.renew_deadline());
        let renewals = Renewals::Scheduled {
            at: sent_at + options.renew_interval(),
        };
        Self {
            lease,
            access: Access::Exclusive,
            token,
            reserved_until,
            last_given: token,
            guards: 1,
            passes_locally_until: sent_at + options.fairness_bound(),
            options,
            metrics,
            acquired_at: Instant::now(),
            deadline,
            renewals_asked: 0,
            renewals_settled: 0,
            renewals,
            status,
        }
    }

    /// Marks the hold as one holder of a shared record, holding `access` in it.
    pub(crate) fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    pub(crate) fn lease(&self) -> LeaseId {
        self.lease
    }

    /// For logs only: nothing is decided by it (each guard carries its own token), so a
    /// mutant returning another number changes no behaviour and survives.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    pub(crate) fn options(&self) -> &Arc<LockOptions> {
        &self.options
    }

    pub(crate) fn metrics(&self) -> &LockMetrics {
        &self.metrics
    }

    /// Whether the guard holding `lease` under `token` is one of this hold's.
    pub(crate) fn is(&self, lease: LeaseId, token: u64) -> bool {
        self.lease == lease && (self.token..=self.last_given).contains(&token)
    }

    /// Whether the lease is provably still this process's at `now`: its loss deadline has
    /// not passed. Past it the store may already have let somebody else in.
    pub(crate) fn is_valid_at(&self, now: Instant) -> bool {
        now < self.deadline
    }

    /// Whether the lease can pass to a local waiter asking for `options` without a store
    /// call: a reserved token is left and the lease may serve the waiter locally (see
    /// [`HeldLease::serves_locally`]).
    pub(crate) fn can_pass_locally(&self, options: &LockOptions, now: Instant) -> bool {
        self.token < self.reserved_until && self.serves_locally(options, now)
    }

    /// Whether this hold takes readers joining it at all: it is a read, and other processes
    /// have not waited the fairness bound for its place (`others_starving`: then it goes back
    /// to the store plainly). The first part of [`HeldLease::can_join`]'s rule, asked before
    /// the waiters are looked at.
    pub(crate) fn takes_joiners(&self, others_starving: bool) -> bool {
        self.access == Access::Read && !others_starving
    }

    /// When a reader waiting here (with `options`, since `arrived`) may join this read as it
    /// is granted, sharing its lease under the next reserved token — the rule, stated once.
    /// One store call then admits a process's waiting readers together instead of one each.
    /// A reader joins if all of these hold:
    ///
    /// - the hold takes joiners ([`HeldLease::takes_joiners`]);
    /// - the reader waits here now, and is next in this process's order: the next of a
    ///   readers' turn, or else the first waiter, never past a writer queued ahead of it (the
    ///   waiters offer no other: `Waiters::deliver_to_joiner`). As the hold takes no guards
    ///   later, joining never keeps a read going past its guards' own critical sections;
    /// - a reserved token is left;
    /// - in arrival order (the lease's and the reader's), the grant's answer said readers
    ///   that arrived before `readers_arrived_before` are ahead of every writer waiting
    ///   elsewhere, this one did, and it shares the lease's terms
    ///   ([`HeldLease::shares_terms`]), so it overtakes no writer; otherwise the lease may
    ///   serve it locally ([`HeldLease::serves_locally`]).
    ///
    /// Letting in a reader that arrived at the very instant the earliest writer elsewhere did
    /// (`<=`) is a surviving mutant: the store admits such a tie too (rule 16 waits only
    /// behind an earlier arrival), so the reader's own attempt, sent at once after the
    /// grant, gets in as joining would have, one store call later.
    pub(crate) fn can_join(
        &self,
        options: &LockOptions,
        now: Instant,
        (arrived, readers_arrived_before): (Instant, Option<Instant>),
    ) -> bool {
        let in_line = self.options.in_arrival_order() && options.in_arrival_order();
        self.last_given < self.reserved_until
            && if in_line {
                readers_arrived_before.is_some_and(|before| arrived < before)
                    && self.shares_terms(options, now)
            } else {
                self.serves_locally(options, now)
            }
    }

    /// Whether the lease may serve a local waiter asking for `options` without a store
    /// call: neither the lease nor the waiter is in arrival order (where the store decides
    /// every turn), and [`HeldLease::shares_terms`].
    fn serves_locally(&self, options: &LockOptions, now: Instant) -> bool {
        !self.options.in_arrival_order()
            && !options.in_arrival_order()
            && self.shares_terms(options, now)
    }

    /// Whether the lease may serve a waiter asking for `options` now: it is provably still
    /// ours (deadline ahead, no renewal came back unconfirmed), the store was asked less
    /// than the fairness bound ago, and the waiter's lease terms are this lease's.
    ///
    /// Serving at the fairness bound's very instant too (`<=`) is a mutant no test can tell
    /// from this: the bound is a tuning, and the simulator allows it a millisecond of slack
    /// for paused time's whole-millisecond timers.
    fn shares_terms(&self, options: &LockOptions, now: Instant) -> bool {
        self.is_valid_at(now)
            && self.renewals.at_risk_since().is_none()
            && now < self.passes_locally_until
            && options.same_lease_terms(&self.options)
    }

    /// Passes the lease to the next local holder, with the next reserved token: the lease,
    /// its deadline and any renewal in flight carry on; this hold's guards see a release.
    ///
    /// The successor takes its waiter's options, though `can_pass_locally` already made
    /// their lease terms and mode this hold's: what may still differ between two handles
    /// of a name (the fairness bound, the backoff) tunes the next decisions only, so
    /// keeping the old options is a mutant no test can tell from this.
    pub(crate) fn pass_locally(mut self, options: Arc<LockOptions>, metrics: LockMetrics) -> Self {
        self.metrics.hold_ended(self.acquired_at.elapsed());
        let successor = self.status.successor();
        std::mem::replace(&mut self.status, successor).released();
        Self {
            token: self.token + 1,
            last_given: self.token + 1,
            options,
            metrics,
            acquired_at: Instant::now(),
            ..self
        }
    }

    /// A guard of this hold for its caller, answering to `actor`.
    pub(crate) fn guard(&self, name: &LockName, actor: &ActorRef<LockMsg>) -> LockGuard {
        self.guard_under(self.token, name, actor)
    }

    fn guard_under(&self, token: u64, name: &LockName, actor: &ActorRef<LockMsg>) -> LockGuard {
        LockGuard::new(
            name.clone(),
            token,
            self.access,
            self.lease,
            actor.clone(),
            self.status.subscribe(),
        )
    }

    /// A guard for a reader joining this read (see [`HeldLease::can_join`]), under the next
    /// reserved token. It counts as a holder once [`HeldLease::joined`] says it was delivered;
    /// a guard its reader could not take leaves its token unused.
    pub(crate) fn joiner_guard(&mut self, name: &LockName, actor: &ActorRef<LockMsg>) -> LockGuard {
        self.last_given += 1;
        self.guard_under(self.last_given, name, actor)
    }

    /// A reader took a joiner's guard: one more guard holds the lease.
    pub(crate) fn joined(&mut self) {
        self.guards += 1;
        self.metrics.attempt(AttemptResult::Acquired);
        self.metrics.held(1.0);
    }

    /// One of several guards let go: the lease stays for the others (returns `true`). With
    /// one guard left, nothing changes: its release is the lease's.
    pub(crate) fn guard_left(&mut self) -> bool {
        if self.guards <= 1 {
            return false;
        }
        self.guards -= 1;
        self.metrics.hold_ended(self.acquired_at.elapsed());
        true
    }

    pub(crate) fn key(&self, name: &LockName) -> LeaseKey {
        let key = if self.access.kind().is_shared() {
            LeaseKey::shared(name.clone(), self.lease)
        } else {
            LeaseKey::new(name.clone(), self.lease)
        };
        key.with_arrival_order(self.options.in_arrival_order())
            .with_access(self.access)
    }

    /// Schedules the first renewal.
    pub(crate) fn granted(&mut self, next_renewal: Instant) {
        self.metrics.held(1.0);
        self.renewals = Renewals::Scheduled { at: next_renewal };
    }

    /// What the hold's timer should do at `now`.
    pub(crate) fn due(&self, now: Instant) -> LeaseDue {
        if now >= self.deadline {
            return LeaseDue::Deadline;
        }
        match self.renewals {
            Renewals::Out { silent_at } if now >= silent_at => LeaseDue::Silent,
            Renewals::Scheduled { at } | Renewals::Retrying { at, .. } if now >= at => {
                LeaseDue::Renewal
            }
            _ => LeaseDue::Nothing,
        }
    }

    /// When the hold's one timer must fire: at its next renewal, or while a renewal is in
    /// flight at the moment its silence puts the hold at risk, then at its loss deadline (a
    /// renewal is always due before the deadline, so the deadline is armed whenever a store
    /// call could hang).
    pub(crate) fn timer_at(&self) -> Instant {
        match self.renewals {
            Renewals::Scheduled { at } | Renewals::Retrying { at, .. } => at.min(self.deadline),
            Renewals::Out { silent_at } => silent_at.min(self.deadline),
            Renewals::RetryOut { .. } => self.deadline,
        }
    }

    /// The renewal to send now for this hold of `name`, answering to `actor`, bounded by
    /// the loss deadline (a later answer is useless anyway).
    pub(crate) fn renewal(&mut self, name: &LockName, actor: &ActorRef<LockMsg>) -> Renewal {
        self.renewals_asked += 1;
        let at_risk_since = self.renewals.at_risk_since();
        self.renewals = match at_risk_since {
            Some(since) => Renewals::RetryOut { since },
            // Halfway to the deadline: late enough that a loaded store's slow answer is not
            // a false alarm, early enough that half the time left remains to act on the
            // warning.
            None => {
                let now = Instant::now();
                Renewals::Out {
                    silent_at: now + self.deadline.saturating_duration_since(now) / 2,
                }
            }
        };
        Renewal {
            request: ExtendRequest::new(self.key(name), self.options.lease_duration()),
            deadline: self.deadline,
            actor: actor.clone(),
            number: self.renewals_asked,
            again: at_risk_since.is_some(),
        }
    }

    /// Applies the answer to renewal `number`, sent at `sent_at`: a confirmation moves the
    /// deadline and schedules the next renewal (aligned by `renewer`), an error puts the
    /// hold at risk until the deadline decides. Returns the loss reason when the store
    /// says the lease is gone.
    ///
    /// Two renewals can be out at once (see [`HeldLease::store_silent`]). The first confirmed
    /// settles every renewal asked until then; a later answer to one of those is out of
    /// date. Its confirmation still counts for the deadline, from its own send time, but
    /// schedules nothing; its failure or timeout says nothing of a lease just renewed and is
    /// ignored. "Not the owner" is news whatever its renewal: the lease is gone.
    pub(crate) fn apply_renewal(
        &mut self,
        name: &LockName,
        (number, sent_at): (u64, Instant),
        result: Result<ExtendOutcome, StoreError>,
        renewer: &Renewer,
    ) -> Option<LossReason> {
        let failed = result.is_err();
        self.metrics
            .store_call(StoreOp::Extend, sent_at.elapsed(), failed);
        let out_of_date = number <= self.renewals_settled;
        match result {
            Ok(ExtendOutcome::Extended) => {
                tracing::trace!(lock = %name, token = self.token, "lease renewed");
                self.metrics.renewal(RenewalResult::Extended);
                self.deadline = self.deadline.max(sent_at + self.options.renew_deadline());
                self.status.confirmed(sent_at);
                if out_of_date {
                    return None;
                }
                self.renewals_settled = self.renewals_asked;
                if self.renewals.at_risk_since().is_some() {
                    self.metrics.at_risk(-1.0);
                    self.status.recovered();
                }
                let interval = self.options.renew_interval();
                let at = renewer.align(self.next_renewal_after(sent_at), interval);
                self.renewals = Renewals::Scheduled { at };
                None
            }
            Ok(ExtendOutcome::NotOwner) => {
                self.metrics.renewal(RenewalResult::Lost);
                Some(LossReason::Superseded)
            }
            Ok(ExtendOutcome::ForceReleased) => {
                self.metrics.renewal(RenewalResult::Lost);
                Some(LossReason::ForceReleased)
            }
            Err(_) if out_of_date => None,
            Err(error) => {
                tracing::warn!(lock = %name, token = self.token, %error, "lease renewal failed; retrying until the renew deadline");
                self.metrics.renewal(RenewalResult::Error);
                // A renewal our own timeout cut short went unanswered: that is a silent
                // store, not a failing one.
                let last_error = (!matches!(error, StoreError::Timeout(_))).then_some(error);
                let since = self.mark_at_risk(last_error.as_ref());
                // Retried a quarter cadence later, never past the deadline (its timer
                // decides the loss).
                let retry = (self.options.renew_interval() / 4).max(Duration::from_millis(1));
                self.renewals = Renewals::Retrying {
                    since,
                    at: (Instant::now() + retry).min(self.deadline),
                    last_error,
                };
                None
            }
        }
    }

    /// The renewal in flight has gone unanswered for half its time: the hold is at risk
    /// while the renewal may still come back, and the returned renewal goes beside it. A
    /// command can hang on its way (a stuck connection, a server that lost it) while the
    /// store answers others again; without a second renewal the lease would be lost at its
    /// deadline with the store answering all along. Both are owner-checked extends of the
    /// same lease: the first confirmed moves the deadline, from its own send time, and the
    /// other's answer is then out of date (see [`HeldLease::apply_renewal`]). The renewer sends
    /// the second only while the first is in a command out (see `Renewal::again`).
    pub(crate) fn store_silent(&mut self, name: &LockName, actor: &ActorRef<LockMsg>) -> Renewal {
        let since = self.mark_at_risk(None);
        self.renewals = Renewals::RetryOut { since };
        self.renewal(name, actor)
    }

    /// Tells the holder the hold is at risk, with the store's `last_error` if it reported
    /// one: since when it is, counted from now unless it already was.
    fn mark_at_risk(&self, last_error: Option<&StoreError>) -> Instant {
        let since = self.renewals.at_risk_since().unwrap_or_else(|| {
            self.metrics.at_risk(1.0);
            Instant::now()
        });
        self.status.at_risk(AtRisk {
            since,
            deadline: self.deadline,
            last_error: last_error.map(StoreError::report),
        });
        since
    }

    /// When the next renewal should be sent after one sent at `sent_at` succeeded.
    pub(crate) fn next_renewal_after(&self, sent_at: Instant) -> Instant {
        sent_at + self.options.renew_interval()
    }

    /// Why the lock is lost if the deadline passes now.
    pub(crate) fn deadline_reason(&self) -> LossReason {
        match &self.renewals {
            Renewals::Retrying {
                last_error: Some(error),
                ..
            } => LossReason::StoreErrors {
                last_error: error.report(),
            },
            _ => LossReason::DeadlineExceeded,
        }
    }

    /// Tells every guard of this hold that it is lost. The lease itself is left to the
    /// returned [`LostLease`]: it must stay on the store while the guard may still act.
    pub(crate) fn lose(self, name: &LockName, reason: &LossReason) -> LostLease {
        self.metrics.loss(reason);
        self.end();
        self.status.lost(reason.clone());
        // The store keeps the lease at least `expiry` past the last confirmed send, and the
        // deadline is `renew_deadline` past it: the holder is told at least this much before
        // the lease can expire — the margin it is promised to stop in.
        let margin = self
            .options
            .lease_duration()
            .saturating_sub(self.options.renew_deadline());
        LostLease {
            key: self.key(name),
            timeout: self.options.renew_deadline(),
            free_at: Instant::now() + margin,
            status: self.status,
        }
    }

    /// The hold ends: it counts no more in the gauges (at risk too, if it was).
    fn end(&self) {
        if self.renewals.at_risk_since().is_some() {
            self.metrics.at_risk(-1.0);
        }
        for _ in 0..self.guards {
            self.metrics.hold_ended(self.acquired_at.elapsed());
        }
    }

    /// Ends the hold by release: not a loss, so loss watchers never fire.
    pub(crate) fn released(self) {
        self.end();
        self.status.released();
    }
}

/// A hold whose guard was told of its loss but may still be running its critical section.
/// Freeing the lease at once would let another holder in while this one works: the loss
/// margin would be zero. So the lease is freed only once the holder acknowledges the loss (its
/// guard and loss signals are dropped) or, at the latest, once the margin has passed — the
/// moment it would have expired on the store anyway.
pub(crate) struct LostLease {
    key: LeaseKey,
    status: HoldStatusSender,
    free_at: Instant,
    timeout: Duration,
}

impl LostLease {
    /// On its own task: waits for the acknowledgement (or the end of the margin), then
    /// releases the lease (owner-checked: a lease somebody else replaced is left alone).
    pub(crate) fn spawn_release(self, store: &Arc<dyn LockStore>) {
        let store = store.clone();
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = self.status.acknowledged() => {}
                () = tokio::time::sleep_until(self.free_at) => {}
            }
            // At the margin's end the lease is about to expire anyway: one try.
            orphan::release_now(store.as_ref(), &self.key, self.timeout, Instant::now()).await;
        });
    }
}

/// What the guard that released the lease `lease` of `name` is told, from the store's
/// answer to its release (recording a loss in the metrics of that hold).
pub(crate) fn release_answer(
    name: &LockName,
    lease: LeaseId,
    result: Result<ReleaseOutcome, StoreError>,
    metrics: &LockMetrics,
) -> Result<(), LockError> {
    match result {
        Ok(ReleaseOutcome::Released { .. }) => Ok(()),
        // The record no longer carried our lease: it had expired and been taken over before
        // the release — the caller must know its critical section was not exclusive.
        Ok(ReleaseOutcome::NotOwner) => {
            metrics.loss(&LossReason::Superseded);
            Err(LockError::Lost(LossReason::Superseded))
        }
        Err(error) => {
            tracing::warn!(lock = %name, %lease, %error, "release failed; the lease will expire on the store");
            Err(LockError::Store(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Fairness, LockNameLabel};

    /// Two renewals out at once (one sent again beside a silent one): whichever is
    /// confirmed first settles both, in either order. The other's failure or timeout then
    /// warns nobody and schedules nothing, its confirmation only counts for the deadline,
    /// and "not the owner" still means the lease is gone.
    #[tokio::test(start_paused = true)]
    async fn the_first_confirmation_settles_every_renewal_out() {
        let name = LockName::new("stuck").unwrap();
        let renewer = Renewer::start(Arc::new(crate::store::memory::MemoryStore::new()));
        let (actor, _messages) = crate::lock::timer::tests::probe::<LockMsg>().await;
        let timeout = || Err(StoreError::Timeout(Duration::ZERO));
        for second_wins in [true, false] {
            let options = Arc::new(LockOptions::default());
            let metrics = LockMetrics::new(&name, &LockNameLabel::Off);
            let granted_at = Instant::now();
            let mut hold = HeldLease::new(LeaseId::new(), (1, 16), options, metrics, granted_at);
            tokio::time::advance(Duration::from_secs(10)).await;
            let first = hold.renewal(&name, &actor);
            let first_sent = (first.number, Instant::now());
            tokio::time::advance(Duration::from_secs(5)).await;
            let second = hold.store_silent(&name, &actor);
            assert!(second.again && !first.again, "only the second goes beside");
            let second_sent = (second.number, Instant::now());
            tokio::time::advance(Duration::from_millis(10)).await;
            let (confirmed, other) = if second_wins {
                (second_sent, first_sent)
            } else {
                (first_sent, second_sent)
            };
            let renewed =
                hold.apply_renewal(&name, confirmed, Ok(ExtendOutcome::Extended), &renewer);
            assert_eq!(renewed, None);
            assert!(hold.renewals.at_risk_since().is_none(), "recovered");
            let _next = hold.renewal(&name, &actor); // the next renewal is out
            let (deadline, timer_at) = (hold.deadline, hold.timer_at());
            assert_eq!(hold.apply_renewal(&name, other, timeout(), &renewer), None);
            assert!(
                hold.renewals.at_risk_since().is_none(),
                "warned by an out-of-date answer"
            );
            let out = |hold: &HeldLease| matches!(hold.renewals, Renewals::Out { .. });
            assert!(out(&hold), "the renewal out was forgotten");
            assert_eq!((hold.deadline, hold.timer_at()), (deadline, timer_at));
            assert_eq!(
                hold.apply_renewal(&name, other, Ok(ExtendOutcome::Extended), &renewer),
                None
            );
            assert!(out(&hold), "the renewal out was forgotten");
            assert_eq!(
                hold.deadline,
                deadline.max(other.1 + hold.options.renew_deadline()),
                "a confirmation counts from its own send time"
            );
            let gone = hold.apply_renewal(&name, other, Ok(ExtendOutcome::NotOwner), &renewer);
            assert_eq!(gone, Some(LossReason::Superseded));
        }
    }

    /// A renewal answered "force-released" is a loss that says so.
    #[tokio::test(start_paused = true)]
    async fn a_forced_release_is_a_loss_named_as_such() {
        let name = LockName::new("forced").unwrap();
        let renewer = Renewer::start(Arc::new(crate::store::memory::MemoryStore::new()));
        let (actor, _messages) = crate::lock::timer::tests::probe::<LockMsg>().await;
        let options = Arc::new(LockOptions::default());
        let metrics = LockMetrics::new(&name, &LockNameLabel::Off);
        let mut hold = HeldLease::new(LeaseId::new(), (1, 16), options, metrics, Instant::now());
        tokio::time::advance(Duration::from_secs(10)).await;
        let renewal = hold.renewal(&name, &actor);
        let sent = (renewal.number, Instant::now());
        let answer = Ok(ExtendOutcome::ForceReleased);
        let lost = hold.apply_renewal(&name, sent, answer, &renewer);
        assert_eq!(lost, Some(LossReason::ForceReleased));
    }

    /// A release's key tells the store the lease's mode: in arrival order the MongoDB store
    /// keeps the released record (and its line of waiters) while a place in the line lasts.
    #[test]
    fn a_key_carries_the_lease_mode_and_kind() {
        let name = LockName::new("keyed").unwrap();
        for fairness in [Fairness::Bounded, Fairness::ArrivalOrder] {
            for access in [
                Access::Exclusive,
                Access::Read,
                Access::Permit { permits: 2 },
            ] {
                let options = Arc::new(LockOptions::default().with_fairness(fairness));
                let metrics = LockMetrics::for_access(&name, &LockNameLabel::Off, access);
                let hold =
                    HeldLease::new(LeaseId::new(), (1, 16), options, metrics, Instant::now())
                        .with_access(access);
                let key = hold.key(&name);
                assert_eq!(key.lease, hold.lease());
                assert_eq!(key.shared, access.kind().is_shared(), "{access:?}");
                assert_eq!(
                    key.in_arrival_order,
                    fairness == Fairness::ArrivalOrder,
                    "{fairness:?}"
                );
            }
        }
    }
}
