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
        ..
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

/// Waits a while and asserts nothing was reported meanwhile.
async fn quiet(changes: &mut LockWatch, step: &str, wait: Duration) {
    if let Ok(change) = timeout(wait, changes.recv()).await {
        panic!("{step}: expected no change, got {change:?}");
    }
}

/// A shared lock has one holding per permit or reader, and the watch follows each: every
/// holder's grant and release under its own holder and token, in order; a holder that keeps
/// renewing is never reported expired because another took a place beside it; a holder that
/// stops renewing expires alone; and the last release is reported, so the lock does not
/// look held once nobody holds it. Several holders at the start are each reported.
pub(crate) async fn watch_follows_every_holder_of_a_shared_lock<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let name = LockName::new("watched-permits").unwrap();
    let mut changes = a.watch(["watched-permits"]).unwrap();
    match next(&mut changes, "start").await {
        LockChange::Current { holder: None, .. } => {}
        other => panic!("start: {other:?}"),
    }
    let acquired = |holder: &HolderId, token| LockChange::Acquired {
        name: name.clone(),
        holder: Some(holder.clone()),
        token,
    };
    let released = |holder: &HolderId, token| LockChange::Released {
        name: name.clone(),
        holder: Some(holder.clone()),
        token,
    };

    let first = a
        .semaphore("watched-permits", 3)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert_eq!(
        next(&mut changes, "first permit").await,
        acquired(a.holder_id(), first.token())
    );
    let second = b
        .semaphore("watched-permits", 3)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert_eq!(
        next(&mut changes, "second permit").await,
        acquired(b.holder_id(), second.token()),
        "a second holder beside the first"
    );
    // Both keep renewing for several lease lengths: nobody expired.
    let lease = super::fast_options().lease_duration();
    quiet(&mut changes, "both renewing", lease * 3).await;

    // A holder that stops renewing beside them expires alone.
    let stalled = HolderId::from_string("stalled-permit".to_owned());
    let request = AcquireRequest::new(
        name.clone(),
        LeaseId::new(),
        stalled.clone(),
        Duration::from_millis(1200),
    )
    .with_access(mongolock::Access::Permit { permits: 3 });
    let AcquireOutcome::Acquired {
        token: stalled_token,
        ..
    } = store.try_acquire(&request).await.unwrap()
    else {
        panic!("a third permit of three was refused");
    };
    assert_eq!(
        next(&mut changes, "stalled permit").await,
        acquired(&stalled, stalled_token)
    );
    assert_eq!(
        next(&mut changes, "stalled expiry").await,
        LockChange::Expired {
            name: name.clone(),
            holder: Some(stalled),
            token: stalled_token,
        }
    );

    // Each release under its own holder, the last one included.
    let (first_token, second_token) = (first.token(), second.token());
    first.release().await.unwrap();
    assert_eq!(
        next(&mut changes, "first release").await,
        released(a.holder_id(), first_token)
    );
    second.release().await.unwrap();
    match next(&mut changes, "last release").await {
        change if change == released(b.holder_id(), second_token) => {}
        // Polling: a TTL index may clean the released record up before the next read.
        LockChange::Deleted { .. } if backend.watches_by_polling() => {}
        other => panic!("last release: {other:?}"),
    }

    // Readers held when a watch begins are each reported, then each release.
    let readers = [
        a.rw_lock("watched-readers").unwrap().read().await.unwrap(),
        b.rw_lock("watched-readers").unwrap().read().await.unwrap(),
    ];
    let mut later = b.watch(["watched-readers"]).unwrap();
    let rw = LockName::new("watched-readers").unwrap();
    let mut current = Vec::new();
    for _ in 0..2 {
        match next(&mut later, "readers at the start").await {
            LockChange::Current {
                holder: Some(holder),
                token,
                ..
            } => current.push((holder, token)),
            other => panic!("readers at the start: {other:?}"),
        }
    }
    assert_eq!(
        current,
        vec![
            (a.holder_id().clone(), readers[0].token()),
            (b.holder_id().clone(), readers[1].token()),
        ]
    );
    for (guard, holder) in readers.into_iter().zip([a.holder_id(), b.holder_id()]) {
        let token = guard.token();
        guard.release().await.unwrap();
        match next(&mut later, "reader's release").await {
            LockChange::Released {
                name: on,
                holder: Some(by),
                token: of,
            } if on == rw && &by == holder && of == token => {}
            LockChange::Deleted { .. } if backend.watches_by_polling() => {}
            other => panic!("reader's release: {other:?}"),
        }
    }
    a.shutdown().await;
    b.shutdown().await;
}
