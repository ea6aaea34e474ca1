//! What one name's actor owns — the kind, the local waiters, the acquisition, the holds and
//! the releases in flight — and the rules that depend on the kind.
//!
//! The types the state is made of are defined here or below it (`phase.rs`, `waiters.rs`,
//! `held_lease.rs`), never in the files that move it (`admission.rs`, `acquisition.rs`,
//! `holds.rs`, `release.rs`), so those import from the state and never the other way.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorId, ActorRef};
use tokio::time::Instant;

use super::held_lease::HeldLease;
use super::listing::Listing;
use super::phase::{Attempt, Phase};
use super::waiters::Waiters;
use crate::error::{LockError, LossReason, StoreError};
use crate::kind::{Access, LockKind};
use crate::lock::cleanup::Cleanups;
use crate::lock::message::{GuardReply, LockMsg, ReleaseReply, TryReply};
use crate::lock::renewer::Renewer;
use crate::lock::route::RouteGate;
use crate::lock::store_call::{self, Started};
use crate::lock::timer::{Timer, Timers};
use crate::metrics::LockMetrics;
use crate::name::LockName;
use crate::options::{LockNameLabel, LockOptions};
use crate::store::request::HolderId;
use crate::store::{LeaseId, LeaseKey, LockStore, ReleaseWaiters};

/// What every per-name actor of one manager shares.
#[derive(Clone)]
pub(crate) struct ManagerContext {
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) holder: HolderId,
    /// How long an actor lingers with nothing held or queued (the manager's setting).
    pub(crate) idle_timeout: Duration,
    /// Sends the renewals of every name batched.
    pub(crate) renewer: Renewer,
    pub(crate) release_waiters: ReleaseWaiters,
    pub(crate) timers: Timers,
    /// What the manager's shutdown waits for (see `cleanup`).
    pub(crate) cleanups: Cleanups,
}

/// What a per-name actor is started with.
pub(crate) struct NameActorArgs {
    pub(crate) name: LockName,
    pub(crate) context: ManagerContext,
    /// The count of requests sent on this actor's route (see `route`).
    pub(crate) gate: Arc<RouteGate>,
    pub(crate) retire: Retire,
}

/// Tells whoever started the actor that it retired idle (its route takes no more requests):
/// a callback rather than the supervisor's address, so the actor does not depend on it.
pub(crate) type Retire = Arc<dyn Fn(&LockName, ActorId) + Send + Sync>;

/// A caller's request for a place.
pub(super) enum Request {
    Acquire {
        access: Access,
        options: Arc<LockOptions>,
        requested_at: Instant,
        reply: GuardReply,
    },
    Try {
        access: Access,
        options: Arc<LockOptions>,
        reply: TryReply,
    },
}

impl Request {
    pub(super) fn access(&self) -> Access {
        match self {
            Self::Acquire { access, .. } | Self::Try { access, .. } => *access,
        }
    }

