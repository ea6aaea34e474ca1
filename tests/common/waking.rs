//! Whom a release wakes: a mutex's release is reported to the release feed of the manager
//! that has waited longest for it (listed on the record by its refused attempts, in either
//! fairness mode) and to feeds that serve no particular manager, not to the other waiting
//! managers' feeds. Each is named `waking_…`, so that `cargo test waking` runs them all.

use std::time::Duration;

use mongolock::store::{AcquireRequest, LockStore, ReleaseDemand};
use mongolock::{Access, LockName};
use tokio::sync::mpsc::Receiver;

use super::Backend;
use super::shared_records::{
    Caller, FEED_QUIET, FEED_WITHIN, LONG, feed_reports, granted, inspect, name, open_feed,
    refused, released,
};

/// A waiting attempt of `caller` for the mutex `name` that began `waited` ago (default
/// mode: listed on the record if refused, for as long as a waiter's retry lasts).
fn waiting(caller: &Caller, name: &LockName, waited: Duration) -> AcquireRequest {
    caller
        .request(name, Access::Exclusive, LONG)
        .with_waited(waited)
        .with_retry_within(LONG)
}

/// `caller`'s release feed on `store`, open: a change stream starts watching some time
/// after it was asked for, so a probe lock is released, with `caller` listed as waiting
/// for it, until the feed reports it. `None` where the backend's feed never reports (a
/// server without change streams: its waiters poll).
async fn feed_of<B: Backend>(
    backend: &B,
    store: &B::Store,
    caller: &Caller,
) -> Option<Receiver<LockName>> {
    if backend.watches_by_polling() {
        return None;
    }
    let mut feed = store
        .watch_releases(ReleaseDemand::for_holder(caller.holder.clone()))
        .await?;
    let probe = name("wake-probe");
    let holder = Caller::new();
    for _ in 0..20 {
        let (held, _) = granted(store, &holder.request(&probe, Access::Exclusive, LONG)).await;
        refused(store, &waiting(caller, &probe, Duration::ZERO)).await;
        released(store, &held).await;
        if feed_reports(&mut feed, &probe, Duration::from_millis(500)).await {
            // Its place is taken out by a grant, as a woken waiter's would be.
            let (taken, _) = granted(store, &waiting(caller, &probe, Duration::ZERO)).await;
            released(store, &taken).await;
            return Some(feed);
        }
    }
    panic!("the release feed reported none of 20 releases that woke its manager");
}

