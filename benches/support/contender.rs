//! One interface over everything the scenarios measure: mongolock, the driver floor, the
//! DistributedLock algorithm and the peer crate, so every workload runs the same code for each.

use std::future::Future;

use distributed_lock_core::traits::LockHandle as _;
use distributed_lock_mongo::MongoDistributedLock;
use distributed_lock_mongo::handle::MongoLockHandle;
use mongolock::{Lock, LockGuard, MultiLock, MultiLockGuard, RwLock, Semaphore};

/// Something that can be acquired (waiting while another holder has it) and released.
pub(crate) trait Contender: Send + Sync + 'static {
    /// Proof of holding, handed back to [`release`](Self::release).
    type Held: Send + 'static;

    /// Waits until held.
    fn acquire(&self) -> impl Future<Output = Result<Self::Held, String>> + Send;

    /// Gives it back.
    fn release(&self, held: Self::Held) -> impl Future<Output = Result<(), String>> + Send;
}

/// One uncontended acquire + release.
///
/// # Errors
///
/// What acquire or release returned.
pub(crate) async fn cycle<C: Contender>(contender: &C) -> Result<(), String> {
    let held = contender.acquire().await?;
    contender.release(held).await
}

impl Contender for Lock {
    type Held = LockGuard;

    async fn acquire(&self) -> Result<LockGuard, String> {
        Lock::acquire(self)
            .await
            .map_err(|e| format!("mongolock acquire: {e}"))
    }

    async fn release(&self, held: LockGuard) -> Result<(), String> {
        held.release()
            .await
            .map_err(|e| format!("mongolock release: {e}"))
    }
}

/// The peer crate `distributed-lock-mongo`, used as its README shows.
impl Contender for MongoDistributedLock {
    type Held = MongoLockHandle;

    async fn acquire(&self) -> Result<MongoLockHandle, String> {
        distributed_lock_core::traits::DistributedLock::acquire(self, None)
            .await
            .map_err(|e| format!("distributed-lock-mongo acquire: {e}"))
    }

    async fn release(&self, held: MongoLockHandle) -> Result<(), String> {
        held.release()
            .await
            .map_err(|e| format!("distributed-lock-mongo release: {e}"))
    }
}

/// A permit of a semaphore.
impl Contender for Semaphore {
    type Held = LockGuard;

    async fn acquire(&self) -> Result<LockGuard, String> {
        Semaphore::acquire(self)
            .await
            .map_err(|e| format!("semaphore acquire: {e}"))
    }

    async fn release(&self, held: LockGuard) -> Result<(), String> {
        held.release()
            .await
            .map_err(|e| format!("semaphore release: {e}"))
    }
}

/// Every member of a multi-lock.
impl Contender for MultiLock {
    type Held = MultiLockGuard;

    async fn acquire(&self) -> Result<MultiLockGuard, String> {
        MultiLock::acquire(self)
            .await
            .map_err(|e| format!("multi-lock acquire: {e}"))
    }

    async fn release(&self, held: MultiLockGuard) -> Result<(), String> {
        held.release()
            .await
            .map_err(|e| format!("multi-lock release: {e}"))
    }
}

/// The read side of a reader/writer lock.
#[derive(Debug, Clone)]
pub(crate) struct Reading(pub(crate) RwLock);

impl Contender for Reading {
    type Held = LockGuard;

    async fn acquire(&self) -> Result<LockGuard, String> {
        self.0.read().await.map_err(|e| format!("read: {e}"))
    }

    async fn release(&self, held: LockGuard) -> Result<(), String> {
        held.release()
            .await
            .map_err(|e| format!("read release: {e}"))
    }
}

/// The write side of a reader/writer lock.
#[derive(Debug, Clone)]
pub(crate) struct Writing(pub(crate) RwLock);

impl Contender for Writing {
    type Held = LockGuard;

    async fn acquire(&self) -> Result<LockGuard, String> {
        self.0.write().await.map_err(|e| format!("write: {e}"))
    }

    async fn release(&self, held: LockGuard) -> Result<(), String> {
        held.release()
            .await
            .map_err(|e| format!("write release: {e}"))
    }
}
