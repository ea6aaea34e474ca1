//! Watching locks: [`LockWatch`], the stream of [`LockChange`]s a caller reads, and the task
//! that produces them.
//!
//! The task reads the records of the watched names once, then follows the store's record
//! feed ([`LockStore::watch_records`]) where there is one — every grant, renewal, release and
//! deletion, in order — and polls [`LockStore::inspect`] every [`POLL_INTERVAL`] where there
//! is none. A lease that runs out is no write, so expiry is noticed by the task itself: it
//! keeps each held lease's end (from the lease length the store reported, counted on this
//! process's clock from when it heard of the write) and, when that passes, asks the store
//! whether the lease is still held.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::error::StoreError;
use crate::name::LockName;
use crate::store::outcome::LockRecord;
use crate::store::request::HolderId;
use crate::store::{LockStore, RecordEvent};

/// How often the records are read when the store has no record feed.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long after a failed read it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How many changes may wait unread before the watch stops reading the store (it then
/// catches up with a [`LockChange::Current`] per name).
const BUFFERED_CHANGES: usize = 1024;

/// What happened to a watched lock.
///
/// ```
/// use mongolock::{HolderId, LockChange, LockName};
///
/// let change = LockChange::Acquired {
///     name: LockName::new("orders")?,
///     holder: Some(HolderId::from_string("web-1".into())),
///     token: 17,
/// };
/// assert_eq!(change.name().as_str(), "orders");
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockChange {
    /// The lock's state when the watch began, or after it had to read the records again
    /// because it may have missed changes (its feed restarted, or its reader fell behind).
    Current {
        /// The lock.
        name: LockName,
        /// The holder of an unexpired lease, `None` when the lock is free.
        holder: Option<HolderId>,
        /// The last grant's fencing token (0 when the store has no record).
        token: u64,
        /// Time left on the lease by the store's clock, `None` when free.
        expires_in: Option<Duration>,
    },
    /// A new grant: `holder` holds the lock under `token` (after it was free, after the
    /// previous lease [expired](Self::Expired), or handed over within one manager).
    Acquired {
        /// The lock.
        name: LockName,
        /// The new holder (`None` only if it could not be read).
        holder: Option<HolderId>,
        /// The grant's fencing token.
        token: u64,
    },
    /// The holder released the lock.
    Released {
        /// The lock.
        name: LockName,
        /// Who released it, if known.
        holder: Option<HolderId>,
        /// The released grant's token.
        token: u64,
    },
    /// An operator freed the lock without its holder (`mongolock release --force`).
    ForceReleased {
        /// The lock.
        name: LockName,
        /// Whose lease was cleared, if known.
        holder: Option<HolderId>,
        /// The cleared grant's token.
        token: u64,
    },
    /// The lease ran out without a renewal or a release: its holder stopped renewing. An
    /// [`Acquired`](Self::Acquired) by another holder follows when someone takes it over.
    Expired {
        /// The lock.
        name: LockName,
        /// Whose lease ran out, if known.
        holder: Option<HolderId>,
        /// The expired grant's token.
        token: u64,
    },
    /// The record of a held lock was deleted (by an operator): its holder learns of it at
    /// its next renewal. The clean-up of a free lock's record (a TTL index, a sweeper) is
    /// not reported.
    Deleted {
        /// The lock.
        name: LockName,
    },
}

impl LockChange {
    /// The lock the change is about.
    ///
    /// ```
    /// use mongolock::{LockChange, LockName};
    /// let deleted = LockChange::Deleted { name: LockName::new("a")? };
    /// assert_eq!(deleted.name().as_str(), "a");
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn name(&self) -> &LockName {
        match self {
            Self::Current { name, .. }
            | Self::Acquired { name, .. }
            | Self::Released { name, .. }
            | Self::ForceReleased { name, .. }
            | Self::Expired { name, .. }
            | Self::Deleted { name } => name,
        }
    }
}

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
/// Watching costs nothing on the locks themselves; on MongoDB it holds one change stream
/// (a `getMore` per write to a watched name, renewals included). It ends (`recv` returns
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
        tokio::spawn(Watcher::new(store, names, sender).run(closed));
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

/// What the watcher last knew of one name.
#[derive(Debug, Clone, Default)]
struct Known {
    holder: Option<HolderId>,
    token: u64,
    /// When the current lease ends, on this process's clock; `None` when not held.
    ends_at: Option<Instant>,
}

/// The task behind a [`LockWatch`].
struct Watcher {
    store: Arc<dyn LockStore>,
    names: Vec<LockName>,
    known: BTreeMap<LockName, Known>,
    changes: mpsc::Sender<LockChange>,
}

/// The watcher's reader went away, or the manager shut down: stop.
struct Stop;

