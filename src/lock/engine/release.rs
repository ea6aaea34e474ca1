//! How a held place moves on when its guard lets go: a mutex passes to the next local
//! waiter under its reserved tokens while that is provably safe; otherwise, with a local
//! waiter to serve, one hand-over call releases the place and asks it for that waiter
//! (readers' turn included); otherwise a plain release. A multi-lock detaches its member's
//! lease to release it with its others in one call.

use ractor::ActorRef;
use tokio::time::Instant;

use super::attempt::{self, Verdict};
use super::backoff::Backoff;
use super::fairness;
use super::held_lease;
use super::holds::LeaseLeft;
use super::phase::{Attempt, Phase};
use super::state::{HandingOver, NameState, Place, Releasing};
use super::waiters::NextWaiter;
use crate::error::{LockError, LossReason, StoreError};
use crate::kind::Access;
use crate::lock::message::{DetachReply, LockMsg, ReleaseReply};
use crate::lock::orphan::{self, GrantClaim};
use crate::lock::store_call::spawn_store_call;
use crate::metrics::{AttemptResult, StoreOp};
use crate::store::{AcquireOutcome, HandOverOutcome, LeaseId, LeaseKey, ReleaseOutcome};

impl NameState {
    pub(super) fn on_release(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        token: u64,
        reply: ReleaseReply,
    ) {
        let answer = match self.holds.get_mut(&lease) {
            Some(place) if place.hold.is(lease, token) => {
                if place.hold.is_valid_at(Instant::now()) {
                    if place.hold.guard_left() {
                        // Readers who joined this read still hold its lease.
                        if let Some(reply) = reply {
                            let _ = reply.send(Ok(()));
                        }
                        return;
                    }
                    return self.release_hold(myself, lease, reply, true);
                }
                // Past its deadline (the process was paused, or the deadline's own message
                // is still queued): the place may be somebody else's by now, so the
                // critical section may not have been exclusive — a loss, not a release.
                let reason = place.hold.deadline_reason();
                self.lose(myself, lease, reason.clone(), LeaseLeft::OnStore);
                Err(LockError::Lost(reason))
            }
            // A stale guard (its hold was lost and already reported): nothing to release.
            // The guard reports its loss itself.
            _ => Ok(()),
        };
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
    }

    /// A multi-lock takes this hold's lease to release it with its other members in one
    /// store call: the hold ends here as a release (never passed on locally: the lease is
    /// the multi-lock's to free), and the call's answer comes back as `ReleaseDone`.
    /// Multi-locks are made of mutexes only.
    pub(super) fn on_detach(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        token: u64,
        reply: DetachReply,
    ) {
        let answer = match self.holds.get(&lease) {
            _ if self.kind.is_shared() => Err(LockError::KindMismatch {
                name: self.name.as_str().to_owned(),
                found: self.kind,
                asked: Access::Exclusive.kind(),
            }),
            Some(place)
                if place.hold.is(lease, token) && place.hold.is_valid_at(Instant::now()) =>
            {
                let Some(place) = self.holds.remove(&lease) else {
                    return;
                };
                let hold = place.end();
                let key = hold.key(&self.name);
                self.releasing.insert(
                    lease,
                    Releasing {
                        reply: None,
                        key: key.clone(),
                        options: hold.options().clone(),
                        metrics: hold.metrics().clone(),
                    },
                );
                hold.released();
                Ok(key)
            }
            Some(place) if place.hold.is(lease, token) => {
                // Past its deadline: a loss, exactly as a late release is.
                let reason = place.hold.deadline_reason();
                self.lose(myself, lease, reason.clone(), LeaseLeft::OnStore);
                Err(LockError::Lost(reason))
            }
            _ => Err(LockError::Lost(LossReason::Superseded)),
        };
        let _ = reply.send(answer);
    }

