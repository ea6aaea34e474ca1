//! [`Semaphore`]: a lock name up to N holders share, each with its own lease, token and
//! loss signal.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::guard::LockGuard;
use super::handle::Lock;
use crate::error::LockError;
use crate::kind::{Access, MAX_PERMITS};
use crate::name::LockName;
use crate::store::outcome::LockRecord;

/// A counting semaphore: at most [`permits`](Self::permits) holders at a time across every
/// process sharing the store, each holding a permit through a [`LockGuard`] with every
/// guard's guarantees (its token is larger than any issued for the name, by any permit).
///
/// A crashed holder's permit comes back when its lease expires. The count lives in the
/// name's record: while the record exists, a handle asking for another count gets
/// [`LockError::KindMismatch`], and only [`set_permits`](Self::set_permits) changes it
/// (handles asking for a count the record had before are then held to the new one). A
/// record nobody holds is removed by the store's clean-up (the memory store's sweeper,
/// MongoDB's TTL index) and the next handle's count applies again.
///
/// Local waiters are served first come, first served, with one store attempt in flight per
/// name and process. A released permit goes back through the store (never straight to a
/// local waiter: its grant's next reserved token could be smaller than a token issued to
/// another holder since), and waiters elsewhere are woken by the store's release feed.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let imports = manager.semaphore("nightly-import", 3)?;
/// let first = imports.acquire().await?;
/// let second = imports.acquire().await?;
/// let third = imports.acquire().await?;
/// assert!(imports.try_acquire().await?.is_none(), "all three permits are taken");
/// assert!(third.token() > second.token() && second.token() > first.token());
/// drop(first);
/// assert!(imports.acquire().await?.token() > third.token());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    lock: Lock,
    /// The count this handle asks for (shared by clones; `set_permits` changes it).
    permits: Arc<AtomicU32>,
}

impl Semaphore {
    pub(crate) fn new(lock: Lock, permits: u32) -> Result<Self, LockError> {
        check_permits(permits)?;
        Ok(Self {
            lock,
            permits: Arc::new(AtomicU32::new(permits)),
        })
    }

    fn access(&self) -> Access {
        Access::Permit {
            permits: self.permits(),
        }
    }

    /// The semaphore's name.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// assert_eq!(manager.semaphore("imports", 3)?.name().as_str(), "imports");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &LockName {
        self.lock.name()
    }

    /// How many permits this handle asks the semaphore to have.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// assert_eq!(manager.semaphore("imports", 3)?.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits.load(Ordering::Acquire)
    }

    /// Waits until a permit is held.
    ///
    /// # Errors
    ///
    /// [`LockError::KindMismatch`] if the name is another kind of lock or a semaphore of
    /// another count; otherwise as [`Lock::acquire`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves no permit held (a grant that arrives after
    /// the caller left is released).
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let permit = manager.semaphore("imports", 3)?.acquire().await?;
    /// assert!(permit.token() > 0);
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        self.lock.acquire_as(self.access()).await
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` with
    /// [`LockError::Timeout`]; nothing is held then.
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`]; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// ```
    /// # use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let one = manager.semaphore("single", 1)?;
    /// let _held = one.acquire().await?;
    /// let late = one.acquire_timeout(Duration::from_millis(50)).await;
    /// assert!(matches!(late, Err(LockError::Timeout(_))));
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<LockGuard, LockError> {
        self.lock.acquire_timeout_as(self.access(), timeout).await
    }

    /// Exactly one store attempt: `Some(permit)` if a place was free, `None` if all are
    /// taken. `None` without a store call while tasks of this process wait for a permit.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a grant whose caller left is released at once.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let two = manager.semaphore("pair", 2)?;
    /// let (a, b) = (two.try_acquire().await?, two.try_acquire().await?);
    /// assert!(a.is_some() && b.is_some());
    /// assert!(two.try_acquire().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>, LockError> {
        self.lock.try_acquire_as(self.access()).await
    }

    /// What the store says about the semaphore: its count ([`LockRecord::kind`]) and its
    /// holders with their tokens and time left ([`LockRecord::holders`]).
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use mongolock::{LockKind, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let imports = manager.semaphore("imports", 3)?;
    /// let _permit = imports.acquire().await?;
    /// let record = imports.inspect().await?.expect("a held semaphore has a record");
    /// assert_eq!(record.kind, LockKind::Semaphore { permits: 3 });
    /// assert_eq!(record.holders.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self) -> Result<Option<LockRecord>, LockError> {
        self.lock.inspect().await
    }

    /// Changes the semaphore's count to `permits` for every process; returns the count it
    /// had (`None`: the store had no record of it). Holders keep their permits: a lower
    /// count admits nobody new until fewer than `permits` are held, a higher one admits
    /// waiters at their next attempt, in every process. This handle (and its clones) ask
    /// for the new count from now on; other handles still asking for the old one are held
    /// to the new count by the store (only a count the record never had gets
    /// [`LockError::KindMismatch`]).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] for a count of 0 or above [`MAX_PERMITS`] (nothing is
    /// written); [`LockError::KindMismatch`] if the name is another kind of lock;
    /// [`LockError::Store`] if the store fails or cannot change counts.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the store may or may not have applied the change (read
    /// it back with [`inspect`](Self::inspect)).
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let imports = manager.semaphore("imports", 3)?;
    /// let _permit = imports.acquire().await?;
    /// assert_eq!(imports.set_permits(5).await?, Some(3));
    /// assert_eq!(imports.permits(), 5);
    /// # Ok(()) }
    /// ```
    pub async fn set_permits(&self, permits: u32) -> Result<Option<u32>, LockError> {
        check_permits(permits)?;
        let old = self.lock.set_permits(permits).await?;
        self.permits.store(permits, Ordering::Release);
        Ok(old)
    }
}

/// Refuses a count no semaphore can have.
fn check_permits(permits: u32) -> Result<(), LockError> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(LockError::InvalidOptions(format!(
            "a semaphore needs 1 to {MAX_PERMITS} permits, not {permits}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_one_to_max_permits() {
        for permits in [1, MAX_PERMITS] {
            assert!(check_permits(permits).is_ok(), "{permits}");
        }
        for permits in [0, MAX_PERMITS + 1, u32::MAX] {
            assert!(
                matches!(check_permits(permits), Err(LockError::InvalidOptions(_))),
                "{permits}"
            );
        }
    }
}
