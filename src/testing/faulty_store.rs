use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::name::LockName;
use crate::store::outcome::LockRecord;
use crate::store::request::HolderId;
use crate::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, LeaseKey,
    LockStore, ReleaseDemand, ReleaseOutcome,
};

const PASS: u8 = 0;
const HANG: u8 = 1;
const FAIL: u8 = 2;
const STALL: u8 = 3;
const ANSWER_LATE: u8 = 4;

/// Wraps any [`LockStore`] and, on command, makes every call hang (a partitioned or stalled
/// server, a crashed process' view of the world), fail at once, or stall — reach the store
/// only after a delay, and then be applied whether or not the caller still waits, as a
/// server applies a command it received — or answer late (applied at once, the reply
/// delayed), to test how a service behaves when its lock store misbehaves. It also counts
/// acquisition attempts.
///
/// Clones share the switch. With the switch at "pass" it adds nothing but a counter.
///
/// ```
/// use mongolock::testing::FaultyStore;
/// use mongolock::{LockManager, LockOptions, LossReason, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), mongolock::LockError> {
/// let store = FaultyStore::new(MemoryStore::new());
/// let options = LockOptions::default().with_lease_duration(Duration::from_secs(3));
/// let manager = LockManager::start(store.clone(), options).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// store.hang(); // the database stops answering
/// assert_eq!(guard.lost().await, LossReason::DeadlineExceeded);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FaultyStore<S> {
    inner: Arc<S>,
    mode: Arc<AtomicU8>,
    delay_ms: Arc<AtomicU64>,
    acquire_calls: Arc<AtomicU64>,
    hand_over_calls: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
}

impl<S: LockStore> FaultyStore<S> {
    /// Wraps `inner`, passing calls through.
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert_eq!(store.acquire_calls(), 0);
    /// ```
    pub fn new(inner: S) -> Self {
        Self {
            inner: Arc::new(inner),
            mode: Arc::new(AtomicU8::new(PASS)),
            delay_ms: Arc::new(AtomicU64::new(0)),
            acquire_calls: Arc::new(AtomicU64::new(0)),
            hand_over_calls: Arc::new(AtomicU64::new(0)),
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// From now on every call waits forever (the runtime's timeouts end them).
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.hang();
    /// ```
    pub fn hang(&self) {
        self.mode.store(HANG, Ordering::SeqCst);
    }

    /// From now on every call fails at once with [`StoreError::Backend`].
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.fail();
    /// ```
    pub fn fail(&self) {
        self.mode.store(FAIL, Ordering::SeqCst);
    }

    /// From now on every call reaches the wrapped store only after `delay`, and is applied
    /// then even if its caller stopped waiting (timed out or cancelled) — a command stalled
    /// on its way to the server, or in the server's queue.
    ///
    /// ```
    /// use std::time::Duration;
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.stall(Duration::from_secs(2));
    /// ```
    pub fn stall(&self, delay: Duration) {
        self.delay_by(STALL, delay);
    }

    /// From now on every call is applied by the wrapped store at once, and its answer
    /// comes back only after `delay` — a slow reply: the command took effect, and its
    /// caller does not know yet.
    ///
    /// ```
    /// use std::time::Duration;
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.answer_late(Duration::from_secs(2));
    /// ```
    pub fn answer_late(&self, delay: Duration) {
        self.delay_by(ANSWER_LATE, delay);
    }

    /// Switches to `mode`, one of the two that delay a call by `delay`.
    fn delay_by(&self, mode: u8, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.delay_ms.store(ms, Ordering::SeqCst);
        self.mode.store(mode, Ordering::SeqCst);
    }

    /// Back to passing calls through.
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.fail();
    /// store.heal();
    /// ```
    pub fn heal(&self) {
        self.mode.store(PASS, Ordering::SeqCst);
    }

    /// How many acquisition attempts reached this wrapper.
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert_eq!(store.acquire_calls(), 0);
    /// ```
    pub fn acquire_calls(&self) -> u64 {
        self.acquire_calls.load(Ordering::SeqCst)
    }

    /// How many hand-overs ([`LockStore::hand_over`]) reached this wrapper.
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert_eq!(store.hand_over_calls(), 0);
    /// ```
    pub fn hand_over_calls(&self) -> u64 {
        self.hand_over_calls.load(Ordering::SeqCst)
    }

    /// How many calls of any kind reached this wrapper.
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert_eq!(store.calls(), 0);
    /// ```
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The wrapped store.
    ///
    /// ```
    /// let store = mongolock::testing::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert!(store.inner().is_empty());
    /// ```
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Runs `call` on the wrapped store as the current mode says.
    async fn forward<T, F, Fut>(&self, call: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<S>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode.load(Ordering::SeqCst) {
            HANG => std::future::pending().await,
            FAIL => Err(StoreError::backend("injected failure")),
            STALL => {
                let delay = Duration::from_millis(self.delay_ms.load(Ordering::SeqCst));
                let inner = self.inner.clone();
                // Its own task: dropping this future (a caller's timeout) does not stop it.
                let applied = tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    call(inner).await
                });
                applied
                    .await
                    .unwrap_or_else(|error| Err(StoreError::Panicked(error.to_string())))
            }
            ANSWER_LATE => {
                let delay = Duration::from_millis(self.delay_ms.load(Ordering::SeqCst));
                let answer = call(self.inner.clone()).await;
                tokio::time::sleep(delay).await;
                answer
            }
            _ => call(self.inner.clone()).await,
        }
    }
}

