//! The holds: each lease this process holds on the name (at most one for a mutex) with its
//! own timer, and what moves one — a grant, its timer (a renewal, or the loss deadline), a
//! renewal's answer, a loss.
//!
//! A hold is only ever used while it is provably valid (its loss deadline ahead; see
//! `held_lease.rs`): a release that arrives past the deadline is a loss, and a lost hold's lease
//! stays on the store until its guard lets go or the loss margin has passed.

use ractor::ActorRef;
use tokio::time::Instant;

use super::attempt::Grant;
use super::held_lease::{HeldLease, LeaseDue};
use super::phase::Attempt;
use super::state::{NameState, Place};
use crate::error::{LossReason, StoreError};
use crate::lock::message::LockMsg;
use crate::lock::orphan::GrantClaim;
use crate::store::{ExtendOutcome, LeaseId};

/// Whether a lost hold's lease may still be on the store.
pub(super) enum LeaseLeft {
    /// It may (a deadline loss): free it once the holder lets go.
    OnStore,
    /// The store already said it is somebody else's.
    Gone,
}

impl NameState {
    /// The attempt won: a guard for its caller (or, if it left, for the next waiter with
    /// the same access and lease terms — in arrival order only one that had asked by
    /// then), and renewals
    /// from now on. `others_starving` if the grant's
    /// answer said other processes have waited long for it.
    pub(super) fn grant(
        &mut self,
        myself: &ActorRef<LockMsg>,
        attempt: Attempt,
        grant: Grant,
        sent_at: Instant,
        claim: GrantClaim,
        others_starving: bool,
    ) {
        let token = grant.token;
        claim.keep();
        // A grant takes this manager's place out of the line; a write's, its writers' mark.
        self.listing.granted(attempt.access);
        let reserved_until = token.saturating_add(self.store.tokens_per_grant().max(1) - 1);
        let access = attempt.access;
        let mut hold = HeldLease::new(
            attempt.lease,
            (token, reserved_until),
            attempt.options,
            attempt.metrics,
            sent_at,
        )
        .with_access(access);
        let make_guard = || hold.guard(&self.name, myself);
        let delivered = match attempt.for_try {
            Some(reply) => match reply.send(Ok(Some(make_guard()))) {
                Ok(()) => true,
                Err(Ok(Some(guard))) => {
                    guard.disarm();
                    false
                }
                Err(_) => false,
            },
            None => {
                // Only to a waiter that had asked by the time the store was asked: one that
                // asked later (its own waiter having left) may have asked after another
                // grant of this name, issued after this one, was already held here; taking
                // this grant's smaller token then would break the tokens' order.
                let asked_by = attempt.arrived_by.unwrap_or(sent_at);
                self.waiters
                    .deliver_for((access, hold.options()), Some(asked_by), make_guard)
            }
        };
        tracing::debug!(lock = %self.name, token, access = access.as_str(), delivered, "acquired");
        let first_renewal = self.renewer.align(
            hold.next_renewal_after(sent_at),
            hold.options().renew_interval(),
        );
        hold.granted(first_renewal);
        let lease = hold.lease();
        let timer = self.timers.timer();
        self.holds.insert(
            lease,
            Place {
                hold,
                access,
                timer,
                others_starving,
            },
        );
        // Armed before anything else: a mutex passed on locally keeps this timer (its
        // renewals and its deadline), and a released hold cancels it.
        self.arm_hold_timer(myself, lease);
        if delivered {
            self.join_readers(myself, lease, grant.readers_arrived_before);
        } else {
            // The caller left while the attempt was in flight: a mutex passes to the next
            // waiter or goes back; a shared place goes back plainly (the acquisition serves
            // the other waiters).
            let pass_on = self.passes_locally();
            self.release_hold(myself, lease, None, pass_on);
        }
    }

    /// The readers waiting here as a read is granted join it, one after another, while
    /// [`HeldLease::can_join`] (the rule) lets them: each gets its own guard under the next
    /// of the grant's reserved tokens, and the lease stays until the last of them lets go.
    fn join_readers(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        readers_arrived_before: Option<Instant>,
    ) {
        let Some(place) = self.holds.get_mut(&lease) else {
            return;
        };
        // Checked before the waiters are looked at: every grant of every kind comes here.
        if !place.hold.takes_joiners(place.others_starving) {
            return;
        }
        let now = Instant::now();
        let hold = &mut place.hold;
        loop {
            let joined = self.waiters.deliver_to_joiner(|options, arrived| {
                hold.can_join(options, now, (arrived, readers_arrived_before))
                    .then(|| hold.joiner_guard(&self.name, myself))
            });
            match joined {
                Some(true) => hold.joined(),
                Some(false) => {}
                None => break,
            }
        }
    }

    /// Sets the hold's one timer (see [`HeldLease::timer_at`]).
    pub(super) fn arm_hold_timer(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId) {
        if let Some(place) = self.holds.get_mut(&lease) {
            let at = place.hold.timer_at();
            place
                .timer
                .set(myself, at, move || LockMsg::HoldDue { lease });
        }
    }

    pub(super) fn on_hold_due(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId) {
        let Some(place) = self.holds.get_mut(&lease) else {
            return;
        };
        match place.hold.due(Instant::now()) {
            LeaseDue::Deadline => {
                let reason = place.hold.deadline_reason();
                return self.lose(myself, lease, reason, LeaseLeft::OnStore);
            }
            LeaseDue::Renewal => self.renewer.renew(place.hold.renewal(&self.name, myself)),
            LeaseDue::Silent => {
                tracing::warn!(lock = %self.name, token = place.hold.token(), "lease renewal unanswered; at risk, and sent again beside it");
                self.renewer
                    .renew(place.hold.store_silent(&self.name, myself));
            }
            LeaseDue::Nothing => {}
        }
        self.arm_hold_timer(myself, lease);
    }

    pub(super) fn on_renew_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent: (u64, Instant),
        result: Result<ExtendOutcome, StoreError>,
    ) {
        let Some(place) = self.holds.get_mut(&lease) else {
            return;
        };
        match place
            .hold
            .apply_renewal(&self.name, sent, result, &self.renewer)
        {
            Some(reason) => self.lose(myself, lease, reason, LeaseLeft::Gone),
            None => self.arm_hold_timer(myself, lease),
        }
    }

    /// Ends the hold of `lease` with a loss signal, then serves waiters. A lease `left` on
    /// the store is freed once the holder lets go, or after the loss margin (see
    /// `held_lease::LostLease`) — never at the instant the holder is told.
    pub(super) fn lose(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        reason: LossReason,
        left: LeaseLeft,
    ) {
        let Some(place) = self.holds.remove(&lease) else {
            return;
        };
        let hold = place.end();
        tracing::warn!(lock = %self.name, token = hold.token(), %reason, "lost");
        let lost = hold.lose(&self.name, &reason);
        if matches!(left, LeaseLeft::OnStore) {
            lost.spawn_release(&self.store);
        }
        self.place_freed(myself);
    }
}
