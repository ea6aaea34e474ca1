//! The per-name actor's answers to messages a guard, a timer or a store call could send
//! late or twice: checked by sending them directly.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::lock::message::LockMsg;
use crate::lock::runtime::Runtime;
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::memory::MemoryStore;
use crate::store::request::HolderId;
use crate::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};

/// The manager shuts down while an acquisition's answer is queued behind the shutdown
/// (a store that answers at once queues it at the attempt): the stopping actor never
/// handles it, and the grant it carries is released, not left held by nobody until it
/// expires — before the manager's shutdown returns.
#[tokio::test(start_paused = true)]
async fn a_grant_queued_behind_shutdown_is_released() {
    let store = MemoryStore::new();
    let runtime = Runtime::start(
        Arc::new(store.clone()),
        HolderId::generate(),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let name = LockName::new("queued").unwrap();
    let options = Arc::new(LockOptions::default());
    let lock = runtime.lock(name.clone(), options.clone());
    lock.acquire().await.unwrap().release().await.unwrap();
    let route = lock.cached_route().unwrap();

    // Both messages wait in the mailbox before the actor runs.
    let (reply, answer) = oneshot::channel();
    let acquire = LockMsg::Acquire {
        access: crate::kind::Access::Exclusive,
        options,
        requested_at: Instant::now(),
        reply,
    };
    assert!(route.send_request(acquire).is_ok());
    let (stopped, _) = oneshot::channel();
    route
        .actor
        .send_message(LockMsg::Shutdown { reply: stopped })
        .unwrap();
    assert!(
        answer.await.unwrap().is_err(),
        "the waiter is failed by the shutdown"
    );
    runtime.shutdown().await;

    let other = AcquireRequest::new(
        name,
        LeaseId::new(),
        HolderId::generate(),
        Duration::from_secs(30),
    );
    assert!(
        matches!(
            store.try_acquire(&other).await.unwrap(),
            AcquireOutcome::Acquired { .. }
        ),
        "a grant nobody owns is still held after the shutdown"
    );
}

async fn runtime_on(store: Arc<dyn LockStore>) -> Arc<Runtime> {
    Runtime::start(store, HolderId::generate(), Duration::from_secs(60))
        .await
        .unwrap()
}

/// Sends `message(reply)` to `actor` and waits for the answer.
async fn ask<T>(
    actor: &ractor::ActorRef<LockMsg>,
    message: impl FnOnce(oneshot::Sender<T>) -> LockMsg,
) -> T {
    let (reply, answer) = oneshot::channel();
    actor.send_message(message(reply)).unwrap();
    answer.await.unwrap()
}

/// Releases `lease` as the guard holding it under `token` would.
async fn release_as(
    actor: &ractor::ActorRef<LockMsg>,
    lease: LeaseId,
    token: u64,
) -> Result<(), crate::error::LockError> {
    ask(actor, |reply| LockMsg::Release {
        lease,
        token,
        reply: Some(reply),
    })
    .await
}

/// Detaches `lease` as a multi-lock holding it under `token` would.
async fn detach_as(
    actor: &ractor::ActorRef<LockMsg>,
    lease: LeaseId,
    token: u64,
) -> Result<crate::store::LeaseKey, crate::error::LockError> {
    ask(actor, |reply| LockMsg::Detach {
        lease,
        token,
        reply,
    })
    .await
}

/// Local holders one after another share a lease and differ by token: a release or a
/// detach naming the lease under any other token (a guard of an earlier holder) leaves the
/// current holder's hold alone.
#[tokio::test(start_paused = true)]
async fn a_release_or_detach_under_another_token_of_the_lease_frees_nothing() {
    use crate::error::{LockError, LossReason};

    let store = MemoryStore::new();
    let runtime = runtime_on(Arc::new(store.clone())).await;
    let name = LockName::new("passed").unwrap();
    let lock = runtime.lock(name.clone(), Arc::new(LockOptions::default()));
    let (_, lease, token, actor) = lock.acquire().await.unwrap().into_parts();
    for stale in [token - 1, token + 1] {
        let released = release_as(&actor, lease, stale).await;
        assert!(
            released.is_ok(),
            "a stale guard's release is done: {released:?}"
        );
        let detached = detach_as(&actor, lease, stale).await;
        assert!(
            matches!(detached, Err(LockError::Lost(LossReason::Superseded))),
            "{detached:?}"
        );
        assert!(
            store.is_locked_by(&name, lease),
            "token {stale} freed the lock"
        );
    }
    let released = release_as(&actor, lease, token).await;
    assert!(released.is_ok(), "{released:?}");
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(
        !store.is_locked_by(&name, lease),
        "the holder's release freed nothing"
    );
}

/// A detach that reaches the actor at its hold's deadline (the process was paused, the
/// deadline's own message is still queued) is a loss, as a late release is.
#[tokio::test(start_paused = true)]
async fn a_detach_at_the_deadline_is_a_loss() {
    use futures::FutureExt;

    use crate::error::{LockError, LossReason};

    let store = MemoryStore::new();
    let runtime = runtime_on(Arc::new(store.clone())).await;
    let options = Arc::new(LockOptions::default());
    let lock = runtime.lock(LockName::new("paused").unwrap(), options.clone());
    let guard = lock.acquire().await.unwrap();
    let deadline = guard.last_renewed() + options.renew_deadline();
    let (_, lease, token, actor) = guard.into_parts();
    let (reply, answer) = oneshot::channel();
    actor
        .send_message(LockMsg::Detach {
            lease,
            token,
            reply,
        })
        .unwrap();
    let _ = tokio::time::advance(deadline - Instant::now()).now_or_never();
    let detached = answer.await.unwrap();
    assert!(
        matches!(detached, Err(LockError::Lost(LossReason::DeadlineExceeded))),
        "{detached:?}"
    );
}

/// Multi-locks are made of mutexes: a permit is never detached from its actor.
#[tokio::test(start_paused = true)]
async fn a_permit_is_not_detached() {
    use crate::error::LockError;
    use crate::lock::semaphore::Semaphore;

    let store = MemoryStore::new();
    let runtime = runtime_on(Arc::new(store.clone())).await;
    let name = LockName::new("permits").unwrap();
    let lock = runtime.lock(name.clone(), Arc::new(LockOptions::default()));
    let semaphore = Semaphore::new(lock, 2).unwrap();
    let (_, lease, token, actor) = semaphore.acquire().await.unwrap().into_parts();
    let detached = detach_as(&actor, lease, token).await;
    assert!(
        matches!(detached, Err(LockError::KindMismatch { .. })),
        "{detached:?}"
    );
    let released = release_as(&actor, lease, token).await;
    assert!(
        released.is_ok(),
        "the permit was not held any more: {released:?}"
    );
}

/// A timer message of a timer since replaced (its id is not the current timer's, or its
/// moment has not come) starts nothing: no early renewal, no early attempt while backing
/// off, no retirement of an idle actor.
#[tokio::test(start_paused = true)]
async fn a_stale_timer_message_starts_nothing() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    // Store calls are counted by the latency samples this thread's tasks record.
    let count_calls = |op: &str| {
        let mut calls = 0;
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let of_op = key.key().labels().any(|label| label.value() == op);
            if let (true, DebugValue::Histogram(samples)) = (of_op, value) {
                calls += samples.len();
            }
        }
        calls
    };
    let mut attempts = 0;
    let mut count_attempts = || {
        attempts += count_calls("acquire");
        attempts
    };

    let store = MemoryStore::new();
    let here = runtime_on(Arc::new(store.clone())).await;
    let elsewhere = runtime_on(Arc::new(store.clone())).await;
    let name = LockName::new("timers").unwrap();
    let options = Arc::new(LockOptions::default());
    let held = elsewhere
        .lock(name.clone(), options.clone())
        .acquire()
        .await
        .unwrap();
    // Other names' actors take this manager's first timers: ids 0 and 1 are stale here.
    for warm in ["warm-0", "warm-1"] {
        let warm = here.lock(LockName::new(warm).unwrap(), options.clone());
        warm.acquire().await.unwrap().release().await.unwrap();
    }
    const STALE: [u64; 3] = [0, 1, u64::MAX];
    let before = count_attempts();
    let lock = here.lock(name.clone(), options.clone());
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await; // refused once, backing off
    assert_eq!(count_attempts(), before + 1);
    let actor = lock.cached_route().unwrap().actor;
    for timer in STALE {
        actor.send_message(LockMsg::RetryDue { timer }).unwrap();
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        count_attempts(),
        before + 1,
        "a stale retry timer sent an attempt"
    );

    held.release().await.unwrap();
    let (_, lease, token, _) = waiting.await.unwrap().unwrap().into_parts();
    actor.send_message(LockMsg::HoldDue { lease }).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await; // a renewal's answer is back
    assert_eq!(
        count_calls("extend"),
        0,
        "a renewal was sent before it was due"
    );
    let released = release_as(&actor, lease, token).await;
    assert!(released.is_ok(), "{released:?}");
    for timer in STALE {
        actor.send_message(LockMsg::IdleDue { timer }).unwrap();
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        actor.get_status(),
        ractor::ActorStatus::Running,
        "a stale idle timer stopped the actor"
    );
}

