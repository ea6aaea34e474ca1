//! [`RwLock`]: a lock name shared by readers or held by one writer, fair to both sides.

use std::time::Duration;

use super::guard::LockGuard;
use super::handle::Lock;
use crate::error::LockError;
use crate::kind::Access;
use crate::name::LockName;
use crate::store::outcome::LockRecord;

/// A reader/writer lock across processes: any number of readers (up to
/// [`MAX_PERMITS`](crate::MAX_PERMITS)) at once, or one writer. Every read and write is a
/// [`LockGuard`], with every guard's guarantees.
///
/// **Fencing.** Every grant's token — read or write — is larger than every token issued
/// for the name before, so a fenced resource that records the largest token it has seen
/// orders a writer after every reader it excluded, and refuses a reader that was paused
/// past its lease once a writer has written.
///
/// **Fairness.** Neither side starves:
/// - once a writer waits anywhere, new readers wait behind it: a refused writer marks the
///   record, and while the mark lasts (until the writer's next retry is due, so a writer
///   that gave up holds nobody back for long) no new reader is admitted;
/// - readers waiting when a writer leaves go before the next writer: their own mark turns
///   on a readers' turn at that release, during which writers are refused;
/// - in one process, waiters are served in arrival order, except that readers waiting when
///   this process's writer leaves go first (not in
///   [`Fairness::ArrivalOrder`](crate::Fairness::ArrivalOrder), where every task keeps its
///   place).
///
/// **Readers waiting together share a grant.** Readers of one process waiting when a read
/// is granted to one of them join it: one store call lets them all in, each with its own
/// guard and a token of the grant's reserved block (so issued with the grant, above every
/// token before it). [`RwLock::inspect`] shows them as one holding, kept until the last of
/// them lets go. Only readers already waiting join, in this process's order (not past a
/// writer queued ahead of them), up to the block's size, and not once other processes
/// have waited the fairness bound. In arrival order
/// ([`Fairness::ArrivalOrder`](crate::Fairness::ArrivalOrder)) only those that arrived
/// before every writer waiting in another process join: the grant's answer says which.
///
/// **No upgrade or downgrade.** Two readers that both upgrade would each wait for the other
/// to leave: a deadlock the lock cannot break without failing one of them. A downgrade
/// would have to turn the write lease into a read one in the same store write while a
/// writer waiting elsewhere is refused, and a reader that held the lock on that promise
/// would still see its token fenced by a writer that came in between. Release and
/// acquire the other side instead; the tokens tell the resource the order.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let schema = manager.rw_lock("schema")?;
/// let reader = schema.read().await?;
/// let another = schema.read().await?;
/// assert!(schema.try_write().await?.is_none(), "readers exclude the writer");
/// drop((reader, another));
/// let writer = schema.write().await?;
/// assert!(schema.try_read().await?.is_none(), "the writer excludes readers");
/// writer.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock {
    lock: Lock,
}

impl RwLock {
    pub(crate) fn new(lock: Lock) -> Self {
        Self { lock }
    }

    /// The lock's name.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// assert_eq!(manager.rw_lock("schema")?.name().as_str(), "schema");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &LockName {
        self.lock.name()
    }

    /// Waits until this task reads (shares the name with other readers).
    ///
    /// # Errors
    ///
    /// [`LockError::KindMismatch`] if the name is another kind of lock; otherwise as
    /// [`Lock::acquire`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves nothing held.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let reading = manager.rw_lock("schema")?.read().await?;
    /// assert!(reading.token() > 0);
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<LockGuard, LockError> {
        self.lock.acquire_as(Access::Read).await
    }

    /// Like [`read`](Self::read), giving up after `timeout` with [`LockError::Timeout`].
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`]; otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    ///
    /// ```
    /// # use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// let _writing = schema.write().await?;
    /// let read = schema.read_timeout(Duration::from_millis(50)).await;
    /// assert!(matches!(read, Err(LockError::Timeout(_))));
    /// # Ok(()) }
    /// ```
    pub async fn read_timeout(&self, timeout: Duration) -> Result<LockGuard, LockError> {
        self.lock.acquire_timeout_as(Access::Read, timeout).await
    }

    /// Exactly one store attempt to read: `None` if a writer holds the lock or waits for
    /// it, or if tasks of this process wait for it (no store call then).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a grant whose caller left is released at once.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// assert!(schema.try_read().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn try_read(&self) -> Result<Option<LockGuard>, LockError> {
        self.lock.try_acquire_as(Access::Read).await
    }

    /// Waits until this task is the writer (no reader, no other writer).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves nothing held.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// let read_token = schema.read().await?.token();
    /// let writing = schema.write().await?;
    /// assert!(writing.token() > read_token);
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<LockGuard, LockError> {
        self.lock.acquire_as(Access::Write).await
    }

    /// Like [`write`](Self::write), giving up after `timeout` with [`LockError::Timeout`].
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`]; otherwise as [`write`](Self::write).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`write`](Self::write).
    ///
    /// ```
    /// # use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// let _reading = schema.read().await?;
    /// let write = schema.write_timeout(Duration::from_millis(50)).await;
    /// assert!(matches!(write, Err(LockError::Timeout(_))));
    /// # Ok(()) }
    /// ```
    pub async fn write_timeout(&self, timeout: Duration) -> Result<LockGuard, LockError> {
        self.lock.acquire_timeout_as(Access::Write, timeout).await
    }

    /// Exactly one store attempt to write: `None` if anyone reads or writes, or if tasks
    /// of this process wait for the lock (no store call then). A refused attempt marks
    /// nothing: only a waiting writer holds readers back.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a grant whose caller left is released at once.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// let writing = schema.try_write().await?;
    /// assert!(writing.is_some());
    /// assert!(schema.try_write().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn try_write(&self) -> Result<Option<LockGuard>, LockError> {
        self.lock.try_acquire_as(Access::Write).await
    }

    /// What the store says about the lock: its readers or writer, with their tokens and
    /// time left ([`LockRecord::holders`]).
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
    /// # use mongolock::{Access, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// let _reading = schema.read().await?;
    /// let record = schema.inspect().await?.expect("a held lock has a record");
    /// assert_eq!(record.holders[0].access, Access::Read);
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self) -> Result<Option<LockRecord>, LockError> {
        self.lock.inspect().await
    }
}
