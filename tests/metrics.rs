//! The metrics the runtime emits through the `metrics` facade, captured with
//! metrics-util's debugging recorder (a global recorder: this binary holds one test).

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use mongolock::{LockManager, LockName, LockOptions, MemoryStore};

/// Sums what the recorder saw: its snapshots drain counters, gauges and histograms, and
/// the runtime only increments them, so the running sum is the current value (for
/// histograms: the number of samples). The leader and oldest-waiter gauges are set, so their
/// latest value counts.
/// A metric's name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

/// The series of metric `name` with `labels`, labels sorted.
fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    (name.to_owned(), labels)
}

#[derive(Default)]
struct Totals {
    values: HashMap<Series, f64>,
    /// Every histogram sample seen, by series.
    samples: HashMap<Series, Vec<f64>>,
}

impl Totals {
    fn value(
        &mut self,
        snapshotter: &Snapshotter,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<f64> {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let mut key_labels: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            key_labels.sort();
            let series = (key.key().name().to_owned(), key_labels);
            let amount = match value {
                DebugValue::Counter(v) => v as f64,
                DebugValue::Gauge(v) => v.into_inner(),
                DebugValue::Histogram(v) => {
                    let samples = self.samples.entry(series.clone()).or_default();
                    samples.extend(v.iter().map(|sample| sample.into_inner()));
                    v.len() as f64
                }
            };
            let entry = self.values.entry(series).or_default();
            if [
                "mongolock_leader",
                "mongolock_oldest_waiter_start_time_seconds",
            ]
            .contains(&key.key().name())
            {
                *entry = amount; // set, not incremented: the latest value is the value
            } else {
                *entry += amount;
            }
        }
        self.stored(name, labels)
    }

    /// The value of a series as of the last [`Totals::value`] (no new snapshot).
    fn stored(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.values.get(&series(name, labels)).copied()
    }

    /// The samples of a histogram, as of the last [`Totals::value`].
    fn samples(&self, name: &str, labels: &[(&str, &str)]) -> &[f64] {
        self.samples
            .get(&series(name, labels))
            .map_or(&[], Vec::as_slice)
    }

    fn any_label(&self, key: &str, value: &str) -> bool {
        self.values
            .keys()
            .any(|(_, labels)| labels.iter().any(|(k, v)| k == key && v == value))
    }
}

