//! One acquisition attempt, as the per-name actor sends it and judges its answer: the
//! store call runs off the actor's loop with a claim on whatever it grants, and its answer
//! is only a grant if it came back while most of the lease's window is left (before its
//! first renewal is due).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;

use ractor::{ActorRef, ActorStatus};
use tokio::time::Instant;

use crate::error::StoreError;
use crate::lock::cleanup::Cleanups;
use crate::lock::message::LockMsg;
use crate::lock::orphan;
use crate::metrics::{AttemptResult, LockMetrics, StoreOp};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{AcquireOutcome, AcquireRequest, HandOverOutcome, LeaseKey, LockStore};

/// Sends one acquisition attempt for `request` (with the terms of `options`) off the
/// actor's loop: its answer comes back as [`LockMsg::AttemptDone`], carrying a claim that
/// releases whatever the attempt granted unless the actor keeps it — also when the answer
/// comes too late, or to an actor that is gone.
///
/// While the manager's renewals have fallen behind ([`Renewer::behind`]), the attempt
/// waits for them first, and its time counts from when it is sent; it returns the
/// [`Deferred`] send then, which the actor abandons if its waiters leave meanwhile. An
/// actor that stopped meanwhile (idle, the manager shut down) sends nothing either.
///
/// [`Renewer::behind`]: crate::lock::renewer::Renewer::behind
pub(crate) fn send_attempt(
    actor: &ActorRef<LockMsg>,
    store: &Arc<dyn LockStore>,
    cleanups: &Cleanups,
    request: AcquireRequest,
    options: &LockOptions,
    renewals_behind: Option<impl Future<Output = ()> + Send + 'static>,
) -> Option<Deferred> {
    let Some(caught_up) = renewals_behind else {
        send_now(actor, store, cleanups, request, options);
        return None;
    };
    let deferred = Deferred(Arc::new(AtomicBool::new(false)));
    let decided = deferred.0.clone();
    let (actor, store, cleanups) = (actor.clone(), store.clone(), cleanups.clone());
    let options = options.clone();
    tokio::spawn(async move {
        caught_up.await;
        // Whichever of this send and the actor's abandon comes first decides.
        let sends = !decided.swap(true, SeqCst);
        if sends && matches!(actor.get_status(), ActorStatus::Running) {
            send_now(&actor, &store, &cleanups, request, &options);
        }
    });
    Some(deferred)
}

/// An attempt waiting for renewals that fell behind before it is sent. Its waiters may
/// leave meanwhile (cancelled, timed out): abandoned in time, it is never sent, so it
/// neither costs a command nor grants a lease that only its release would free.
/// It holds whether the attempt's fate is decided (sent, or abandoned).
pub(crate) struct Deferred(Arc<AtomicBool>);

impl Deferred {
    /// Abandons the attempt unless it was sent already: whether it never will be (and so
    /// never answers).
    pub(crate) fn abandon(&self) -> bool {
        !self.0.swap(true, SeqCst)
    }
}

fn send_now(
    actor: &ActorRef<LockMsg>,
    store: &Arc<dyn LockStore>,
    cleanups: &Cleanups,
    request: AcquireRequest,
    options: &LockOptions,
) {
    let (lease, orphans, caller) = (request.lease, vec![request.key()], store.clone());
    let call = async move { caller.try_acquire(&request).await };
    let granted = |outcome: &_| matches!(outcome, AcquireOutcome::Acquired { .. });
    orphan::run_granting_call(
        actor,
        store,
        cleanups,
        options,
        call,
        (granted, orphans),
        move |sent_at, result, claim| LockMsg::AttemptDone {
            lease,
            sent_at,
            result,
            claim,
        },
    );
}

