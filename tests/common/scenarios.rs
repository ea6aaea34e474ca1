//! The conformance scenarios: what every lock store must do for one process (mutual
//! exclusion, fencing, loss before takeover, cancel safety, names as values…), each generic
//! over the [`Backend`]. Timings come from [`fast_options`]; every time bound is a
//! property a user relies on (loss reported before others can hold, timeouts honoured).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use mongolock::{LockError, LockGuard, LockManager, LockName, LockOptions, LossReason};
use tokio::time::{Instant, sleep, timeout};

use super::{Backend, SLACK, eventually, fast_options, start};
use mongolock::store::LockStore;
use mongolock::testing::FaultyStore;

/// Two managers on one namespace, like two processes sharing a database.
async fn two_managers<B: Backend>(backend: &B) -> (LockManager, LockManager, B::Store) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    (start(store.clone()).await, start(peer).await, store)
}

/// A manager whose store can be made to hang or fail, and a healthy peer manager.
async fn faulty_and_peer<B: Backend>(
    backend: &B,
) -> (LockManager, FaultyStore<B::Store>, LockManager, B::Store) {
    let store = backend.fresh().await;
    let faulty = FaultyStore::new(store.clone());
    let peer = backend.peer(&store).await;
    (
        start(faulty.clone()).await,
        faulty,
        start(peer).await,
        store,
    )
}

/// Polls `try_acquire` until it succeeds or `within` passes.
async fn acquired_within(
    manager: &LockManager,
    name: &str,
    within: Duration,
) -> Option<mongolock::LockGuard> {
    let lock = manager.lock(name).ok()?;
    let until = Instant::now() + within;
    loop {
        if let Ok(Some(guard)) = lock.try_acquire().await {
            return Some(guard);
        }
        if Instant::now() >= until {
            return None;
        }
        sleep(Duration::from_millis(10)).await;
    }
}

/// Acquires a lock whose holder went silent: it frees up once the lease expires.
async fn take_over(manager: &LockManager, name: &str) -> LockGuard {
    let within = fast_options().lease_duration() * 3;
    match manager.lock(name).unwrap().acquire_timeout(within).await {
        Ok(guard) => guard,
        Err(error) => panic!("{name}: the expired lock was not taken over: {error}"),
    }
}

pub(crate) async fn acquire_release_not_reentrant<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let lock = a.lock("orders").unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "not re-entrant in one manager"
    );
    assert!(
        b.lock("orders")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        lock.acquire_timeout(Duration::from_millis(100)).await,
        Err(LockError::Timeout(_))
    ));
    guard.release().await.unwrap();
    let other = b.lock("orders").unwrap().try_acquire().await.unwrap();
    assert!(other.is_some(), "free right after release");
}

pub(crate) async fn different_names_are_independent<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let _x = a.lock("x").unwrap().acquire().await.unwrap();
    let y = b
        .lock("y")
        .unwrap()
        .acquire_timeout(Duration::from_millis(500))
        .await;
    assert!(y.is_ok(), "{y:?}");
    let _y2 = a
        .lock("y2")
        .unwrap()
        .acquire_timeout(Duration::from_millis(500))
        .await
        .unwrap();
}

pub(crate) async fn reacquire_right_after_release_ten_times<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let mut last = 0;
    for round in 0..10 {
        let manager = if round % 2 == 0 { &a } else { &b };
        let guard = manager.lock("cycle").unwrap().try_acquire().await.unwrap();
        let guard = guard.unwrap_or_else(|| panic!("round {round}: not free right after release"));
        assert!(
            guard.token() > last,
            "round {round}: token {} after {last}",
            guard.token()
        );
        last = guard.token();
        guard.release().await.unwrap();
    }
}

pub(crate) async fn try_acquire_makes_one_attempt<B: Backend>(backend: &B) {
    let (a, counting, b, _) = faulty_and_peer(backend).await;
    let held = b.lock("single").unwrap().acquire().await.unwrap();
    let before = counting.acquire_calls();
    assert!(
        a.lock("single")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        counting.acquire_calls() - before,
        1,
        "exactly one store attempt"
    );
    held.release().await.unwrap();
    assert!(
        a.lock("single")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_some()
    );
}

pub(crate) async fn short_timeout_returns_promptly<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let _held = b.lock("slow").unwrap().acquire().await.unwrap();
    let started = Instant::now();
    let result = a
        .lock("slow")
        .unwrap()
        .acquire_timeout(Duration::from_millis(200))
        .await;
    assert!(
        matches!(result, Err(LockError::Timeout(d)) if d == Duration::from_millis(200)),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "took {:?}",
        started.elapsed()
    );
}

