use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use async_trait::async_trait;

use super::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseKey, LockRecord, LockStore,
    ReleaseOutcome, StoreError,
};
use crate::name::LockName;

const PASS: u8 = 0;
const HANG: u8 = 1;
const FAIL: u8 = 2;

/// Wraps any [`LockStore`] and, on command, makes every call hang (a partitioned or stalled
/// server, a crashed process' view of the world) or fail at once — to test how a service
/// behaves when its lock store misbehaves. It also counts acquisition attempts.
///
/// Clones share the switch. With the switch at "pass" it adds nothing but a counter.
///
/// ```
/// use mongolock::store::FaultyStore;
/// use mongolock::{LockManager, LockOptions, LossReason, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), mongolock::LockError> {
/// let store = FaultyStore::new(MemoryStore::new());
/// let options = LockOptions::default().with_expiry(Duration::from_secs(3));
/// let manager = LockManager::start(store.clone(), options).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// store.hang(); // the database stops answering
/// assert_eq!(guard.lost().await, LossReason::DeadlineExceeded);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FaultyStore<S> {
    inner: S,
    mode: Arc<AtomicU8>,
    acquire_calls: Arc<AtomicU64>,
}

impl<S: LockStore> FaultyStore<S> {
    /// Wraps `inner`, passing calls through.
    ///
    /// ```
    /// let store = mongolock::store::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert_eq!(store.acquire_calls(), 0);
    /// ```
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            mode: Arc::new(AtomicU8::new(PASS)),
            acquire_calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// From now on every call waits forever (the runtime's timeouts end them).
    ///
    /// ```
    /// let store = mongolock::store::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.hang();
    /// ```
    pub fn hang(&self) {
        self.mode.store(HANG, Ordering::SeqCst);
    }

    /// From now on every call fails at once with [`StoreError::Backend`].
    ///
    /// ```
    /// let store = mongolock::store::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.fail();
    /// ```
    pub fn fail(&self) {
        self.mode.store(FAIL, Ordering::SeqCst);
    }

    /// Back to passing calls through.
    ///
    /// ```
    /// let store = mongolock::store::FaultyStore::new(mongolock::MemoryStore::new());
    /// store.fail();
    /// store.heal();
    /// ```
    pub fn heal(&self) {
        self.mode.store(PASS, Ordering::SeqCst);
    }

    /// How many acquisition attempts reached this wrapper.
    ///
    /// ```
    /// let store = mongolock::store::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert_eq!(store.acquire_calls(), 0);
    /// ```
    pub fn acquire_calls(&self) -> u64 {
        self.acquire_calls.load(Ordering::SeqCst)
    }

    /// The wrapped store.
    ///
    /// ```
    /// let store = mongolock::store::FaultyStore::new(mongolock::MemoryStore::new());
    /// assert!(store.inner().is_empty());
    /// ```
    pub fn inner(&self) -> &S {
        &self.inner
    }

    async fn gate(&self) -> Result<(), StoreError> {
        match self.mode.load(Ordering::SeqCst) {
            HANG => std::future::pending().await,
            FAIL => Err(StoreError::backend("injected failure")),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl<S: LockStore> LockStore for FaultyStore<S> {
    async fn prepare(&self) -> Result<(), StoreError> {
        self.inner.prepare().await
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        self.acquire_calls.fetch_add(1, Ordering::SeqCst);
        self.gate().await?;
        self.inner.try_acquire(request).await
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        self.gate().await?;
        self.inner.extend(request).await
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        self.gate().await?;
        self.inner.release(key).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        self.gate().await?;
        self.inner.inspect(name).await
    }
}