impl Watcher {
    fn new(
        store: Arc<dyn LockStore>,
        names: Vec<LockName>,
        changes: mpsc::Sender<LockChange>,
    ) -> Self {
        Self {
            store,
            names,
            known: BTreeMap::new(),
            changes,
        }
    }

    async fn run(mut self, mut closed: watch::Receiver<bool>) {
        let stopped = async move {
            let _ = closed.wait_for(|closed| *closed).await;
        };
        let changes = self.changes.clone();
        tokio::select! {
            biased;
            () = stopped => {}
            () = changes.closed() => {}
            _ = self.follow() => {}
        }
    }

    /// Reads the records, then follows the feed (or polls) until told to stop.
    async fn follow(&mut self) -> Stop {
        let mut feed = self.store.watch_records(&self.names).await;
        if self.resync().await.is_err() {
            return Stop;
        }
        let mut next_poll = Instant::now() + POLL_INTERVAL;
        loop {
            let next_end = self.next_end();
            let event = tokio::select! {
                biased;
                event = next_record(&mut feed) => match event {
                    Some(event) => Some(event),
                    None => {
                        // The feed ended: poll from now on.
                        feed = None;
                        next_poll = Instant::now();
                        None
                    }
                },
                () = tokio::time::sleep_until(next_poll), if feed.is_none() => {
                    next_poll = Instant::now() + POLL_INTERVAL;
                    if self.poll().await.is_err() {
                        return Stop;
                    }
                    None
                }
                () = sleep_until_some(next_end) => {
                    if let Some(name) = self.ended_lease() && self.check_expiry(&name).await.is_err() {
                        return Stop;
                    }
                    None
                }
            };
            if let Some(event) = event
                && self.apply(event).await.is_err()
            {
                return Stop;
            }
        }
    }

    async fn emit(&self, change: LockChange) -> Result<(), Stop> {
        self.changes.send(change).await.map_err(|_| Stop)
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        match tokio::time::timeout(RETRY_AFTER * 10, self.store.inspect(name)).await {
            Ok(read) => read,
            Err(_) => Err(StoreError::Timeout(RETRY_AFTER * 10)),
        }
    }

