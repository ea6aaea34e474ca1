//! Arrival order ([`Fairness::ArrivalOrder`]): the store-level line of waiting managers
//! (the contract's arrival-order rules, called directly) and what the runtime makes of it —
//! a released lock goes to the task that asked first, whichever process it is in, and a
//! waiter that gives up leaves the line at once. Each is named `arrival_order_…`, so that
//! `cargo test arrival_order` runs them all.

use std::time::Duration;

use mongolock::store::{AcquireRequest, HandOverOutcome, LockStore, ReleaseOutcome};
use mongolock::{Access, Fairness, HolderId, LockError, LockName, LockOptions};

use super::shared_records::{
    Caller, FEED_QUIET, FEED_WITHIN, LONG, MARGIN, SHORT, attempt, feed_reports, granted,
    hand_over, inspect, name, open_feed, refused, released,
};
use super::{Backend, eventually, fast_options, start_with};
use tokio::time::sleep;

/// An attempt in line for `name` whose requester began waiting `waited` ago, its place
/// lasting `place_lasts` if refused.
fn in_line(
    caller: &Caller,
    name: &LockName,
    waited: Duration,
    place_lasts: Duration,
) -> AcquireRequest {
    caller
        .request(name, Access::Exclusive, LONG)
        .with_waited(waited)
        .with_retry_within(place_lasts)
        .with_arrival_order(true)
}

/// The managers in the line of `name`, earliest first.
async fn line_of(store: &impl LockStore, name: &LockName) -> Vec<HolderId> {
    inspect(store, name)
        .await
        .map(|record| {
            record
                .queue
                .into_iter()
                .map(|waiter| waiter.holder)
                .collect()
        })
        .unwrap_or_default()
}

/// The line decides who is next: a free lock goes to the earliest live place, not to the
/// first to ask after the release; a grant takes its place out; a hand-over to a later
/// arrival is a release that puts the new lease's manager in line; a request not in
/// arrival order neither waits in line nor looks at it.
pub(crate) async fn rule_16_the_earliest_place_in_line_goes_first<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (a, b, c) = (Caller::new(), Caller::new(), Caller::new());
    let lock = name("fifo-line");
    let (held, first) = granted(&store, &in_line(&a, &lock, Duration::ZERO, LONG)).await;
    let b_asks = || in_line(&b, &lock, Duration::from_secs(20), LONG);
    let c_asks = || in_line(&c, &lock, Duration::from_secs(10), LONG);
    refused(&store, &c_asks()).await;
    refused(&store, &b_asks()).await;
    assert_eq!(
        line_of(&store, &lock).await,
        [b.holder.clone(), c.holder.clone()],
        "earliest arrival first, whatever the order of the attempts"
    );
    let record = inspect(&store, &lock).await.expect("the held record");
    assert!(
        record.queue[0].waiting_for >= Duration::from_secs(20),
        "{:?}",
        record.queue
    );
    assert_eq!(record.queue[0].access, Access::Exclusive);

    released(&store, &held).await;
    refused(&store, &c_asks()).await;
    let outside = a.request(&lock, Access::Exclusive, LONG);
    let (outside_key, _) = granted(&store, &outside).await;
    released(&store, &outside_key).await;

    let (b_key, b_token) = granted(&store, &b_asks()).await;
    assert!(b_token > first, "{b_token} after {first}");
    assert_eq!(
        line_of(&store, &lock).await,
        std::slice::from_ref(&c.holder)
    );

    let b_next = in_line(&b, &lock, Duration::ZERO, LONG);
    assert!(
        matches!(
            hand_over(&store, &b_key, &b_next).await,
            HandOverOutcome::Released { .. }
        ),
        "a hand-over to a later arrival than a place in line releases"
    );
    assert_eq!(
        line_of(&store, &lock).await,
        [c.holder.clone(), b.holder.clone()]
    );
    let (c_key, c_token) = granted(&store, &c_asks()).await;
    assert!(c_token > b_token);

    let c_next = in_line(&c, &lock, Duration::from_secs(30), LONG);
    match hand_over(&store, &c_key, &c_next).await {
        HandOverOutcome::HandedOver { token, .. } => assert!(token > c_token),
        other => panic!("an arrival earlier than every place is handed the lock: {other:?}"),
    }
}