#[tokio::test(start_paused = true)]
async fn contention_holds_renewals_and_losses_are_measured() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).expect("first recorder in this binary");

    let mut totals = Totals::default();
    let store = MemoryStore::new();
    let options = LockOptions::default().with_lease_duration(Duration::from_secs(3));
    let a = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let b = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();

    let held = a.lock("orders").unwrap().acquire().await.unwrap();
    assert_eq!(
        totals.value(&snapshotter, "mongolock_held_locks", &[]),
        Some(1.0)
    );
    // Granted at its first attempt, the acquisition never waited: the oldest-waiter gauge's
    // registry is not touched.
    assert_eq!(
        totals.stored("mongolock_oldest_waiter_start_time_seconds", &[]),
        None
    );

    let waiter = tokio::spawn({
        let lock = b.lock("orders").unwrap();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        totals.value(&snapshotter, "mongolock_waiters", &[]),
        Some(1.0)
    );
    // The waiter began to wait half a second ago by the paused clock, which the wall clock
    // the gauge is in does not follow: its start is a moment ago in wall-clock time.
    let unix_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // Read from the snapshot the waiters' count came from: a snapshot resets gauges.
    let since = totals
        .stored("mongolock_oldest_waiter_start_time_seconds", &[])
        .expect("the oldest waiter is reported");
    assert!(
        (unix_now - 5.0..=unix_now).contains(&since),
        "{since} against {unix_now}"
    );
    assert!(
        totals.value(
            &snapshotter,
            "mongolock_acquire_attempts_total",
            &[("result", "contended")]
        ) >= Some(1.0)
    );
    // 2.5 s held with a 1 s cadence: renewals happened.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        totals.value(
            &snapshotter,
            "mongolock_renewals_total",
            &[("result", "extended")]
        ) >= Some(2.0)
    );

    held.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert_eq!(
        totals.value(&snapshotter, "mongolock_waiters", &[]),
        Some(0.0)
    );
    assert_eq!(
        totals.value(
            &snapshotter,
            "mongolock_acquire_attempts_total",
            &[("result", "acquired")]
        ),
        Some(2.0)
    );
    assert_eq!(
        totals.value(&snapshotter, "mongolock_acquire_wait_seconds", &[]),
        Some(2.0)
    );
    assert_eq!(
        totals.value(&snapshotter, "mongolock_hold_seconds", &[]),
        Some(1.0)
    );
    // The release told how long the waiter elsewhere had waited.
    let others_waited = totals.samples("mongolock_others_waited_seconds", &[]);
    assert!(
        others_waited.len() == 1 && (2.49..2.51).contains(&others_waited[0]),
        "{others_waited:?}"
    );

    // Waiters here step back once those elsewhere have waited the fairness bound (10 ms
    // at this lease), and each step back is counted: the first local waiter gets the lock
    // by the hand-over, gives it back plainly, and the second steps back for the remote.
    let first = a.lock("turns").unwrap().acquire().await.unwrap();
    let take_and_release = |manager: &LockManager| {
        let lock = manager.lock("turns").unwrap();
        tokio::spawn(async move { lock.acquire().await.unwrap().release().await.unwrap() })
    };
    let here = [take_and_release(&a), take_and_release(&a)];
    let elsewhere = take_and_release(&b);
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.release().await.unwrap();
    for task in here.into_iter().chain([elsewhere]) {
        task.await.unwrap();
    }
    assert_eq!(
        totals.value(&snapshotter, "mongolock_step_backs_total", &[]),
        Some(1.0)
    );

    store.remove(&LockName::new("orders").unwrap());
    second.lost().await;
    assert_eq!(
        totals.value(
            &snapshotter,
            "mongolock_losses_total",
            &[("reason", "superseded")]
        ),
        Some(1.0)
    );
    assert_eq!(
        totals.value(&snapshotter, "mongolock_held_locks", &[]),
        Some(0.0)
    );
    assert!(
        totals.value(
            &snapshotter,
            "mongolock_store_operation_seconds",
            &[("op", "acquire")]
        ) >= Some(2.0)
    );

    // The lock name label only where asked for.
    let labelled = a
        .lock_with("billing", options.clone().with_lock_name_label(true))
        .unwrap();
    drop(labelled.acquire().await.unwrap());
    assert_eq!(
        totals.value(
            &snapshotter,
            "mongolock_acquire_attempts_total",
            &[("lock", "billing"), ("result", "acquired")]
        ),
        Some(1.0)
    );
    let unlabelled = !totals.any_label("lock", "orders");
    assert!(unlabelled, "names are not labels unless enabled");

    // An allow-list labels the names it lists and no others.
    let policy = mongolock::LockNameLabel::allow_list(["audit"]);
    let listed = LockOptions::default().with_lock_name_label(policy);
    for name in ["audit", "noise"] {
        let lock = a.lock_with(name, listed.clone()).unwrap();
        drop(lock.acquire().await.unwrap());
    }
    totals.value(&snapshotter, "mongolock_held_locks", &[]);
    assert!(totals.any_label("lock", "audit"));
    assert!(!totals.any_label("lock", "noise"));

    // A lock passed to a local waiter is the waiter's hold: counted in its series, timed
    // from its own grant.
    // (A fairness bound longer than the wait: the lock passes locally after it.)
    let relay = a
        .lock_with(
            "relay",
            options.clone().with_fairness_bound(Duration::from_secs(60)),
        )
        .unwrap();
    let first = relay.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = a
            .lock_with("relay", options.clone().with_lock_name_label(true))
            .unwrap();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Queued behind a hold of its own process, the task is a waiter the oldest-waiter gauge
    // shows, though no attempt of its own was refused.
    let waiting_since = totals.value(
        &snapshotter,
        "mongolock_oldest_waiter_start_time_seconds",
        &[("lock", "relay")],
    );
    assert!(
        waiting_since > Some(0.0),
        "a task waiting behind a local hold is reported: {waiting_since:?}"
    );
    let token = first.token();
    first.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert_eq!(second.token(), token + 1, "passed locally");
    let relayed = [("lock", "relay")];
    assert_eq!(
        totals.value(&snapshotter, "mongolock_held_locks", &relayed),
        Some(1.0)
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    second.release().await.unwrap();
    assert_eq!(
        totals.value(&snapshotter, "mongolock_held_locks", &relayed),
        Some(0.0)
    );
    let held_for = totals.samples("mongolock_hold_seconds", &relayed);
    assert!(
        held_for.len() == 1 && (0.7..0.75).contains(&held_for[0]),
        "{held_for:?}"
    );

    // A semaphore's count is reported while its actor runs.
    let permits = a.semaphore("pool", 3).unwrap();
    drop(permits.acquire().await.unwrap());
    assert_eq!(
        totals.value(&snapshotter, "mongolock_semaphore_permits", &[]),
        Some(3.0)
    );

    // The leader gauge follows terms.
    let election = a
        .election("scheduler", mongolock::ElectionOptions::default())
        .unwrap();
    election.campaign().await.unwrap();
    assert_eq!(
        totals.value(
            &snapshotter,
            "mongolock_leader",
            &[("election", "scheduler")]
        ),
        Some(1.0)
    );
    election.resign().await.unwrap();
    assert_eq!(
        totals.value(
            &snapshotter,
            "mongolock_leader",
            &[("election", "scheduler")]
        ),
        Some(0.0)
    );

    // Readers who joined one read grant each count as a held read, and none stays a
    // waiter; each leaves the held gauge as it lets go.
    let read = [("access", "read")];
    let writing = b.rw_lock("files").unwrap().write().await.unwrap();
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let files = a.rw_lock("files").unwrap();
            tokio::spawn(async move { files.read().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        totals.value(&snapshotter, "mongolock_waiters", &read),
        Some(3.0)
    );
    writing.release().await.unwrap();
    let mut reads = Vec::new();
    for reader in readers {
        reads.push(reader.await.unwrap().unwrap());
    }
    assert_eq!(
        totals.value(&snapshotter, "mongolock_held_locks", &read),
        Some(3.0),
        "every reader of the grant is a held read"
    );
    assert_eq!(totals.stored("mongolock_waiters", &read), Some(0.0));
    let hold_times = totals.samples("mongolock_hold_seconds", &read).len();
    for (left, guard) in reads.into_iter().enumerate() {
        guard.release().await.unwrap();
        assert_eq!(
            totals.value(&snapshotter, "mongolock_held_locks", &read),
            Some(2.0 - left as f64),
            "a reader that let go is still held"
        );
    }
    assert_eq!(
        totals.samples("mongolock_hold_seconds", &read).len(),
        hold_times + 3,
        "a hold time per reader"
    );

    // A hold whose renewals fail is counted at risk until a renewal is confirmed again.
    let faulty = mongolock::testing::FaultyStore::new(store.clone());
    let c = LockManager::start(faulty.clone(), LockOptions::default())
        .await
        .unwrap();
    let guard = c.lock("risky").unwrap().acquire().await.unwrap();
    faulty.fail();
    guard.at_risk().await;
    assert_eq!(
        totals.value(&snapshotter, "mongolock_at_risk_locks", &[]),
        Some(1.0)
    );
    faulty.heal();
    guard.loss_signal().recovered().await;
    assert_eq!(
        totals.value(&snapshotter, "mongolock_at_risk_locks", &[]),
        Some(0.0)
    );
    // So is one whose store stops answering, before the loss.
    faulty.hang();
    tokio::time::timeout(LockOptions::default().renew_deadline(), guard.at_risk())
        .await
        .expect("no warning while the store hung");
    assert_eq!(guard.loss(), None);
    assert_eq!(
        totals.value(&snapshotter, "mongolock_at_risk_locks", &[]),
        Some(1.0)
    );
    guard.lost().await;
    assert_eq!(
        totals.value(&snapshotter, "mongolock_at_risk_locks", &[]),
        Some(0.0)
    );
    faulty.heal();
    drop(guard);
    c.shutdown().await;
    a.shutdown().await;
    assert_eq!(
        totals.value(&snapshotter, "mongolock_semaphore_permits", &[]),
        Some(0.0),
        "a stopped semaphore actor still reports its count"
    );

    // A waiter leaves the gauge however its wait ends: given up, its actor failed, or its
    // manager shut down.
    let queue = b.lock("queue").unwrap();
    let waiting = |lock: &mongolock::Lock| {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(5)).await })
    };
    let held = queue.acquire().await.unwrap();
    let gave_up = queue.acquire_timeout(Duration::from_millis(100)).await;
    assert!(gave_up.is_err());
    held.release().await.unwrap();
    assert_eq!(
        totals.value(&snapshotter, "mongolock_waiters", &[]),
        Some(0.0),
        "a waiter that gave up is still counted"
    );
    let held = queue.acquire().await.unwrap();
    let failed = waiting(&queue);
    tokio::time::sleep(Duration::from_millis(10)).await;
    mongolock::testing::inject_actor_panic(&queue).unwrap();
    assert!(failed.await.unwrap().is_err());
    drop(held);
    assert_eq!(
        totals.value(&snapshotter, "mongolock_waiters", &[]),
        Some(0.0),
        "a waiter of a failed actor is still counted"
    );
    let held = queue.acquire().await.unwrap();
    let shut_out = waiting(&queue);
    tokio::time::sleep(Duration::from_millis(10)).await;
    b.shutdown().await;
    assert!(shut_out.await.unwrap().is_err());
    drop(held);
    assert_eq!(
        totals.value(&snapshotter, "mongolock_waiters", &[]),
        Some(0.0),
        "a waiter failed by the shutdown is still counted"
    );

    // A waiter that got in takes its start out of the oldest-waiter gauge: with nobody else
    // waiting the gauge reads 0. (No snapshot while it waits: a snapshot resets gauges, so 0
    // here is a value set when the waiter left, not the reset.)
    let holding = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let asking = LockManager::start(store.clone(), options.clone())
        .await
        .unwrap();
    let held = holding.lock("last").unwrap().acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = asking.lock("last").unwrap();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.release().await.unwrap();
    let got_in = waiter.await.unwrap().unwrap();
    assert_eq!(
        totals.value(
            &snapshotter,
            "mongolock_oldest_waiter_start_time_seconds",
            &[]
        ),
        Some(0.0),
        "a waiter that got in is still shown as waiting"
    );
    got_in.release().await.unwrap();
    holding.shutdown().await;
    asking.shutdown().await;
}