/// Passes the held `from` to `request.lease` in one store call
/// ([`LockStore::hand_over`]) off the actor's loop: like an attempt, its answer comes back
/// as [`LockMsg::HandOverDone`] with a claim that releases both leases unless the actor
/// keeps the grant.
pub(crate) fn send_hand_over(
    actor: &ActorRef<LockMsg>,
    store: &Arc<dyn LockStore>,
    cleanups: &Cleanups,
    from: LeaseKey,
    request: AcquireRequest,
    options: &LockOptions,
) {
    let (to, orphans, caller) = (
        request.lease,
        vec![request.key(), from.clone()],
        store.clone(),
    );
    let call = async move { caller.hand_over(&from, &request).await };
    let granted = |outcome: &_| matches!(outcome, HandOverOutcome::HandedOver { .. });
    orphan::run_granting_call(
        actor,
        store,
        cleanups,
        options,
        call,
        (granted, orphans),
        move |sent_at, result, claim| LockMsg::HandOverDone {
            to,
            sent_at,
            result,
            claim,
        },
    );
}

/// What an attempt's answer means.
pub(crate) enum Verdict {
    /// Granted in time: the actor keeps it (and its claim).
    Granted(Grant),
    /// Not granted: held elsewhere (`None`), or the store failed. A grant answered after
    /// its first renewal was due is refused too; dropping its claim releases it.
    Refused(Option<StoreError>),
}

/// A grant the actor keeps.
pub(crate) struct Grant {
    /// Its fencing token.
    pub(crate) token: u64,
    /// For a read granted in arrival order: this process's readers that arrived before this
    /// instant arrived before every writer waiting elsewhere, so they may share the grant.
    pub(crate) readers_arrived_before: Option<Instant>,
}

/// Judges the answer to the attempt sent at `sent_at` under `options` (by the store call
/// `op`: an acquisition, or the grant part of a hand-over), recording its metrics and
/// logging what went wrong.
pub(crate) fn judge(
    name: &LockName,
    (op, sent_at): (StoreOp, Instant),
    result: Result<AcquireOutcome, StoreError>,
    options: &LockOptions,
    metrics: &LockMetrics,
) -> Verdict {
    let took = sent_at.elapsed();
    metrics.store_call(op, took, result.is_err());
    let (attempt, verdict) = match result {
        Ok(AcquireOutcome::Acquired {
            token,
            readers_waited_over,
        }) if Instant::now() < sent_at + options.renew_interval() => {
            // A reader here that had waited longer than that when the attempt was sent
            // arrived before this instant.
            let readers_arrived_before =
                readers_waited_over.and_then(|waited| sent_at.checked_sub(waited));
            let grant = Grant {
                token,
                readers_arrived_before,
            };
            (AttemptResult::Acquired, Verdict::Granted(grant))
        }
        Ok(AcquireOutcome::Acquired { token, .. }) => {
            // Answered after its first renewal was due (a store that stalled, or applied the
            // call at its restart): what is left of the window until the loss deadline may
            // be too little for any work, and past that deadline it cannot be used safely
            // at all. Given back, and asked for again with a whole window.
            tracing::warn!(lock = %name, token, ?took, "acquisition answered too late to use; releasing it");
            (AttemptResult::Error, Verdict::Refused(None))
        }
        Ok(AcquireOutcome::Busy { .. }) => (AttemptResult::Contended, Verdict::Refused(None)),
        Err(error @ StoreError::KindMismatch { .. }) => {
            // The caller's mistake, handed back to it as a typed error: not a store fault.
            tracing::debug!(lock = %name, %error, "acquisition refused: another kind of lock");
            (AttemptResult::Contended, Verdict::Refused(Some(error)))
        }
        Err(error) => {
            // An attempt that failed may still have been applied: its claim releases the
            // lease id. A timed-out one is released by its own task once the store answers.
            tracing::warn!(lock = %name, %error, "acquisition attempt failed");
            (AttemptResult::Error, Verdict::Refused(Some(error)))
        }
    };
    metrics.attempt(attempt);
    verdict
}
