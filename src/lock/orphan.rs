//! Orphaned grants: a lease the store may have granted but no guard will ever own — the
//! caller left, the answer came too late to use, or the attempt's outcome is unknown (an
//! error or a timeout, after which the server may still apply it). Such a lease is released
//! at once, and again after a transient failure (a primary stepping down, a dropped
//! connection) until the lease would have expired anyway, so a store that recovers frees it
//! then rather than at its expiry. The release is owner-checked by lease id, so it can never
//! free a lock somebody else holds: releasing a lease that was never granted changes nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, Message};
use tokio::time::Instant;

use super::cleanup::{Cleanups, Pending};
use super::store_call::{self, Started, bounded};
use crate::error::StoreError;
use crate::options::LockOptions;
use crate::store::{LeaseKey, LockStore};

/// The first pause before releasing an orphaned grant again after a transient failure; it
/// doubles up to [`LONGEST_RETRY_PAUSE`].
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Releases `key` and waits for the answer, which nobody needs. A transient failure is
/// retried (pausing 50 ms, doubling up to a second) while a retry can still start before
/// `expired_by`, when the lease has expired on the store by itself; any other failure, or
/// one at that point, leaves it to expire.
pub(crate) async fn release_now(
    store: &dyn LockStore,
    key: &LeaseKey,
    timeout: Duration,
    expired_by: Instant,
) {
    let mut pause = FIRST_RETRY_PAUSE;
    loop {
        let error = match bounded(timeout, store.release(key)).await {
            Ok(_) => return,
            Err(error) => error,
        };
        if !error.is_transient() || Instant::now() + pause >= expired_by {
            tracing::debug!(lock = %key.name, %error, "releasing an orphaned grant failed; it expires on the store");
            return;
        }
        tracing::debug!(lock = %key.name, %error, "releasing an orphaned grant failed; trying again");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_RETRY_PAUSE);
    }
}

/// How long a timed-out call that may grant is still waited for. A stalled command can be
/// applied whenever it reaches the server (a blocked connection, a paused primary); giving up
/// early would release its lease before the grant lands and leave the lock held by nobody
/// until it expires. Waiting costs one idle task per stalled call, so the wait is long —
/// ten lease lengths, at least a minute — but bounded.
pub(crate) fn late_answer_limit(options: &LockOptions) -> Duration {
    options
        .lease_duration()
        .saturating_mul(10)
        .max(Duration::from_secs(60))
}

/// A grant the store may have made and nobody owns yet, travelling in the message that
/// reports it: released (in the background) when dropped, unless the actor
/// [`keep`](Self::keep)s it as a hold. A message the actor never handles — sent after it
/// stopped, or still queued when it stops — is dropped with its claim, so a grant can never
/// outlive the actor that asked for it without a release.
pub(crate) struct GrantClaim(Option<Box<Orphans>>);

/// What an armed claim releases (boxed: most answers carry an empty claim).
struct Orphans {
    keys: Vec<LeaseKey>,
    store: Arc<dyn LockStore>,
    timeout: Duration,
    /// The longest lease the call may have granted: how long a release is worth retrying.
    lease: Duration,
    /// Registered from the answer until the release ends: a shutdown waits for it, also
    /// for a grant in a message nobody has handled yet (queued when its actor stopped).
    _pending: Pending,
}

impl GrantClaim {
    /// A claim on nothing: the call granted nothing (or its task releases what it may have).
    pub(crate) fn empty() -> Self {
        Self(None)
    }

    fn on(
        store: &Arc<dyn LockStore>,
        cleanups: &Cleanups,
        keys: Vec<LeaseKey>,
        timeout: Duration,
        lease: Duration,
    ) -> Self {
        Self(Some(Box::new(Orphans {
            keys,
            store: store.clone(),
            timeout,
            lease,
            _pending: cleanups.pending(timeout),
        })))
    }

    /// The grant became a hold: nothing to release.
    pub(crate) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for GrantClaim {
    fn drop(&mut self) {
        let Some(orphans) = self.0.take() else {
            return;
        };
        // Outside a runtime (the process is exiting) nothing can run: the leases expire.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Granted (if at all) before now: expired on the store a lease from now.
                let expired_by = Instant::now() + orphans.lease;
                for key in &orphans.keys {
                    release_now(orphans.store.as_ref(), key, orphans.timeout, expired_by).await;
                }
            });
        }
    }
}

/// Runs a store call that may grant a lease (an acquisition, a hand-over) under the terms of
/// `options` and sends its answer to `actor` as `to_message(sent_at, result, claim)` — at
/// once if the store answered without waiting, otherwise from a spawned task that gives up
/// waiting after the renew deadline.
///
/// Its `orphans` (the leases the call may leave behind) are released when nobody will own
/// them. An answer that may grant (an outcome that is `granted`, or an error other than a
/// timeout: the server may have applied the call and lost the answer) carries a
/// [`GrantClaim`] on them, which the actor keeps or drops. After a timeout the task waits
/// for the store's late answer (the store may still apply a stalled command; after
/// [`late_answer_limit`] the call is abandoned) and releases them itself.
///
/// A shutdown waits for the call's answer within its timeout, and for the release of what
/// nobody owns (see `cleanup`); not for a late answer.
///
/// Generic in the message: the lock actor's messages carry the claim, so naming them here
/// would tie this file and theirs in a circle.
pub(crate) fn run_granting_call<T: Send + 'static, M: Message>(
    actor: &ActorRef<M>,
    store: &Arc<dyn LockStore>,
    cleanups: &Cleanups,
    options: &LockOptions,
    call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    (granted, mut orphans): (fn(&T) -> bool, Vec<LeaseKey>),
    to_message: impl FnOnce(Instant, Result<T, StoreError>, GrantClaim) -> M + Send + 'static,
) {
    let (timeout, give_up_after) = (options.renew_deadline(), late_answer_limit(options));
    let lease = options.lease_duration();
    let claim_for = {
        let (store, cleanups) = (store.clone(), cleanups.clone());
        move |result: &Result<T, StoreError>, orphans: &mut Vec<LeaseKey>| match result {
            Ok(outcome) if !granted(outcome) => GrantClaim::empty(),
            Err(StoreError::Timeout(_)) => GrantClaim::empty(),
            _ => GrantClaim::on(&store, &cleanups, std::mem::take(orphans), timeout, lease),
        }
    };
    let (sent_at, mut call) = match store_call::start(call) {
        (sent_at, Started::Answered(result)) => {
            let claim = claim_for(&result, &mut orphans);
            // A refused message is dropped with its claim, which releases the grant.
            let _ = actor.send_message(to_message(sent_at, result, claim));
            return;
        }
        (sent_at, Started::Running(call)) => (sent_at, call),
    };
    let (actor, store) = (actor.clone(), store.clone());
    cleanups.spawn(timeout, async move {
        let result = store_call::timed(timeout, &mut call).await;
        let timed_out = matches!(result, Err(StoreError::Timeout(_)));
        let claim = claim_for(&result, &mut orphans);
        let _ = actor.send_message(to_message(sent_at, result, claim));
        if timed_out {
            let _ = tokio::time::timeout(give_up_after, call).await;
            let expired_by = Instant::now() + lease;
            for key in &orphans {
                release_now(store.as_ref(), key, timeout, expired_by).await;
            }
        }
    });
}
