//! The conformance suite on the embedded [`MemoryStore`], under Tokio's paused clock: every
//! timing (expiry, cadence, deadlines, backoff) runs exactly and instantly.

#[macro_use]
mod common;

use async_trait::async_trait;
use common::Backend;
use mongolock::{LockName, MemoryStore};

struct Memory;

#[async_trait]
impl Backend for Memory {
    type Store = MemoryStore;

    async fn fresh(&self) -> MemoryStore {
        MemoryStore::new()
    }

    async fn peer(&self, store: &MemoryStore) -> MemoryStore {
        store.clone()
    }

    async fn delete_record(&self, store: &MemoryStore, name: &LockName) {
        store.remove(name);
    }
}

conformance_suite!(Memory, start_paused = true);

/// A grant whose answer comes back after its first renewal was due (a stalled store, or one
/// that applied the call at its restart) is given back and asked for again: a caller gets a
/// guard only with a useful part of its window left, never one told of its loss moments
/// later.
#[tokio::test(start_paused = true)]
async fn a_grant_answered_late_is_given_back_not_handed_out() {
    use std::time::Duration;

    // Renewals due after 1 s, the loss deadline at 2 s.
    let options = mongolock::LockOptions::default().with_lease_duration(Duration::from_secs(3));
    let (store, manager) = on_a_faulty_store(options.clone()).await;
    let lock = manager.lock("late").unwrap();
    // Answered when the first renewal is due, and after.
    for stall in [options.renew_interval(), Duration::from_millis(1_500)] {
        store.stall(stall);
        let calls = store.acquire_calls();
        let acquiring = tokio::spawn({
            let lock = lock.clone();
            async move { lock.acquire().await }
        });
        while store.acquire_calls() == calls {
            tokio::task::yield_now().await;
        }
        // Only the first attempt stalls: it is applied, and answered, `stall` after it was
        // sent.
        store.heal();
        let guard = acquiring.await.unwrap().unwrap();
        assert!(
            guard.last_renewed().elapsed() < options.renew_interval(),
            "a guard was handed out {:?} into its window",
            guard.last_renewed().elapsed()
        );
        assert!(
            store.acquire_calls() >= calls + 2,
            "the grant answered after {stall:?} was not given back"
        );
        guard.release().await.unwrap();
    }
    manager.shutdown().await;
}

/// A manager with `options` on a fresh memory store behind a [`FaultyStore`], and that
/// store, to inject faults with.
///
/// [`FaultyStore`]: mongolock::testing::FaultyStore
async fn on_a_faulty_store(
    options: mongolock::LockOptions,
) -> (
    mongolock::testing::FaultyStore<MemoryStore>,
    mongolock::LockManager,
) {
    let store = mongolock::testing::FaultyStore::new(MemoryStore::new());
    let manager = common::start_with(store.clone(), options).await;
    (store, manager)
}

/// Two managers on one memory store with 3 s leases; the first reaches it through a
/// [`FaultyStore`](mongolock::testing::FaultyStore).
async fn managers_beside_a_faulty_store() -> (
    mongolock::testing::FaultyStore<MemoryStore>,
    mongolock::LockManager,
    mongolock::LockManager,
) {
    use std::time::Duration;

    let options = mongolock::LockOptions::default().with_lease_duration(Duration::from_secs(3));
    let memory = MemoryStore::new();
    let store = mongolock::testing::FaultyStore::new(memory.clone());
    let manager = mongolock::LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let elsewhere = mongolock::LockManager::start(memory, options)
        .await
        .unwrap();
    (store, manager, elsewhere)
}

/// A grant whose caller gave up: the store applies the attempt `stalled` after it was
/// sent, then fails every call from `fail_at` for `fail_for`. With a 3 s lease the name must
/// be free `free_after` the store recovered, well before the lease would have expired: the
/// give-back was tried again.
async fn given_up_grant_is_free_after_the_outage(
    name: &str,
    stalled: u64,
    (fail_at, fail_for): (u64, u64),
    free_after: u64,
) {
    use std::time::Duration;

    let (store, manager, elsewhere) = managers_beside_a_faulty_store().await;
    store.stall(Duration::from_millis(stalled));
    let gave_up = manager
        .lock(name)
        .unwrap()
        .acquire_timeout(Duration::from_millis(100))
        .await;
    assert!(gave_up.is_err(), "the stalled acquisition did not time out");
    tokio::time::sleep(Duration::from_millis(fail_at - 100)).await;
    store.fail();
    tokio::time::sleep(Duration::from_millis(fail_for)).await;
    store.heal();
    tokio::time::sleep(Duration::from_millis(free_after)).await;
    assert!(
        stalled + 3000 > fail_at + fail_for + free_after,
        "the check comes after the lease's own expiry: it proves nothing"
    );
    let taken = elsewhere.lock(name).unwrap().try_acquire().await.unwrap();
    assert!(
        taken.is_some(),
        "{name}: the grant nobody took is still held after the store recovered"
    );
    drop(taken);
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// Answered before its first renewal is due, the grant reaches the actor with nobody to
/// take it; its release fails from 0.1 s to 0.8 s.
#[tokio::test(start_paused = true)]
async fn a_given_up_grant_is_given_back_once_the_store_recovers() {
    given_up_grant_is_free_after_the_outage("late", 500, (100, 700), 700).await;
}

/// Answered at 1.5 s, after its first renewal was due (lease 3 s): too late to use, the
/// actor drops it, and the give-back that drop starts fails until 2.3 s.
#[tokio::test(start_paused = true)]
async fn a_grant_answered_too_late_to_use_is_given_back_once_the_store_recovers() {
    given_up_grant_is_free_after_the_outage("stale", 1500, (1300, 1000), 1000).await;
}

/// Applied at 2.5 s, after the runtime's own call timeout (the renew deadline, 2 s): the
/// call's task gives it back when the answer comes, and that fails until 3.3 s.
#[tokio::test(start_paused = true)]
async fn a_grant_applied_after_the_call_timeout_is_given_back_once_the_store_recovers() {
    given_up_grant_is_free_after_the_outage("later", 2500, (2300, 1000), 1000).await;
}

/// A release the store fails transiently is tried again until the lease would have expired:
/// the name is free soon after the store recovers, and the caller hears of the failure.
#[tokio::test(start_paused = true)]
async fn a_release_that_fails_is_tried_again_once_the_store_recovers() {
    use std::time::Duration;

    let (store, manager, elsewhere) = managers_beside_a_faulty_store().await;
    let guard = manager.lock("flaky").unwrap().acquire().await.unwrap();
    store.fail();
    assert!(
        guard.release().await.is_err(),
        "a release the store failed was reported as done"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    store.heal();
    // The lease, extended at the latest just before the release, would expire about 3 s
    // later; a second after the store recovers it is free.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let taken = elsewhere
        .lock("flaky")
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "the released lock is still held after the store recovered"
    );
    drop(taken);
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// The retries of a failed release stop once the lease would have expired by itself: a
/// store that never recovers is not called for ever.
#[tokio::test(start_paused = true)]
async fn a_release_the_store_keeps_failing_is_given_up_with_its_lease() {
    use std::time::Duration;

    let options = mongolock::LockOptions::default().with_lease_duration(Duration::from_secs(3));
    let (store, manager) = on_a_faulty_store(options).await;
    let guard = manager.lock("down").unwrap().acquire().await.unwrap();
    store.fail();
    let before = store.calls();
    assert!(guard.release().await.is_err());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let retried = store.calls() - before;
    assert!(retried > 1, "the failed release was not tried again");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        store.calls() - before,
        retried,
        "the release was still retried after its lease would have expired"
    );
    manager.shutdown().await;
}

/// A process paused past its lease with a local waiter queued: when it runs again, the
/// holder's release (already queued) reaches the actor before the deadline's own message.
/// The hold is past its deadline — another process has meanwhile taken the expired lock —
/// so the release is a loss, and the waiter is not handed the lease (with an old token)
/// without a store call.
#[tokio::test(start_paused = true)]
async fn a_release_after_a_pause_past_the_deadline_is_a_loss_not_a_local_pass() {
    use futures::FutureExt;
    use mongolock::{LockError, LockManager, LossReason};
    use std::time::Duration;

    let store = MemoryStore::new();
    let options = common::fast_options();
    let manager = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let lock = manager.lock("paused").unwrap();
    let holder = lock.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await; // the waiter is queued

    // The pause: the release is on its way while the clock jumps past the lease; nothing of
    // this process runs until the other process has taken the expired lock.
    let release = tokio::spawn(holder.release());
    let _ = tokio::time::advance(options.lease_duration() * 2).now_or_never();
    let other_token = taken_by_another_process(&store, &LockName::new("paused").unwrap()).await;

    assert!(matches!(
        release.await.unwrap(),
        Err(LockError::Lost(LossReason::DeadlineExceeded))
    ));
    // The waiter gets the lock only once the other process' lease ends, and with a larger
    // token than that process was given.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter got the lock another process holds"
    );
    let guard = waiter.await.unwrap().unwrap();
    assert!(guard.token() > other_token);
    manager.shutdown().await;
}

/// A process paused after the runtime handed a grant to its caller's channel and before the
/// caller took it: by then the loss deadline has passed and another process may hold the
/// expired lock. `acquire` lets such a grant go and waits again; it never returns it.
#[tokio::test(start_paused = true)]
async fn a_grant_taken_after_a_pause_past_its_deadline_is_let_go_and_asked_again() {
    let (manager, lock, other_token) = paused_past_the_deadline_while_granted(|lock| {
        Box::pin(async move { lock.acquire().await.map(Some) })
    })
    .await;
    let guard = lock.unwrap().expect("acquire waits for the lock");
    assert!(
        guard.token() > other_token,
        "acquire returned token {} while another process held {other_token}",
        guard.token()
    );
    manager.shutdown().await;
}

/// The same for `try_acquire`: a grant taken past its deadline is not won.
#[tokio::test(start_paused = true)]
async fn a_try_taken_after_a_pause_past_its_deadline_is_not_won() {
    let (manager, outcome, _) = paused_past_the_deadline_while_granted(|lock| {
        Box::pin(async move { lock.try_acquire().await })
    })
    .await;
    assert!(
        outcome.unwrap().is_none(),
        "try_acquire returned a grant another process had taken over"
    );
    manager.shutdown().await;
}

type Acquiring = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<Option<mongolock::LockGuard>, mongolock::LockError>>,
    >,
>;

/// Starts `acquire` on a fresh manager, lets the store grant and the runtime hand the guard
/// on, then pauses the whole process past the lease (the caller has not taken the guard)
/// while another process takes the expired lock: the manager, what `acquire` returned, and
/// the other process's token.
async fn paused_past_the_deadline_while_granted(
    acquire: impl FnOnce(mongolock::Lock) -> Acquiring,
) -> (
    mongolock::LockManager,
    Result<Option<mongolock::LockGuard>, mongolock::LockError>,
    u64,
) {
    use futures::FutureExt;
    use mongolock::LockManager;
    use mongolock::store::LockStore;

    let store = MemoryStore::new();
    let options = common::fast_options();
    let manager = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let name = LockName::new("paused-caller").unwrap();
    let mut acquiring = acquire(manager.lock(name.as_str()).unwrap());
    assert!(futures::poll!(acquiring.as_mut()).is_pending());
    // The store grants and the runtime hands the guard on; this task does not take it yet.
    while store.inspect(&name).await.unwrap().is_none() {
        tokio::task::yield_now().await;
    }
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }

    // The pause: the clock jumps past the lease, and another process takes the expired lock.
    let _ = tokio::time::advance(options.lease_duration() * 2).now_or_never();
    let other_token = taken_by_another_process(&store, &name).await;
    (manager, acquiring.await, other_token)
}

/// The same for a lock passed on within the process: a waiter that takes the passed guard
/// only after a pause past the lease's loss deadline lets it go and asks again — in its own
/// place, so a task of its process that asked after it does not go first (queued behind
/// it, the later task got the next grant).
#[tokio::test(start_paused = true)]
async fn a_local_pass_taken_after_a_pause_past_its_deadline_is_let_go_and_asked_again_in_place() {
    use futures::FutureExt;
    use mongolock::LockManager;

    let store = MemoryStore::new();
    let options = common::fast_options();
    let manager = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let name = LockName::new("paused-place").unwrap();
    let lock = manager.lock(name.as_str()).unwrap();
    let held = lock.acquire().await.unwrap();
    let mut first = std::pin::pin!(lock.acquire());
    assert!(futures::poll!(first.as_mut()).is_pending());
    // Passed on locally: the guard waits in the channel of a task that does not take it yet.
    held.release().await.unwrap();
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    // Later by the clock too: tasks asking at the same instant have no order to keep.
    tokio::time::advance(std::time::Duration::from_millis(1)).await;
    let mut second = std::pin::pin!(lock.acquire());
    assert!(futures::poll!(second.as_mut()).is_pending());

    let _ = tokio::time::advance(options.lease_duration() * 2).now_or_never();
    let other_token = taken_by_another_process(&store, &name).await;
    tokio::select! {
        biased;
        guard = &mut first => {
            let guard = guard.unwrap();
            assert!(
                guard.token() > other_token,
                "acquire returned token {} while another process held {other_token}",
                guard.token()
            );
            assert!(futures::poll!(second.as_mut()).is_pending());
        }
        guard = &mut second => panic!("the task that asked later got the lock first: {:?} other {other_token}", guard.map(|g| g.token())),
    }
    manager.shutdown().await;
}

/// Another process takes `name`, whose lease has expired, for a minute: its token.
async fn taken_by_another_process(store: &MemoryStore, name: &LockName) -> u64 {
    use mongolock::HolderId;
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
    use std::time::Duration;

    let other = AcquireRequest::new(
        name.clone(),
        LeaseId::new(),
        HolderId::generate(),
        Duration::from_secs(60),
    );
    let AcquireOutcome::Acquired { token, .. } = store.try_acquire(&other).await.unwrap() else {
        panic!("the expired lock was not free for another process");
    };
    token
}

/// A store without a bulk write — it keeps the trait's one-by-one `extend_many` — whose
/// every call takes 20 ms. Its renewals must be sent as separate calls, side by side, each
/// under its own timeout: sent as one batch under one timeout, 600 leases took 12 s per
/// batch against 10 s left before their deadlines, and every lock was lost.
#[tokio::test(start_paused = true)]
async fn renewals_on_a_store_without_bulk_writes_are_not_batched_into_losses() {
    use async_trait::async_trait;
    use mongolock::LockRecord;
    use mongolock::store::{
        AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseKey, ReleaseOutcome,
    };
    use mongolock::{LockManager, LockOptions, StoreError, store::LockStore};
    use std::time::Duration;

    struct Slow(MemoryStore);

    const CALL: Duration = Duration::from_millis(20);

    #[async_trait]
    impl LockStore for Slow {
        async fn try_acquire(&self, r: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
            tokio::time::sleep(CALL).await;
            self.0.try_acquire(r).await
        }
        async fn extend(&self, r: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
            tokio::time::sleep(CALL).await;
            self.0.extend(r).await
        }
        async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
            tokio::time::sleep(CALL).await;
            self.0.release(key).await
        }
        async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
            self.0.inspect(name).await
        }
    }

    let options = LockOptions::default();
    let manager = LockManager::start(Slow(MemoryStore::new()), options.clone())
        .await
        .unwrap();
    let acquisitions = (0..600).map(|i| {
        let lock = manager.lock(format!("lease-{i}")).unwrap();
        async move { lock.acquire().await.unwrap() }
    });
    let guards = futures::future::join_all(acquisitions).await;
    tokio::time::sleep(options.renew_interval() * 3 + Duration::from_secs(1)).await;
    let lost = guards.iter().filter(|guard| guard.loss().is_some()).count();
    assert_eq!(lost, 0, "{lost} of 600 leases lost over three cadences");
    drop(guards);
    manager.shutdown().await;
}

