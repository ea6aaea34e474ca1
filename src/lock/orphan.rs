//! Orphaned grants: a lease the store may have granted but no guard will ever own — the
//! caller left, the answer came too late to use, or the attempt's outcome is unknown (an
//! error or a timeout, after which the server may still apply it). Such a lease is released
//! at once. The release is owner-checked by lease id, so it can never free a lock somebody
//! else holds: releasing a lease that was never granted changes nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::message::LockMsg;
use super::store_call::{self, Started, bounded};
use crate::error::StoreError;
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{LeaseId, LeaseKey, LockStore};

/// Releases `lease` in the background, without waiting for the answer.
pub(crate) fn release(
    store: &Arc<dyn LockStore>,
    name: &LockName,
    lease: LeaseId,
    timeout: Duration,
) {
    let store = store.clone();
    let key = LeaseKey {
        name: name.clone(),
        lease,
    };
    tokio::spawn(async move { release_now(store.as_ref(), &key, timeout).await });
}

/// Releases `key` and waits for the answer, which nobody needs: a failed release leaves a
/// lease that expires on the store by itself.
pub(crate) async fn release_now(store: &dyn LockStore, key: &LeaseKey, timeout: Duration) {
    if let Err(error) = bounded(timeout, store.release(key)).await {
        tracing::debug!(lock = %key.name, %error, "releasing an orphaned grant failed; it expires on the store");
    }
}

/// How long a timed-out call that may grant is still waited for. A stalled command can be
/// applied whenever it reaches the server (a blocked connection, a paused primary); giving up
/// early would release its lease before the grant lands and leave the lock held by nobody
/// until it expires. Waiting costs one idle task per stalled call, so the wait is long —
/// ten lease lengths, at least a minute — but bounded.
pub(crate) fn late_answer_limit(options: &LockOptions) -> Duration {
    options
        .expiry()
        .saturating_mul(10)
        .max(Duration::from_secs(60))
}

/// Runs a store call that may grant a lease (an acquisition, a hand-over) and sends its
/// answer to `actor` as `to_message(sent_at, result)` — at once if the store answered without
/// waiting, otherwise from a spawned task that gives up waiting after `timeout`.
///
/// Its `orphans` (the leases the call may leave behind) are released when nobody will own
/// them: after a timeout, once the store's late answer arrives (the store may still apply
/// a stalled command; after `give_up_after` the call is abandoned, with a release anyway),
/// or when the call granted but the actor is gone.
pub(crate) fn run_granting_call<T: Send + 'static>(
    actor: &ActorRef<LockMsg>,
    store: &Arc<dyn LockStore>,
    call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    (timeout, give_up_after): (Duration, Duration),
    granted: fn(&Result<T, StoreError>) -> bool,
    orphans: Vec<LeaseKey>,
    to_message: impl FnOnce(Instant, Result<T, StoreError>) -> LockMsg + Send + 'static,
) {
    let mut call = match store_call::start(call) {
        (sent_at, Started::Answered(result)) => {
            let _ = actor.send_message(to_message(sent_at, result));
            return;
        }
        (sent_at, Started::Running(call)) => (sent_at, call),
    };
    let (actor, store) = (actor.clone(), store.clone());
    tokio::spawn(async move {
        let (sent_at, call) = (call.0, &mut call.1);
        let result = tokio::time::timeout(timeout, &mut *call)
            .await
            .unwrap_or(Err(StoreError::Timeout(timeout)));
        let timed_out = matches!(result, Err(StoreError::Timeout(_)));
        let was_granted = granted(&result);
        let delivered = actor.send_message(to_message(sent_at, result)).is_ok();
        if timed_out {
            let _ = tokio::time::timeout(give_up_after, call).await;
        }
        if timed_out || (was_granted && !delivered) {
            for key in &orphans {
                release_now(store.as_ref(), key, timeout).await;
            }
        }
    });
}
