//! Many processes on one lock, as the runtime's mechanisms see it (memory store, paused
//! time, so every count is exact): while a holder keeps renewing, a waiting process asks a
//! few times a minute rather than polling; a release costs one attempt, the woken
//! manager's, whatever the number of waiting processes; and a crashed holder's lock is
//! still taken over within a backoff of its lease's end.

use std::time::Duration;

use mongolock::testing::FaultyStore;
use mongolock::{LockManager, LockOptions, MemoryStore};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

/// A process: its manager and the store wrapper that counts what it asks.
struct Process {
    manager: LockManager,
    store: FaultyStore<MemoryStore>,
}

async fn process(store: &MemoryStore, options: LockOptions) -> Process {
    let store = FaultyStore::new(store.clone());
    let manager = LockManager::start(store.clone(), options)
        .await
        .expect("a manager starts on the memory store");
    Process { manager, store }
}

/// A process holding "leader" (its guard), and `waiting` more processes, all with `options`
/// on one store.
async fn leader_and_waiting(
    options: &LockOptions,
    waiting: usize,
) -> (Process, mongolock::LockGuard, Vec<Process>) {
    let store = MemoryStore::new();
    let leader = process(&store, options.clone()).await;
    let held = leader
        .manager
        .lock("leader")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let mut others = Vec::new();
    for _ in 0..waiting {
        others.push(process(&store, options.clone()).await);
    }
    (leader, held, others)
}

/// Each of `waiting` processes asks for "leader" with one task; returns their tasks.
fn wait_for_leader(waiting: &[Process]) -> Waiting {
    waiting
        .iter()
        .map(|process| {
            let lock = process.manager.lock("leader").expect("a valid name");
            tokio::spawn(async move { lock.acquire().await })
        })
        .collect()
}

/// The record of "leader" as `process` inspects it.
async fn leader_record(process: &Process) -> Option<mongolock::LockRecord> {
    process
        .manager
        .lock("leader")
        .expect("a valid name")
        .inspect()
        .await
        .expect("the memory store answers")
}

fn attempts(waiting: &[Process]) -> u64 {
    waiting
        .iter()
        .map(|process| process.store.acquire_calls())
        .sum()
}

/// The tasks of waiting processes, each asking for one lock or permit.
type Waiting = Vec<JoinHandle<Result<mongolock::LockGuard, mongolock::LockError>>>;

/// Seven processes wait in line for 3 s (a distinct arrival each): each asks only to keep
/// its place — its first attempt, then one per 0.64–0.8 s — not at a backoff's ramp from
/// 10 ms, about 12 times each. Then `held`'s release wakes the head of the line, whose one
/// attempt takes `what`: it goes in arrival order, and nobody else asks.
async fn quiet_in_line_then_one_attempt(
    held: mongolock::LockGuard,
    waiting: &[Process],
    tasks: Waiting,
    what: &str,
) {
    let waited = Duration::from_secs(3);
    sleep(waited).await;
    let asked = attempts(waiting);
    assert!(
        asked <= 7 * 6,
        "7 processes in line for {what} asked {asked} times in {waited:?} (a backoff's ramp: ~84)"
    );

    let before = attempts(waiting);
    held.release().await.unwrap();
    let (granted, first, others) = futures::future::select_all(tasks).await;
    let guard = granted.unwrap().unwrap();
    assert_eq!(first, 0, "{what} went to the first to arrive");
    assert_eq!(
        attempts(waiting) - before,
        1,
        "the release woke the head of the line, whose attempt took {what}"
    );
    drop(guard);
    for task in others {
        task.abort();
    }
}

/// One of `tasks` is granted within `bound` of the holder's crash at `crashed`.
async fn taken_within(tasks: Waiting, crashed: Instant, bound: Duration) {
    let (granted, _, others) = futures::future::select_all(tasks).await;
    let _taken = granted.unwrap().unwrap();
    assert!(
        crashed.elapsed() <= bound,
        "taken over {:?} after the crash (bound {bound:?})",
        crashed.elapsed()
    );
    for task in others {
        task.abort();
    }
}