// Every provided method is written out: one left to its default would bypass the inner
// store (a `set_permits` answering `Unsupported`, a batch sent one call at a time).
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: LockStore> LockStore for FaultyStore<S> {
    async fn prepare(&self) -> Result<(), StoreError> {
        self.inner.prepare().await
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        self.acquire_calls.fetch_add(1, Ordering::SeqCst);
        let request = request.clone();
        self.forward(move |store| async move { store.try_acquire(&request).await })
            .await
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        let request = request.clone();
        self.forward(move |store| async move { store.extend(&request).await })
            .await
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        let key = key.clone();
        self.forward(move |store| async move { store.release(&key).await })
            .await
    }

    /// One fault for the whole batch, as for one call.
    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        let count = keys.len();
        let keys = keys.to_vec();
        self.forward(move |store| async move { Ok(store.release_many(&keys).await) })
            .await
            .unwrap_or_else(|error| vec![Err(error); count])
    }

    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        let name = name.clone();
        self.forward(move |store| async move { store.set_permits(&name, permits).await })
            .await
    }

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        self.hand_over_calls.fetch_add(1, Ordering::SeqCst);
        let (from, to) = (from.clone(), to.clone());
        self.forward(move |store| async move { store.hand_over(&from, &to).await })
            .await
    }

    /// One fault for the whole batch, as for one call.
    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let count = requests.len();
        let requests = requests.to_vec();
        self.forward(move |store| async move { Ok(store.extend_many(&requests).await) })
            .await
            .unwrap_or_else(|error| vec![Err(error); count])
    }

    fn max_extend_batch(&self) -> usize {
        self.inner.max_extend_batch()
    }

    fn tokens_per_grant(&self) -> u64 {
        self.inner.tokens_per_grant()
    }

    fn keeps_arrival_order(&self) -> bool {
        self.inner.keeps_arrival_order()
    }

    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        let (name, holder) = (name.clone(), holder.clone());
        self.forward(move |store| async move { store.withdraw(&name, &holder).await })
            .await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        let name = name.clone();
        self.forward(move |store| async move { store.inspect(&name).await })
            .await
    }

    async fn watch_releases(
        &self,
        demand: ReleaseDemand,
    ) -> Option<tokio::sync::mpsc::Receiver<LockName>> {
        self.inner.watch_releases(demand).await
    }

    async fn watch_records(
        &self,
        names: &[LockName],
    ) -> Option<tokio::sync::mpsc::Receiver<crate::store::RecordEvent>> {
        self.inner.watch_records(names).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::kind::{Access, LockKind};
    use crate::store::LeaseId;
    use crate::store::memory::MemoryStore;

    fn name(name: &str) -> LockName {
        LockName::new(name).unwrap_or_else(|error| panic!("{error}"))
    }

    /// Takes one permit of the semaphore `name` (of `permits`) directly on `store`.
    async fn permit(store: &MemoryStore, name: &LockName, permits: u32) -> LeaseKey {
        let request = AcquireRequest::new(
            name.clone(),
            LeaseId::new(),
            HolderId::generate(),
            Duration::from_secs(30),
        )
        .with_access(Access::Permit { permits });
        let outcome = store.try_acquire(&request).await;
        assert!(matches!(outcome, Ok(AcquireOutcome::Acquired { .. })));
        request.key()
    }

    /// `set_permits` reaches the wrapped store (the trait's default answers `Unsupported`)
    /// and, like every call, fails or counts as the switch says.
    #[tokio::test(start_paused = true)]
    async fn set_permits_reaches_the_inner_store() {
        let inner = MemoryStore::new();
        let store = FaultyStore::new(inner.clone());
        let imports = name("imports");
        permit(&inner, &imports, 2).await;

        assert!(matches!(store.set_permits(&imports, 5).await, Ok(Some(2))));
        assert_eq!(store.calls(), 1);
        let record = inner.inspect(&imports).await;
        assert!(
            matches!(&record, Ok(Some(record)) if record.kind == LockKind::Semaphore { permits: 5 }),
            "the count did not change: {record:?}"
        );

        store.fail();
        assert!(matches!(
            store.set_permits(&imports, 3).await,
            Err(StoreError::Backend { .. })
        ));
        assert_eq!(store.calls(), 2);
        let record = inner.inspect(&imports).await;
        assert!(
            matches!(&record, Ok(Some(record)) if record.kind == LockKind::Semaphore { permits: 5 }),
            "a failed call changed the count: {record:?}"
        );
    }

    /// `release_many` is the inner store's one call (the default would release one lease
    /// after another through this wrapper), and a fault fails the whole batch at once.
    #[tokio::test(start_paused = true)]
    async fn release_many_is_one_call_to_the_inner_store() {
        let inner = MemoryStore::new();
        let store = FaultyStore::new(inner.clone());
        let keys = [
            permit(&inner, &name("a"), 2).await,
            permit(&inner, &name("b"), 2).await,
        ];

        store.fail();
        let failed = store.release_many(&keys).await;
        assert_eq!(failed.len(), 2);
        assert!(
            failed
                .iter()
                .all(|result| matches!(result, Err(StoreError::Backend { .. })))
        );
        assert_eq!(store.calls(), 1, "the failed batch was more than one call");

        store.heal();
        let released = store.release_many(&keys).await;
        assert_eq!(released.len(), 2);
        assert!(
            released
                .iter()
                .all(|result| matches!(result, Ok(ReleaseOutcome::Released { .. })))
        );
        assert_eq!(store.calls(), 2, "the batch was sent one lease at a time");
        for key in &keys {
            let record = inner.inspect(&key.name).await;
            let held = match &record {
                Ok(Some(record)) => !record.holders.is_empty(),
                _ => false,
            };
            assert!(
                record.is_ok() && !held,
                "{} is still held: {record:?}",
                key.name
            );
        }
    }
}