pub(crate) async fn cancelled_before_waiting_leaves_nothing_held<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let lock = a.lock("never").unwrap();
    drop(lock.acquire()); // created, never polled
    let pending = lock.acquire();
    tokio::select! { biased; _ = async {} => {}, _ = pending => panic!("not expected to finish first") }
    assert!(
        acquired_within(&b, "never", SLACK).await.is_some(),
        "a dropped acquire must hold nothing"
    );
}

pub(crate) async fn cancelled_while_waiting_leaves_no_phantom_hold<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let held = b.lock("phantom").unwrap().acquire().await.unwrap();
    let lock = a.lock("phantom").unwrap();
    // Cancel mid-wait, many times, at different points of the attempt/backoff cycle.
    for step in 0..10u64 {
        let _ = timeout(Duration::from_millis(3 * step + 1), lock.acquire()).await;
    }
    held.release().await.unwrap();
    // A phantom hold would keep the lock for a whole expiry (1.5 s); a clean runtime frees it
    // at once, or after releasing a grant that arrived with nobody waiting.
    let again = acquired_within(&b, "phantom", SLACK).await;
    assert!(again.is_some(), "a cancelled acquire left the lock held");
}

/// An acquisition that times out while its command is stalled, and that the store applies
/// afterwards, must not leave the lock held under a lease nobody owns: it is released as soon
/// as the store's answer arrives, long before the lease would expire.
pub(crate) async fn acquire_applied_after_timeout_leaves_no_orphan<B: Backend>(backend: &B) {
    let (a, faulty, b, _) = faulty_and_peer(backend).await;
    let options = fast_options();
    // Applied 300 ms after the runtime gave the attempt up (its renew deadline).
    let stall = options.renew_deadline() + Duration::from_millis(300);
    faulty.stall(stall);
    let started = Instant::now();
    let result = a
        .lock("late")
        .unwrap()
        .acquire_timeout(Duration::from_millis(200))
        .await;
    assert!(matches!(result, Err(LockError::Timeout(_))), "{result:?}");
    faulty.heal();
    sleep(stall.saturating_sub(started.elapsed())).await;
    // A lease nobody holds would block `b` for a whole expiry (1.5 s) after the late apply.
    let freed = acquired_within(&b, "late", SLACK).await;
    assert!(
        freed.is_some(),
        "the late-applied attempt left the lock held by nobody for more than {SLACK:?}"
    );
}

/// A release with a local caller queued passes the lock straight to it: a larger token, and
/// the lock never free in between (another process's attempt right after finds it held).
pub(crate) async fn release_hands_over_to_a_local_waiter<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let lock = a.lock("relay").unwrap();
    let first = lock.acquire().await.unwrap();
    let next = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    sleep(Duration::from_millis(20)).await; // queued behind the holder
    let first_token = first.token();
    first.release().await.unwrap();
    let second = timeout(SLACK, next)
        .await
        .expect("the local waiter got the lock")
        .unwrap()
        .unwrap();
    assert!(second.token() > first_token);
    assert!(
        b.lock("relay")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "another process found the handed-over lock free"
    );
    second.release().await.unwrap();
    let third = acquired_within(&b, "relay", SLACK)
        .await
        .expect("freed at last");
    assert!(third.token() > first_token);
}