/// One holder renewing for a minute, seven processes waiting: each asks about once per
/// quiet interval (5 s), not once per backoff (0.8 s at most). Then the release wakes one
/// of them, whose one attempt takes the lock: nobody else asks for it.
#[tokio::test(start_paused = true)]
async fn waiting_processes_stay_quiet_and_a_release_costs_one_attempt() {
    let (_leader, held, waiting) = leader_and_waiting(&LockOptions::default(), 7).await;
    let tasks = wait_for_leader(&waiting);
    sleep(Duration::from_secs(5)).await; // every waiter refused and listed
    let before = attempts(&waiting);
    sleep(Duration::from_secs(60)).await;
    let in_a_minute = attempts(&waiting) - before;
    assert!(
        in_a_minute <= 7 * 13,
        "7 waiting processes asked {in_a_minute} times in a minute (polling would be ~525)"
    );
    assert!(in_a_minute >= 7 * 10, "they still ask: {in_a_minute}");

    let before = attempts(&waiting);
    held.release().await.unwrap();
    let (granted, _, others) = futures::future::select_all(tasks).await;
    let guard = granted.unwrap().unwrap();
    assert_eq!(
        attempts(&waiting) - before,
        1,
        "the release woke one process, whose attempt took the lock"
    );
    drop(guard);
    for task in others {
        task.abort();
    }
}

/// A waiting process whose release feed is watching is listed on the record by its first
/// refused attempt, so a release wakes it first if it waited longest, and it waits quietly
/// from then on: one attempt, not a retry at the backoff's first step (10 ms by default) to
/// be listed, and not one per backoff. (Its feed watches only once the manager has met
/// contention: an uncontended acquire stays as small as it can be; a waiter refused before
/// the feed watches is listed by its retry, below.)
#[tokio::test(start_paused = true)]
async fn a_refused_waiter_whose_feed_watches_is_listed_at_once_then_waits_quietly() {
    let (_leader, held, waiting) = leader_and_waiting(&LockOptions::default(), 1).await;
    let tasks = wait_for_leader(&waiting);
    sleep(Duration::from_millis(100)).await;
    assert_eq!(
        attempts(&waiting),
        1,
        "refused with the feed watching, the first attempt lists it"
    );
    assert!(
        leader_record(&waiting[0])
            .await
            .is_some_and(|record| record.contended_for.is_some()),
        "the refusal is recorded as contention"
    );
    sleep(Duration::from_secs(4)).await;
    assert_eq!(attempts(&waiting), 1, "listed, it waits quietly");
    drop(held);
    for task in tasks {
        let guard = tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the release wakes the listed waiter at once")
            .expect("the waiting task runs to its end");
        assert!(guard.is_ok(), "{guard:?}");
    }
    assert_eq!(attempts(&waiting), 2, "woken, one attempt takes the lock");
}