/// A bound actor that takes long to start must not hold up the loss report: the deposed
/// leader publishes `Deposed` by its deadline, before another candidate can be elected —
/// not once the slow start has finished.
#[tokio::test(start_paused = true)]
async fn deposed_is_published_on_time_while_the_bound_actor_starts() {
    use mongolock::ElectionEvent;
    use std::time::Duration;
    use tokio::time::Instant;

    let options = short_election();
    let (faulty, a, b) = two_managers().await;
    let leader = a.election("scheduler", options.clone()).unwrap();
    let mut events = leader.subscribe();
    leader
        .run_while_leader(bound_actor_starting_in(Duration::from_secs(30)))
        .unwrap();
    next(&mut events, |e| matches!(e, ElectionEvent::Elected { .. })).await;
    let elected = Instant::now();
    faulty.hang(); // renewals stop being confirmed
    let other = b.election("scheduler", options.clone()).unwrap();
    let mut other_events = other.subscribe();
    other.campaign_in_background().unwrap();
    next(&mut events, |e| matches!(e, ElectionEvent::Deposed { .. })).await;
    let deposed = elected.elapsed();
    assert!(
        deposed <= options.renew_deadline(),
        "Deposed came {deposed:?} after the election; the renew deadline is {:?}",
        options.renew_deadline()
    );
    next(&mut other_events, |e| {
        matches!(e, ElectionEvent::Elected { .. })
    })
    .await;
    assert!(
        elected.elapsed() >= deposed,
        "elected before the leader was deposed"
    );
    drop((leader, other));
    a.shutdown().await;
    b.shutdown().await;
}

/// A shut-down manager sends nothing more to its store, even while election handles live,
/// and its tasks are gone: the campaign actor and the leader observer stop with it.
#[tokio::test(start_paused = true)]
async fn a_shut_down_manager_keeps_no_election_running() {
    use mongolock::testing::FaultyStore;
    use mongolock::{ElectionOptions, LockError, LockManager, LockOptions};
    use std::time::Duration;

    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let store = FaultyStore::new(MemoryStore::new());
    let baseline = alive();
    let manager = LockManager::start(store.clone(), LockOptions::default())
        .await
        .unwrap();
    let election = manager
        .election("scheduler", ElectionOptions::default())
        .unwrap();
    election.campaign().await.unwrap();
    manager.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let calls = store.calls();
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        store.calls(),
        calls,
        "the election kept reading the store after shutdown"
    );
    assert!(matches!(election.leader().await, Err(LockError::Shutdown)));
    // What is left: the memory store's sweeper, started by the manager.
    assert_eq!(alive(), baseline + 1, "tasks left running after shutdown");
    drop(election);
}

/// A `try_acquire` whose grant arrives after its caller left, with a waiter queued: the
/// lease passes to the waiter, whose hold is renewed and timed like any other (the hold's
/// timer was armed only for a delivered grant, so this hold was never renewed and its
/// holder never told when the lease expired under it).
#[tokio::test(start_paused = true)]
async fn a_grant_passed_on_after_its_caller_left_is_renewed() {
    use std::time::Duration;

    let options = common::fast_options();
    let (store, manager) = on_a_faulty_store(options.clone()).await;
    let lock = manager.lock("passed").unwrap();
    store.stall(Duration::from_millis(200));
    let trying = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    trying.abort(); // the caller leaves before the grant arrives
    let guard = waiter.await.unwrap().unwrap();
    store.heal();
    tokio::time::sleep(options.lease_duration() * 3).await;
    assert_eq!(guard.loss(), None, "the passed-on hold was lost");
    let record = lock.inspect().await.unwrap().unwrap();
    assert!(
        record.holder().is_some(),
        "the lease expired on the store while its holder was never told"
    );
    guard.release().await.unwrap();
    manager.shutdown().await;
}