/// Holders that follow one another in one process take the next token the grant reserved,
/// with no store call until the block is used up; tokens still increase across every hold of
/// both processes, and the other process gets its turns.
pub(crate) async fn rule_6_local_hand_overs_keep_tokens_increasing<B: Backend>(backend: &B) {
    let (a, counting, b, _) = faulty_and_peer(backend).await;
    let block = counting.tokens_per_grant();
    assert!(block > 1, "the store reserves tokens with each grant");
    // A fairness bound longer than the test: the chain passes locally for its whole block.
    let lock = a
        .lock_with(
            "chain",
            fast_options().with_fairness_bound(Duration::from_secs(60)),
        )
        .unwrap();
    let first = lock.acquire().await.unwrap();
    let chain: Vec<_> = (0..block + 4)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move {
                let guard = lock.acquire().await.unwrap();
                let token = guard.token();
                guard.release().await.unwrap();
                token
            })
        })
        .collect();
    sleep(Duration::from_millis(50)).await; // all queued behind the holder
    let mut tokens = vec![first.token()];
    first.release().await.unwrap();
    for task in chain {
        tokens.push(task.await.unwrap());
    }
    tokens.sort_unstable();
    // A pass past the block would take the token the store's next grant gives too.
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "a token was given twice: {tokens:?}"
    );
    assert_eq!(
        (counting.acquire_calls(), counting.hand_over_calls()),
        (1, 1),
        "{} holds: one grant, {} free passes, one hand-over reserving the next block",
        block + 5,
        block - 1,
    );
    assert_eq!(
        tokens[usize::try_from(block).unwrap() - 1],
        tokens[0] + block - 1
    );
    assert!(tokens[usize::try_from(block).unwrap()] >= tokens[0] + block);

    let holds = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..48 {
        let in_b = i % 4 == 0;
        let manager = if in_b { b.clone() } else { a.clone() };
        let holds = holds.clone();
        tasks.push(tokio::spawn(async move {
            let guard = manager.lock("baton").unwrap().acquire().await.unwrap();
            holds.lock().unwrap().push((in_b, guard.token()));
            sleep(Duration::from_millis(1)).await;
            guard.release().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let holds = holds.lock().unwrap().clone();
    assert_eq!(holds.len(), 48);
    // Whether any of these holds passes on locally depends on timing: a release with the
    // other manager waiting longer than the fairness bound goes through the store, and on
    // a loaded machine every one may (a CI run saw 48 holds alternate in pairs, each from
    // the store). Local passing itself is pinned by the chain above; here the tokens'
    // order is what must hold, however the lock went round.
    assert!(
        holds.windows(2).all(|pair| pair[0].1 < pair[1].1),
        "tokens must increase in the order the lock was held: {holds:?}"
    );
    assert_eq!(holds.iter().filter(|(in_b, _)| *in_b).count(), 12);
}

pub(crate) async fn hundred_contenders_never_overlap<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let inside = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..100 {
        let manager = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (inside, done) = (inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let guard = manager.lock("hot").unwrap().acquire().await.unwrap();
            assert!(
                !inside.swap(true, Ordering::SeqCst),
                "two holders inside the critical section"
            );
            tokio::task::yield_now().await;
            sleep(Duration::from_millis(1)).await;
            inside.store(false, Ordering::SeqCst);
            done.fetch_add(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 100);
}

pub(crate) async fn local_waiters_share_one_poller_in_fifo_order<B: Backend>(backend: &B) {
    let (a, counting, b, _) = faulty_and_peer(backend).await;
    let held = b.lock("queue").unwrap().acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    // One task polls the ten acquisitions in order, so they reach the lock actor in order
    // (a request is sent on the first poll) whatever the runtime's threads do.
    let waiters = (0..10).map(|i| {
        let (lock, order) = (a.lock("queue").unwrap(), order.clone());
        async move {
            let guard = lock.acquire().await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }
    });
    let all = tokio::spawn(futures::future::join_all(waiters));
    sleep(Duration::from_millis(20)).await;
    let window = Duration::from_millis(500);
    let before = counting.acquire_calls();
    sleep(window).await;
    let attempts = counting.acquire_calls() - before;
    // One poller sleeps at least busy_wait min (5 ms) between attempts; ten pollers would
    // make about ten times as many.
    let bound = u64::try_from(window.as_millis() / 5 + 1).unwrap_or(u64::MAX);
    assert!(
        attempts <= bound,
        "{attempts} store attempts in {window:?} for 10 local waiters (one poller allows {bound})"
    );
    held.release().await.unwrap();
    all.await.unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        (0..10).collect::<Vec<_>>(),
        "local waiters are served FIFO"
    );
}

pub(crate) async fn rule_1_expired_holder_is_taken_over<B: Backend>(backend: &B) {
    let (holder, faulty, peer, _) = faulty_and_peer(backend).await;
    let guard = holder.lock("crash").unwrap().acquire().await.unwrap();
    let acquired = Instant::now();
    faulty.hang(); // the holder can no longer reach the store: as if it crashed
    let reason = guard.lost().await;
    let told = Instant::now();
    let taken = take_over(&peer, "crash").await;
    let took_over = Instant::now();
    assert!(taken.token() > guard.token());
    assert_eq!(reason, LossReason::DeadlineExceeded);
    assert!(
        told < took_over,
        "the old holder must learn before the new one holds"
    );
    assert!(
        took_over - acquired >= Duration::from_millis(1400),
        "taken over before expiry: {:?}",
        took_over - acquired
    );
}

pub(crate) async fn extension_keeps_the_lock_past_expiry<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let guard = a.lock("long").unwrap().acquire().await.unwrap();
    let expiry = fast_options().lease_duration();
    let until = Instant::now() + expiry * 2 + expiry / 2;
    while Instant::now() < until {
        assert!(
            b.lock("long")
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_none(),
            "lost to a peer while renewing"
        );
        sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(guard.loss(), None);
    guard.release().await.unwrap();
}

pub(crate) async fn external_takeover_is_reported_within_one_cadence<B: Backend>(backend: &B) {
    let (a, b, store) = two_managers(backend).await;
    let guard = a.lock("stolen").unwrap().acquire().await.unwrap();
    backend
        .delete_record(&store, &LockName::new("stolen").unwrap())
        .await;
    let thief = b
        .lock("stolen")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("record deleted: free");
    assert!(
        thief.token() > guard.token(),
        "token after deletion must still increase"
    );
    let bound = fast_options().renew_interval() + SLACK;
    let reason = timeout(bound, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal within {bound:?}"));
    assert_eq!(reason, LossReason::Superseded);
    // Subscribing after the loss resolves at once.
    assert_eq!(
        timeout(Duration::from_millis(1), guard.lost()).await,
        Ok(LossReason::Superseded)
    );
    assert!(matches!(
        guard.release().await,
        Err(LockError::Lost(LossReason::Superseded))
    ));
    assert_eq!(
        thief.loss(),
        None,
        "the old holder's release must not touch the new holder"
    );
}

pub(crate) async fn hung_store_is_reported_by_local_deadline<B: Backend>(backend: &B) {
    let (holder, faulty, _peer, _) = faulty_and_peer(backend).await;
    let options = fast_options();
    let sent = Instant::now();
    let guard = holder.lock("hang").unwrap().acquire().await.unwrap();
    faulty.hang();
    let reason = timeout(options.lease_duration(), guard.lost()).await;
    let reason = reason.unwrap_or_else(|_| panic!("no loss before the lease expiry"));
    assert_eq!(reason, LossReason::DeadlineExceeded);
    let elapsed = sent.elapsed();
    assert!(
        elapsed >= options.renew_deadline() - Duration::from_millis(50)
            && elapsed < options.lease_duration(),
        "loss after {elapsed:?}"
    );
}

pub(crate) async fn failing_store_is_reported_as_store_errors<B: Backend>(backend: &B) {
    let (holder, faulty, _peer, _) = faulty_and_peer(backend).await;
    let guard = holder.lock("errors").unwrap().acquire().await.unwrap();
    faulty.fail();
    let reason = timeout(fast_options().lease_duration(), guard.lost())
        .await
        .expect("loss before expiry");
    assert!(
        matches!(reason, LossReason::StoreErrors { .. }),
        "{reason:?}"
    );
    // After recovery exactly one holder.
    faulty.heal();
    let again = holder
        .lock("errors")
        .unwrap()
        .acquire_timeout(fast_options().lease_duration() * 2)
        .await
        .unwrap();
    assert!(again.token() > guard.token());
}

pub(crate) async fn rule_2_late_release_does_not_free_successor<B: Backend>(backend: &B) {
    let (stalled, faulty, peer, _) = faulty_and_peer(backend).await;
    let old = stalled.lock("succ").unwrap().acquire().await.unwrap();
    faulty.hang();
    let _ = old.lost().await;
    let successor = take_over(&peer, "succ").await;
    faulty.heal();
    assert!(
        old.release().await.is_err(),
        "a lost guard's release reports the loss"
    );
    let record = peer
        .lock("succ")
        .unwrap()
        .inspect()
        .await
        .unwrap()
        .expect("record");
    assert_eq!(
        record.holder(),
        Some(peer.holder_id()),
        "the successor still holds the lock"
    );
    assert_eq!(record.token, successor.token());
}

pub(crate) async fn rule_1_fencing_tokens_strictly_increase<B: Backend>(backend: &B) {
    let (a, faulty, b, store) = faulty_and_peer(backend).await;
    let name = LockName::new("fenced").unwrap();
    let mut tokens = Vec::new();
    // Release.
    let g = a.lock("fenced").unwrap().acquire().await.unwrap();
    tokens.push(g.token());
    g.release().await.unwrap();
    // Expiry takeover.
    let g = a.lock("fenced").unwrap().acquire().await.unwrap();
    tokens.push(g.token());
    faulty.hang();
    let g2 = take_over(&b, "fenced").await;
    tokens.push(g2.token());
    faulty.heal();
    drop(g);
    // External deletion (operator) of a held record: another manager takes it at once.
    backend.delete_record(&store, &name).await;
    let g3 = a
        .lock("fenced")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free after deletion");
    tokens.push(g3.token());
    g3.release().await.unwrap();
    // Deletion of a released record (a TTL monitor's cleanup).
    backend.delete_record(&store, &name).await;
    let g4 = b
        .lock("fenced")
        .unwrap()
        .acquire_timeout(fast_options().lease_duration())
        .await
        .unwrap();
    tokens.push(g4.token());
    drop(g2);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens not strictly increasing: {tokens:?}"
    );
}

pub(crate) async fn shutdown_releases_everything<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let [s1, s2, s3] = [
        a.lock("s1").unwrap().acquire().await.unwrap(),
        a.lock("s2").unwrap().acquire().await.unwrap(),
        a.lock("s3").unwrap().acquire().await.unwrap(),
    ];
    let _other = b.lock("s4").unwrap().acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = a.lock("s4").unwrap();
        async move { lock.acquire().await }
    });
    sleep(Duration::from_millis(20)).await;
    a.shutdown().await;
    for guard in [&s1, &s2, &s3] {
        assert_eq!(
            timeout(Duration::from_millis(10), guard.lost()).await,
            Ok(LossReason::Shutdown)
        );
    }
    assert!(matches!(waiter.await.unwrap(), Err(LockError::Shutdown)));
    // Told holders may still be working: nobody else gets their locks until they let go…
    assert!(
        b.lock("s1").unwrap().try_acquire().await.unwrap().is_none(),
        "s1 granted to another process while its holder, told a moment ago, still holds it"
    );
    drop(s2);
    assert!(matches!(
        s3.release().await,
        Err(LockError::Lost(LossReason::Shutdown))
    ));
    for name in ["s2", "s3"] {
        assert!(
            acquired_within(&b, name, SLACK).await.is_some(),
            "{name} still held after its holder let go at shutdown"
        );
    }
    // …or until the loss margin has passed, as if the lease had expired.
    let margin = fast_options().lease_duration() - fast_options().renew_deadline();
    assert!(
        acquired_within(&b, "s1", margin + SLACK).await.is_some(),
        "s1 still held after the loss margin"
    );
    drop(s1);
    assert!(matches!(
        a.lock("s1").unwrap().acquire().await,
        Err(LockError::Shutdown)
    ));
    a.shutdown().await; // idempotent
}