/// Two managers wait in the default mode; each release of the mutex wakes only the one
/// listed longest — the one that began waiting first, whatever the order of the attempts —
/// and a grant takes its manager off the list, so the next release wakes the other. A
/// listing orders nobody (a newcomer may still take a free lock), and `inspect`'s queue,
/// arrival order's line, does not show it. A feed serving no manager hears every release,
/// and every feed hears a release that nobody was listed for.
pub(crate) async fn rule_22_a_release_wakes_only_the_longest_waiting_manager<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (holder, early, late) = (Caller::new(), Caller::new(), Caller::new());
    let (Some(mut early_feed), Some(mut late_feed)) = (
        feed_of(backend, &store, &early).await,
        feed_of(backend, &store, &late).await,
    ) else {
        return; // a backend without a feed: waiters poll, nobody is woken
    };
    let mut every_feed = open_feed(backend, &store)
        .await
        .expect("a store with a feed has one for everyone too");
    let lock = name("wake-the-longest");
    let (held, _) = granted(&store, &holder.request(&lock, Access::Exclusive, LONG)).await;
    refused(&store, &waiting(&late, &lock, Duration::from_secs(1))).await;
    refused(&store, &waiting(&early, &lock, Duration::from_secs(5))).await;
    assert!(
        inspect(&store, &lock)
            .await
            .is_some_and(|record| record.queue.is_empty()),
        "the default mode's waiters are not arrival order's line"
    );

    released(&store, &held).await;
    assert!(
        feed_reports(&mut early_feed, &lock, FEED_WITHIN).await,
        "the release wakes the manager waiting longest"
    );
    assert!(
        feed_reports(&mut every_feed, &lock, FEED_WITHIN).await,
        "a feed serving no manager hears every release"
    );
    assert!(
        !feed_reports(&mut late_feed, &lock, FEED_QUIET).await,
        "the release wakes nobody else"
    );

    // A listing holds nobody back, not even a request in arrival order: a newcomer takes
    // the free lock, and its release wakes the longest-waiting manager again.
    let newcomer = Caller::new();
    let in_order = newcomer
        .request(&lock, Access::Exclusive, LONG)
        .with_retry_within(LONG)
        .with_arrival_order(true);
    let (taken, _) = granted(&store, &in_order).await;
    released(&store, &taken).await;
    assert!(feed_reports(&mut early_feed, &lock, FEED_WITHIN).await);
    assert!(!feed_reports(&mut late_feed, &lock, FEED_QUIET).await);

    // The woken manager's grant takes it off the list: the next release wakes the other.
    let (early_holds, _) = granted(&store, &waiting(&early, &lock, Duration::from_secs(6))).await;
    released(&store, &early_holds).await;
    assert!(
        feed_reports(&mut late_feed, &lock, FEED_WITHIN).await,
        "the next release wakes the next manager"
    );
    assert!(
        !feed_reports(&mut early_feed, &lock, FEED_QUIET).await,
        "a manager that got the lock is not woken for it again"
    );

    // Nobody listed (a waiter refused once, with no `retry_within`, is not): the release
    // wakes every manager.
    let unlisted = name("wake-everyone");
    let (held, _) = granted(&store, &holder.request(&unlisted, Access::Exclusive, LONG)).await;
    refused(&store, &late.request(&unlisted, Access::Exclusive, LONG)).await;
    released(&store, &held).await;
    assert!(feed_reports(&mut early_feed, &unlisted, FEED_WITHIN).await);
    assert!(feed_reports(&mut late_feed, &unlisted, FEED_WITHIN).await);
}

/// A waiting attempt of `caller` for the mutex `name` in arrival order, begun `waited` ago.
fn in_line(caller: &Caller, name: &LockName, waited: Duration) -> AcquireRequest {
    waiting(caller, name, waited).with_arrival_order(true)
}

/// The manager a release woke may be overtaken before its attempt comes: a retry's arrival
/// is stamped again from its wait, so it moves with each call's latency. Its refusal, with
/// the lock free and only an earlier place in the way, passes the wake on to that place's
/// manager, so the lock does not sit free until the one that overtook it asks again; a
/// refusal while that manager comes does not wake it twice.
pub(crate) async fn rule_22_a_request_refused_only_by_the_line_wakes_the_earliest_place<
    B: Backend,
>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (holder, first, second) = (Caller::new(), Caller::new(), Caller::new());
    let (Some(mut first_feed), Some(mut second_feed)) = (
        feed_of(backend, &store, &first).await,
        feed_of(backend, &store, &second).await,
    ) else {
        return; // a backend without a feed: waiters poll, nobody is woken
    };
    let lock = name("wake-passed-on");
    let (held, _) = granted(&store, &holder.request(&lock, Access::Exclusive, LONG)).await;
    refused(&store, &in_line(&first, &lock, Duration::from_secs(5))).await;
    refused(&store, &in_line(&second, &lock, Duration::from_secs(1))).await;
    released(&store, &held).await;
    assert!(
        feed_reports(&mut first_feed, &lock, FEED_WITHIN).await,
        "the release wakes the earliest place"
    );
    assert!(!feed_reports(&mut second_feed, &lock, FEED_QUIET).await);

    // The woken manager comes with a later arrival than the second place's.
    refused(&store, &in_line(&first, &lock, Duration::ZERO)).await;
    assert!(
        feed_reports(&mut second_feed, &lock, FEED_WITHIN).await,
        "a refusal by the line alone wakes the manager that goes first now"
    );
    assert!(
        !feed_reports(&mut first_feed, &lock, FEED_QUIET).await,
        "nor does it wake the refused manager"
    );
    refused(&store, &in_line(&first, &lock, Duration::ZERO)).await;
    assert!(
        !feed_reports(&mut second_feed, &lock, FEED_QUIET).await,
        "a manager already woken is not woken again"
    );
    granted(&store, &in_line(&second, &lock, Duration::from_secs(2))).await;
}