    pub(super) fn refuse(self, error: LockError) {
        match self {
            Self::Acquire { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            Self::Try { reply, .. } => {
                let _ = reply.send(Err(error));
            }
        }
    }
}

/// One lease this process holds, with its timer.
pub(super) struct Place {
    pub(super) hold: HeldLease,
    pub(super) access: Access,
    pub(super) timer: Timer<LockMsg>,
    /// Other processes have waited the fairness bound for this place (the hand-over that
    /// granted it said so): it goes back to the store plainly, and this process
    /// steps back.
    pub(super) others_starving: bool,
}

impl Place {
    /// The hold, its timer stopped.
    pub(super) fn end(mut self) -> HeldLease {
        self.timer.cancel();
        self.hold
    }
}

/// A release in flight (plain, detached or the release half of a hand-over).
pub(super) struct Releasing {
    pub(super) reply: ReleaseReply,
    /// The lease released, to release again if the store fails for a while.
    pub(super) key: LeaseKey,
    pub(super) options: Arc<LockOptions>,
    pub(super) metrics: LockMetrics,
}

/// A hand-over in flight: the place of the released lease `from` asked for a waiter (the
/// grant goes to the first waiter of `to.access` when it comes back; the release's answer
/// waits in `releasing`).
pub(super) struct HandingOver {
    pub(super) from: LeaseId,
    pub(super) to: Attempt,
}

pub(crate) struct NameState {
    pub(super) name: LockName,
    pub(super) store: Arc<dyn LockStore>,
    pub(super) holder: HolderId,
    /// The kind this process uses the name as. It changes only while nothing is held, in
    /// flight or waited for here: then the name's record (if any) answers a new request.
    pub(super) kind: LockKind,
    /// Whether the store has answered for `kind` since this process took it up: it
    /// granted a place, or found the name held (a record of the other family refuses an
    /// attempt instead). Until then `kind` is only what this process asked first.
    pub(super) kind_on_record: bool,
    /// The semaphore capacity this actor added to the permits gauge, taken back when it
    /// stops.
    pub(super) reported_permits: Option<(LockNameLabel, f64)>,
    pub(super) waiters: Waiters,
    /// Requests of the other family than `kind`, waiting for the store to answer for
    /// `kind` (see `admission`).
    pub(super) waiting_for_record: Vec<Request>,
    pub(super) acquisition: Phase,
    /// The leases this process holds on the name (at most one for a mutex), each with its
    /// own timer.
    pub(super) holds: HashMap<LeaseId, Place>,
    /// Releases in flight, by the released lease.
    pub(super) releasing: HashMap<LeaseId, Releasing>,
    /// Hand-overs in flight, by the new lease: beside the acquisition, so a busy
    /// semaphore passes each released permit on while an attempt is out.
    pub(super) handing_over: HashMap<LeaseId, HandingOver>,
    /// This manager's place in the name's line and its writers' mark, withdrawn when the
    /// waiters (or the writers) here give up.
    pub(super) listing: Listing,
    /// Counts this manager's actors waiting for another process's release.
    pub(super) release_waiters: ReleaseWaiters,
    /// Requests received, compared with the route's count before an idle stop.
    pub(super) requests_seen: u64,
    gate: Arc<RouteGate>,
    retire: Retire,
    idle_timeout: Duration,
    /// Sends this name's renewals batched with the other names' of the manager.
    pub(super) renewer: Renewer,
    pub(super) timers: Timers,
    /// The releases of leases nobody owns, which the manager's shutdown waits for.
    pub(super) cleanups: Cleanups,
}

impl NameState {
    pub(super) fn new(args: NameActorArgs) -> Self {
        let context = args.context;
        Self {
            acquisition: Phase::default(),
            name: args.name,
            store: context.store,
            holder: context.holder,
            // Taken up from the first request (see `admission`).
            kind: LockKind::Mutex,
            kind_on_record: false,
            reported_permits: None,
            waiters: Waiters::default(),
            waiting_for_record: Vec::new(),
            holds: HashMap::new(),
            releasing: HashMap::new(),
            handing_over: HashMap::new(),
            listing: Listing::default(),
            release_waiters: context.release_waiters,
            requests_seen: 0,
            gate: args.gate,
            retire: args.retire,
            idle_timeout: context.idle_timeout,
            renewer: context.renewer,
            timers: context.timers,
            cleanups: context.cleanups,
        }
    }

    /// The actor stopped: the gauges it moved go back.
    pub(super) fn stopped(&mut self) {
        if let Some((policy, permits)) = self.reported_permits.take() {
            LockMetrics::semaphore_permits(&self.name, &policy, -permits);
        }
    }

    /// A mutex has one holder, so this process attempts only while it holds nothing and has
    /// no release in flight; a shared kind's holders each have their own lease, and its
    /// acquisition runs beside them.
    pub(super) fn may_attempt(&self) -> bool {
        self.kind.is_shared()
            || (self.holds.is_empty() && self.releasing.is_empty() && self.handing_over.is_empty())
    }

    /// Whether a released mutex may pass straight to a local waiter under its reserved
    /// tokens. A shared kind never does: other holders of the name may have been granted
    /// larger tokens since this grant reserved its block (every grant's token must exceed
    /// every one before it), and a reader admitted here would overtake a writer waiting
    /// elsewhere; its places go back through the store (`hand_over`).
    pub(super) fn passes_locally(&self) -> bool {
        !self.kind.is_shared()
    }

    /// Nothing held, released, handed over or attempted.
    pub(super) fn is_unused(&self) -> bool {
        self.holds.is_empty()
            && self.releasing.is_empty()
            && self.handing_over.is_empty()
            && self.acquisition.is_idle()
    }

    /// The idle phase, its idle stop armed if the actor is unused.
    pub(super) fn idle(&mut self, myself: &ActorRef<LockMsg>) -> Phase {
        // Nobody here waits any more (a grant would have taken the place or mark off).
        if let Some(lasts) = self.listing.take() {
            self.withdraw(lasts);
        }
        let idle_stop = self.is_unused().then(|| {
            let mut idle_stop = self.timers.timer();
            let timer = idle_stop.id();
            idle_stop.set(myself, Instant::now() + self.idle_timeout, move || {
                LockMsg::IdleDue { timer }
            });
            idle_stop
        });
        Phase::Idle { idle_stop }
    }

