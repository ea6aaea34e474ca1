//! A [`LockStore`] wrapper that can be told to hang or fail, and counts calls: fault
//! injection for any backend (it wraps the real store; it imitates nothing).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use mongolock::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseKey, LockRecord,
    ReleaseOutcome,
};
use mongolock::{LockName, LockStore, StoreError};

const NORMAL: u8 = 0;
const HANG: u8 = 1;
const FAIL: u8 = 2;

#[derive(Clone)]
pub struct FaultyStore<S> {
    inner: S,
    mode: Arc<AtomicU8>,
    acquire_calls: Arc<AtomicU64>,
}

impl<S: LockStore + Clone> FaultyStore<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            mode: Arc::new(AtomicU8::new(NORMAL)),
            acquire_calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Every later call waits forever (a partitioned or stalled server).
    pub fn hang(&self) {
        self.mode.store(HANG, Ordering::SeqCst);
    }

    /// Every later call fails at once with a backend error.
    pub fn fail(&self) {
        self.mode.store(FAIL, Ordering::SeqCst);
    }

    /// Back to passing calls through.
    pub fn heal(&self) {
        self.mode.store(NORMAL, Ordering::SeqCst);
    }

    pub fn acquire_calls(&self) -> u64 {
        self.acquire_calls.load(Ordering::SeqCst)
    }

    async fn gate(&self) -> Result<(), StoreError> {
        match self.mode.load(Ordering::SeqCst) {
            HANG => std::future::pending().await,
            FAIL => Err(StoreError::Backend("injected failure".into())),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl<S: LockStore + Clone> LockStore for FaultyStore<S> {
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