    /// Reads every record and reports it as [`LockChange::Current`]; a name that cannot be
    /// read is retried until it can.
    async fn resync(&mut self) -> Result<(), Stop> {
        for name in self.names.clone() {
            let record = loop {
                match self.inspect(&name).await {
                    Ok(record) => break record,
                    Err(error) => {
                        tracing::debug!(%error, %name, "watch: could not read the record; retrying");
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            };
            let known = known_from(record.as_ref());
            self.emit(LockChange::Current {
                name: name.clone(),
                holder: record.as_ref().and_then(|record| record.holder.clone()),
                token: known.token,
                expires_in: record.as_ref().and_then(|record| record.expires_in),
            })
            .await?;
            self.known.insert(name, known);
        }
        Ok(())
    }

    /// One round of polling: each record read and compared with what was known, as the
    /// events a feed would have reported.
    async fn poll(&mut self) -> Result<(), Stop> {
        for name in self.names.clone() {
            let record = match self.inspect(&name).await {
                Ok(record) => record,
                Err(error) => {
                    tracing::debug!(%error, %name, "watch: could not read the record");
                    continue;
                }
            };
            let known = self.known.get(&name).cloned().unwrap_or_default();
            let event = match &record {
                None if known.ends_at.is_some() || known.token != 0 => {
                    Some(RecordEvent::Deleted { name: name.clone() })
                }
                // A grant that began and ended between two reads shows only as a new token
                // on a free record: nothing to report.
                None => None,
                Some(record) => match (record.expires_in, known.ends_at) {
                    (Some(left), _) if record.token != known.token => Some(RecordEvent::Granted {
                        name: name.clone(),
                        holder: record.holder.clone(),
                        token: record.token,
                        lease_left: left,
                    }),
                    (Some(left), Some(_)) => Some(RecordEvent::Renewed {
                        name: name.clone(),
                        lease_left: left,
                    }),
                    (None, Some(ends_at)) if Instant::now() < ends_at => {
                        Some(RecordEvent::Released {
                            name: name.clone(),
                            forced: false,
                        })
                    }
                    // Its end passed: the expiry check reports it.
                    _ => None,
                },
            };
            if let Some(event) = event {
                self.apply(event).await?;
            }
        }
        Ok(())
    }

    /// The earliest end of a held lease.
    fn next_end(&self) -> Option<Instant> {
        self.known.values().filter_map(|known| known.ends_at).min()
    }

    /// A name whose lease end has passed.
    fn ended_lease(&self) -> Option<LockName> {
        let now = Instant::now();
        self.known
            .iter()
            .find(|(_, known)| known.ends_at.is_some_and(|ends_at| ends_at <= now))
            .map(|(name, _)| name.clone())
    }

    /// The lease of `name` should have ended: asks the store (its clock decides).
    async fn check_expiry(&mut self, name: &LockName) -> Result<(), Stop> {
        let record = match self.inspect(name).await {
            Ok(record) => record,
            Err(error) => {
                tracing::debug!(%error, %name, "watch: could not read the record; retrying");
                if let Some(known) = self.known.get_mut(name) {
                    known.ends_at = Some(Instant::now() + RETRY_AFTER);
                }
                return Ok(());
            }
        };
        let Some(known) = self.known.get(name).cloned() else {
            return Ok(());
        };
        match record {
            Some(record) if record.token == known.token && record.expires_in.is_some() => {
                // Renewed after all (this clock ran ahead of the store's): wait for its end.
                let left = record.expires_in.unwrap_or_default();
                if let Some(entry) = self.known.get_mut(name) {
                    entry.ends_at = Some(Instant::now() + left);
                }
                Ok(())
            }
            Some(record) if record.token != known.token && record.expires_in.is_some() => {
                // Taken over already: the feed's grant may still be on its way.
                self.apply(RecordEvent::Granted {
                    name: name.clone(),
                    holder: record.holder.clone(),
                    token: record.token,
                    lease_left: record.expires_in.unwrap_or_default(),
                })
                .await
            }
            _ => self.expired(name, known).await,
        }
    }

    async fn expired(&mut self, name: &LockName, known: Known) -> Result<(), Stop> {
        if let Some(entry) = self.known.get_mut(name) {
            entry.ends_at = None;
        }
        self.emit(LockChange::Expired {
            name: name.clone(),
            holder: known.holder,
            token: known.token,
        })
        .await
    }

    /// Turns one store event into changes, in order, keeping what is known up to date.
    async fn apply(&mut self, event: RecordEvent) -> Result<(), Stop> {
        let now = Instant::now();
        match event {
            RecordEvent::Granted {
                name,
                holder,
                token,
                lease_left,
            } => {
                let known = self.known.get(&name).cloned().unwrap_or_default();
                if known.ends_at.is_some() && known.token == token {
                    return Ok(()); // already reported (by the expiry check)
                }
                let holder = match holder {
                    Some(holder) => Some(holder),
                    None => known.holder.clone(),
                };
                // A new holder while the last lease was still counted as held: that lease
                // ran out (a hand-over keeps the holder).
                if known.ends_at.is_some() && holder != known.holder {
                    self.expired(&name, known).await?;
                }
                self.known.insert(
                    name.clone(),
                    Known {
                        holder: holder.clone(),
                        token,
                        ends_at: Some(now + lease_left),
                    },
                );
                self.emit(LockChange::Acquired {
                    name,
                    holder,
                    token,
                })
                .await
            }
            RecordEvent::Renewed { name, lease_left } => {
                if let Some(known) = self.known.get_mut(&name)
                    && known.ends_at.is_some()
                {
                    known.ends_at = Some(now + lease_left);
                }
                Ok(())
            }
            RecordEvent::Released { name, forced } => {
                let Some(known) = self
                    .known
                    .get_mut(&name)
                    .filter(|known| known.ends_at.is_some())
                else {
                    return Ok(()); // already reported as expired
                };
                known.ends_at = None;
                let (holder, token) = (known.holder.clone(), known.token);
                self.emit(if forced {
                    LockChange::ForceReleased {
                        name,
                        holder,
                        token,
                    }
                } else {
                    LockChange::Released {
                        name,
                        holder,
                        token,
                    }
                })
                .await
            }
            RecordEvent::Deleted { name } => {
                // Forgotten, as the store forgot it: its next grant is new whatever its token.
                let known = self.known.insert(name.clone(), Known::default());
                // Only a held lock's deletion is news; a free lock's record being cleaned up
                // (a TTL index, a sweeper) changes nothing for anyone.
                if known.is_some_and(|known| known.ends_at.is_some()) {
                    self.emit(LockChange::Deleted { name }).await
                } else {
                    Ok(())
                }
            }
            // Resync, and variants a newer store may add: read everything again.
            _ => self.resync().await,
        }
    }
}

fn known_from(record: Option<&LockRecord>) -> Known {
    match record {
        Some(record) => Known {
            holder: record.holder.clone(),
            token: record.token,
            ends_at: record.expires_in.map(|left| Instant::now() + left),
        },
        None => Known::default(),
    }
}

/// The next event of `feed`; never resolves without one.
async fn next_record(feed: &mut Option<mpsc::Receiver<RecordEvent>>) -> Option<RecordEvent> {
    match feed {
        Some(feed) => feed.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