/// A memory store whose bulk renewals take [`SlowBulkRenewals::TAKES`] and carry at most
/// two leases; it counts acquisition attempts.
struct SlowBulkRenewals {
    inner: MemoryStore,
    attempts: std::sync::atomic::AtomicUsize,
    takes: Duration,
}

impl SlowBulkRenewals {
    fn new(takes: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryStore::new(),
            attempts: std::sync::atomic::AtomicUsize::new(0),
            takes,
        })
    }

    /// A runtime on this store holding three locks whose renewals fall due together (the
    /// first command takes two), and the options they were taken with.
    async fn holding_three(
        self: &Arc<Self>,
        options: LockOptions,
    ) -> (
        Arc<Runtime>,
        Arc<LockOptions>,
        Vec<crate::lock::guard::LockGuard>,
    ) {
        let runtime = runtime_on(self.clone()).await;
        let options = Arc::new(options);
        let mut held = Vec::new();
        for name in ["a", "b", "c"] {
            let lock = runtime.lock(LockName::new(name).unwrap(), options.clone());
            held.push(lock.acquire().await.unwrap());
        }
        assert_eq!(self.attempts(), 3);
        (runtime, options, held)
    }

    /// A runtime holding three locks (lease 6 s, renewed every 2 s) just after their
    /// renewals fell due together and the first command took two, and an acquisition of
    /// another name asked for 100 ms later (its attempt waiting for the third renewal).
    async fn attempt_behind_renewals() -> (
        Arc<Self>,
        Arc<Runtime>,
        Vec<crate::lock::guard::LockGuard>,
        tokio::task::JoinHandle<Result<crate::lock::guard::LockGuard, crate::error::LockError>>,
    ) {
        let store = Self::new(Duration::from_secs(1));
        let (runtime, options, held) = store
            .holding_three(
                LockOptions::default()
                    .with_lease_duration(Duration::from_secs(6))
                    .with_renew_interval(Duration::from_secs(2)),
            )
            .await;
        tokio::time::sleep(options.renew_interval() + Duration::from_millis(100)).await;
        let waiting = tokio::spawn({
            let lock = runtime.lock(LockName::new("d").unwrap(), options.clone());
            async move { lock.acquire().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        (store, runtime, held, waiting)
    }

    fn attempts(&self) -> usize {
        self.attempts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl LockStore for SlowBulkRenewals {
    async fn try_acquire(
        &self,
        request: &AcquireRequest,
    ) -> Result<AcquireOutcome, crate::error::StoreError> {
        self.attempts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.try_acquire(request).await
    }

    async fn extend(
        &self,
        request: &crate::store::ExtendRequest,
    ) -> Result<crate::store::ExtendOutcome, crate::error::StoreError> {
        self.inner.extend(request).await
    }

    async fn extend_many(
        &self,
        requests: &[crate::store::ExtendRequest],
    ) -> Vec<Result<crate::store::ExtendOutcome, crate::error::StoreError>> {
        tokio::time::sleep(self.takes).await;
        self.inner.extend_many(requests).await
    }

    fn max_extend_batch(&self) -> usize {
        2
    }

    async fn release(
        &self,
        key: &crate::store::LeaseKey,
    ) -> Result<crate::store::ReleaseOutcome, crate::error::StoreError> {
        self.inner.release(key).await
    }

    async fn inspect(
        &self,
        name: &LockName,
    ) -> Result<Option<crate::store::outcome::LockRecord>, crate::error::StoreError> {
        self.inner.inspect(name).await
    }
}

/// While more renewals are due than the command out could take, an acquisition attempt
/// waits for them (the server's time goes to the leases held first) and goes once the
/// renewer has caught up.
#[tokio::test(start_paused = true)]
async fn an_attempt_waits_while_renewals_are_left_behind() {
    let (store, _runtime, held, waiting) = SlowBulkRenewals::attempt_behind_renewals().await;
    assert_eq!(
        store.attempts(),
        3,
        "the attempt went ahead of the renewal left behind"
    );
    let guard = waiting.await.unwrap().unwrap();
    assert_eq!(store.attempts(), 4);
    assert!(held.iter().chain([&guard]).all(|g| g.loss().is_none()));
}

/// In arrival order an attempt is not held back behind renewals: its place in line is taken
/// when it reaches the store, so a wait would put the task behind whoever asked elsewhere
/// meanwhile.
#[tokio::test(start_paused = true)]
async fn an_attempt_in_arrival_order_does_not_wait_for_renewals() {
    let store = SlowBulkRenewals::new(Duration::from_secs(1));
    let (runtime, options, held) = store
        .holding_three(
            LockOptions::default()
                .with_lease_duration(Duration::from_secs(6))
                .with_renew_interval(Duration::from_secs(2))
                .with_fairness(crate::options::Fairness::ArrivalOrder),
        )
        .await;
    tokio::time::sleep(options.renew_interval() + Duration::from_millis(100)).await;
    let lock = runtime.lock(LockName::new("d").unwrap(), options.clone());
    let waiting = tokio::spawn(async move { lock.acquire().await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        store.attempts(),
        4,
        "the attempt in arrival order waited for the renewal left behind"
    );
    let guard = waiting.await.unwrap().unwrap();
    assert!(held.iter().chain([&guard]).all(|g| g.loss().is_none()));
}

/// An attempt that waited for renewals as long as it may is sent then, and its time counts
/// from then: its grant is kept, not judged too late for the wait before it (which would
/// release it, send another and load the server that fell behind with both).
#[tokio::test(start_paused = true)]
async fn an_attempt_that_waited_out_its_bound_counts_its_time_from_when_it_went() {
    let renew_interval = Duration::from_secs(1);
    // Renewals stay behind for longer than an attempt waits for them.
    let store = SlowBulkRenewals::new(renew_interval * 3);
    let (runtime, options, _held) = store
        .holding_three(
            LockOptions::default()
                .with_lease_duration(Duration::from_secs(20))
                .with_renew_interval(renew_interval),
        )
        .await;
    tokio::time::sleep(renew_interval + Duration::from_millis(100)).await;
    let asked = Instant::now();
    let lock = runtime.lock(LockName::new("d").unwrap(), options.clone());
    let guard = lock.acquire().await.unwrap();
    assert_eq!(
        asked.elapsed(),
        renew_interval,
        "sent once the wait ran out"
    );
    assert_eq!(store.attempts(), 4, "one attempt, granted and kept");
    assert!(guard.loss().is_none());
}

/// An attempt waiting for renewals when its manager shuts down is never sent: after
/// `shutdown` returns the manager sends nothing but releases.
#[tokio::test(start_paused = true)]
async fn an_attempt_waiting_for_renewals_at_shutdown_is_never_sent() {
    let (store, runtime, held, waiting) = SlowBulkRenewals::attempt_behind_renewals().await;
    drop(held);
    runtime.shutdown().await;
    assert!(waiting.await.unwrap().is_err(), "the waiter is failed");
    tokio::time::sleep(Duration::from_secs(4)).await; // two renew intervals
    assert_eq!(store.attempts(), 3, "an attempt was sent after shutdown");
}

/// An acquisition cancelled while its attempt waits for renewals sends nothing: the
/// attempt is abandoned unsent rather than granted and released as an orphan, and the next
/// acquisition of the name gets its own attempt.
#[tokio::test(start_paused = true)]
async fn an_attempt_waiting_for_renewals_is_not_sent_once_its_waiter_left() {
    let (store, runtime, held, waiting) = SlowBulkRenewals::attempt_behind_renewals().await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    tokio::time::sleep(Duration::from_secs(4)).await; // two renew intervals
    assert_eq!(
        store.attempts(),
        3,
        "the cancelled acquisition's attempt was sent"
    );
    let options = Arc::new(
        LockOptions::default()
            .with_lease_duration(Duration::from_secs(6))
            .with_renew_interval(Duration::from_secs(2)),
    );
    let lock = runtime.lock(LockName::new("d").unwrap(), options);
    let guard = lock.acquire().await.unwrap();
    assert_eq!(store.attempts(), 4, "one attempt for the next acquisition");
    assert!(held.iter().chain([&guard]).all(|g| g.loss().is_none()));
}
