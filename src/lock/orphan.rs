//! Orphaned grants: a lease the store may have granted but no guard will ever own — the
//! caller left, the answer came too late to use, or the attempt's outcome is unknown (an
//! error or a timeout, after which the server may still apply it). Such a lease is released
//! at once. The release is owner-checked by lease id, so it can never free a lock somebody
//! else holds: releasing a lease that was never granted changes nothing.

use std::sync::Arc;
use std::time::Duration;

use super::store_call::bounded;
use crate::name::LockName;
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