/// A grant whose waiter left while its attempt was in flight goes on only to a waiter whose
/// handle asks for the same lease terms: a handle's guard keeps that handle's lease length
/// and loss margin. The waiter queued behind it on a handle with a longer lease used to get
/// the first one's short lease.
#[tokio::test(start_paused = true)]
async fn a_grant_whose_waiter_left_goes_only_to_a_waiter_on_its_terms() {
    use std::time::Duration;

    let short = common::fast_options();
    let long = short
        .clone()
        .with_lease_duration(short.lease_duration() * 4);
    let (store, manager) = on_a_faulty_store(short.clone()).await;
    let on_short = manager.lock("terms").unwrap();
    let on_long = manager.lock_with("terms", long.clone()).unwrap();
    store.stall(Duration::from_millis(200));
    let first = tokio::spawn({
        let lock = on_short.clone();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = tokio::spawn(async move { on_long.acquire().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.abort(); // leaves while the attempt made for it is in flight
    let guard = second.await.unwrap().unwrap();
    store.heal();
    let record = on_short.inspect().await.unwrap().unwrap();
    let left = record.expires_in().expect("held");
    assert!(
        left > short.lease_duration(),
        "the guard of a handle with a {:?} lease holds a lease of {left:?} left",
        long.lease_duration()
    );
    guard.release().await.unwrap();
    manager.shutdown().await;
}

/// A permit granted to a waiter that left while its attempt was out goes to no waiter that
/// asked after the attempt was sent: meanwhile another grant of the name, issued after it,
/// may have been held here, and the later waiter would hold a smaller token than one held
/// before it asked (the fault checker's token order caught it). It is handed over through
/// the store instead, for a later token.
#[tokio::test(start_paused = true)]
async fn a_grant_whose_waiter_left_goes_to_no_one_who_asked_after_it_was_sent() {
    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    let permits = manager.semaphore("sent", 2).unwrap();
    store.stall(Duration::from_millis(200));
    let first = tokio::spawn({
        let permits = permits.clone();
        async move { permits.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.abort(); // leaves while the attempt made for it is in flight
    let later = tokio::spawn({
        let permits = permits.clone();
        async move { permits.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.heal();
    let guard = later.await.unwrap().unwrap();
    assert_eq!(
        store.acquire_calls() + store.hand_over_calls(),
        2,
        "the later waiter took the grant of an attempt sent before it asked"
    );
    guard.release().await.unwrap();
    manager.shutdown().await;
}

/// A deposed leader keeps the loss margin to stop in, as a lock holder does: without a
/// bound actor (its subscribers cannot say when they have stopped) the next candidate is
/// elected no earlier than `lease − renew deadline` after `Deposed`; with one, as soon as
/// that actor is gone. The campaign used to drop the lost guard at once, freeing the lease
/// while the deposed leader's work still ran.
#[tokio::test(start_paused = true)]
async fn a_deposed_leader_keeps_its_margin_until_its_work_has_stopped() {
    use mongolock::ElectionEvent;
    use std::time::Duration;
    use tokio::time::Instant;

    let options = short_election().with_lease_duration(Duration::from_millis(3_000));
    let margin = options.lease_duration() - options.renew_deadline();
    // The deposed candidate resigns, or its manager shuts down (the campaign then ends
    // with the lost term's guard still in its keeping).
    for (bound, shut_down) in [(false, false), (true, false), (false, true)] {
        let (faulty, a, b) = two_managers().await;
        let leader = a.election("scheduler", options.clone()).unwrap();
        let mut events = leader.subscribe();
        if bound {
            leader
                .run_while_leader(bound_actor_starting_in(Duration::ZERO))
                .unwrap();
        }
        leader.campaign().await.unwrap();
        // Renewals hang until just before the deadline, then the store answers again.
        faulty.hang();
        tokio::time::sleep(Duration::from_millis(800)).await;
        faulty.heal();
        let other = b.election("scheduler", options.clone()).unwrap();
        let mut other_events = other.subscribe();
        other.campaign_in_background().unwrap();
        next(&mut events, |e| matches!(e, ElectionEvent::Deposed { .. })).await;
        let deposed = Instant::now();
        // The deposed candidate stops campaigning, so the other one is next.
        if shut_down {
            a.shutdown().await;
        } else {
            let _ = leader.resign().await;
        }
        next(&mut other_events, |e| {
            matches!(e, ElectionEvent::Elected { .. })
        })
        .await;
        let after = deposed.elapsed();
        if bound {
            assert!(
                after < margin,
                "with its bound actor gone the lease was kept {after:?}"
            );
        } else {
            assert!(
                after >= margin,
                "the next leader was elected {after:?} after Deposed (shut down: {shut_down}); \
                 the margin is {margin:?}"
            );
        }
        drop((leader, other));
        a.shutdown().await;
        b.shutdown().await;
    }
}

/// A campaign waiting for its term when its manager shuts down ends with
/// `LockError::Shutdown`, as documented (a resignation's is `CampaignStopped`).
#[tokio::test(start_paused = true)]
async fn a_campaign_waiting_at_shutdown_ends_with_shutdown() {
    use mongolock::LockError;

    let (_faulty, a, b) = two_managers().await;
    let leader = b.election("scheduler", short_election()).unwrap();
    leader.campaign().await.unwrap();
    let waiting = a.election("scheduler", short_election()).unwrap();
    let campaign = tokio::spawn(async move { waiting.campaign().await });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!campaign.is_finished(), "the lock is the other candidate's");
    a.shutdown().await;
    let ended = campaign.await.unwrap();
    assert!(matches!(ended, Err(LockError::Shutdown)), "{ended:?}");
    drop(leader);
    b.shutdown().await;
}

/// Election timings short enough for a test: lease 1.5 s, renew deadline 0.9 s.
fn short_election() -> mongolock::ElectionOptions {
    use std::time::Duration;
    mongolock::ElectionOptions::default()
        .with_lease_duration(Duration::from_millis(1_500))
        .with_renew_deadline(Duration::from_millis(900))
        .with_retry_period(Duration::from_millis(250))
}

/// Two managers on one memory store, the first behind a fault switch.
async fn two_managers() -> (
    mongolock::testing::FaultyStore<MemoryStore>,
    mongolock::LockManager,
    mongolock::LockManager,
) {
    use mongolock::{LockManager, LockOptions};
    let store = MemoryStore::new();
    let faulty = mongolock::testing::FaultyStore::new(store.clone());
    let a = LockManager::start(faulty.clone(), LockOptions::default())
        .await
        .unwrap();
    let b = LockManager::start(store, LockOptions::default())
        .await
        .unwrap();
    (faulty, a, b)
}

/// Waits (a minute at most) for the next event that `wanted` accepts.
async fn next(
    events: &mut tokio::sync::broadcast::Receiver<mongolock::ElectionEvent>,
    wanted: fn(&mongolock::ElectionEvent) -> bool,
) {
    let waited = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            match events.recv().await {
                Ok(event) if wanted(&event) => return,
                Ok(_) => {}
                Err(error) => panic!("the events ended: {error}"),
            }
        }
    });
    waited
        .await
        .expect("the event did not come within a minute");
}

/// A `run_while_leader` spawner of an actor whose start takes `delay`.
fn bound_actor_starting_in(
    delay: std::time::Duration,
) -> impl Fn(
    u64,
    ractor::ActorCell,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ractor::ActorCell, ractor::SpawnErr>> + Send>,
> + Send
+ Sync
+ 'static {
    move |_, supervisor| {
        Box::pin(async move {
            let (actor, _) =
                ractor::Actor::spawn_linked(None, StartingIn, delay, supervisor).await?;
            Ok(actor.get_cell())
        })
    }
}

/// A bound actor whose `pre_start` takes a while (connecting, loading state).
struct StartingIn;

impl ractor::Actor for StartingIn {
    type Msg = ();
    type State = ();
    type Arguments = std::time::Duration;

    async fn pre_start(
        &self,
        _: ractor::ActorRef<()>,
        delay: std::time::Duration,
    ) -> Result<(), ractor::ActorProcessingErr> {
        tokio::time::sleep(delay).await;
        Ok(())
    }
}

/// A bound actor that reports its term once started, after starting for the time its
/// script gives that start (counted from 1), and stops itself at once if the script says so.
struct Scripted;

/// What a [`Scripted`] actor is told: its term, how long its start takes, whether it stops
/// itself once started, and where it reports.
type ScriptedArgs = (
    u64,
    std::time::Duration,
    bool,
    tokio::sync::mpsc::UnboundedSender<u64>,
);

impl ractor::Actor for Scripted {
    type Msg = ();
    type State = ();
    type Arguments = ScriptedArgs;

    async fn pre_start(
        &self,
        myself: ractor::ActorRef<()>,
        (term, delay, stops, started): ScriptedArgs,
    ) -> Result<(), ractor::ActorProcessingErr> {
        tokio::time::sleep(delay).await;
        let _ = started.send(term);
        if stops {
            myself.stop(Some("its work is done".to_owned()));
        }
        Ok(())
    }
}

/// What a `run_while_leader` spawner returns: the bound actor, once spawned.
type BoundSpawning = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ractor::ActorCell, ractor::SpawnErr>> + Send>,
>;

/// A `run_while_leader` spawner of [`Scripted`] actors: the n-th start (from 1) takes
/// `delay(n)` and stops itself if `stops(n)`; each started actor sends its term to the
/// returned receiver.
fn scripted_bound_actors(
    delay: fn(usize) -> std::time::Duration,
    stops: fn(usize) -> bool,
) -> (
    impl Fn(u64, ractor::ActorCell) -> BoundSpawning + Send + Sync + 'static,
    tokio::sync::mpsc::UnboundedReceiver<u64>,
) {
    let (report, started) = tokio::sync::mpsc::unbounded_channel();
    let starts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let spawn = move |term, supervisor| {
        let n = starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let args = (term, delay(n), stops(n), report.clone());
        Box::pin(async move {
            let (actor, _) = ractor::Actor::spawn_linked(None, Scripted, args, supervisor).await?;
            if stops(n) {
                // Its end reaches the campaign before its start does.
                let _ = actor.get_cell().wait(None).await;
            }
            Ok(actor.get_cell())
        }) as BoundSpawning
    };
    (spawn, started)
}

/// A term lost while its bound actor still starts: the next term gets its own actor once
/// that late one has finished starting (and been stopped). It used to get none: the late
/// start still counted as the running one.
#[tokio::test(start_paused = true)]
async fn a_term_begun_while_the_last_ones_actor_started_gets_its_own() {
    use mongolock::ElectionEvent;
    use std::time::Duration;

    let (faulty, a, _b) = two_managers().await;
    let leader = a.election("scheduler", short_election()).unwrap();
    let mut events = leader.subscribe();
    let (spawn, mut started) = scripted_bound_actors(
        |n| Duration::from_secs(if n == 1 { 5 } else { 0 }),
        |_| false,
    );
    leader.run_while_leader(spawn).unwrap();
    next(&mut events, |e| matches!(e, ElectionEvent::Elected { .. })).await;
    faulty.hang(); // the first term is lost while its actor starts
    next(&mut events, |e| matches!(e, ElectionEvent::Deposed { .. })).await;
    faulty.heal();
    next(&mut events, |e| matches!(e, ElectionEvent::Elected { .. })).await;
    let terms = leader.leader().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), started.recv()).await;
    let second = tokio::time::timeout(Duration::from_secs(60), started.recv()).await;
    assert!(
        matches!((first, second), (Ok(Some(one)), Ok(Some(two))) if two > one),
        "the second term's actor never started (leader {terms:?})"
    );
    drop(leader);
    a.shutdown().await;
}

/// A bound actor that ends as soon as it has started ends its term, like one that ends
/// later: the lock is handed over and the candidate campaigns again. Its end, reported
/// before its start was, used to be missed, and the term ran on with no actor.
#[tokio::test(start_paused = true)]
async fn a_bound_actor_that_ends_as_it_starts_ends_its_term() {
    use mongolock::ElectionEvent;
    use std::time::Duration;

    let (_faulty, a, _b) = two_managers().await;
    let leader = a.election("scheduler", short_election()).unwrap();
    let mut events = leader.subscribe();
    let (spawn, mut started) = scripted_bound_actors(|_| Duration::ZERO, |n| n == 1);
    leader.run_while_leader(spawn).unwrap();
    next(&mut events, |e| matches!(e, ElectionEvent::Elected { .. })).await;
    next(&mut events, |e| matches!(e, ElectionEvent::Elected { .. })).await;
    let first = started.recv().await;
    let second = started.recv().await;
    assert!(
        matches!((first, second), (Some(one), Some(two)) if two > one),
        "{first:?} then {second:?}"
    );
    drop(leader);
    a.shutdown().await;
}

/// A warning before a loss: when renewals start failing the guard, its loss signal, a
/// background lock's and an election's events and `Election::health` say the hold is at
/// risk and how long is left; when a renewal is confirmed again, that it recovered.
#[tokio::test(start_paused = true)]
async fn failing_renewals_warn_before_the_loss_and_recover() {
    use mongolock::{ElectionEvent, ElectionHealth, LockEvent};
    use std::time::Duration;
    use tokio::time::Instant;

    let options = common::fast_options();
    let (store, manager) = on_a_faulty_store(options.clone()).await;
    let guard = manager.lock("orders").unwrap().acquire().await.unwrap();
    let background = manager.lock("compaction").unwrap().background().unwrap();
    let mut lock_events = background.subscribe();
    background.wait_acquired().await.unwrap();
    let election = manager.election("scheduler", short_election()).unwrap();
    let mut election_events = election.subscribe();
    election.campaign().await.unwrap();
    assert!(guard.risk().is_none());

    store.fail(); // renewals now fail at once
    let started = Instant::now();
    let risk = guard.at_risk().await;
    // The next renewal is due within one interval (plus the renewer's 2 ms of batching).
    let warned_after = started.elapsed();
    assert!(
        warned_after <= options.renew_interval() + Duration::from_millis(10),
        "warned {warned_after:?} after the store began failing"
    );
    assert!(risk.time_left() > Duration::ZERO && risk.time_left() < options.renew_deadline());
    assert!(
        risk.last_error()
            .is_some_and(|error| error.contains("injected failure"))
    );
    assert_eq!(guard.loss(), None, "at risk is not lost");
    let warned = |event: &LockEvent| matches!(event, LockEvent::AtRisk { .. });
    loop {
        if warned(&lock_events.recv().await.unwrap()) {
            break;
        }
    }
    next(&mut election_events, |e| {
        matches!(e, ElectionEvent::AtRisk { .. })
    })
    .await;
    assert!(matches!(
        election.health(Duration::from_secs(60)).await.unwrap(),
        ElectionHealth::AtRisk { .. }
    ));

    store.heal();
    tokio::time::timeout(options.renew_deadline(), guard.loss_signal().recovered())
        .await
        .expect("no recovery after the store answered again");
    assert!(guard.risk().is_none());
    loop {
        if matches!(
            lock_events.recv().await.unwrap(),
            LockEvent::Recovered { .. }
        ) {
            break;
        }
    }
    next(&mut election_events, |e| {
        matches!(e, ElectionEvent::Recovered { .. })
    })
    .await;
    assert_eq!(guard.loss(), None);
    drop(guard);
    manager.shutdown().await;
}

/// A multi-lock warns before it is lost, as a single guard does: when its members'
/// renewals start failing, its guard and its one signal say it is at risk (with the
/// member deadline that comes first), that it recovered once renewals are confirmed again,
/// and, if they never are, it is lost at that deadline.
#[tokio::test(start_paused = true)]
async fn a_multi_lock_warns_before_a_member_is_lost_and_recovers() {
    use mongolock::{LockGuard, LossReason};
    use std::time::Duration;
    use tokio::time::timeout;

    let options = common::fast_options();
    let (store, manager) = on_a_faulty_store(options.clone()).await;
    let both = manager
        .multi_lock(["member-a", "member-b"])
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let signal = both.loss_signal();
    assert!(both.risk().is_none() && signal.risk().is_none());

    store.fail(); // renewals now fail at once
    // The next renewal is due within one interval (plus the renewer's 2 ms of batching).
    let warned_within = options.renew_interval() + Duration::from_millis(10);
    let risk = timeout(warned_within, both.at_risk())
        .await
        .expect("the multi-lock never warned while its renewals failed");
    assert_eq!(both.loss(), None, "at risk is not lost");
    let soonest = both
        .guards()
        .iter()
        .filter_map(LockGuard::risk)
        .map(|risk| risk.deadline())
        .min();
    assert_eq!(
        Some(risk.deadline()),
        soonest,
        "not the most urgent warning"
    );
    assert_eq!(both.risk().map(|risk| risk.deadline()), soonest);
    assert!(
        risk.last_error()
            .is_some_and(|error| error.contains("injected failure"))
    );

    store.heal();
    timeout(options.renew_deadline(), signal.recovered())
        .await
        .expect("no recovery after the store answered again");
    assert!(both.risk().is_none() && signal.risk().is_none());
    assert_eq!(both.loss(), None);

    store.fail();
    let risk = timeout(warned_within, signal.at_risk())
        .await
        .expect("no warning the second time");
    let reason = timeout(risk.time_left() + common::SLACK, both.lost())
        .await
        .expect("not lost at the warned deadline");
    assert!(
        matches!(reason, LossReason::StoreErrors { .. }),
        "lost with {reason:?}"
    );
    assert!(signal.risk().is_none(), "still at risk once lost");
    store.heal();
    manager.shutdown().await;
}

/// A store that stops answering (a hung connection) warns before the loss, as a failing
/// one does: a renewal that has not come back by the at-risk point (halfway from its sending
/// to the loss deadline) puts a mutex's guard, a permit's and a multi-lock's at risk while
/// their loss deadline is still well ahead, and the
/// at-risk gauge counts them; only at the deadline are they lost. A renewal that comes
/// back in time after all clears the warning.
#[tokio::test(start_paused = true)]
async fn a_store_that_stops_answering_warns_before_the_loss() {
    use futures::FutureExt;

    use mongolock::{LockGuard, LossReason};
    use tokio::time::{Instant, timeout};

    let options = common::fast_options();
    let (store, manager) = on_a_faulty_store(options.clone()).await;
    let mutex = manager.lock("hung-mutex").unwrap().acquire().await.unwrap();
    let permit = manager
        .semaphore("hung-permits", 2)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let both = manager
        .multi_lock(["hung-a", "hung-b"])
        .unwrap()
        .acquire()
        .await
        .unwrap();

    store.hang(); // renewals now go out and never come back
    let hung_at = Instant::now();
    let check = |what: &str, risk: mongolock::AtRisk, lost: Option<LossReason>| {
        assert_eq!(lost, None, "{what}: lost before (or instead of) a warning");
        // Halfway from the renewal (at most one interval after the grant) to the deadline.
        assert!(
            risk.time_left() >= (options.renew_deadline() - options.renew_interval()) / 2,
            "{what}: warned only {:?} before the loss",
            risk.time_left()
        );
        assert_eq!(
            risk.last_error(),
            None,
            "{what}: a silent store reports no error"
        );
    };
    let within = options.renew_deadline();
    let risk = timeout(within, mutex.at_risk())
        .await
        .expect("the mutex was never warned while its store hung");
    check("mutex", risk, mutex.loss());
    let risk = timeout(within, permit.at_risk())
        .await
        .expect("the permit was never warned while its store hung");
    check("permit", risk, permit.loss());
    let risk = timeout(within, both.at_risk())
        .await
        .expect("the multi-lock was never warned while its store hung");
    check("multi-lock", risk, both.loss());
    assert!(
        hung_at.elapsed() < options.renew_deadline(),
        "warned only at the deadline"
    );

    for (what, guard) in [("mutex", &mutex), ("permit", &permit)] {
        let reason = timeout(within, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{what}: not lost at the deadline"));
        assert_eq!(reason, LossReason::DeadlineExceeded, "{what}");
    }
    let reason = timeout(within, both.lost()).await.expect("multi-lock lost");
    assert_eq!(reason, LossReason::DeadlineExceeded);
    store.heal();

    // A renewal slow enough to warn that comes back in time clears the warning.
    let guard: LockGuard = manager.lock("slow").unwrap().acquire().await.unwrap();
    let slow = (options.renew_deadline() - options.renew_interval()) * 3 / 4;
    store.stall(slow);
    timeout(within, guard.at_risk())
        .await
        .expect("a renewal unanswered past the at-risk point did not warn");
    store.heal();
    timeout(within, guard.loss_signal().recovered())
        .await
        .expect("the late confirmation did not clear the warning");
    assert!(guard.risk().is_none());
    assert!(guard.lost().now_or_never().is_none(), "lost after all");
    drop(guard);
    manager.shutdown().await;
}

/// A renewal command stuck on its way (a hung connection) while the store answers other
/// calls again does not cost the lease: unanswered for half its time, the renewal is sent
/// again beside it, and the hold is warned, then renewed. If that copy fails (the store
/// not yet back), the retry goes beside the stuck command too. The stuck command's
/// timeout, after that, is out of date and warns nobody.
#[tokio::test(start_paused = true)]
async fn a_renewal_stuck_on_its_way_is_sent_again_beside_it() {
    use std::time::Duration;
    use tokio::time::timeout;

    let options = common::fast_options();
    for copy_fails in [false, true] {
        let (store, manager) = on_a_faulty_store(options.clone()).await;
        let mutex = manager
            .lock("stuck-mutex")
            .unwrap()
            .acquire()
            .await
            .unwrap();
        let permit = manager
            .semaphore("stuck-permits", 2)
            .unwrap()
            .acquire()
            .await
            .unwrap();
        let both = manager
            .multi_lock(["stuck-a", "stuck-b"])
            .unwrap()
            .acquire()
            .await
            .unwrap();
        let granted = tokio::time::Instant::now();

        // The first renewals (due within one interval) go out together, in one bulk
        // command, and never come back.
        let before = store.calls();
        store.hang();
        tokio::time::sleep(options.renew_interval() + options.renew_interval() / 4).await;
        assert_eq!(
            store.calls() - before,
            1,
            "the four renewals are stuck in one command"
        );
        if copy_fails {
            // The copies, sent halfway to the deadline, fail; the retries, a quarter
            // interval later, are answered.
            store.fail();
            let halfway = (options.renew_interval() + options.renew_deadline()) / 2;
            tokio::time::sleep_until(granted + halfway + Duration::from_millis(10)).await;
        }
        // Answered again, a little slowly (so the warning lasts long enough to be seen).
        store.stall(Duration::from_millis(50));

        let within = options.renew_deadline();
        let quiet = options.lease_duration();
        let warned_once = |what: &'static str, signal: mongolock::LossSignal| async move {
            timeout(within, signal.at_risk())
                .await
                .unwrap_or_else(|_| panic!("{what}: never warned while its renewal was stuck"));
            timeout(within, signal.recovered())
                .await
                .unwrap_or_else(|_| panic!("{what}: not renewed with the store answering"));
            // Past the deadline the stuck renewals had, and their command's timeout.
            assert!(
                timeout(quiet, signal.at_risk()).await.is_err(),
                "{what}: warned again after the lease was renewed"
            );
            assert_eq!(signal.loss(), None, "{what}: lost with the store answering");
        };
        tokio::join!(
            warned_once("mutex", mutex.loss_signal()),
            warned_once("permit", permit.loss_signal()),
            warned_once("multi-lock", both.loss_signal()),
        );
        drop((mutex, permit, both));
        manager.shutdown().await;
    }
}

/// A request of the other kind that arrives while this process's first attempt of one
/// kind is in flight is judged by the name's record, not by that attempt: here the record
/// is a semaphore held elsewhere, so the mistaken lock is refused by the record, and the
/// permit asked for meanwhile waits for that answer and is then granted.
#[tokio::test(start_paused = true)]
async fn a_request_of_the_other_kind_during_a_first_attempt_is_judged_by_the_record() {
    use mongolock::{LockError, LockKind};
    use std::time::Duration;
    use tokio::time::timeout;

    let options = common::fast_options();
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let held_elsewhere = elsewhere
        .semaphore("exports", 2)
        .unwrap()
        .acquire()
        .await
        .unwrap();

    // The mistaken lock's attempt is held on its way to the store...
    store.stall(Duration::from_secs(1));
    let lock = manager.lock("exports").unwrap();
    let mistaken = tokio::spawn(async move { lock.acquire().await });
    while store.acquire_calls() == 0 {
        tokio::task::yield_now().await;
    }
    store.heal();
    // ...while a permit is asked for on the same name.
    let semaphore = manager.semaphore("exports", 2).unwrap();
    let permit = timeout(Duration::from_secs(10), semaphore.acquire())
        .await
        .expect("the permit was never answered");
    assert!(
        permit.is_ok(),
        "the permit was refused by this process's first request, not by the record: {permit:?}"
    );
    assert!(
        matches!(
            mistaken.await.unwrap(),
            Err(LockError::KindMismatch {
                found: LockKind::Semaphore { permits: 2 },
                ..
            })
        ),
        "the mistaken lock is refused by the record"
    );
    drop((permit, held_elsewhere));
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// Once this process's waiting attempt has been refused by a record held elsewhere, the
/// record has answered for the kind this process uses the name as: a request of the other
/// kind is refused at once, not kept waiting behind it.
#[tokio::test(start_paused = true)]
async fn a_refusal_answers_for_the_kind_of_the_name() {
    use mongolock::{LockError, LockKind};
    use std::time::Duration;
    use tokio::time::timeout;

    let options = common::fast_options();
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let held_elsewhere = elsewhere.lock("reports").unwrap().acquire().await.unwrap();
    let lock = manager.lock("reports").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire().await });
    // The waiting lock's first attempt has come back refused.
    while store.acquire_calls() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let semaphore = manager.semaphore("reports", 2).unwrap();
    let answer = timeout(Duration::from_millis(100), semaphore.try_acquire())
        .await
        .expect("the permit waited behind this process's own lock");
    assert!(
        matches!(
            answer,
            Err(LockError::KindMismatch {
                found: LockKind::Mutex,
                ..
            })
        ),
        "a permit on a name the record says is a mutex: {answer:?}"
    );
    waiting.abort();
    drop(held_elsewhere);
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// A single try while this process holds a mutex (alone, or with a task of its own waiting
/// for it) answers from what the process knows: no store call, and the waiting task keeps its turn.
#[tokio::test(start_paused = true)]
async fn a_try_on_a_mutex_held_here_answers_without_the_store() {
    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    let lock = manager.lock("ledger").unwrap();
    let held = lock.acquire().await.unwrap();
    let calls = store.acquire_calls();
    assert!(lock.try_acquire().await.unwrap().is_none(), "held here");
    assert_eq!(store.acquire_calls(), calls, "the try went to the store");
    let queued = lock.clone();
    let waiting = tokio::spawn(async move { queued.acquire().await });
    tokio::task::yield_now().await;
    assert!(lock.try_acquire().await.unwrap().is_none(), "held here");
    assert_eq!(store.acquire_calls(), calls, "the try went to the store");
    drop(held);
    let next = waiting
        .await
        .unwrap()
        .expect("the waiting task gets the lock");
    drop(next);
    manager.shutdown().await;
}

type Reader = tokio::task::JoinHandle<Result<mongolock::LockGuard, mongolock::LockError>>;

/// The guard a spawned acquisition returns within `secs` seconds (paused time); `what`
/// says what failed to happen otherwise.
async fn granted_within(
    secs: u64,
    task: tokio::task::JoinHandle<Result<mongolock::LockGuard, mongolock::LockError>>,
    what: &str,
) -> mongolock::LockGuard {
    tokio::time::timeout(std::time::Duration::from_secs(secs), task)
        .await
        .expect(what)
        .expect("the acquiring task panicked")
        .expect("the acquisition failed")
}

/// A manager on a store that counts its calls (`store`), and one "elsewhere" on the same
/// memory store, whose calls are not counted.
async fn here_and_elsewhere(
    options: &mongolock::LockOptions,
) -> (
    mongolock::testing::FaultyStore<MemoryStore>,
    mongolock::LockManager,
    mongolock::LockManager,
) {
    use mongolock::LockManager;
    let store = mongolock::testing::FaultyStore::new(MemoryStore::new());
    let elsewhere = LockManager::start(store.inner().clone(), options.clone())
        .await
        .unwrap();
    let manager = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    (store, elsewhere, manager)
}

/// `count` tasks of `manager` asking to read "files".
fn readers_of_files(manager: &mongolock::LockManager, count: u64) -> Vec<Reader> {
    (0..count)
        .map(|_| {
            let files = manager.rw_lock("files").unwrap();
            tokio::spawn(async move { files.read().await })
        })
        .collect()
}

/// Every waiting reader gets in (within five seconds of paused time).
async fn readers_in(readers: Vec<Reader>, stall: std::time::Duration) -> Vec<mongolock::LockGuard> {
    let mut guards = Vec::new();
    for reader in readers {
        let guard = tokio::time::timeout(std::time::Duration::from_secs(5), reader)
            .await
            .unwrap_or_else(|_| panic!("stall {stall:?}: a reader waited on"))
            .unwrap()
            .unwrap();
        guards.push(guard);
    }
    guards
}

/// Past the instant the stalled call was applied, every holding on the record is held by a
/// reader (readers who joined one grant share its holding, under tokens of its block): the
/// stalled call's grant was used or given back. Then the readers leave.
async fn no_grant_left_unused(
    store: &mongolock::testing::FaultyStore<MemoryStore>,
    guards: Vec<mongolock::LockGuard>,
    stall: std::time::Duration,
) {
    use mongolock::store::LockStore;
    tokio::time::sleep(stall).await;
    let name = mongolock::LockName::new("files").unwrap();
    let block = store.tokens_per_grant();
    let record = store.inner().inspect(&name).await.unwrap();
    let holders = record.map(|record| record.holders).unwrap_or_default();
    assert!(
        !holders.is_empty(),
        "stall {stall:?}: the readers hold nothing"
    );
    for holding in holders {
        assert!(
            guards
                .iter()
                .any(|guard| (holding.token..holding.token + block).contains(&guard.token())),
            "stall {stall:?}: a grant (token {}) is held on the store that no reader uses",
            holding.token
        );
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
}

/// Readers waiting in one process when a read is granted join that grant: one store call
/// lets them all in, each with its own token (of the grant's reserved block), the record
/// shows one holding, it stays until the last of them lets go, and one release frees it.
#[tokio::test(start_paused = true)]
async fn readers_waiting_together_join_one_grant() {
    use mongolock::store::LockStore;
    use std::collections::BTreeSet;

    let options = common::fast_options();
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let writer = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
    let readers = readers_of_files(&manager, 6);
    while store.acquire_calls() == 0 {
        tokio::task::yield_now().await;
    }
    // Every reader has queued behind the refused first attempt.
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    let calls = store.calls();
    writer.release().await.unwrap();
    let mut guards = readers_in(readers, std::time::Duration::ZERO).await;
    assert_eq!(
        store.calls() - calls,
        1,
        "one grant lets every waiting reader in"
    );
    let tokens: BTreeSet<u64> = guards.iter().map(mongolock::LockGuard::token).collect();
    assert_eq!(tokens.len(), 6, "each reader has its own token: {tokens:?}");
    let name = mongolock::LockName::new("files").unwrap();
    let record = store.inner().inspect(&name).await.unwrap().unwrap();
    assert_eq!(record.holders.len(), 1, "the readers share one holding");
    let first = record.holders[0].token;
    assert!(
        tokens
            .iter()
            .all(|token| (first..first + store.tokens_per_grant()).contains(token)),
        "tokens {tokens:?} outside the grant's block from {first}"
    );
    let last = guards.pop().unwrap();
    for guard in guards {
        guard.release().await.unwrap();
    }
    assert_eq!(
        store.calls() - calls,
        1,
        "a reader's release freed the shared lease"
    );
    let record = store.inner().inspect(&name).await.unwrap().unwrap();
    assert_eq!(record.holders.len(), 1, "the last reader still holds");
    // A writer elsewhere is still kept out, and the last reader's loss signal is quiet.
    assert!(
        elsewhere
            .rw_lock("files")
            .unwrap()
            .try_write()
            .await
            .unwrap()
            .is_none(),
        "a writer got in beside a reader"
    );
    assert!(last.loss().is_none());
    last.release().await.unwrap();
    let left = store.inner().inspect(&name).await.unwrap();
    assert!(
        left.is_none_or(|record| record.holders.is_empty()),
        "the last reader's release frees the name"
    );
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// A read is joined by as many readers as its grant reserved tokens for, no more: the
/// readers beyond the block ask for a grant of their own, and no token is given twice.
#[tokio::test(start_paused = true)]
async fn readers_beyond_a_grants_block_ask_for_their_own() {
    use mongolock::store::LockStore;
    use std::collections::BTreeSet;

    let options = common::fast_options();
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let block = store.tokens_per_grant();
    let writer = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
    let readers = readers_of_files(&manager, block + 4);
    while store.acquire_calls() == 0 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    writer.release().await.unwrap();
    let guards = readers_in(readers, std::time::Duration::ZERO).await;
    let tokens: BTreeSet<u64> = guards.iter().map(mongolock::LockGuard::token).collect();
    assert_eq!(
        tokens.len(),
        guards.len(),
        "a token was given twice: {tokens:?}"
    );
    let name = mongolock::LockName::new("files").unwrap();
    let holders = store.inner().inspect(&name).await.unwrap().unwrap().holders;
    assert_eq!(
        holders.len(),
        2,
        "{} readers in grants of {block}",
        guards.len()
    );
    for guard in &guards {
        assert!(
            holders
                .iter()
                .any(|holding| (holding.token..holding.token + block).contains(&guard.token())),
            "token {} is in no grant's block: {holders:?}",
            guard.token()
        );
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// Only the readers ahead of a writer waiting in this process join a read: one queued
/// behind it asks for its own place (as the refused writer's one reader attempt), so the
/// record shows two holdings, not one.
#[tokio::test(start_paused = true)]
async fn readers_behind_a_local_writer_do_not_join_a_read() {
    use mongolock::store::LockStore;
    use std::time::Duration;

    let options = common::fast_options();
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let writer = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
    let files = manager.rw_lock("files").unwrap();
    let spawn_read = |files: mongolock::RwLock| tokio::spawn(async move { files.read().await });
    let ahead = spawn_read(files.clone());
    tokio::time::sleep(Duration::from_millis(1)).await;
    let local_writer = {
        let files = files.clone();
        tokio::spawn(async move { files.write().await })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    let behind = spawn_read(files.clone());
    tokio::time::sleep(Duration::from_millis(1)).await;
    writer.release().await.unwrap();
    let mut guards = Vec::new();
    for reader in [ahead, behind] {
        let guard = granted_within(5, reader, "a reader never got in").await;
        guards.push(guard);
    }
    let name = mongolock::LockName::new("files").unwrap();
    let record = store.inner().inspect(&name).await.unwrap().unwrap();
    assert_eq!(
        record.holders.len(),
        2,
        "the reader behind the local writer joined the first reader's grant"
    );
    assert!(
        !local_writer.is_finished(),
        "the writer got in beside a reader"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
    let written = granted_within(5, local_writer, "the writer got in after the reads").await;
    written.release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// In arrival order, the readers of one process that arrived before every writer waiting
/// elsewhere join the read granted to the first of them; one that arrived after such a
/// writer does not (joining would let it overtake the writer), and goes after it.
#[tokio::test(start_paused = true)]
async fn in_arrival_order_only_readers_ahead_of_every_writer_elsewhere_join() {
    use mongolock::store::LockStore;
    use mongolock::{Fairness, LockManager};
    use std::time::Duration;

    let options = common::fast_options().with_fairness(Fairness::ArrivalOrder);
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let third = LockManager::start(store.inner().clone(), options.clone())
        .await
        .unwrap();
    let held = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
    let ms = Duration::from_millis;
    let ahead = readers_of_files(&manager, 2);
    tokio::time::sleep(ms(2)).await;
    let writer = {
        let files = third.rw_lock("files").unwrap();
        tokio::spawn(async move { files.write().await })
    };
    tokio::time::sleep(ms(2)).await;
    let behind = readers_of_files(&manager, 2);
    tokio::time::sleep(ms(2)).await;
    held.release().await.unwrap();
    let guards = readers_in(ahead, Duration::ZERO).await;
    let name = mongolock::LockName::new("files").unwrap();
    let holders = store.inner().inspect(&name).await.unwrap().unwrap().holders;
    let block = holders[0].token..holders[0].token + store.tokens_per_grant();
    assert!(
        holders.len() == 1 && guards.iter().all(|guard| block.contains(&guard.token())),
        "the two readers ahead of the writer share one grant: {holders:?}"
    );
    tokio::time::sleep(ms(100)).await;
    assert!(
        behind.iter().all(|reader| !reader.is_finished()),
        "a reader that arrived after the writer elsewhere got in ahead of it"
    );
    assert!(
        !writer.is_finished(),
        "the writer got in beside the readers"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
    let written = granted_within(
        5,
        writer,
        "the writer gets in after the readers ahead of it",
    )
    .await;
    assert!(
        behind.iter().all(|reader| !reader.is_finished()),
        "a reader got in beside the writer"
    );
    written.release().await.unwrap();
    let guards = readers_in(behind, Duration::ZERO).await;
    let holders = store.inner().inspect(&name).await.unwrap().unwrap().holders;
    assert_eq!(holders.len(), 1, "the readers behind share the next grant");
    for guard in guards {
        guard.release().await.unwrap();
    }
    manager.shutdown().await;
    elsewhere.shutdown().await;
    third.shutdown().await;
}

/// When a writer of `manager` that gave up, and the reader that asked 10 ms after it, got
/// in (see [`writer_gives_up_before_a_reader`]).
struct WriterGaveUp {
    asked: tokio::time::Instant,
    gave_up: tokio::time::Instant,
    reader_entered: tokio::time::Instant,
    /// The writer's manager sent the store more than attempts (its withdrawal).
    withdrew: bool,
}

/// A read held elsewhere; a writer of one manager asking with `write_timeout`, every answer
/// to that manager `answer_late` (if any); 10 ms later a reader, of the writer's manager if
/// `reader_beside_writer`, else of the other. Backoff 1–2 s, so a writers' mark lasts 4 s
/// and a reader's next retry is a second or more away.
async fn writer_gives_up_before_a_reader(
    write_timeout: std::time::Duration,
    answer_late: Option<std::time::Duration>,
    reader_beside_writer: bool,
) -> WriterGaveUp {
    use std::time::Duration;
    use tokio::time::Instant;

    let options =
        common::fast_options().with_retry_backoff(Duration::from_secs(1), Duration::from_secs(2));
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let held = elsewhere.rw_lock("files").unwrap().read().await.unwrap();
    if let Some(delay) = answer_late {
        store.answer_late(delay);
    }
    let asked = Instant::now();
    let writer = {
        let files = manager.rw_lock("files").unwrap();
        tokio::spawn(async move { files.write_timeout(write_timeout).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let reader = {
        let readers = if reader_beside_writer {
            &manager
        } else {
            &elsewhere
        };
        let files = readers.rw_lock("files").unwrap();
        tokio::spawn(async move {
            let guard = files.read().await;
            (guard, Instant::now())
        })
    };
    assert!(
        writer.await.unwrap().is_err(),
        "the writer waits for the reader holding, or its answer comes too late"
    );
    let gave_up = Instant::now();
    let (guard, reader_entered) = reader.await.unwrap();
    let withdrew = store.calls() > store.acquire_calls();
    store.heal();
    guard.unwrap().release().await.unwrap();
    held.release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
    WriterGaveUp {
        asked,
        gave_up,
        reader_entered,
        withdrew,
    }
}

/// A reader/writer lock's writer that gives up (here: times out) takes its manager's
/// writers' mark off the record at once: a reader elsewhere that the mark held back is woken
/// and gets in, instead of waiting for the mark to end (twice the longest backoff, 4 s
/// here) or for its own next retry (a second or more).
#[tokio::test(start_paused = true)]
async fn a_writer_that_gives_up_holds_no_reader_back() {
    use std::time::Duration;

    let run = writer_gives_up_before_a_reader(Duration::from_millis(500), None, false).await;
    let waited_after = run.reader_entered - run.gave_up;
    assert!(
        waited_after < Duration::from_millis(100),
        "the reader got in {waited_after:?} after the writer gave up"
    );
    assert!(run.withdrew, "the writer's manager withdrew its mark");
}

/// The same when the writer's own process still has a reader waiting: the mark goes as soon
/// as no writer waits there, not only once nobody does, and that reader gets in.
#[tokio::test(start_paused = true)]
async fn a_writer_that_gives_up_holds_back_no_reader_of_its_own() {
    use std::time::Duration;

    let run = writer_gives_up_before_a_reader(Duration::from_millis(500), None, true).await;
    let waited_after = run.reader_entered - run.gave_up;
    assert!(
        waited_after < Duration::from_millis(100),
        "the reader got in {waited_after:?} after the writer gave up"
    );
}

/// And when the writer gave up while its attempt was out: the refusal that comes back for
/// nobody marked the record, so the mark goes then, and the reader waiting behind the
/// writer in its own process gets in long before the mark would have ended.
#[tokio::test(start_paused = true)]
async fn a_writer_refused_after_it_gave_up_holds_back_no_reader() {
    use std::time::Duration;

    // Late, but not so late that a grant is given back (its first renewal is due at 300 ms).
    let late = Some(Duration::from_millis(200));
    let run = writer_gives_up_before_a_reader(Duration::from_millis(100), late, true).await;
    let waited = run.reader_entered - run.asked;
    assert!(
        waited < Duration::from_millis(1500),
        "the reader got in {waited:?} after the writer asked (its mark would last 4 s)"
    );
}

/// In arrival order, a writer that gives up while a reader of its process still waits
/// leaves its manager's place in line to that reader — its access and its arrival — at
/// once: a reader of a third process, which the writer's place held back while only
/// readers held, gets in then, not at the manager's next attempt (a second or more with
/// this backoff) and its own next retry.
#[tokio::test(start_paused = true)]
async fn in_arrival_order_a_writer_that_gives_up_leaves_its_place_to_the_reader_behind_it() {
    use mongolock::{Fairness, LockManager};
    use std::time::Duration;
    use tokio::time::Instant;

    let options = common::fast_options()
        .with_fairness(Fairness::ArrivalOrder)
        .with_retry_backoff(Duration::from_secs(1), Duration::from_secs(2));
    let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let third = LockManager::start(store.inner().clone(), options.clone())
        .await
        .unwrap();
    let held = elsewhere.rw_lock("files").unwrap().read().await.unwrap();
    let ms = Duration::from_millis;
    let writer = {
        let files = manager.rw_lock("files").unwrap();
        tokio::spawn(async move { files.write_timeout(ms(500)).await })
    };
    tokio::time::sleep(ms(10)).await;
    let own_reader = readers_of_files(&manager, 1);
    tokio::time::sleep(ms(10)).await;
    let other_reader = {
        let files = third.rw_lock("files").unwrap();
        tokio::spawn(async move {
            let guard = files.read().await;
            (guard, Instant::now())
        })
    };
    assert!(
        writer.await.unwrap().is_err(),
        "the writer waits behind the reader holding"
    );
    let gave_up = Instant::now();
    let (guard, entered) = tokio::time::timeout(Duration::from_secs(10), other_reader)
        .await
        .expect("the third process's reader gets in")
        .unwrap();
    let waited_after = entered - gave_up;
    assert!(
        waited_after < ms(200),
        "the third process's reader got in {waited_after:?} after the writer ahead of it gave up"
    );
    guard.unwrap().release().await.unwrap();
    for guard in readers_in(own_reader, Duration::ZERO).await {
        guard.release().await.unwrap();
    }
    held.release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
    third.shutdown().await;
}

/// A reader that gives up while another reader of its process still waits leaves nothing to
/// take back (a refused reader marks the readers' wait, which the others still need, and no
/// writer's): its manager sends the store nothing for it.
#[tokio::test(start_paused = true)]
async fn a_reader_that_gives_up_beside_another_withdraws_nothing() {
    use std::time::Duration;

    let (store, elsewhere, manager) = here_and_elsewhere(&common::fast_options()).await;
    let held = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
    let files = manager.rw_lock("files").unwrap();
    let leaving = {
        let files = files.clone();
        tokio::spawn(async move { files.read_timeout(Duration::from_millis(300)).await })
    };
    let staying = {
        let files = files.clone();
        tokio::spawn(async move { files.read().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(store.acquire_calls() > 0, "the readers were refused");
    let other_calls = || store.calls() - store.acquire_calls();
    let before = other_calls();
    assert!(
        leaving.await.unwrap().is_err(),
        "the first reader gave up while the write was held"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        other_calls(),
        before,
        "no withdrawal: the reader that left had nothing of its own on the record"
    );
    held.release().await.unwrap();
    staying.await.unwrap().unwrap().release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// A writer that waited and then got in leaves no mark to withdraw (its grant ended it): once
/// it releases, its manager sends the store nothing more.
#[tokio::test(start_paused = true)]
async fn a_writer_that_got_in_withdraws_nothing() {
    use std::time::Duration;

    let (store, elsewhere, manager) = here_and_elsewhere(&common::fast_options()).await;
    let held = elsewhere.rw_lock("files").unwrap().read().await.unwrap();
    let writer = {
        let files = manager.rw_lock("files").unwrap();
        tokio::spawn(async move { files.write().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(store.acquire_calls() > 0, "the writer was refused");
    let other_calls = || store.calls() - store.acquire_calls();
    let before = other_calls();
    held.release().await.unwrap();
    let written = writer.await.unwrap().unwrap();
    written.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        other_calls(),
        before + 1,
        "after the refusals: the write's release, and no withdrawal"
    );
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// A waiter of the default mode that gives up costs the store nothing more: it never had a
/// place in the name's line, so there is none to withdraw (only an arrival-order waiter's
/// refusal puts its manager in line).
#[tokio::test(start_paused = true)]
async fn a_default_mode_waiter_that_gives_up_withdraws_nothing() {
    use std::time::Duration;

    let (store, elsewhere, manager) = here_and_elsewhere(&common::fast_options()).await;
    let held = elsewhere.lock("orders").unwrap().acquire().await.unwrap();
    let orders = manager.lock("orders").unwrap();
    let other_calls = || store.calls() - store.acquire_calls();
    let before = other_calls();
    let timed_out = orders.acquire_timeout(Duration::from_millis(300)).await;
    assert!(timed_out.is_err(), "the lock is held elsewhere");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        other_calls(),
        before,
        "only attempts went to the store, no withdrawal"
    );
    held.release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// A reader of the default mode does not join a read granted in arrival order, even one it
/// asked for before every writer elsewhere: a request in the default mode neither waits in
/// line nor looks at it, so it is served by its own attempt (its own holding on the record).
#[tokio::test(start_paused = true)]
async fn a_default_mode_reader_does_not_join_a_read_granted_in_arrival_order() {
    use mongolock::Fairness;
    use mongolock::store::LockStore;
    use std::time::Duration;

    let (store, elsewhere, manager) = here_and_elsewhere(&common::fast_options()).await;
    let held = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
    let in_line = {
        let options = common::fast_options().with_fairness(Fairness::ArrivalOrder);
        let files = manager.rw_lock_with("files", options).unwrap();
        tokio::spawn(async move { files.read().await })
    };
    tokio::time::sleep(Duration::from_millis(2)).await;
    let default_mode = readers_of_files(&manager, 1);
    tokio::time::sleep(Duration::from_millis(2)).await;
    held.release().await.unwrap();
    let mut readers = default_mode;
    readers.insert(0, in_line);
    let guards = readers_in(readers, Duration::ZERO).await;
    let name = mongolock::LockName::new("files").unwrap();
    let holders = store.inner().inspect(&name).await.unwrap().unwrap().holders;
    assert_eq!(
        holders.len(),
        2,
        "each reader holds by its own grant: {holders:?}"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// In arrival order a writer refused while readers elsewhere hold keeps its place among
/// this process's tasks: a reader that asked after it here does not go first (in the
/// default mode it would get one attempt, for a readers' turn the store may be running).
#[tokio::test(start_paused = true)]
async fn in_arrival_order_a_reader_waits_behind_an_earlier_writer_of_its_process() {
    use mongolock::Fairness;
    use std::time::Duration;

    let options = common::fast_options().with_fairness(Fairness::ArrivalOrder);
    let (_store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let held = elsewhere.rw_lock("files").unwrap().read().await.unwrap();
    let files = manager.rw_lock("files").unwrap();
    let writer = {
        let files = files.clone();
        tokio::spawn(async move { files.write().await })
    };
    tokio::time::sleep(Duration::from_millis(2)).await;
    let reader = tokio::spawn(async move { files.read().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !reader.is_finished(),
        "a reader got in ahead of the writer that asked before it in its process"
    );
    held.release().await.unwrap();
    let written =
        granted_within(5, writer, "the writer gets in once the read elsewhere ends").await;
    assert!(!reader.is_finished(), "a reader got in beside the writer");
    written.release().await.unwrap();
    let read = granted_within(5, reader, "the reader gets in after the writer").await;
    read.release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// In arrival order a process serves its own tasks in the order they asked when its writer
/// lets go too: the writer that asked before a reader goes first. (In the default mode the
/// readers waiting when a writer leaves get a turn of their own before the next writer.)
#[tokio::test(start_paused = true)]
async fn in_arrival_order_a_leaving_writer_is_followed_by_the_task_that_asked_next() {
    use mongolock::Fairness;
    use std::time::Duration;

    let options = common::fast_options().with_fairness(Fairness::ArrivalOrder);
    let (_store, elsewhere, manager) = here_and_elsewhere(&options).await;
    let files = manager.rw_lock("files").unwrap();
    let first = files.write().await.unwrap();
    let writer = {
        let files = files.clone();
        tokio::spawn(async move { files.write().await })
    };
    tokio::time::sleep(Duration::from_millis(2)).await;
    let reader = tokio::spawn(async move { files.read().await });
    tokio::time::sleep(Duration::from_millis(2)).await;
    first.release().await.unwrap();
    let written = granted_within(
        5,
        writer,
        "the writer that asked next gets in when the first writer lets go",
    )
    .await;
    assert!(
        !reader.is_finished(),
        "a reader that asked after the waiting writer got in ahead of it or beside it"
    );
    written.release().await.unwrap();
    let read = granted_within(5, reader, "the reader gets in after the writer").await;
    read.release().await.unwrap();
    manager.shutdown().await;
    elsewhere.shutdown().await;
}

/// A read grant that reaches this process while its readers wait goes to them, or is given
/// back at once: whether the stalled attempt's answer comes in time, after its first
/// renewal was due, or after the attempt timed out (applied later), both waiting readers
/// get in, and no holding of the name outlives them unused.
#[tokio::test(start_paused = true)]
async fn a_read_grant_answered_while_readers_wait_is_used_or_given_back() {
    use std::time::Duration;

    let options = common::fast_options();
    // In time; after the first renewal was due; after the attempt's own timeout.
    for stall in [100, 500, 1_200].map(Duration::from_millis) {
        let (store, elsewhere, manager) = here_and_elsewhere(&options).await;
        let writer = elsewhere.rw_lock("files").unwrap().write().await.unwrap();
        let readers = readers_of_files(&manager, 2);
        // The readers were refused while the writer holds; their next attempt stalls.
        while store.acquire_calls() == 0 {
            tokio::task::yield_now().await;
        }
        store.stall(stall);
        let stalled_from = store.acquire_calls();
        writer.release().await.unwrap();
        while store.acquire_calls() == stalled_from {
            tokio::task::yield_now().await;
        }
        store.heal();
        let guards = readers_in(readers, stall).await;
        no_grant_left_unused(&store, guards, stall).await;
        manager.shutdown().await;
        elsewhere.shutdown().await;
    }
}

/// As above, for the read grant a local writer's release hands over to the readers waiting
/// here: whether the hand-over is answered in time, late, or after it timed out, both
/// readers get in and no holding outlives them unused.
#[tokio::test(start_paused = true)]
async fn a_read_handed_over_while_readers_wait_is_used_or_given_back() {
    use std::time::Duration;

    let options = common::fast_options();
    for stall in [100, 500, 1_200].map(Duration::from_millis) {
        let (store, manager) = on_a_faulty_store(options.clone()).await;
        let writer = manager.rw_lock("files").unwrap().write().await.unwrap();
        let readers = readers_of_files(&manager, 2);
        let asked = store.acquire_calls();
        while store.acquire_calls() == asked {
            tokio::task::yield_now().await;
        }
        store.stall(stall);
        let releasing = tokio::spawn(async move { writer.release().await });
        while store.hand_over_calls() == 0 {
            tokio::task::yield_now().await;
        }
        store.heal();
        let guards = readers_in(readers, stall).await;
        let _ = releasing.await.unwrap();
        no_grant_left_unused(&store, guards, stall).await;
        manager.shutdown().await;
    }
}

/// A lease ends at its expiry instant: an extension that arrives exactly then finds nothing
/// to extend, for a mutex and for a shared place alike, as a grant to another holder at that
/// instant finds the place free; otherwise both would hold it. Paused time hits the instant
/// exactly, which no real clock does on demand.
#[tokio::test(start_paused = true)]
async fn a_lease_cannot_be_extended_at_its_expiry_instant() {
    use mongolock::store::{
        AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseId, LockStore,
    };
    use mongolock::{Access, HolderId};
    use std::time::Duration;

    let store = MemoryStore::new();
    let lease = Duration::from_millis(300);
    for (name, access) in [
        ("edge-mutex", Access::Exclusive),
        ("edge-permit", Access::Permit { permits: 1 }),
    ] {
        let request = AcquireRequest::new(
            LockName::new(name).unwrap(),
            LeaseId::new(),
            HolderId::generate(),
            lease,
        )
        .with_access(access);
        assert!(matches!(
            store.try_acquire(&request).await.unwrap(),
            AcquireOutcome::Acquired { .. }
        ));
        tokio::time::sleep(lease).await;
        let renewal = ExtendRequest::new(request.key(), Duration::from_secs(30));
        assert_eq!(
            store.extend(&renewal).await.unwrap(),
            ExtendOutcome::NotOwner,
            "{name}: extended at its expiry instant"
        );
    }
}

/// A single try that is refused marks nothing on the record: a `try_write` refused while
/// a reader holds does not keep other processes' readers out as a waiting writer would.
#[tokio::test(start_paused = true)]
async fn a_refused_try_write_keeps_no_reader_out() {
    let store = MemoryStore::new();
    let (a, b, c) = (
        common::start(store.clone()).await,
        common::start(store.clone()).await,
        common::start(store.clone()).await,
    );
    let reading = a.rw_lock("ledger").unwrap().read().await.unwrap();
    let writer = b.rw_lock("ledger").unwrap();
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "a reader holds"
    );
    let reader = c.rw_lock("ledger").unwrap().try_read().await.unwrap();
    assert!(reader.is_some(), "a refused try kept a reader out");
    drop((reading, reader));
    for manager in [a, b, c] {
        manager.shutdown().await;
    }
}

/// A writer waiting in one process keeps new readers of other processes out for as long as
/// it waits: its mark on the record outlives the longest backoff between its attempts.
#[tokio::test(start_paused = true)]
async fn a_waiting_writer_keeps_other_processes_readers_out_between_its_attempts() {
    use std::time::Duration;

    let store = MemoryStore::new();
    let backoff = common::fast_options()
        .with_retry_backoff(Duration::from_millis(10), Duration::from_millis(400));
    let (a, b, c) = (
        common::start(store.clone()).await,
        common::start_with(store.clone(), backoff).await,
        common::start(store.clone()).await,
    );
    let reading = a.rw_lock("ledger").unwrap().read().await.unwrap();
    let writing = tokio::spawn({
        let writer = b.rw_lock("ledger").unwrap();
        async move { writer.write().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    // Readers of its own process queued behind it get an attempt now and then, not its
    // every turn.
    let behind = b.rw_lock("ledger").unwrap();
    let readers_behind: Vec<_> = (0..2)
        .map(|_| {
            let behind = behind.clone();
            tokio::spawn(async move { behind.read().await })
        })
        .collect();
    let late_reader = c.rw_lock("ledger").unwrap();
    for step in 0..250 {
        let read = late_reader.try_read().await.unwrap();
        assert!(
            read.is_none(),
            "a reader overtook the waiting writer after {step} steps"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(reading);
    let written = writing.await.unwrap().unwrap();
    drop(written);
    for reader in readers_behind {
        drop(reader.await.unwrap().unwrap());
    }
    for manager in [a, b, c] {
        manager.shutdown().await;
    }
}

/// When a process's own writer lets go, the readers that process has waiting go before
/// its next writer, even one queued ahead of them, with no store call to spare: the
/// released place is handed over to the first reader, the second joins that grant, and the
/// writer asks once (refused: the readers hold).
#[tokio::test(start_paused = true)]
async fn a_local_writers_release_lets_every_local_reader_in_before_the_next_writer() {
    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    let rw = manager.rw_lock("journal").unwrap();
    let writing = rw.write().await.unwrap();
    let next_writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let rw = rw.clone();
            tokio::spawn(async move { rw.read().await })
        })
        .collect();
    // The writer is refused again, and the first reader asks once.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (attempts, hand_overs) = (store.acquire_calls(), store.hand_over_calls());
    let released_at = tokio::time::Instant::now();
    writing.release().await.unwrap();
    let mut reading = Vec::new();
    for reader in readers {
        let guard = granted_within(10, reader, "a reader never got in").await;
        reading.push(guard);
    }
    assert_eq!(
        released_at.elapsed(),
        Duration::ZERO,
        "the second reader waited for a backoff"
    );
    assert!(
        !next_writer.is_finished(),
        "the writer queued first got in before or beside the readers"
    );
    assert_eq!(
        (store.hand_over_calls(), store.acquire_calls()),
        (hand_overs + 1, attempts + 1),
        "one hand-over to the first reader (the second joins it), one attempt of the writer's"
    );
    // A reader arriving after the turn queues behind the writer.
    let late_reader = tokio::spawn({
        let rw = rw.clone();
        async move { rw.read().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    drop(reading);
    let writing = granted_within(
        10,
        next_writer,
        "the writer never got in after the readers' turn",
    )
    .await;
    assert!(
        !late_reader.is_finished(),
        "a reader arriving after the turn went before the writer"
    );
    writing.release().await.unwrap();
    drop(late_reader.await.unwrap().unwrap());
    manager.shutdown().await;
}

/// A reader of this process's readers' turn refused with nobody holding ends the turn
/// here: the store has no turn on (none of these readers had asked when the write was
/// released) and this process's next writer waits on the record. The turn's other readers
/// would be refused alike, each after a backoff, with nobody left to release and wake
/// anyone: the writer asks at once instead and gets in as the refused writer's answer
/// comes back.
#[tokio::test(start_paused = true)]
async fn a_reader_refused_with_nobody_holding_ends_the_local_readers_turn() {
    use std::time::Duration;

    let options = common::fast_options();
    let (store, manager) = on_a_faulty_store(options.clone()).await;
    let rw = manager.rw_lock("journal").unwrap();
    let writing = rw.write().await.unwrap();
    // The next writer's first attempt is refused when it arrives (its mark is on the record
    // for twice the longest backoff), and its answer comes back within that: it is still out
    // when the write is released, so the release hands nothing over.
    let answer_after = options.retry_backoff().1 / 2;
    let attempts = store.acquire_calls();
    store.answer_late(answer_after);
    let next_writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await }
    });
    while store.acquire_calls() == attempts {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    store.heal();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let rw = rw.clone();
            tokio::spawn(async move { rw.read().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1)).await;
    // The writer leaves: the two readers waiting get a turn here, none on the store.
    let released_at = tokio::time::Instant::now();
    writing.release().await.unwrap();
    let written = granted_within(10, next_writer, "the writer never got in").await;
    assert!(
        released_at.elapsed() <= answer_after,
        "the writer waited for a backoff after the refused reader (took {:?})",
        released_at.elapsed()
    );
    assert!(
        readers.iter().all(|reader| !reader.is_finished()),
        "a reader got in beside the writer"
    );
    written.release().await.unwrap();
    for reader in readers {
        drop(granted_within(10, reader, "a reader never got in").await);
    }
    manager.shutdown().await;
}

/// A released place is handed over only to a waiter no call in flight already asks for: a
/// permit released while the one waiter's attempt is out, or a read released while the
/// writer's attempt is out, is released plainly (the attempt takes the place).
#[tokio::test(start_paused = true)]
async fn a_place_is_not_handed_over_to_a_waiter_an_attempt_already_asks_for() {
    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    let semaphore = manager.semaphore("pool", 2).unwrap();
    let rw = manager.rw_lock("journal").unwrap();
    let held = (
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
        rw.read().await.unwrap(),
    );
    let permit = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire().await }
    });
    let write = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await }
    });
    // Both attempts are out, refused when they arrive; their retries are not.
    let attempts = store.acquire_calls();
    store.stall(Duration::from_millis(100));
    while store.acquire_calls() < attempts + 2 {
        tokio::task::yield_now().await;
    }
    store.heal();
    let hand_overs = store.hand_over_calls();
    let (first, _second, reading) = held;
    first.release().await.unwrap();
    reading.release().await.unwrap();
    assert_eq!(
        store.hand_over_calls(),
        hand_overs,
        "a place was handed over to a waiter its attempt asks for"
    );
    drop(permit.await.unwrap().unwrap());
    drop(write.await.unwrap().unwrap());
    manager.shutdown().await;
}

/// Permits released one after another, each while the hand-over before is still out, each
/// go to a waiter of their count (one hand-over per waiter), and an attempt out for a
/// waiter of another count is not counted against them.
#[tokio::test(start_paused = true)]
async fn released_permits_are_each_handed_over_to_a_waiter_of_their_count() {
    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    let two = manager.semaphore("pool", 2).unwrap();
    let three = manager.semaphore("pool", 3).unwrap();
    let (first, second) = (two.acquire().await.unwrap(), two.acquire().await.unwrap());
    let acquiring = |semaphore: &mongolock::Semaphore| {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await })
    };
    // A waiter of three permits, its attempt out; then two waiters of two.
    let attempts = store.acquire_calls();
    store.stall(Duration::from_millis(100));
    let of_three = acquiring(&three);
    while store.acquire_calls() == attempts {
        tokio::task::yield_now().await;
    }
    let of_two = [acquiring(&two), acquiring(&two)];
    tokio::task::yield_now().await;
    // The hand-overs stall too: the second permit is released while the first's is out.
    let hand_overs = store.hand_over_calls();
    drop((first, second));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        store.hand_over_calls(),
        hand_overs + 2,
        "each released permit is handed over to a waiter of two"
    );
    store.heal();
    for waiter in of_two {
        drop(waiter.await.unwrap().unwrap());
    }
    // (The record's count is two: a waiter of three is refused once it is judged by it.)
    let _ = of_three.await.unwrap();
    manager.shutdown().await;
}

/// A release answered with "others have waited long" while this process's own attempt is
/// out does not step back over that attempt: its grant is used, not dropped and asked for
/// again a backoff later.
#[tokio::test(start_paused = true)]
async fn a_step_back_never_drops_an_attempt_in_flight() {
    use mongolock::Access;
    use mongolock::HolderId;
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};

    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    let semaphore = manager.semaphore("pool", 2).unwrap();
    let (first, second) = (
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    );
    // Another process has waited a second for a permit (and sleeps on).
    let elsewhere = AcquireRequest::new(
        LockName::new("pool").unwrap(),
        LeaseId::new(),
        HolderId::generate(),
        Duration::from_secs(10),
    )
    .with_access(Access::Permit { permits: 2 })
    .with_waited(Duration::from_secs(1));
    let refused = store.inner().try_acquire(&elsewhere).await.unwrap();
    assert!(matches!(refused, AcquireOutcome::Busy { .. }));
    // A local waiter's attempt is out when the release's answer comes back.
    let attempts = store.acquire_calls();
    store.stall(Duration::from_millis(100));
    let waiter = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire().await }
    });
    while store.acquire_calls() == attempts {
        tokio::task::yield_now().await;
    }
    store.heal();
    first.release().await.unwrap();
    let permit = waiter.await.unwrap().unwrap();
    assert_eq!(
        store.acquire_calls(),
        attempts + 1,
        "the waiter's granted attempt was dropped and sent again"
    );
    drop((permit, second));
    manager.shutdown().await;
}

/// A single try is a request in flight too: a request of the other kind made meanwhile
/// waits for the record the try's answer brings, and is judged by it.
#[tokio::test(start_paused = true)]
async fn a_request_of_the_other_kind_during_a_single_try_waits_for_the_record() {
    use mongolock::{LockError, LockKind};
    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    store.stall(Duration::from_millis(100));
    let trying = tokio::spawn({
        let semaphore = manager.semaphore("exports", 2).unwrap();
        async move { semaphore.try_acquire().await }
    });
    while store.acquire_calls() == 0 {
        tokio::task::yield_now().await;
    }
    store.heal();
    let lock = manager.lock("exports").unwrap();
    let mistaken = tokio::time::timeout(Duration::from_secs(10), lock.acquire())
        .await
        .expect("the request of the other kind was never answered");
    assert!(
        matches!(
            mistaken,
            Err(LockError::KindMismatch {
                found: LockKind::Semaphore { permits: 2 },
                ..
            })
        ),
        "{mistaken:?}"
    );
    let permit = trying.await.unwrap().unwrap();
    assert!(permit.is_some(), "the try was refused");
    drop(permit);
    manager.shutdown().await;
}

/// A single try still out when the manager shuts down is answered with the shutdown, and
/// what it may have been granted is released.
#[tokio::test(start_paused = true)]
async fn a_single_try_out_at_shutdown_is_answered_and_its_grant_released() {
    use mongolock::LockError;

    use std::time::Duration;

    let (store, manager) = on_a_faulty_store(common::fast_options()).await;
    store.stall(Duration::from_millis(100));
    let trying = tokio::spawn({
        let lock = manager.lock("late").unwrap();
        async move { lock.try_acquire().await }
    });
    while store.acquire_calls() == 0 {
        tokio::task::yield_now().await;
    }
    store.heal();
    manager.shutdown().await;
    let answer = trying.await.unwrap();
    assert!(matches!(answer, Err(LockError::Shutdown)), "{answer:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(store.inner().is_empty(), "the try's grant is still held");
}

/// An acquisition the caller gave up on, granted on the store but its answer still on the
/// way when the manager shuts down, is released before the shutdown returns: a process
/// that exits then leaves no lease that only expiry frees.
#[test]
fn a_grant_answered_after_shutdown_began_is_released_before_it_returns() {
    nothing_held_after_exit(|store, manager| async move {
        use std::time::Duration;

        store.answer_late(Duration::from_millis(300));
        give_up_after_100_ms(&manager).await;
        manager.shutdown().await;
    });
}

/// The release of a grant whose caller had left, still in flight when the manager shuts
/// down, is waited for.
#[test]
fn a_given_up_grants_release_lands_before_shutdown_returns() {
    nothing_held_after_exit(|store, manager| async move {
        use std::time::Duration;

        store.stall(Duration::from_millis(300));
        give_up_after_100_ms(&manager).await;
        // The grant lands at 300 ms and goes back at once, stalled until 600 ms.
        tokio::time::sleep(Duration::from_millis(300)).await;
        manager.shutdown().await;
    });
}

/// The release of a guard dropped just before the shutdown, still in flight, is waited for.
#[test]
fn a_dropped_guards_release_lands_before_shutdown_returns() {
    nothing_held_after_exit(|store, manager| async move {
        let dropped = manager.lock("dropped").unwrap().acquire().await.unwrap();
        store.stall(std::time::Duration::from_millis(300));
        drop(dropped);
        manager.shutdown().await;
    });
}

/// So is the one release of a dropped multi-lock guard's members.
#[test]
fn a_dropped_multi_lock_guards_release_lands_before_shutdown_returns() {
    nothing_held_after_exit(|store, manager| async move {
        let both = manager.multi_lock(["a", "b"]).unwrap();
        let dropped = both.acquire().await.unwrap();
        store.stall(std::time::Duration::from_millis(300));
        drop(dropped);
        manager.shutdown().await;
    });
}

/// Acquires `given-up` with a 100 ms timeout, which the store's delay makes it miss.
async fn give_up_after_100_ms(manager: &mongolock::LockManager) {
    let gave_up = manager
        .lock("given-up")
        .unwrap()
        .acquire_timeout(std::time::Duration::from_millis(100))
        .await;
    assert!(gave_up.is_err(), "the delayed acquisition did not time out");
}

/// Runs `process` (a manager with 3 s leases on a memory store behind a `FaultyStore`, so
/// a 300 ms stall is well inside a call's 2 s timeout) on a runtime of its own, then drops
/// that runtime as a process exit would, with whatever task was still running; then no
/// record may be left.
fn nothing_held_after_exit<F: std::future::Future<Output = ()>>(
    process: impl FnOnce(mongolock::testing::FaultyStore<MemoryStore>, mongolock::LockManager) -> F,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let memory = MemoryStore::new();
    runtime.block_on(async {
        let options = mongolock::LockOptions::default()
            .with_lease_duration(std::time::Duration::from_secs(3));
        let store = mongolock::testing::FaultyStore::new(memory.clone());
        let manager = common::start_with(store.clone(), options).await;
        process(store, manager).await;
    });
    drop(runtime);
    assert!(
        memory.is_empty(),
        "a lease nobody owns outlived the shutdown: {} records",
        memory.len()
    );
}

/// A refused attempt costs its one call: nothing was granted, so nothing is released.
#[tokio::test(start_paused = true)]
async fn a_refused_attempt_costs_one_store_call() {
    use mongolock::testing::FaultyStore;
    use std::time::Duration;

    let store = FaultyStore::new(MemoryStore::new());
    let (here, elsewhere) = (
        common::start(store.clone()).await,
        common::start(store.inner().clone()).await,
    );
    let held = elsewhere.lock("busy").unwrap().acquire().await.unwrap();
    let lock = here.lock("busy").unwrap();
    let calls = store.calls();
    assert!(lock.try_acquire().await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(store.calls(), calls + 1, "a refused try made more calls");
    drop(held);
    here.shutdown().await;
    elsewhere.shutdown().await;
}

/// Two managers on one memory store, the second's waiters sleeping 5 s between attempts:
/// only a wake-up from the store gets them in sooner.
async fn awake_and_sleepy() -> (mongolock::LockManager, mongolock::LockManager) {
    use std::time::Duration;

    let store = MemoryStore::new();
    let sleepy =
        common::fast_options().with_retry_backoff(Duration::from_secs(5), Duration::from_secs(5));
    (
        common::start(store.clone()).await,
        common::start_with(store, sleepy).await,
    )
}

/// Every release on the store wakes another process's waiter at once, not only the first:
/// the store's release feed keeps its live watchers after telling them.
#[tokio::test(start_paused = true)]
async fn every_release_wakes_the_waiters_of_other_processes() {
    use std::time::Duration;

    let (a, b) = awake_and_sleepy().await;
    for round in 0..3 {
        let held = a.lock("woken").unwrap().acquire().await.unwrap();
        let waiting = tokio::spawn({
            let lock = b.lock("woken").unwrap();
            async move { lock.acquire().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await; // refused, asleep for 5 s
        let released_at = tokio::time::Instant::now();
        held.release().await.unwrap();
        let woken = waiting.await.unwrap().unwrap();
        assert!(
            released_at.elapsed() < Duration::from_secs(1),
            "round {round}: the waiter slept through the release"
        );
        woken.release().await.unwrap();
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// The sweeper removes expired records and only those: a held lock, a held permit and a
/// record re-taken since it expired stay. The store's inspection helpers agree with it.
#[tokio::test(start_paused = true)]
async fn the_sweeper_removes_expired_records_and_never_a_held_one() {
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
    use mongolock::{Access, HolderId};
    use std::time::Duration;

    let store = MemoryStore::with_sweep_interval(Duration::from_secs(3600));
    let take = async |name: &str, access: Access, lease_for: Duration| {
        let request = AcquireRequest::new(
            LockName::new(name).unwrap(),
            LeaseId::new(),
            HolderId::generate(),
            lease_for,
        )
        .with_access(access);
        let granted = store.try_acquire(&request).await.unwrap();
        assert!(matches!(granted, AcquireOutcome::Acquired { .. }), "{name}");
        (LockName::new(name).unwrap(), request.lease)
    };
    let (short, long) = (Duration::from_secs(1), Duration::from_secs(60));
    let permit = Access::Permit { permits: 2 };
    let (held, held_lease) = take("held", Access::Exclusive, long).await;
    let (held_permit, permit_lease) = take("held-permit", permit, long).await;
    let (expired, _) = take("expired", Access::Exclusive, short).await;
    let (expired_permit, _) = take("expired-permit", permit, short).await;
    let (retaken, _) = take("retaken", Access::Exclusive, short).await;
    tokio::time::sleep(short * 2).await;
    let (_, retaken_lease) = take("retaken", Access::Exclusive, long).await;

    assert_eq!((store.len(), store.is_empty()), (5, false));
    assert!(store.is_expired(&expired) && store.is_expired(&expired_permit));
    assert!(!store.is_expired(&held) && !store.is_expired(&held_permit));
    assert!(
        store.is_locked_by(&held, held_lease) && store.is_locked_by(&held_permit, permit_lease)
    );
    assert!(!store.is_locked_by(&held, permit_lease) && !store.is_locked_by(&expired, held_lease));
    assert_eq!(store.sweep_expired(), 2, "the two expired records");
    assert_eq!(store.len(), 3);
    for (name, lease) in [
        (&held, held_lease),
        (&held_permit, permit_lease),
        (&retaken, retaken_lease),
    ] {
        assert!(
            store.is_locked_by(name, lease),
            "{name} was swept while held"
        );
    }
    assert!(store.remove(&held) && store.remove(&held_permit) && !store.remove(&expired));
    assert_eq!(store.len(), 1);
}

/// A sweep removes only places in line that have ended: a waiter's live place stays, so a
/// request that arrived later is still refused when the lock comes free (arrival order).
#[tokio::test(start_paused = true)]
async fn the_sweeper_leaves_a_live_place_in_line() {
    use mongolock::HolderId;
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
    use std::time::Duration;

    let store = MemoryStore::with_sweep_interval(Duration::from_secs(3600));
    let name = LockName::new("line").unwrap();
    let request = || {
        AcquireRequest::new(
            name.clone(),
            LeaseId::new(),
            HolderId::generate(),
            Duration::from_secs(60),
        )
        .with_arrival_order(true)
        .with_retry_within(Duration::from_secs(10))
    };
    let holder = request();
    let (first, later) = (request(), request());
    let granted = |outcome: &AcquireOutcome| matches!(outcome, AcquireOutcome::Acquired { .. });
    assert!(granted(&store.try_acquire(&holder).await.unwrap()));
    assert!(
        !granted(&store.try_acquire(&first).await.unwrap()),
        "held: the first waiter is put in line"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(store.sweep_expired(), 0, "nothing has expired");
    store
        .release(&holder.key().with_arrival_order(true))
        .await
        .unwrap();
    assert!(
        !granted(&store.try_acquire(&later).await.unwrap()),
        "a request that arrived after the waiter in line went ahead of it: the sweep dropped a live place"
    );
    assert!(granted(&store.try_acquire(&first).await.unwrap()));
}

/// A waiter in another process gets the lock within the fairness bound, however busy this
/// process keeps it: its tasks pass the lock among themselves only while the store was asked
/// less than the bound ago, and once the store says someone elsewhere has waited the bound
/// the lock goes back, the release wakes that waiter, and the tasks here step back. Short
/// holds meet the bound through the waited time the store reports; long ones (a whole block
/// of reserved tokens lasts longer than the bound) through asking the store in time.
#[tokio::test(start_paused = true)]
async fn a_waiter_elsewhere_gets_the_lock_within_the_fairness_bound() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    let bound = Duration::from_millis(100);
    let options = mongolock::LockOptions::default().with_fairness_bound(bound);
    for hold in [Duration::from_millis(1), Duration::from_millis(40)] {
        let store = MemoryStore::new();
        let busy = common::start_with(store.clone(), options.clone()).await;
        let elsewhere = common::start_with(store.clone(), options.clone()).await;
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (lock, stop) = (busy.lock("busy").unwrap(), stop.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let guard = lock.acquire().await.unwrap();
                    tokio::time::sleep(hold).await;
                    let _ = guard.release().await;
                }
            }));
        }
        let lock = elsewhere.lock("busy").unwrap();
        for round in 0..3 {
            // Off the holders' rhythm, well into a chain of local passes.
            tokio::time::sleep(Duration::from_millis(337)).await;
            let asked = tokio::time::Instant::now();
            let guard = lock.acquire().await.unwrap();
            let waited = asked.elapsed();
            // The store is asked at the first release a bound after it last was (a hold
            // later at most), and the waiter elsewhere has waited the bound by one of those.
            let allowed = bound * 2 + hold * 2 + Duration::from_millis(10);
            assert!(
                waited <= allowed,
                "hold {hold:?}, round {round}: the waiter elsewhere waited {waited:?} (allowed {allowed:?})"
            );
            guard.release().await.unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        for task in tasks {
            task.await.unwrap();
        }
        busy.shutdown().await;
        elsewhere.shutdown().await;
    }
}

/// A guard's `Debug` says what it holds: for logs.
#[tokio::test(start_paused = true)]
async fn a_guard_shows_its_lock_token_and_access() {
    let manager = common::start(MemoryStore::new()).await;
    let guard = manager.lock("shown").unwrap().acquire().await.unwrap();
    let shown = format!("{guard:?}");
    for part in [
        "LockGuard",
        "shown",
        &format!("token: {}", guard.token()),
        "Exclusive",
        "lost: None",
    ] {
        assert!(shown.contains(part), "{shown} lacks {part}");
    }
    guard.release().await.unwrap();
    manager.shutdown().await;
}

/// Whether another manager holds a name: not when it is free, nor when this one holds it.
/// A lock handle's `Debug` names the lock.
#[tokio::test(start_paused = true)]
async fn a_lock_tells_whether_another_manager_holds_it() {
    let store = MemoryStore::new();
    let (a, b) = (
        common::start(store.clone()).await,
        common::start(store.clone()).await,
    );
    let (here, there) = (a.lock("asked").unwrap(), b.lock("asked").unwrap());
    assert!(!there.is_held_by_another_manager().await.unwrap(), "free");
    let guard = here.acquire().await.unwrap();
    assert!(there.is_held_by_another_manager().await.unwrap());
    assert!(!here.is_held_by_another_manager().await.unwrap());
    assert!(here.is_held_by_this_manager().await.unwrap());
    assert!(!there.is_held_by_this_manager().await.unwrap());
    guard.release().await.unwrap();
    assert!(format!("{here:?}").contains("asked"), "{here:?}");
    a.shutdown().await;
    b.shutdown().await;
}

/// A multi-lock try that finds one member busy has given back the others when it returns,
/// so another process can take them at once; a guard counts its members.
#[tokio::test(start_paused = true)]
async fn a_refused_multi_lock_try_has_given_its_members_back() {
    let store = MemoryStore::new();
    let counted = mongolock::testing::FaultyStore::new(store.clone());
    let (a, b) = (
        common::start(store.clone()).await,
        common::start(counted.clone()).await,
    );
    let busy = a.lock("m-c").unwrap().acquire().await.unwrap();
    let all = b.multi_lock(["m-a", "m-b", "m-c"]).unwrap();
    let calls = counted.calls();
    assert!(all.try_acquire().await.unwrap().is_none());
    assert_eq!(
        counted.calls(),
        calls + 4,
        "three tries, then the two taken given back in one call before the answer"
    );
    for member in ["m-a", "m-b"] {
        let taken = a.lock(member).unwrap().try_acquire().await.unwrap();
        assert!(taken.is_some(), "{member} was not given back");
    }
    drop(busy);
    let pair = b
        .multi_lock(["m-x", "m-y"])
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert_eq!((pair.len(), pair.is_empty()), (2, false));
    pair.release().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

/// A multi-lock's members go back in one store call, whether its guard is released or
/// dropped, and the release has reached the store when `release` returns.
#[tokio::test(start_paused = true)]
async fn a_multi_lock_gives_its_members_back_in_one_call() {
    let store = MemoryStore::new();
    let counted = mongolock::testing::FaultyStore::new(store.clone());
    let (here, elsewhere) = (
        common::start(counted.clone()).await,
        common::start(store.clone()).await,
    );
    let pair = here.multi_lock(["r-a", "r-b"]).unwrap();
    let calls = counted.calls();
    let both = pair.try_acquire().await.unwrap().expect("both free");
    assert!(format!("{both:?}").contains("r-b"), "{both:?}");
    let (a, b) = (both.token("r-a"), both.token("r-b"));
    assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
    assert_eq!(both.token("r-z"), None);
    both.release().await.unwrap();
    assert_eq!(counted.calls(), calls + 3, "two grants, one release");
    let calls = counted.calls();
    drop(pair.acquire().await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    assert_eq!(
        counted.calls(),
        calls + 3,
        "two grants, one release on drop"
    );
    for member in ["r-a", "r-b"] {
        let taken = elsewhere.lock(member).unwrap().try_acquire().await.unwrap();
        assert!(taken.is_some(), "{member} is still held");
    }
    here.shutdown().await;
    elsewhere.shutdown().await;
}

/// Raising a semaphore's count wakes the waiters of other processes at once, as a release
/// does: they do not sleep out their backoff before the new permits are theirs.
#[tokio::test(start_paused = true)]
async fn a_raised_count_wakes_the_waiters_of_other_processes() {
    use std::time::Duration;

    let (a, b) = awake_and_sleepy().await;
    let held = a
        .semaphore("raised-wake", 1)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let permits = b.semaphore("raised-wake", 1).unwrap();
        async move { permits.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await; // refused, asleep for 5 s
    let raised_at = tokio::time::Instant::now();
    a.semaphore("raised-wake", 1)
        .unwrap()
        .set_permits(2)
        .await
        .unwrap();
    let woken = waiting.await.unwrap().unwrap();
    assert!(
        raised_at.elapsed() < Duration::from_secs(1),
        "the waiter slept through the raised count: {:?}",
        raised_at.elapsed()
    );
    woken.release().await.unwrap();
    held.release().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

/// A request for `access` on `name` under a 30 s lease that, refused, marks the record (a
/// waiting writer, waiting readers) for `retry`.
fn marking(
    name: &LockName,
    access: mongolock::Access,
    retry: std::time::Duration,
) -> mongolock::store::AcquireRequest {
    mongolock::store::AcquireRequest::new(
        name.clone(),
        mongolock::store::LeaseId::new(),
        mongolock::HolderId::generate(),
        std::time::Duration::from_secs(30),
    )
    .with_access(access)
    .with_retry_within(retry)
}

fn granted(outcome: mongolock::store::AcquireOutcome) -> bool {
    matches!(outcome, mongolock::store::AcquireOutcome::Acquired { .. })
}

/// A waiting writer's mark ends exactly its retry interval after its attempt: new readers
/// are held back until that instant and admitted at it.
#[tokio::test(start_paused = true)]
async fn a_waiting_writers_mark_ends_exactly_its_retry_interval_after_the_attempt() {
    use mongolock::Access;
    use mongolock::store::{LeaseKey, LockStore};
    use std::time::Duration;

    let store = MemoryStore::new();
    let name = LockName::new("mark-end").unwrap();
    let request = |access: Access, retry: Duration| marking(&name, access, retry);
    let reader = request(Access::Read, Duration::ZERO);
    assert!(granted(store.try_acquire(&reader).await.unwrap()));
    let retry = Duration::from_millis(100);
    let writer = request(Access::Write, retry);
    assert!(!granted(store.try_acquire(&writer).await.unwrap()));
    let key = LeaseKey::shared(name.clone(), reader.lease);
    store.release(&key).await.unwrap();
    tokio::time::advance(retry - Duration::from_millis(1)).await;
    let early = request(Access::Read, Duration::ZERO);
    assert!(
        !granted(store.try_acquire(&early).await.unwrap()),
        "a reader overtook the waiting writer before its mark ended"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    let on_time = request(Access::Read, Duration::ZERO);
    assert!(
        granted(store.try_acquire(&on_time).await.unwrap()),
        "the mark outlived its retry interval"
    );
}

/// A shared holder's lease ends exactly at its expiry: from that instant it is neither held
/// nor renewable, and its record counts as expired, as a mutex's does.
#[tokio::test(start_paused = true)]
async fn a_permit_expires_exactly_at_its_expiry() {
    use mongolock::store::{
        AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseId, LeaseKey, LockStore,
    };
    use mongolock::{Access, HolderId};
    use std::time::Duration;

    let store = MemoryStore::new();
    let name = LockName::new("permit-end").unwrap();
    let lease_for = Duration::from_secs(1);
    let request = AcquireRequest::new(
        name.clone(),
        LeaseId::new(),
        HolderId::generate(),
        lease_for,
    )
    .with_access(Access::Permit { permits: 2 });
    let granted = store.try_acquire(&request).await.unwrap();
    assert!(matches!(granted, AcquireOutcome::Acquired { .. }));
    let key = LeaseKey::shared(name.clone(), request.lease);
    tokio::time::advance(lease_for - Duration::from_millis(1)).await;
    assert!(store.is_locked_by(&name, request.lease));
    assert!(!store.is_expired(&name));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(
        !store.is_locked_by(&name, request.lease),
        "held at its expiry"
    );
    assert!(store.is_expired(&name), "not expired at its expiry");
    let extended = store
        .extend(&ExtendRequest::new(key, lease_for))
        .await
        .unwrap();
    assert_eq!(extended, ExtendOutcome::NotOwner, "renewed at its expiry");
}

/// Readers' waiting mark ends exactly its retry interval after the refused read: a write
/// released just before that instant begins a readers' turn (a second writer is refused),
/// one released at it does not (the second writer goes).
#[tokio::test(start_paused = true)]
async fn a_waiting_readers_mark_ends_exactly_its_retry_interval_after_the_read() {
    use mongolock::Access;
    use mongolock::store::{LeaseKey, LockStore};
    use std::time::Duration;

    let store = MemoryStore::new();
    let retry = Duration::from_millis(100);
    for (before_the_end, turn) in [(Duration::from_millis(1), true), (Duration::ZERO, false)] {
        let name = LockName::new(format!("readers-mark-{}", before_the_end.as_millis())).unwrap();
        let request = |access: Access, retry: Duration| marking(&name, access, retry);
        let writer = request(Access::Write, Duration::ZERO);
        assert!(granted(store.try_acquire(&writer).await.unwrap()));
        let reader = request(Access::Read, retry);
        assert!(!granted(store.try_acquire(&reader).await.unwrap()));
        tokio::time::advance(retry - before_the_end).await;
        let key = LeaseKey::shared(name.clone(), writer.lease);
        store.release(&key).await.unwrap();
        let next_writer = request(Access::Write, Duration::ZERO);
        assert_eq!(
            !granted(store.try_acquire(&next_writer).await.unwrap()),
            turn,
            "released {before_the_end:?} before the readers' mark ended: a readers' turn {}",
            if turn { "expected" } else { "not expected" }
        );
    }
}

/// A shared record's refusal says how long the holder whose lease ends first has left, by
/// the store's clock: a waiter that waits quietly asks again then, when a crashed holder's
/// permit comes free. (Mutation testing found it unpinned: answering no time left passed
/// every other test.)
#[tokio::test(start_paused = true)]
async fn a_shared_refusal_tells_when_the_first_lease_ends() {
    use mongolock::store::{AcquireRequest, LeaseId};
    use mongolock::{Access, HolderId};
    use std::time::Duration;

    let store = MemoryStore::new();
    let name = LockName::new("first-lease-end").unwrap();
    let request = |lease: Duration| {
        AcquireRequest::new(name.clone(), LeaseId::new(), HolderId::generate(), lease)
            .with_access(Access::Permit { permits: 2 })
    };
    granted_each(
        &store,
        [3, 1].map(|secs| request(Duration::from_secs(secs))),
    )
    .await;
    tokio::time::advance(Duration::from_millis(300)).await;
    let lease_left = refusal_lease_left(&store, &request(Duration::from_secs(1))).await;
    assert_eq!(lease_left, Some(Duration::from_millis(700)));
}

/// Runs each of `requests`, which must all be granted.
async fn granted_each(
    store: &MemoryStore,
    requests: impl IntoIterator<Item = mongolock::store::AcquireRequest>,
) {
    use mongolock::store::{AcquireOutcome, LockStore};
    for request in requests {
        let held = store.try_acquire(&request).await.unwrap();
        assert!(matches!(held, AcquireOutcome::Acquired { .. }), "{held:?}");
    }
}

/// Runs `request`, which must be refused: the time its refusal says the first lease has left.
async fn refusal_lease_left(
    store: &MemoryStore,
    request: &mongolock::store::AcquireRequest,
) -> Option<std::time::Duration> {
    use mongolock::store::{AcquireOutcome, LockStore};
    match store.try_acquire(request).await.unwrap() {
        AcquireOutcome::Busy { lease_left, .. } => lease_left,
        granted => panic!("expected a refusal: {granted:?}"),
    }
}

/// A holder whose lease ends exactly as a refusal is answered no longer holds: a request
/// refused by the line then is told when the next holder's lease ends, not that one ends
/// now.
#[tokio::test(start_paused = true)]
async fn a_refusal_by_the_line_at_a_lease_end_tells_the_next_one() {
    use mongolock::store::{AcquireRequest, LeaseId};
    use mongolock::{Access, HolderId};
    use std::time::Duration;

    let store = MemoryStore::new();
    let name = LockName::new("next-lease-end").unwrap();
    let request = |lease: Duration| {
        AcquireRequest::new(name.clone(), LeaseId::new(), HolderId::generate(), lease)
            .with_access(Access::Permit { permits: 2 })
            .with_arrival_order(true)
            .with_retry_within(Duration::from_secs(30))
    };
    granted_each(
        &store,
        [1, 3].map(|secs| request(Duration::from_secs(secs))),
    )
    .await;
    refusal_lease_left(&store, &request(Duration::from_secs(1))).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    // A permit is free now, but the first place in line goes first.
    let lease_left = refusal_lease_left(&store, &request(Duration::from_secs(1))).await;
    assert_eq!(lease_left, Some(Duration::from_secs(2)));
}

/// A semaphore's release made exactly as another permit's lease ends frees both permits:
/// the release wakes the managers of the first two places in line, not only the first.
#[tokio::test(start_paused = true)]
async fn a_release_at_another_lease_end_wakes_as_many_places_as_permits_are_free() {
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore, ReleaseDemand};
    use mongolock::{Access, HolderId};
    use std::time::Duration;

    let store = MemoryStore::new();
    let name = LockName::new("two-permits-free").unwrap();
    let permit = Access::Permit { permits: 2 };
    let long = Duration::from_secs(30);
    let request = |holder: &HolderId, lease: Duration| {
        AcquireRequest::new(name.clone(), LeaseId::new(), holder.clone(), lease)
            .with_access(permit)
            .with_arrival_order(true)
            .with_retry_within(long)
    };
    let (ending, releasing) = (HolderId::generate(), HolderId::generate());
    store
        .try_acquire(&request(&ending, Duration::from_secs(1)))
        .await
        .unwrap();
    let held = request(&releasing, long);
    let granted = store.try_acquire(&held).await.unwrap();
    assert!(
        matches!(granted, AcquireOutcome::Acquired { .. }),
        "{granted:?}"
    );
    let (first, second) = (HolderId::generate(), HolderId::generate());
    let mut feeds = Vec::new();
    for waiter in [&first, &second] {
        feeds.push(
            store
                .watch_releases(ReleaseDemand::for_holder(waiter.clone()))
                .await
                .expect("the memory store has a release feed"),
        );
        let refused = store.try_acquire(&request(waiter, long)).await.unwrap();
        assert!(
            matches!(refused, AcquireOutcome::Busy { .. }),
            "{refused:?}"
        );
        // Places of one instant share it: each would be let in as the first.
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    tokio::time::advance(Duration::from_millis(998)).await;
    store.release(&held.key()).await.unwrap();
    for (who, feed) in ["the first place", "the second place"]
        .iter()
        .zip(&mut feeds)
    {
        assert_eq!(feed.try_recv().ok(), Some(name.clone()), "{who} is woken");
    }
}

/// A reader/writer lock admits at most `MAX_PERMITS` readers at once.
#[tokio::test(start_paused = true)]
async fn readers_are_capped_at_max_permits() {
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
    use mongolock::{Access, HolderId, MAX_PERMITS};
    use std::time::Duration;

    let store = MemoryStore::new();
    let name = LockName::new("crowded").unwrap();
    let read = || {
        AcquireRequest::new(
            name.clone(),
            LeaseId::new(),
            HolderId::generate(),
            Duration::from_secs(30),
        )
        .with_access(Access::Read)
    };
    for reader in 0..MAX_PERMITS {
        let outcome = store.try_acquire(&read()).await.unwrap();
        assert!(
            matches!(outcome, AcquireOutcome::Acquired { .. }),
            "reader {reader}"
        );
    }
    let one_more = store.try_acquire(&read()).await.unwrap();
    assert!(
        matches!(one_more, AcquireOutcome::Busy { .. }),
        "{one_more:?}"
    );
}

/// In arrival order, a grant won for a task that gave up while the attempt was out (a
/// stalled store call) does not go to a later task of the same process: it goes back to
/// the store, and a task elsewhere that asked in between goes first.
///
/// The stall also delays the attempt's arrival by the store's clock (it is the store's now
/// minus the task's wait when the call is applied): the task elsewhere asks after that.
#[tokio::test(start_paused = true)]
async fn a_grant_for_a_task_that_left_goes_back_to_the_line() {
    use mongolock::testing::FaultyStore;
    use mongolock::{Fairness, LockManager, LockOptions};
    use std::time::Duration;

    let in_order = LockOptions::default()
        .with_fairness(Fairness::ArrivalOrder)
        .with_retry_backoff(Duration::from_millis(5), Duration::from_secs(2));
    let store = MemoryStore::new();
    let faulty = FaultyStore::new(store.clone());
    let here = LockManager::start(faulty.clone(), in_order.clone())
        .await
        .unwrap();
    let holder = LockManager::start(store.clone(), in_order.clone())
        .await
        .unwrap();
    let elsewhere = LockManager::start(store, in_order).await.unwrap();
    let spawn_acquire = |manager: &LockManager, timeout: Duration| {
        let lock = manager.lock("fifo-left").unwrap();
        tokio::spawn(async move { lock.acquire_timeout(timeout).await })
    };
    let ms = Duration::from_millis;
    let started = tokio::time::Instant::now();
    let held = holder.lock("fifo-left").unwrap().acquire().await.unwrap();
    let first = spawn_acquire(&here, ms(520));
    tokio::time::sleep(ms(30)).await;
    // The release wakes this process, whose attempt (for `first`) is applied at 530 ms,
    // arriving at 500 ms by the store's clock — after `first` gave up at 520 ms.
    faulty.stall(ms(500));
    held.release().await.unwrap();
    tokio::time::sleep_until(started + ms(505)).await;
    let between = spawn_acquire(&elsewhere, Duration::from_secs(5));
    tokio::time::sleep(ms(10)).await;
    let later = spawn_acquire(&here, Duration::from_secs(5));
    assert!(first.await.unwrap().is_err(), "the first task gave up");
    faulty.heal();
    let between = granted_within(
        3,
        between,
        "the task elsewhere, which asked before the later one, gets the lock",
    )
    .await;
    assert!(!later.is_finished(), "the later local task waits its turn");
    between.release().await.unwrap();
    later.await.unwrap().unwrap().release().await.unwrap();
    for manager in [here, holder, elsewhere] {
        manager.shutdown().await;
    }
}

/// A place is free at the very instant its lease expires, whatever the kind: the memory
/// store drops a holder whose expiry is now, as MongoDB's `expiresAt > $$NOW` does and as
/// the memory store's own mutex record does. (Found by mutation testing: keeping a holder
/// whose expiry is now passed every other test.)
#[tokio::test(start_paused = true)]
async fn a_place_is_free_at_the_instant_its_lease_expires() {
    use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
    use mongolock::{Access, HolderId, LockName};
    use std::time::Duration;

    let store = MemoryStore::new();
    let lease = Duration::from_secs(1);
    for (name, access) in [
        ("expiring-mutex", Access::Exclusive),
        ("expiring-permit", Access::Permit { permits: 1 }),
        ("expiring-write", Access::Write),
    ] {
        let name = LockName::new(name).unwrap();
        let attempt = |holder: HolderId| {
            AcquireRequest::new(name.clone(), LeaseId::new(), holder, lease).with_access(access)
        };
        let first = store.try_acquire(&attempt(HolderId::generate())).await;
        assert!(
            matches!(first, Ok(AcquireOutcome::Acquired { .. })),
            "{first:?}"
        );
        tokio::time::advance(lease - Duration::from_millis(1)).await;
        let early = store.try_acquire(&attempt(HolderId::generate())).await;
        assert!(
            matches!(early, Ok(AcquireOutcome::Busy { .. })),
            "{access:?}: free before its lease expired: {early:?}"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        let at_expiry = store.try_acquire(&attempt(HolderId::generate())).await;
        assert!(
            matches!(at_expiry, Ok(AcquireOutcome::Acquired { .. })),
            "{access:?}: still held at the instant its lease expired: {at_expiry:?}"
        );
    }
}

/// Writers of two busy processes take turns: each process has writers queued one behind
/// another and readers beside them, and every writer gets in within the fairness bound
/// (100 ms), by the store's rules alone (writers in the order first refused, one readers'
/// turn between two writes). Before them one process handed the lock from writer to writer
/// and a writer elsewhere waited the whole run.
#[tokio::test(start_paused = true)]
async fn writers_of_two_busy_processes_take_turns() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    let hold = Duration::from_millis(1);
    let store = MemoryStore::new();
    let managers = [
        common::start(store.clone()).await,
        common::start(store.clone()).await,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for manager in &managers {
        for _ in 0..2 {
            let (lock, stop) = (manager.rw_lock("busy-rw").unwrap(), stop.clone());
            writers.push(tokio::spawn(async move {
                let mut longest = Duration::ZERO;
                let mut writes = 0_u32;
                while !stop.load(Ordering::SeqCst) {
                    let asked = tokio::time::Instant::now();
                    let guard = lock.write().await.unwrap();
                    longest = longest.max(asked.elapsed());
                    writes += 1;
                    tokio::time::sleep(hold).await;
                    guard.release().await.unwrap();
                }
                (longest, writes)
            }));
        }
        for _ in 0..6 {
            let (lock, stop) = (manager.rw_lock("busy-rw").unwrap(), stop.clone());
            readers.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let guard = lock.read().await.unwrap();
                    tokio::time::sleep(hold).await;
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let mut longest = Duration::ZERO;
    for writer in writers {
        let (waited, writes) = writer.await.unwrap();
        assert!(writes > 0, "a writer never got in");
        longest = longest.max(waited);
    }
    for reader in readers {
        reader.await.unwrap();
    }
    assert!(
        longest < mongolock::LockOptions::default().fairness_bound(),
        "a writer waited {longest:?}: the writers did not take turns"
    );
    for manager in managers {
        manager.shutdown().await;
    }
}
