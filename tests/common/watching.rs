//! Conformance scenario for watching locks: grants with holder and token, a release, an
//! expiry followed by a takeover, a deletion, and the end at shutdown — from the store's
//! record feed where it has one (the memory store, MongoDB with change streams) and by
//! polling where not (a standalone MongoDB server).

use std::time::Duration;

use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
use mongolock::{HolderId, LockChange, LockName, LockWatch};
use tokio::time::timeout;

use super::{Backend, start};

/// Longer than a poll (1 s) plus a store round trip.
const WITHIN: Duration = Duration::from_secs(5);

async fn next(changes: &mut LockWatch, step: &str) -> LockChange {
    match timeout(WITHIN, changes.recv()).await {
        Ok(Some(change)) => change,
        Ok(None) => panic!("{step}: the watch ended"),
        Err(_) => panic!("{step}: no change within {WITHIN:?}"),
    }
}

pub(crate) async fn watch_reports_grants_releases_expiry_takeover_and_deletion<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let name = LockName::new("watched").unwrap();
    let mut changes = a.lock("watched").unwrap().watch();
    match next(&mut changes, "start").await {
        LockChange::Current { holder: None, .. } => {}
        other => panic!("start: {other:?}"),
    }

    // A grant and its release, by this manager.
    let guard = a.lock("watched").unwrap().acquire().await.unwrap();
    let first = guard.token();
    assert_eq!(
        next(&mut changes, "acquire").await,
        LockChange::Acquired {
            name: name.clone(),
            holder: Some(a.holder_id().clone()),
            token: first,
        }
    );
    guard.release().await.unwrap();
    let released = LockChange::Released {
        name: name.clone(),
        holder: Some(a.holder_id().clone()),
        token: first,
    };
    match next(&mut changes, "release").await {
        change if change == released => {}
        // Polling: a TTL index may clean the released record up before the next read.
        LockChange::Deleted { .. } if backend.watches_by_polling() => {}
        other => panic!("release: {other:?}"),
    }

    // A holder that never renews: its lease runs out, then another process takes over.
    let stalled = HolderId::from_string("stalled-holder".to_owned());
    let request = AcquireRequest::new(
        name.clone(),
        LeaseId::new(),
        stalled.clone(),
        Duration::from_millis(1200),
    );
    let AcquireOutcome::Acquired {
        token: stalled_token,
    } = store.try_acquire(&request).await.unwrap()
    else {
        panic!("the lock was free");
    };
    assert_eq!(
        next(&mut changes, "stalled grant").await,
        LockChange::Acquired {
            name: name.clone(),
            holder: Some(stalled.clone()),
            token: stalled_token,
        }
    );
    assert_eq!(
        next(&mut changes, "expiry").await,
        LockChange::Expired {
            name: name.clone(),
            holder: Some(stalled),
            token: stalled_token,
        }
    );
    let taken = b.lock("watched").unwrap().acquire().await.unwrap();
    assert!(taken.token() > stalled_token);
    assert_eq!(
        next(&mut changes, "takeover").await,
        LockChange::Acquired {
            name: name.clone(),
            holder: Some(b.holder_id().clone()),
            token: taken.token(),
        }
    );

    // An operator deletes the record.
    backend.delete_record(&store, &name).await;
    assert_eq!(
        next(&mut changes, "deletion").await,
        LockChange::Deleted { name: name.clone() }
    );
    drop(taken);

    // The watch ends with its manager.
    a.shutdown().await;
    assert_eq!(
        timeout(WITHIN, changes.recv()).await,
        Ok(None),
        "the watch outlived its manager"
    );
    b.shutdown().await;
}