    /// The guard of `lease` let go: a mutex passes to the next local waiter without a store
    /// call while its hold is provably valid and reserved tokens last; with a local waiter
    /// to serve (and `may_pass_on`), one hand-over call releases the place and asks it for
    /// that waiter, under the store's grant rules, so a busy name takes one command per
    /// holder instead of a release and an attempt; otherwise a plain release.
    pub(super) fn release_hold(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        reply: ReleaseReply,
        may_pass_on: bool,
    ) {
        let Some(place) = self.holds.remove(&lease) else {
            return;
        };
        // In arrival order a process serves its own tasks in the order they asked, readers
        // included: only the default mode gives the readers waiting now a turn of their own.
        if place.access == Access::Write && !place.hold.options().in_arrival_order() {
            self.waiters.writer_left();
        }
        let next = (may_pass_on && !place.others_starving)
            .then(|| self.hand_over_target(place.access))
            .flatten();
        let next = match next {
            Some(next)
                if self.passes_locally()
                    && place.hold.can_pass_locally(&next.options, Instant::now()) =>
            {
                return self.pass_locally(myself, place, reply, next);
            }
            next => next,
        };
        let hold = place.end();
        let key = hold.key(&self.name);
        let timeout = hold.options().renew_deadline();
        self.releasing.insert(
            lease,
            Releasing {
                reply,
                key: key.clone(),
                options: hold.options().clone(),
                metrics: hold.metrics().clone(),
            },
        );
        hold.released();
        if let Some(next) = next {
            return self.send_hand_over(myself, key, next);
        }
        let store = self.store.clone();
        spawn_store_call(
            myself,
            &self.cleanups,
            timeout,
            async move { store.release(&key).await },
            move |sent_at, result| LockMsg::ReleaseDone {
                lease,
                sent_at,
                result,
            },
        );
    }

    /// Passes a mutex's `place` to the first waiter with no store call at all: the lease
    /// stays, its renewal and deadline timer keeps running, and the waiter gets the next
    /// of the tokens the store reserved with the grant (so tokens still increase across
    /// processes: the store's next grant is past the whole block). The block's size bounds
    /// how many local holders follow one another before a store call hears whether other
    /// processes wait.
    fn pass_locally(
        &mut self,
        myself: &ActorRef<LockMsg>,
        place: Place,
        reply: ReleaseReply,
        next: NextWaiter,
    ) {
        let Place {
            hold,
            access,
            timer,
            ..
        } = place;
        let hold = hold.pass_locally(next.options, next.metrics);
        if let Some(reply) = reply {
            let _ = reply.send(Ok(()));
        }
        let delivered = self
            .waiters
            .deliver_for((access, hold.options()), None, || {
                hold.guard(&self.name, myself)
            });
        hold.metrics().attempt(AttemptResult::Acquired);
        hold.metrics().held(1.0);
        tracing::debug!(lock = %self.name, token = hold.token(), delivered, "lock passed to a local waiter");
        let lease = hold.lease();
        self.holds.insert(
            lease,
            Place {
                hold,
                access,
                timer,
                others_starving: false,
            },
        );
        if !delivered {
            // Every waiter left meanwhile: nobody holds the lease now.
            self.release_hold(myself, lease, None, true);
        }
    }

    /// The waiter a released place of `access` goes to, if any: not while this process
    /// steps back for others, and only for a waiter no attempt or
    /// hand-over in flight is already asking a place for. Permits go to the waiters of
    /// their count, any number of hand-overs beside the attempt; a mutex's or a
    /// reader/writer lock's place only when nothing else is in flight, to the waiter the
    /// next attempt would be for (its local fairness).
    fn hand_over_target(&mut self, access: Access) -> Option<NextWaiter> {
        if matches!(self.acquisition, Phase::BackingOff { yielding: true, .. }) {
            return None;
        }
        if let Access::Permit { .. } = access {
            let attempting = match &self.acquisition {
                Phase::Attempting { attempt, .. } if attempt.access == access => 1,
                _ => 0,
            };
            let asked = attempting + self.handing_over.len();
            return (self.waiters.count_for(access) > asked)
                .then(|| self.waiters.first_live_for(access))
                .flatten();
        }
        let idle = matches!(
            self.acquisition,
            Phase::Idle { .. } | Phase::BackingOff { .. }
        );
        (idle && self.handing_over.is_empty())
            .then(|| self.waiters.next_in_turn())
            .flatten()
    }

    /// Sends the hand-over of the released place `from` to `next`.
    fn send_hand_over(&mut self, myself: &ActorRef<LockMsg>, from: LeaseKey, next: NextWaiter) {
        // A mutex's hand-over in the default mode is never refused: it lists nobody.
        let request = self.acquire_request(&next, false, false);
        let options = next.options.clone();
        self.handing_over.insert(
            request.lease,
            HandingOver {
                from: from.lease,
                to: Attempt::new(request.lease, next, None),
            },
        );
        attempt::send_hand_over(myself, &self.store, &self.cleanups, from, request, &options);
    }

