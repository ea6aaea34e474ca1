//! [`LockWatch`]: the stream of changes a caller reads.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, watch};

use super::change::LockChange;
use super::follower;
use crate::name::LockName;
use crate::store::LockStore;

/// How many changes may wait unread before the watch stops reading the store (it then
/// catches up with a [`LockChange::Current`] per name).
const BUFFERED_CHANGES: usize = 1024;

/// A stream of what happens to some locks, from every process: grants with their holder
/// and token, releases, expiries, operators' force-releases and deletions, in the order they
/// happened. From [`Lock::watch`](crate::Lock::watch) or
/// [`LockManager::watch`](crate::LockManager::watch).
///
/// It starts with a [`LockChange::Current`] per name. With a store that reports its changes
/// (MongoDB through a change stream, the memory store) every grant and release is seen;
/// otherwise (a MongoDB server without change streams) the records are read every second,
/// so a grant that begins and ends between two reads is not seen, a lease that was let go
/// is reported as released or expired by whether its end had passed, a force-release as a
/// release, and a release whose record is cleaned up before the next read as a deletion.
///
/// A watch sees what reaches the store: a lock passed between tasks of one manager without
/// a store call (within the block of fencing tokens its grant reserved) stays one grant to
/// it.
///
/// A semaphore or reader/writer lock is followed holder by holder: each permit's or
/// reader's grant, release and expiry is its own change with its own holder and token, and
/// a place passed to another waiter of the same manager through the store is a release and
/// a grant.
///
/// Watching costs nothing on the locks themselves; on MongoDB it holds one change stream
/// (a `getMore` per write to a watched name, renewals included), and reads a semaphore's or
/// reader/writer lock's record once per grant, release and lease end (its change events
/// do not say which holder left). It ends (`recv` returns
/// `None`) when the manager shuts down; dropping it stops it.
///
/// Also a [`futures::Stream`] of [`LockChange`].
///
/// ```
/// use mongolock::{LockChange, LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let lock = manager.lock("orders")?;
/// let mut changes = lock.watch();
/// assert!(matches!(changes.recv().await, Some(LockChange::Current { holder: None, .. })));
/// let guard = lock.acquire().await?;
/// match changes.recv().await {
///     Some(LockChange::Acquired { holder, token, .. }) => {
///         assert_eq!(holder.as_ref(), Some(manager.holder_id()));
///         assert_eq!(token, guard.token());
///     }
///     other => panic!("{other:?}"),
/// }
/// guard.release().await?;
/// assert!(matches!(changes.recv().await, Some(LockChange::Released { .. })));
/// # manager.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a watch does nothing unless its changes are read"]
pub struct LockWatch {
    changes: mpsc::Receiver<LockChange>,
}

impl LockWatch {
    /// Starts watching `names` of `store` until the watch is dropped or `closed` says the
    /// manager shut down.
    pub(crate) fn start(
        store: Arc<dyn LockStore>,
        names: Vec<LockName>,
        closed: watch::Receiver<bool>,
    ) -> Self {
        let (sender, changes) = mpsc::channel(BUFFERED_CHANGES);
        follower::spawn(store, names, sender, closed);
        Self { changes }
    }

    /// The next change; `None` once the manager has shut down.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a change is taken only when it is returned.
    ///
    /// ```
    /// # use mongolock::{LockChange, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let mut changes = manager.watch(["a", "b"])?;
    /// for _ in 0..2 {
    ///     assert!(matches!(changes.recv().await, Some(LockChange::Current { .. })));
    /// }
    /// manager.shutdown().await;
    /// assert_eq!(changes.recv().await, None);
    /// # Ok(()) }
    /// ```
    pub async fn recv(&mut self) -> Option<LockChange> {
        self.changes.recv().await
    }
}

impl futures::Stream for LockWatch {
    type Item = LockChange;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LockChange>> {
        self.changes.poll_recv(cx)
    }
}