/// A place lasts its `retry_within` unless renewed: a waiter that stopped asking (killed,
/// paused) stops blocking the line then; `withdraw` takes a place out at once and is a
/// no-op for a manager not in line. Names stay values in the line's queries too.
pub(crate) async fn rule_20_places_in_line_end_or_are_withdrawn<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (a, b, c) = (Caller::new(), Caller::new(), Caller::new());
    let lock = name("$line.holder");
    let (held, _) = granted(&store, &in_line(&a, &lock, Duration::ZERO, LONG)).await;
    refused(&store, &in_line(&b, &lock, Duration::from_secs(5), SHORT)).await;
    released(&store, &held).await;
    let c_asks = || in_line(&c, &lock, Duration::ZERO, LONG);
    refused(&store, &c_asks()).await;
    tokio::time::sleep(SHORT + MARGIN).await;
    let (c_key, _) = granted(&store, &c_asks()).await;

    refused(&store, &in_line(&b, &lock, Duration::from_secs(5), LONG)).await;
    released(&store, &c_key).await;
    assert_eq!(
        line_of(&store, &lock).await,
        std::slice::from_ref(&b.holder)
    );
    let withdraw = |holder: HolderId| {
        let (store, lock) = (store.clone(), lock.clone());
        async move {
            store
                .withdraw(&lock, &holder)
                .await
                .unwrap_or_else(|error| panic!("withdraw from {lock}: {error}"));
        }
    };
    // A withdrawal wakes the feed only when it took a place out.
    let mut feed = open_feed(backend, &store).await;
    withdraw(c.holder.clone()).await;
    assert_eq!(
        line_of(&store, &lock).await,
        std::slice::from_ref(&b.holder)
    );
    if let Some(feed) = feed.as_mut() {
        assert!(
            !feed_reports(feed, &lock, FEED_QUIET).await,
            "a withdrawal of no place is no release"
        );
    }
    withdraw(b.holder.clone()).await;
    assert!(line_of(&store, &lock).await.is_empty());
    if let Some(feed) = feed.as_mut() {
        assert!(
            feed_reports(feed, &lock, FEED_WITHIN).await,
            "the release feed reports a withdrawn place"
        );
    }
    assert!(
        attempt(&store, &in_line(&a, &lock, Duration::ZERO, LONG))
            .await
            .is_some()
    );
}

/// An attempt in line for `access` of the shared lock `name` (see [`in_line`]).
pub(super) fn shared_in_line(
    caller: &Caller,
    name: &LockName,
    access: Access,
    waited: Duration,
) -> AcquireRequest {
    caller
        .request(name, access, LONG)
        .with_waited(waited)
        .with_retry_within(LONG)
        .with_arrival_order(true)
}

/// A reader/writer lock in arrival order: a reader waits behind an earlier writer's place
/// even while only readers hold, but not behind earlier readers (consecutive readers go in
/// together, and a reader earlier than the waiting writer joins the readers holding); the
/// writer goes in once they left; the line lists each place with its access.
pub(crate) async fn rule_15_readers_in_line_go_in_together_behind_earlier_writers<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (a, b, c, d, e) = (
        Caller::new(),
        Caller::new(),
        Caller::new(),
        Caller::new(),
        Caller::new(),
    );
    let lock = name("fifo-rw");
    let secs = Duration::from_secs;
    let (a_read, _) = granted(
        &store,
        &shared_in_line(&a, &lock, Access::Read, Duration::ZERO),
    )
    .await;
    let b_writes = || shared_in_line(&b, &lock, Access::Write, secs(10));
    let c_reads = || shared_in_line(&c, &lock, Access::Read, secs(5));
    refused(&store, &b_writes()).await;
    refused(&store, &c_reads()).await;
    let (d_read, _) = granted(&store, &shared_in_line(&d, &lock, Access::Read, secs(20))).await;
    let record = inspect(&store, &lock).await.expect("the held record");
    let line: Vec<(HolderId, Access)> = record
        .queue
        .iter()
        .map(|waiter| (waiter.holder.clone(), waiter.access))
        .collect();
    assert_eq!(
        line,
        [
            (b.holder.clone(), Access::Write),
            (c.holder.clone(), Access::Read)
        ]
    );
    assert_eq!(record.held_count(), 2, "two readers hold");

    released(&store, &a_read).await;
    released(&store, &d_read).await;
    refused(&store, &c_reads()).await;
    let (b_write, _) = granted(&store, &b_writes()).await;
    refused(&store, &shared_in_line(&e, &lock, Access::Read, secs(1))).await;
    released(&store, &b_write).await;
    granted(&store, &c_reads()).await;
    granted(&store, &shared_in_line(&e, &lock, Access::Read, secs(1))).await;
    assert!(line_of(&store, &lock).await.is_empty());
}