pub(crate) async fn bad_names_and_options_are_rejected<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let bad = fast_options().with_renew_deadline(Duration::from_secs(5));
    assert!(matches!(
        LockManager::start(store.clone(), bad.clone()).await,
        Err(LockError::InvalidOptions(_))
    ));
    let manager = start(store.clone()).await;
    assert!(matches!(
        manager.lock_with("x", bad),
        Err(LockError::InvalidOptions(_))
    ));
    let too_long = "x".repeat(mongolock::MAX_LOCK_NAME_BYTES + 1);
    let one_megabyte = "y".repeat(1 << 20);
    for name in ["", "\0", "a\0b", too_long.as_str(), one_megabyte.as_str()] {
        match manager.lock(name) {
            Err(LockError::InvalidName { name: shown, .. }) => {
                assert!(shown.len() < 100, "error repeats a huge name");
            }
            other => panic!("{:?}… accepted: {other:?}", &name[..name.len().min(10)]),
        }
    }
    assert_eq!(
        manager.active_locks().await,
        0,
        "bad input must not create anything"
    );
    let zero = LockOptions::default().with_lease_duration(Duration::ZERO);
    assert!(matches!(
        LockManager::start(store, zero).await,
        Err(LockError::InvalidOptions(_))
    ));
}

pub(crate) async fn rule_4_operator_like_names_are_plain_values<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let long = "z".repeat(mongolock::MAX_LOCK_NAME_BYTES);
    let names = [
        "$gt",
        "{\"$ne\": 1}",
        "$where",
        "a.b.c",
        "_id",
        " ",
        "注文-🔒",
        long.as_str(),
    ];
    let mut guards = Vec::new();
    for name in names {
        let guard = a.lock(name).unwrap().try_acquire().await.unwrap();
        guards.push(
            guard.unwrap_or_else(|| {
                panic!("{name:?} should be free: names are values, not operators")
            }),
        );
    }
    for name in names {
        assert!(
            b.lock(name).unwrap().try_acquire().await.unwrap().is_none(),
            "{name:?} is held"
        );
    }
    assert!(
        b.lock("plain")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_some(),
        "an operator-like name matched another lock"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
}