    /// The store refused `attempt` (the name held, or others ahead): what it keeps for a
    /// refused request — this manager's place in line in arrival order, its writers' mark
    /// for a write otherwise — lasts until it ends or the waiters here give up.
    pub(super) fn refused(&mut self, attempt: &Attempt) {
        self.listing.refused(attempt.access, &attempt.options);
        if attempt.access == Access::Write {
            // A writer that gave up while this attempt was out holds nobody back.
            self.withdraw_mark_if_no_writer_waits();
        }
    }

    /// With no writer left waiting here while other waiters stay, this manager's writers'
    /// mark goes at once: a writer that gave up holds nobody back. (In arrival order there
    /// is no mark, and the place in line stays for the others.)
    pub(super) fn withdraw_mark_if_no_writer_waits(&mut self) {
        if self.listing.is_in_line() || self.waiters.count_for(Access::Write) > 0 {
            return;
        }
        if let Some(lasts) = self.listing.take_mark() {
            self.withdraw(lasts);
        }
    }

    /// The waiter this manager's place in line stood for gave up while others stay: the
    /// place (that waiter's access and arrival) goes at once, waking whoever it held back
    /// (a writer's place holds other processes' readers back, though only readers are
    /// left here), and once it is gone the next waiter asks for a place of its own, with
    /// its own access and arrival. Asking before the withdrawal is answered could have the
    /// withdrawal take the new place off.
    pub(super) fn give_place_to_next_waiter(&mut self, myself: &ActorRef<LockMsg>) {
        if !self.listing.is_in_line() {
            return;
        }
        if let Some(lasts) = self.listing.take() {
            self.withdraw_then_wake(lasts, Some(myself.clone()));
        }
    }

    fn withdraw(&self, lasts: Duration) {
        self.withdraw_then_wake(lasts, None);
    }

    /// Takes this manager's place and writers' mark off the name's record; once answered
    /// (or failed), wakes `then` if given. Nobody waits for the answer: a withdrawal that
    /// fails costs those behind at most what is left of the place's or mark's life, which
    /// also bounds how long the call may take. One that lands after a new refusal of this
    /// manager takes that refusal's mark or place off too, which costs that waiter its turn
    /// in order until its next attempt, never safety.
    fn withdraw_then_wake(&self, lasts: Duration, then: Option<ActorRef<LockMsg>>) {
        let (store, name, holder) = (self.store.clone(), self.name.clone(), self.holder.clone());
        let call = async move { store.withdraw(&name, &holder).await };
        let done = move |result: Result<(), StoreError>| {
            if let Err(error) = result {
                tracing::debug!(%error, "withdrawing from a lock's line failed; the place expires");
            }
            if let Some(actor) = then {
                let _ = actor.send_message(LockMsg::Wake);
            }
        };
        match store_call::start(call) {
            (_, Started::Answered(result)) => done(result),
            (_, Started::Running(call)) => {
                tokio::spawn(async move { done(store_call::timed(lasts, call).await) });
            }
        }
    }

    pub(super) fn on_idle_due(&mut self, myself: &ActorRef<LockMsg>, timer: u64) {
        let current = matches!(
            &self.acquisition,
            Phase::Idle { idle_stop: Some(idle_stop) } if idle_stop.id() == timer
        );
        if !current || !self.is_unused() {
            return;
        }
        if self.gate.try_retire(self.requests_seen) {
            // No request can reach us any more: the supervisor forgets us, we stop.
            (self.retire)(&self.name, myself.get_id());
            myself.stop(Some("idle".to_owned()));
        } else {
            // A request is on its way; if its sender took it elsewhere, try again later.
            self.advance(|this, _| this.idle(myself));
        }
    }

    /// Fails waiters (taking this manager's place in line and writers' mark off the
    /// record), tells every live holder of its loss (each lease freed once its guard
    /// lets go, or after the loss margin) and answers what is in flight. A grant still in
    /// flight is released through its claim when its answer finds this actor gone.
    pub(super) fn shut_down(&mut self) {
        self.waiters.fail_all(LockError::Shutdown);
        // A shutdown gives up waiting: those behind this manager's place or writers' mark
        // go now, not when it ends.
        if let Some(lasts) = self.listing.take() {
            self.withdraw(lasts);
        }
        for request in self.waiting_for_record.drain(..) {
            request.refuse(LockError::Shutdown);
        }
        for (_, place) in self.holds.drain() {
            place
                .end()
                .lose(&self.name, &LossReason::Shutdown)
                .spawn_release(&self.store);
        }
        for (_, releasing) in self.releasing.drain() {
            if let Some(reply) = releasing.reply {
                let _ = reply.send(Err(LockError::Shutdown));
            }
        }
        // Their answers find nothing in flight: their claims release both leases. So do
        // an attempt's, once the actor has stopped; a single try's caller is told of the
        // shutdown by its dropped reply (the runtime is closed before actors are told).
        self.handing_over.clear();
    }
}