/// A read granted in arrival order says which of its manager's other readers may share it:
/// those that waited longer than the earliest writer of another manager in line (zero when
/// no such writer waits: its own place, readers' places and ended places do not count).
/// Any other grant says nobody may.
pub(crate) async fn rule_17_a_read_in_line_says_which_readers_may_share_it<B: Backend>(
    backend: &B,
) {
    use mongolock::store::AcquireOutcome;

    let store = backend.fresh().await;
    let (a, b, c, d) = (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let lock = name("fifo-sharing");
    let secs = Duration::from_secs;
    let readers_told = |outcome: AcquireOutcome| match outcome {
        AcquireOutcome::Acquired {
            readers_waited_over,
            ..
        } => readers_waited_over,
        busy => panic!("expected a grant, got {busy:?}"),
    };
    let ask = async |request: AcquireRequest| {
        let outcome = store.try_acquire(&request).await.unwrap();
        (request.key(), readers_told(outcome))
    };
    let (a_write, told) = ask(shared_in_line(&a, &lock, Access::Write, Duration::ZERO)).await;
    assert_eq!(told, None, "a write is shared with nobody");
    refused(&store, &shared_in_line(&b, &lock, Access::Write, secs(10))).await;
    refused(&store, &shared_in_line(&c, &lock, Access::Read, secs(30))).await;
    refused(&store, &shared_in_line(&d, &lock, Access::Read, secs(40))).await;
    released(&store, &a_write).await;
    let (c_read, told) = ask(shared_in_line(&c, &lock, Access::Read, secs(30))).await;
    let told = told.expect("a read in line says which readers may share it");
    assert!(
        told >= secs(10) && told < secs(10) + MARGIN,
        "the earliest writer elsewhere had waited about 10 s: {told:?}"
    );
    released(&store, &c_read).await;

    let (d_read, told) = ask(shared_in_line(&d, &lock, Access::Read, secs(40))).await;
    assert!(told.is_some_and(|told| told >= secs(10)), "{told:?}");
    released(&store, &d_read).await;
    let (b_write, _) = ask(shared_in_line(&b, &lock, Access::Write, secs(10))).await;
    released(&store, &b_write).await;
    let (c_read, told) = ask(shared_in_line(&c, &lock, Access::Read, secs(1))).await;
    assert_eq!(told, Some(Duration::ZERO), "no writer waits in line");
    released(&store, &c_read).await;
    let plain = c.request(&lock, Access::Read, LONG);
    let (plain_read, told) = ask(plain).await;
    assert_eq!(told, None, "a read not in line is shared with nobody");
    released(&store, &plain_read).await;
}

/// A semaphore in arrival order: a free permit goes to the earliest place in line, not to
/// the first to ask after the release.
pub(crate) async fn rule_16_permits_go_to_the_earliest_place_in_line<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (a, b, c) = (Caller::new(), Caller::new(), Caller::new());
    let lock = name("fifo-permits");
    let permit = Access::Permit { permits: 2 };
    let secs = Duration::from_secs;
    let (first, _) = granted(&store, &shared_in_line(&a, &lock, permit, Duration::ZERO)).await;
    let (second, _) = granted(&store, &shared_in_line(&a, &lock, permit, Duration::ZERO)).await;
    let b_asks = || shared_in_line(&b, &lock, permit, secs(10));
    let c_asks = || shared_in_line(&c, &lock, permit, secs(20));
    refused(&store, &b_asks()).await;
    refused(&store, &c_asks()).await;
    assert_eq!(
        line_of(&store, &lock).await,
        [c.holder.clone(), b.holder.clone()]
    );
    released(&store, &first).await;
    refused(&store, &b_asks()).await;
    granted(&store, &c_asks()).await;
    refused(&store, &b_asks()).await;
    released(&store, &second).await;
    granted(&store, &b_asks()).await;
}