pub(crate) async fn panicking_lock_actor_is_isolated<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    let kept = a.lock("kept").unwrap().acquire().await.unwrap();
    let _blocker = b.lock("doomed").unwrap().acquire().await.unwrap();
    let doomed = a.lock("doomed").unwrap();
    let waiter = tokio::spawn({
        let doomed = doomed.clone();
        async move { doomed.acquire().await }
    });
    sleep(Duration::from_millis(20)).await;
    mongolock::testing::inject_actor_panic(&doomed).unwrap();
    let result = timeout(Duration::from_secs(1), waiter)
        .await
        .expect("waiter hung after the actor panicked");
    assert!(matches!(result.unwrap(), Err(LockError::ActorFailed(_))));
    // Other locks keep renewing past their expiry.
    sleep(fast_options().lease_duration() * 2).await;
    assert_eq!(kept.loss(), None);
    assert!(
        b.lock("kept")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    // The name works again with a fresh actor.
    drop(_blocker);
    let again = doomed.acquire_timeout(Duration::from_secs(2)).await;
    assert!(again.is_ok(), "{again:?}");
}

pub(crate) async fn idle_lock_actors_are_stopped<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let manager = LockManager::builder(store)
        .with_default_lock_options(fast_options())
        .with_idle_actor_timeout(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    // Counted while held: a held name's actor never idles, whereas 20 acquire-release
    // cycles one after another may outlast the idle timeout on a loaded machine.
    let mut guards = Vec::new();
    for i in 0..20 {
        guards.push(
            manager
                .lock(format!("idle-{i}"))
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        );
    }
    let held = manager.lock("busy").unwrap().acquire().await.unwrap();
    assert_eq!(manager.active_locks().await, 21);
    for guard in guards {
        guard.release().await.unwrap();
    }
    // Stopped well within a few idle timeouts; a loaded machine may take longer than one.
    assert!(
        eventually(Duration::from_secs(5), async || manager
            .active_locks()
            .await
            == 1)
        .await,
        "only the held lock's actor remains: {} live",
        manager.active_locks().await
    );
    // A stopped actor's name works again.
    let again = manager.lock("idle-3").unwrap().try_acquire().await.unwrap();
    assert!(again.is_some());
    held.release().await.unwrap();
}