/// A waiter listed before its manager's release feed was watching is listed only for its
/// backoff's time (here exactly a quiet interval, 5 s): the feed's start wakes every
/// waiter (releases before it went unseen), so refused once the feed watches, it asks
/// again at once, and that attempt lists it for the quiet wait.
#[tokio::test(start_paused = true)]
async fn a_waiter_listed_before_the_feed_watched_asks_again_once_it_does() {
    use std::sync::Arc;

    use async_trait::async_trait;
    use mongolock::store::{
        AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseKey, LockStore,
        ReleaseDemand, ReleaseOutcome,
    };
    use mongolock::{LockName, LockRecord, StoreError};
    use tokio::sync::{Notify, mpsc};

    /// The memory store, whose release feed starts watching only once `opened`.
    #[derive(Clone)]
    struct LateFeed {
        inner: MemoryStore,
        opened: Arc<Notify>,
    }

    #[async_trait]
    impl LockStore for LateFeed {
        async fn try_acquire(&self, r: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
            self.inner.try_acquire(r).await
        }
        async fn extend(&self, r: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
            self.inner.extend(r).await
        }
        async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
            self.inner.release(key).await
        }
        async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
            self.inner.inspect(name).await
        }
        async fn watch_releases(&self, demand: ReleaseDemand) -> Option<mpsc::Receiver<LockName>> {
            let (inner, opened) = (self.inner.clone(), self.opened.clone());
            let (names, feed) = mpsc::channel(16);
            tokio::spawn(async move {
                opened.notified().await;
                let Some(mut released) = inner.watch_releases(demand).await else {
                    return;
                };
                while let Some(name) = released.recv().await {
                    if names.send(name).await.is_err() {
                        return;
                    }
                }
            });
            Some(feed)
        }
    }

    let options = LockOptions::default()
        .with_retry_backoff(Duration::from_millis(10), Duration::from_millis(2500));
    let (leader, _held, _) = leader_and_waiting(&options, 0).await;
    let opened = Arc::new(Notify::new());
    let store = FaultyStore::new(LateFeed {
        inner: leader.store.inner().clone(),
        opened: opened.clone(),
    });
    let manager = LockManager::start(store.clone(), options).await.unwrap();
    let lock = manager.lock("leader").unwrap();
    let task = tokio::spawn(async move { lock.acquire().await });
    while store.acquire_calls() == 0 {
        sleep(Duration::from_millis(1)).await;
    }
    // Its second attempt lists it for twice the longest backoff; the feed starts watching
    // while that attempt's answer is on its way.
    let answer_after = Duration::from_millis(50);
    store.answer_late(answer_after);
    while store.acquire_calls() == 1 {
        sleep(Duration::from_millis(1)).await;
    }
    store.heal();
    opened.notify_one();
    sleep(answer_after + Duration::from_millis(1)).await;
    assert_eq!(
        store.acquire_calls(),
        3,
        "refused with the feed watching, the waiter listed for a backoff's time asked again \
         as the answer came"
    );
    sleep(Duration::from_secs(4)).await;
    assert_eq!(store.acquire_calls(), 3, "listed anew, it waits quietly");
    task.abort();
    manager.shutdown().await;
}

/// The holder's process stops answering (crashed): its lease runs out on the store, and a
/// waiting process, told the lease's end when it was refused, takes the lock within its
/// longest backoff of that end, as it did when it polled.
#[tokio::test(start_paused = true)]
async fn a_crashed_holders_lock_is_taken_over_within_a_backoff_of_its_lease_end() {
    let lease = Duration::from_secs(3);
    let options = LockOptions::default().with_lease_duration(lease);
    let longest_backoff = options.retry_backoff().1;
    let (leader, _held, waiting) = leader_and_waiting(&options, 3).await;
    let tasks = wait_for_leader(&waiting);
    sleep(Duration::from_secs(10)).await; // renewed all along
    leader.store.hang();
    // The last renewal went out at most a renew interval before the crash.
    taken_within(tasks, Instant::now(), lease + longest_backoff).await;
}