/// A held shared record that refuses a request by the line (a reader behind an earlier
/// writer's place while only readers hold; a permit free but promised to an earlier place)
/// records the contention as a refusal by its holders does: inspection shows the wait, and
/// the holder's release reports it.
pub(crate) async fn rule_3_16_a_refusal_by_the_line_is_contention<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (a, b, c, d) = (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let secs = Duration::from_secs;

    // a reads; b's writer is refused and keeps its place; d's reader, which arrived before
    // b, joins a (its grant clears the contention); c's reader, behind b, is refused by
    // the line alone.
    let rw = name("fifo-contended-rw");
    let (a_read, _) = granted(
        &store,
        &shared_in_line(&a, &rw, Access::Read, Duration::ZERO),
    )
    .await;
    refused(&store, &shared_in_line(&b, &rw, Access::Write, secs(5))).await;
    granted(&store, &shared_in_line(&d, &rw, Access::Read, secs(10))).await;
    refused(&store, &shared_in_line(&c, &rw, Access::Read, secs(1))).await;

    // a and d fill the semaphore; b is refused and keeps its place; d leaves and gets back
    // in as an arrival before b (clearing the contention), then leaves again: a permit is
    // free, but c, behind b, is refused by the line alone.
    let sem = name("fifo-contended-sem");
    let permit = Access::Permit { permits: 2 };
    let (a_permit, _) = granted(&store, &shared_in_line(&a, &sem, permit, Duration::ZERO)).await;
    let (d_permit, _) = granted(&store, &shared_in_line(&d, &sem, permit, Duration::ZERO)).await;
    refused(&store, &shared_in_line(&b, &sem, permit, secs(5))).await;
    released(&store, &d_permit).await;
    let (d_permit, _) = granted(&store, &shared_in_line(&d, &sem, permit, secs(10))).await;
    released(&store, &d_permit).await;
    refused(&store, &shared_in_line(&c, &sem, permit, secs(1))).await;

    for (lock, held) in [(&rw, a_read), (&sem, a_permit)] {
        let shown = inspect(&store, lock)
            .await
            .and_then(|record| record.contended_for);
        assert!(
            shown.is_some_and(|waited| waited >= secs(1)),
            "{lock}: a held record that refused c by the line shows c's wait: {shown:?}"
        );
        match store.release(&held).await {
            Ok(ReleaseOutcome::Released {
                contended_for: Some(waited),
            }) => assert!(waited >= secs(1), "{lock}: c's wait: {waited:?}"),
            other => panic!("{lock}: c waits for a's place: {other:?}"),
        }
    }
}

/// A withdrawal takes out a place of the manager's that has ended as well as a live one,
/// and wakes the release feed for it. The store cannot tell what the manager's actor
/// believes: an attempt's refusal answered after a hand-over's grant leaves an actor that
/// thinks it is out of line while the store keeps the refused attempt's place.
pub(crate) async fn rule_20_22_withdrawing_an_ended_place_wakes_every_feed<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (a, b) = (Caller::new(), Caller::new());
    let lock = name("fifo-ended-place");
    let permit = Access::Permit { permits: 1 };
    let (held, _) = granted(&store, &shared_in_line(&a, &lock, permit, Duration::ZERO)).await;
    let placed = b
        .request(&lock, permit, LONG)
        .with_waited(Duration::from_secs(1))
        .with_retry_within(SHORT)
        .with_arrival_order(true);
    refused(&store, &placed).await;
    sleep(SHORT + MARGIN).await;
    assert!(
        line_of(&store, &lock).await.is_empty(),
        "b's place has ended"
    );
    let mut feed = open_feed(backend, &store).await;
    store
        .withdraw(&lock, &b.holder)
        .await
        .unwrap_or_else(|error| panic!("withdraw from {lock}: {error}"));
    if let Some(feed) = feed.as_mut() {
        assert!(
            feed_reports(feed, &lock, FEED_WITHIN).await,
            "the release feed reports the withdrawal of an ended place"
        );
    }
    released(&store, &held).await;
}

/// Options in arrival order whose retries come late and whose place outlives the
/// scenario's waits (so only a release's wake-up or a withdrawal moves things in time), with
/// a fairness bound that would let the default mode pass the lock locally all along.
fn in_order() -> LockOptions {
    fast_options()
        .with_fairness(Fairness::ArrivalOrder)
        .with_retry_backoff(Duration::from_secs(2), Duration::from_secs(3))
        .with_fairness_bound(Duration::from_secs(60))
}