pub(crate) async fn contended_lock_is_shared_with_other_processes<B: Backend>(backend: &B) {
    let (a, b, _) = two_managers(backend).await;
    // Two tasks in A want the lock back-to-back, forever: without yielding after a contended
    // release, A would always re-take it before B's poller wakes up.
    let stop = Arc::new(AtomicBool::new(false));
    let mut hogs = Vec::new();
    for _ in 0..2 {
        let (lock, stop) = (a.lock("shared").unwrap(), stop.clone());
        hogs.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = lock.acquire().await.unwrap();
                sleep(Duration::from_millis(7)).await;
                let _ = guard.release().await;
            }
        }));
    }
    // Start off the hogs' 7 ms rhythm, so no attempt of B coincides with a release of A.
    sleep(Duration::from_millis(23)).await;
    let lock = b.lock("shared").unwrap();
    // With a turn after every contended release B gets in within a few rounds (each a
    // coin flip between two random backoff sleeps); without it, it starves for seconds.
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire_timeout(Duration::from_secs(1)).await }
    });
    // Whoever holds the lock now, the other side's failed attempts mark it contended.
    let mut contended = false;
    for _ in 0..200 {
        let record = lock.inspect().await.unwrap();
        if record.is_some_and(|r| r.contended_for.is_some()) {
            contended = true;
            break;
        }
        sleep(Duration::from_millis(5)).await;
    }
    assert!(contended, "failed attempts must mark the grant contended");
    let turn = waiter.await.unwrap();
    stop.store(true, Ordering::SeqCst);
    assert!(turn.is_ok(), "another process never got a turn: {turn:?}");
    drop(turn);
    for hog in hogs {
        hog.await.unwrap();
    }
}