    /// The hand-over's answer is two: the release's, for the guard that let go, and the
    /// attempt's, judged as any attempt's. The acquisition goes on as it was: a grant
    /// leaves the count of places held as it found it — except a read, after which more
    /// readers may be let in at once — and a place that became free (the new lease
    /// refused, or the old one not ours any more) is one a waiter may try for now.
    pub(super) fn on_hand_over_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        to: LeaseId,
        sent_at: Instant,
        result: Result<HandOverOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        // Not in flight any more (shut down): dropping its claim releases both leases.
        let Some(HandingOver { from, to: attempt }) = self.handing_over.remove(&to) else {
            return;
        };
        let mut others_starving = false;
        let (released, acquired) = match result {
            Ok(HandOverOutcome::HandedOver {
                token,
                contended_for,
            }) => {
                others_starving = fairness::others_starving(contended_for, &attempt.options);
                (
                    Ok(ReleaseOutcome::Released { contended_for }),
                    Ok(AcquireOutcome::acquired(token)),
                )
            }
            Ok(HandOverOutcome::Released { contended_for }) => {
                // Refused (an earlier waiter elsewhere, a writer's turn): the store put us
                // in line or marked our writer.
                self.refused(&attempt);
                (
                    Ok(ReleaseOutcome::Released { contended_for }),
                    Ok(AcquireOutcome::busy(None)),
                )
            }
            // The place was not ours any more: nothing was written.
            Ok(HandOverOutcome::NotOwner) => {
                (Ok(ReleaseOutcome::NotOwner), Ok(AcquireOutcome::busy(None)))
            }
            Err(error) => (Err(error.clone()), Err(error)),
        };
        // The call is counted once, as a hand-over, by `judge` below.
        self.answer_release(from, released, None);
        match attempt::judge(
            &self.name,
            (StoreOp::HandOver, sent_at),
            acquired,
            &attempt.options,
            &attempt.metrics,
        ) {
            Verdict::Granted(grant) => {
                let access = attempt.access;
                self.grant(myself, attempt, grant, sent_at, claim, others_starving);
                if access == Access::Read || self.acquisition.is_idle() {
                    self.place_freed(myself);
                }
            }
            Verdict::Refused(error) => {
                if let Some(error) = error.filter(|error| !error.is_transient()) {
                    // Refused for good: only those who asked for this access fail.
                    self.waiters.fail_first_for(attempt.access, error.into());
                }
                self.place_freed(myself);
            }
        }
    }

    /// Answers the guard whose release of `lease` the store answered with `result`; a
    /// release call sent at `sent_at` is counted in the metrics.
    fn answer_release(
        &mut self,
        lease: LeaseId,
        result: Result<ReleaseOutcome, StoreError>,
        sent_at: Option<Instant>,
    ) {
        let Some(Releasing { reply, metrics, .. }) = self.releasing.remove(&lease) else {
            return;
        };
        if let Some(sent_at) = sent_at {
            metrics.store_call(StoreOp::Release, sent_at.elapsed(), result.is_err());
        }
        if let Ok(ReleaseOutcome::Released {
            contended_for: Some(waited),
        }) = result
        {
            metrics.others_waited(waited);
        }
        let answer = held_lease::release_answer(&self.name, lease, result, &metrics);
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
    }

    pub(super) fn on_release_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ReleaseOutcome, StoreError>,
    ) {
        let Some(releasing) = self.releasing.get(&lease) else {
            return;
        };
        let options = releasing.options.clone();
        if let Err(error) = &result
            && error.is_transient()
        {
            // The lease may still be held on the store, by nobody: release it again in the
            // background until it would have expired anyway (owner-checked, so harmless if
            // the first release did land or somebody took the name since).
            let (store, key) = (self.store.clone(), releasing.key.clone());
            let (timeout, expired_by) = (
                options.renew_deadline(),
                Instant::now() + options.lease_duration(),
            );
            self.cleanups.spawn(timeout, async move {
                orphan::release_now(store.as_ref(), &key, timeout, expired_by).await;
            });
        }
        let step_back = fairness::step_back(&result, &options, self.kind);
        // Only a step back counts in the metrics: no label copy for every other release.
        let metrics = step_back.map(|_| releasing.metrics.clone());
        self.answer_release(lease, result, Some(sent_at));
        match step_back {
            // Others have waited long: let them have the freed place before we retry.
            Some(delay)
                if self.waiters.prune()
                    && !matches!(self.acquisition, Phase::Attempting { .. }) =>
            {
                if let Some(metrics) = &metrics {
                    metrics.stepped_back();
                }
                self.advance(|this, phase| {
                    // A waiter already backing off keeps its backoff's progress: a fresh
                    // one would only make its sleeps after the step back shorter (a tuning,
                    // not a guarantee; its mutant survives).
                    let backoff = match phase {
                        Phase::BackingOff { backoff, .. } => backoff,
                        _ => Backoff::new(&options),
                    };
                    this.retry_after(myself, delay, true, false, backoff)
                });
            }
            _ => self.place_freed(myself),
        }
    }
}