/// Awaits a spawned acquire, failing the test (not hanging it) after `within`.
async fn acquired_within(
    within: Duration,
    task: tokio::task::JoinHandle<Result<mongolock::LockGuard, LockError>>,
    what: &str,
) -> mongolock::LockGuard {
    match tokio::time::timeout(within, task).await {
        Ok(Ok(Ok(guard))) => guard,
        Ok(Ok(Err(error))) => panic!("{what}: {error}"),
        Ok(Err(error)) => panic!("{what}: the task failed: {error}"),
        Err(_) => panic!("{what}: not acquired within {within:?}"),
    }
}

/// Two processes in arrival order: a release goes to the task that asked first, in the
/// other process, not to the local waiter that asked later (which the default mode would
/// pass it to with no store call); then back. Multi-locks refuse the mode with a typed
/// error (their members never wait in line).
pub(crate) async fn arrival_order_lock_serves_processes_in_arrival_order<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let here = start_with(store.clone(), in_order()).await;
    let there = start_with(backend.peer(&store).await, in_order()).await;
    let lock = name("fifo-processes");
    let held = here.lock(lock.as_str()).unwrap().acquire().await.unwrap();

    let there_lock = there.lock(lock.as_str()).unwrap();
    let first = tokio::spawn(async move { there_lock.acquire().await });
    let placed = eventually(Duration::from_secs(5), async || {
        line_of(&store, &lock).await == [there.holder_id().clone()]
    })
    .await;
    assert!(placed, "the other process's waiter is in line");
    // Arrival is the store's clock at each attempt minus the measured wait, so a retry
    // arrives later by its own latency (`guide::fairness`, "Its bounds"): `there` retries
    // once when its release feed opens, about now, and a slow retry used to land after the
    // local ask below when it came a few milliseconds later (1 run in 20 under load). The
    // order is promised beyond an attempt's latency: ask half a second later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let here_lock = here.lock(lock.as_str()).unwrap();
    let second = tokio::spawn(async move { here_lock.acquire().await });
    // The local request reaches the name's actor before the release below does: both go
    // through the same mailbox, and nothing else runs in between.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!second.is_finished());
    let token = held.token();
    held.release().await.unwrap();

    // Past the longest backoff: a wake-up the release feed misses (its stream still
    // opening) costs a retry, not the order.
    let turn = Duration::from_secs(10);
    let first = acquired_within(turn, first, "the earlier waiter, in the other process").await;
    assert!(first.token() > token);
    assert!(
        !second.is_finished(),
        "the later local waiter waits its turn"
    );
    let first_token = first.token();
    first.release().await.unwrap();
    let second = acquired_within(turn, second, "then the local waiter").await;
    assert!(second.token() > first_token);
    second.release().await.unwrap();

    let refused = here.multi_lock(["fifo-a", "fifo-b"]).map(drop);
    assert!(
        matches!(refused, Err(LockError::InvalidOptions(_))),
        "{refused:?}"
    );
    here.shutdown().await;
    there.shutdown().await;
}

/// A waiter in arrival order that gives up (its acquire times out) takes its manager's
/// place out of the line at once: those behind it do not wait for the place to end.
pub(crate) async fn arrival_order_waiter_that_gives_up_leaves_the_line<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let here = start_with(store.clone(), in_order()).await;
    let there = start_with(backend.peer(&store).await, in_order()).await;
    let lock = name("fifo-gives-up");
    let held = here.lock(lock.as_str()).unwrap().acquire().await.unwrap();
    let timed_out = there
        .lock(lock.as_str())
        .unwrap()
        .acquire_timeout(Duration::from_millis(400))
        .await;
    assert!(
        matches!(timed_out, Err(LockError::Timeout(_))),
        "{timed_out:?}"
    );
    // The place would last 6 s (twice the longest backoff) and the next retry, which would
    // find nobody waiting, is 2 s or more away; the withdrawal empties the line within a
    // round trip.
    let left = eventually(Duration::from_millis(500), async || {
        line_of(&store, &lock).await.is_empty()
    })
    .await;
    assert!(
        left,
        "the line still holds {:?}",
        line_of(&store, &lock).await
    );
    held.release().await.unwrap();
    here.shutdown().await;
    there.shutdown().await;
}
