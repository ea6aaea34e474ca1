//! Whom a release wakes: a mutex's release is reported to the release feed of the manager
//! that has waited longest for it (listed on the record by its refused attempts, in either
//! fairness mode) and to feeds that serve no particular manager, not to the other waiting
//! managers' feeds. Each is named `waking_…`, so that `cargo test waking` runs them all.

use std::time::Duration;

use mongolock::store::{
    AcquireRequest, HandOverOutcome, LeaseKey, LockStore, ReleaseDemand, ReleaseOutcome,
};
use mongolock::{Access, LockName};
use tokio::sync::mpsc::Receiver;

use super::Backend;
use super::arrival_order::shared_in_line;
use super::shared_records::{
    Caller, FEED_QUIET, FEED_WITHIN, LONG, feed_reports, granted, hand_over, inspect, name,
    open_feed, refused, released,
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

/// `caller` refused in line for `access` of the shared lock `name`, having waited
/// `waited`: its manager takes a place.
async fn placed(
    store: &impl LockStore,
    caller: &Caller,
    name: &LockName,
    access: Access,
    waited: Duration,
) {
    refused(store, &shared_in_line(caller, name, access, waited)).await;
}

/// `caller` granted `access` of the shared lock `name` in line at its first attempt.
async fn holds(
    store: &impl LockStore,
    caller: &Caller,
    name: &LockName,
    access: Access,
) -> LeaseKey {
    granted(store, &shared_in_line(caller, name, access, Duration::ZERO))
        .await
        .0
}

/// Which of `feeds` report `lock`: those expected to within [`FEED_WITHIN`], the others not
/// within [`FEED_QUIET`] (after the expected ones were heard).
async fn reported(feeds: &mut [(&str, &mut Receiver<LockName>, bool)], lock: &LockName) {
    for (who, feed, _) in feeds.iter_mut().filter(|(_, _, expected)| *expected) {
        assert!(
            feed_reports(feed, lock, FEED_WITHIN).await,
            "the release of {lock} wakes {who}"
        );
    }
    for (who, feed, _) in feeds.iter_mut().filter(|(_, _, expected)| !*expected) {
        assert!(
            !feed_reports(feed, lock, FEED_QUIET).await,
            "the release of {lock} wakes nobody but whom its kind lets in next, not {who}"
        );
    }
}

/// A semaphore's release wakes the managers of the earliest places in line, as many as
/// permits are free (here one of a count of 2, with three places), and nobody else; a feed
/// serving no manager hears it too. With no place in line, every manager hears it.
pub(crate) async fn rule_22_a_semaphore_release_wakes_the_earliest_places_it_frees<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (holder, first, second, third) =
        (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let (Some(mut first_feed), Some(mut second_feed), Some(mut third_feed)) = (
        feed_of(backend, &store, &first).await,
        feed_of(backend, &store, &second).await,
        feed_of(backend, &store, &third).await,
    ) else {
        return; // a backend without a feed: waiters poll, nobody is woken
    };
    let mut every_feed = open_feed(backend, &store)
        .await
        .expect("a store with a feed has one for everyone too");
    let pool = name("wake-a-permit");
    let permit = Access::Permit { permits: 2 };
    let secs = Duration::from_secs;
    let held = holds(&store, &holder, &pool, permit).await;
    holds(&store, &holder, &pool, permit).await;
    // Asked in an order other than their arrivals': the places are ordered by arrival.
    placed(&store, &second, &pool, permit, secs(20)).await;
    placed(&store, &third, &pool, permit, secs(10)).await;
    placed(&store, &first, &pool, permit, secs(30)).await;
    released(&store, &held).await;
    reported(
        &mut [
            ("the earliest place's manager", &mut first_feed, true),
            ("a feed serving no manager", &mut every_feed, true),
            ("the second place's manager", &mut second_feed, false),
            ("the third place's manager", &mut third_feed, false),
        ],
        &pool,
    )
    .await;

    // Nobody in line (waiters of the default mode take no place): every manager hears it.
    let unlined = name("wake-every-permit");
    let one = Access::Permit { permits: 1 };
    let held = holds(&store, &holder, &unlined, one).await;
    refused(
        &store,
        &first.request(&unlined, one, LONG).with_retry_within(LONG),
    )
    .await;
    refused(
        &store,
        &second.request(&unlined, one, LONG).with_retry_within(LONG),
    )
    .await;
    released(&store, &held).await;
    reported(
        &mut [
            ("a waiter without a place", &mut first_feed, true),
            ("another waiter without a place", &mut second_feed, true),
            (
                "a manager not waiting, with no place in line",
                &mut third_feed,
                true,
            ),
        ],
        &unlined,
    )
    .await;
}

/// A reader/writer lock's writer releases with places read, read, write in line: the
/// release wakes both readers' managers (a readers' batch goes in together) and not the
/// writer's, behind them.
pub(crate) async fn rule_22_a_writers_release_wakes_the_readers_batch<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (holder, reader, other_reader, writer) =
        (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let (Some(mut reader_feed), Some(mut other_reader_feed), Some(mut writer_feed)) = (
        feed_of(backend, &store, &reader).await,
        feed_of(backend, &store, &other_reader).await,
        feed_of(backend, &store, &writer).await,
    ) else {
        return; // a backend without a feed: waiters poll, nobody is woken
    };
    let secs = Duration::from_secs;

    // A readers' batch: both readers ahead of the writer go in together.
    let batch = name("wake-a-readers-batch");
    let wrote = holds(&store, &holder, &batch, Access::Write).await;
    placed(&store, &writer, &batch, Access::Write, secs(10)).await;
    placed(&store, &reader, &batch, Access::Read, secs(30)).await;
    placed(&store, &other_reader, &batch, Access::Read, secs(20)).await;
    released(&store, &wrote).await;
    reported(
        &mut [
            ("the first reader's manager", &mut reader_feed, true),
            ("the second reader's manager", &mut other_reader_feed, true),
            (
                "the writer's manager, behind the readers",
                &mut writer_feed,
                false,
            ),
        ],
        &batch,
    )
    .await;
}

/// Readers hold a reader/writer lock and a writer's place is first in line: a reader's
/// release while another reader holds lets nobody in, and wakes nobody; the last reader's
/// lets the writer in, and wakes its manager, not that of the reader behind it.
pub(crate) async fn rule_22_a_readers_release_wakes_nobody_while_readers_hold<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (holder, reader, other_reader, writer) =
        (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let (Some(mut reader_feed), Some(mut writer_feed)) = (
        feed_of(backend, &store, &reader).await,
        feed_of(backend, &store, &writer).await,
    ) else {
        return; // a backend without a feed: waiters poll, nobody is woken
    };
    let secs = Duration::from_secs;
    let readers = name("wake-behind-readers");
    let read = holds(&store, &holder, &readers, Access::Read).await;
    let other_read = holds(&store, &other_reader, &readers, Access::Read).await;
    placed(&store, &writer, &readers, Access::Write, secs(30)).await;
    placed(&store, &reader, &readers, Access::Read, secs(10)).await;
    released(&store, &read).await;
    reported(
        &mut [
            (
                "the writer's manager, while a reader holds",
                &mut writer_feed,
                false,
            ),
            (
                "the reader's manager, behind the writer",
                &mut reader_feed,
                false,
            ),
        ],
        &readers,
    )
    .await;
    released(&store, &other_read).await;
    reported(
        &mut [
            (
                "the writer's manager, once nobody holds",
                &mut writer_feed,
                true,
            ),
            (
                "the reader's manager, behind the writer",
                &mut reader_feed,
                false,
            ),
        ],
        &readers,
    )
    .await;
}

/// A shared record's hand-over in arrival order to a waiter behind an earlier place of
/// another manager releases the permit (rule 19) and wakes whom the record then lets in:
/// the earliest place's manager, not the later one's (nor the hand-over's own, now in line
/// behind both). A hand-over that grants is no release and wakes nobody.
pub(crate) async fn rule_22_a_shared_hand_over_that_releases_wakes_the_earliest_place<
    B: Backend,
>(
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
    let secs = Duration::from_secs;
    let one = Access::Permit { permits: 1 };

    // Nobody else in line: the hand-over grants, and no feed hears of it.
    let pool = name("wake-after-a-hand-over");
    let held = holds(&store, &holder, &pool, one).await;
    let next = shared_in_line(&holder, &pool, one, Duration::ZERO);
    assert!(matches!(
        hand_over(&store, &held, &next).await,
        HandOverOutcome::HandedOver { .. }
    ));
    reported(
        &mut [
            ("a manager not waiting", &mut early_feed, false),
            ("another manager not waiting", &mut late_feed, false),
        ],
        &pool,
    )
    .await;
    let held = next.key();
    placed(&store, &late, &pool, one, secs(10)).await;
    placed(&store, &early, &pool, one, secs(30)).await;
    // Hands over to a waiter that arrived after both places: released instead.
    let behind = shared_in_line(&holder, &pool, one, Duration::ZERO);
    assert!(matches!(
        hand_over(&store, &held, &behind).await,
        HandOverOutcome::Released { .. }
    ));
    reported(
        &mut [
            ("the earliest place's manager", &mut early_feed, true),
            ("the later place's manager", &mut late_feed, false),
        ],
        &pool,
    )
    .await;
}

/// Holder ids are values in whom a release wakes (rule 4): a waiting manager whose id has
/// spaces and pattern characters is woken when its place is first, and a manager whose id
/// only starts that one's is not. (One whose id is a part of it between spaces, say
/// `p q.*`, may be: a spurious wake rule 22 allows.)
pub(crate) async fn rule_4_22_a_holder_id_of_any_text_is_woken_as_written<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let caller = |id: &str| Caller {
        holder: mongolock::HolderId::from_string(id.to_owned()),
    };
    let (holder, first, prefix) = (Caller::new(), caller("p q.* (|x)$"), caller("p q"));
    let (Some(mut first_feed), Some(mut prefix_feed)) = (
        feed_of(backend, &store, &first).await,
        feed_of(backend, &store, &prefix).await,
    ) else {
        return; // a backend without a feed: waiters poll, nobody is woken
    };
    let pool = name("wake-an-odd-holder");
    let one = Access::Permit { permits: 1 };
    let secs = Duration::from_secs;
    let held = holds(&store, &holder, &pool, one).await;
    placed(&store, &first, &pool, one, secs(30)).await;
    placed(&store, &prefix, &pool, one, secs(20)).await;
    released(&store, &held).await;
    reported(
        &mut [
            ("the first place's manager", &mut first_feed, true),
            (
                "a manager whose id starts the first's",
                &mut prefix_feed,
                false,
            ),
        ],
        &pool,
    )
    .await;
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

/// A mutex granted to a listed waiter while another manager is still listed is contended
/// from the start, since that manager began to wait: its release (or first hand-over)
/// says so, and its holder lets the others have their turn then, rather than when one of
/// them, waiting quietly for a wake, asks again. A grant to a request that waits on
/// nothing (no `retry_within`: a single try, a first attempt) leaves the mark clear.
pub(crate) async fn rule_3_21_a_grant_while_others_are_listed_is_contended_from_the_start<
    B: Backend,
>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (holder, next, other, plain) = (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let lock = name("contended-from-the-start");
    let (held, _) = granted(&store, &holder.request(&lock, Access::Exclusive, LONG)).await;
    // The one granted next began to wait first: its own place does not count.
    let (own_wait, waited) = (Duration::from_secs(40), Duration::from_secs(20));
    refused(&store, &waiting(&next, &lock, own_wait)).await;
    refused(&store, &waiting(&other, &lock, waited)).await;
    released(&store, &held).await;

    let (next_held, _) = granted(&store, &waiting(&next, &lock, own_wait)).await;
    match store.release(&next_held).await {
        Ok(ReleaseOutcome::Released {
            contended_for: Some(contended_for),
        }) => assert!(
            contended_for >= waited && contended_for < own_wait,
            "contended since the other listed manager began to wait ({waited:?} ago), \
             not since its own holder did ({own_wait:?}): {contended_for:?}"
        ),
        outcome => panic!("a grant made while another manager is listed is contended: {outcome:?}"),
    }

    // `other` is still listed, but a request that waits on nothing leaves the mark clear.
    let (plain_held, _) = granted(&store, &plain.request(&lock, Access::Exclusive, LONG)).await;
    match store.release(&plain_held).await {
        Ok(ReleaseOutcome::Released { contended_for }) => assert_eq!(
            contended_for, None,
            "a grant to a request that waits on nothing starts uncontended"
        ),
        outcome => panic!("the plain grant's release: {outcome:?}"),
    }
}