/// In arrival order a waiting process's first refused attempt takes its place in line: its
/// arrival counts from then, not from a retry.
#[tokio::test(start_paused = true)]
async fn in_arrival_order_the_first_refusal_takes_a_place() {
    let in_order = LockOptions::default().with_fairness(mongolock::Fairness::ArrivalOrder);
    let (leader, _held, waiting) = leader_and_waiting(&in_order, 1).await;
    let tasks = wait_for_leader(&waiting);
    while attempts(&waiting) == 0 {
        sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(attempts(&waiting), 1);
    let queue = leader_record(&leader)
        .await
        .map_or(0, |record| record.queue.len());
    assert_eq!(queue, 1, "the first refusal put its process in line");
    for task in tasks {
        task.abort();
    }
}

/// A process that shuts down while waiting in arrival order gives its place in the line up
/// at once: those behind it do not wait for the place to end.
#[tokio::test(start_paused = true)]
async fn a_process_shutting_down_leaves_the_line_at_once() {
    let in_order = LockOptions::default().with_fairness(mongolock::Fairness::ArrivalOrder);
    let (leader, _held, waiting) = leader_and_waiting(&in_order, 1).await;
    let tasks = wait_for_leader(&waiting);
    let in_line = async || {
        leader_record(&leader)
            .await
            .map_or(0, |record| record.queue.len())
    };
    while in_line().await == 0 {
        sleep(Duration::from_millis(10)).await;
    }
    for waiter in waiting {
        waiter.manager.shutdown().await;
    }
    assert_eq!(in_line().await, 0, "the place went with the shutdown");
    for task in tasks {
        task.abort();
    }
}

/// In arrival order a waiting process is in line, and a release wakes the head of it: it
/// asks only to keep its place (about twice per place's life, 1.6 s by default), not at a
/// backoff's ramp from 10 ms, which would ask about 12 times in the first 3 s. The release
/// then costs one attempt, the head's, and the lock goes in arrival order.
#[tokio::test(start_paused = true)]
async fn waiting_in_line_a_process_asks_only_to_keep_its_place() {
    let in_order = LockOptions::default().with_fairness(mongolock::Fairness::ArrivalOrder);
    let (_leader, held, waiting) = leader_and_waiting(&in_order, 7).await;
    let mut tasks = Vec::new();
    for process in &waiting {
        let lock = process.manager.lock("leader").expect("a valid name");
        tasks.push(tokio::spawn(async move { lock.acquire().await }));
        sleep(Duration::from_millis(1)).await; // a distinct arrival each
    }
    quiet_in_line_then_one_attempt(held, &waiting, tasks, "the lock").await;
}

/// A process holding a permit of the semaphore "pool" of one, and `waiting` more processes
/// each asking for a permit with one task, all in arrival order on one store (a distinct
/// arrival each); returns the holder's process and guard, the waiting processes and their
/// tasks.
async fn permit_held_and_waiting(
    options: &LockOptions,
    waiting: usize,
) -> (Process, mongolock::LockGuard, Vec<Process>, Waiting) {
    let store = MemoryStore::new();
    let holder = process(&store, options.clone()).await;
    let held = holder
        .manager
        .semaphore("pool", 1)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let mut others = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..waiting {
        let process = process(&store, options.clone()).await;
        let permits = process.manager.semaphore("pool", 1).expect("a valid name");
        tasks.push(tokio::spawn(async move { permits.acquire().await }));
        others.push(process);
        sleep(Duration::from_millis(1)).await;
    }
    (holder, held, others, tasks)
}

/// In arrival order a process waiting for a semaphore's permit is in line as a mutex's
/// waiter is, and a release wakes only the head of it (the store's rule 22 for shared
/// records): it asks only to keep its place, not at a backoff's ramp from 10 ms, and the
/// release costs one attempt, the head's.
#[tokio::test(start_paused = true)]
async fn waiting_in_line_for_a_permit_a_process_asks_only_to_keep_its_place() {
    let in_order = LockOptions::default().with_fairness(mongolock::Fairness::ArrivalOrder);
    let (_holder, held, waiting, tasks) = permit_held_and_waiting(&in_order, 7).await;
    quiet_in_line_then_one_attempt(held, &waiting, tasks, "the permit").await;
}

/// A permit's holder crashes while processes wait for it quietly in line: told when the
/// holder's lease ends (`Busy`'s `lease_left` on a shared record), one of them takes the
/// permit within its longest backoff of that end, as when it polled — here a backoff of
/// 100 ms at most, shorter than the half second between renewals of a place.
#[tokio::test(start_paused = true)]
async fn a_crashed_permit_holders_place_is_taken_within_a_backoff_of_its_lease_end() {
    let lease = Duration::from_secs(3);
    let options = LockOptions::default()
        .with_lease_duration(lease)
        .with_retry_backoff(Duration::from_millis(10), Duration::from_millis(100))
        .with_fairness(mongolock::Fairness::ArrivalOrder);
    let longest_backoff = options.retry_backoff().1;
    let (holder, _held, _waiting, tasks) = permit_held_and_waiting(&options, 3).await;
    sleep(Duration::from_secs(10)).await; // renewed all along
    holder.store.hang();
    // The last renewal went out at most a renew interval before the crash.
    taken_within(tasks, Instant::now(), lease + longest_backoff).await;
}
