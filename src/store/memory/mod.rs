mod line;
mod shared;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::outcome::LockRecord;
use super::request::HolderId;
use super::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, LeaseId,
    LeaseKey, LockStore, RECORD_FEED_CAPACITY, RELEASE_FEED_CAPACITY, RecordEvent, ReleaseDemand,
    ReleaseOutcome, TOKENS_PER_GRANT, check_hand_over, check_lease_length, check_permits,
};
use crate::error::StoreError;
use crate::kind::{Access, LockKind};
use crate::name::LockName;
use crate::options::MAX_LEASE_DURATION;
use crate::store::request::{mark_length, wait_length};
use line::WaitingLine;
use shared::{SharedGrant, SharedRecord, mismatch};

/// How often the sweeper removes expired records unless configured otherwise.
const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// An embedded, in-process [`LockStore`]: a map of lock name → lease behind one mutex.
///
/// - **Atomic acquisition**: the free-or-expired check and the write happen under one lock, so
///   exactly one attempt wins; success is decided by the stored lease id being the caller's.
/// - **Owner-checked** extend and release (`is_locked_by` is the same check, public).
/// - **Sweeper**: a background task (started by the first [`LockManager`](crate::LockManager)
///   on this store) removes expired records every minute; removal re-checks expiry under the
///   same lock, so a record re-taken in between is never deleted (compare-and-remove).
/// - **Fencing tokens** come from one counter for the whole store, never reset, so they keep
///   increasing for every name after release, expiry and sweeping, with no per-name memory.
///   Each grant reserves a block of them (see [`LockStore::tokens_per_grant`]).
/// - **Time** is `tokio::time::Instant`: the store's clock is the "server time", and tests can
///   pause it.
///
/// `MemoryStore` is `Clone`; clones share one state, so two managers started on clones behave
/// like two processes sharing a database.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let store = MemoryStore::new();
/// let a = LockManager::start(store.clone(), LockOptions::default()).await?;
/// let b = LockManager::start(store.clone(), LockOptions::default()).await?;
/// let held = a.lock("orders")?.acquire().await?;
/// assert!(b.lock("orders")?.try_acquire().await?.is_none());
/// held.release().await?;
/// assert!(b.lock("orders")?.try_acquire().await?.is_some());
/// # a.shutdown().await; b.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MemoryStore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<MemoryState>,
    sweep_interval: Duration,
}

#[derive(Debug, Default)]
struct MemoryState {
    records: HashMap<LockName, Record>,
    /// Semaphores' and reader/writer locks' records (a name is in at most one of the maps).
    shared: HashMap<LockName, SharedRecord>,
    /// The lines of managers waiting in arrival order, by name (kept across releases, as
    /// MongoDB keeps them on the document).
    lines: HashMap<LockName, WaitingLine>,
    /// Managers watching for released locks, each with the holder it serves (`None`:
    /// every release).
    watchers: Vec<(Option<HolderId>, mpsc::Sender<LockName>)>,
    /// Watchers of records ([`LockStore::watch_records`]).
    record_watchers: Vec<RecordWatcher>,
    /// The last token reserved, for any name.
    last_token: u64,
    sweeper_started: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    lease: LeaseId,
    holder: HolderId,
    /// The token of the current (or last) grant.
    token: u64,
    expires_at: Instant,
    /// When another holder first failed to take this grant.
    contended_since: Option<Instant>,
}

/// One [`LockStore::watch_records`] feed: the names it watches and whether it dropped events
/// (it then owes its reader a [`RecordEvent::Resync`]).
#[derive(Debug)]
struct RecordWatcher {
    names: BTreeSet<LockName>,
    sender: mpsc::Sender<RecordEvent>,
    overflowed: bool,
}

impl RecordWatcher {
    /// Sends `event`; returns false once the reader is gone.
    fn send(&mut self, event: &RecordEvent) -> bool {
        if self.overflowed {
            match self.sender.try_send(RecordEvent::Resync) {
                Ok(()) => self.overflowed = false,
                Err(mpsc::error::TrySendError::Full(_)) => return true,
                Err(mpsc::error::TrySendError::Closed(_)) => return false,
            }
        }
        match self.sender.try_send(event.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.overflowed = true;
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

impl MemoryState {
    /// Tells the record watchers of the event's name; drops those whose reader is gone.
    fn recorded(&mut self, event: &RecordEvent) {
        let Some(name) = event.name() else { return };
        self.record_watchers
            .retain_mut(|watcher| !watcher.names.contains(name) || watcher.send(event));
    }

    /// The owner-checked release of `key`, under the store's lock.
    fn release(&mut self, key: &LeaseKey) -> ReleaseOutcome {
        let now = Instant::now();
        let mut removed = false;
        let contended_for = if key.shared {
            match self
                .shared
                .get_mut(&key.name)
                .and_then(|record| record.release(key.lease, now))
            {
                Some(contended_for) => contended_for,
                None => return ReleaseOutcome::NotOwner,
            }
        } else {
            match self.records.get(&key.name) {
                // Rule 2: only the record's own lease releases it; rule 3: how long others waited.
                Some(record) if record.lease == key.lease => {
                    let contended_for = record.contended_since.map(|since| now - since);
                    // Rule 20: the line is kept apart from the record, so the release keeps it.
                    self.records.remove(&key.name);
                    removed = true;
                    contended_for
                }
                _ => return ReleaseOutcome::NotOwner,
            }
        };
        // Rule 22: a mutex's release wakes the manager listed longest, a shared record's those
        // its kind lets in next (a lease of the default mode's: every feed).
        if key.shared {
            self.wake_let_in(&key.name, key.in_arrival_order, now);
        } else {
            self.wake_longest_waiting(&key.name, now);
        }
        self.recorded(&RecordEvent::Released {
            name: key.name.clone(),
            forced: false,
        });
        // A released mutex leaves no record here (MongoDB keeps it until its TTL index
        // removes it, and says so then): the name may next be of another kind.
        if removed {
            self.recorded(&RecordEvent::Deleted {
                name: key.name.clone(),
            });
        }
        ReleaseOutcome::Released { contended_for }
    }

    /// When `request`'s requester started waiting, by the store's clock.
    fn arrival(request: &AcquireRequest, now: Instant) -> Instant {
        // Rules 5 and 15: the store's now minus `waited`, a longer wait counted as the longest.
        now.checked_sub(wait_length(request.waited)).unwrap_or(now)
    }

    /// Whether `request` (in arrival order) must let an earlier place in line go first.
    fn behind_in_line(&self, request: &AcquireRequest, now: Instant) -> bool {
        request.in_arrival_order
            && self.lines.get(&request.name).is_some_and(|line| {
                let arrival = Self::arrival(request, now);
                line.earlier_elsewhere(&request.holder, (request.access, arrival), now)
            })
    }

    /// For a read granted in arrival order: how long the earliest other manager's writer
    /// in line had waited (zero if none), which this manager's readers that waited longer
    /// arrived before (see [`AcquireOutcome::Acquired`]).
    fn readers_waited_over(&self, request: &AcquireRequest, now: Instant) -> Option<Duration> {
        // Rule 17: only a read granted in arrival order answers it.
        if !(request.in_arrival_order && request.access == Access::Read) {
            return None;
        }
        let earliest = self
            .lines
            .get(&request.name)
            .and_then(|line| line.earliest_elsewhere(&request.holder, request.access, now));
        Some(earliest.map_or(Duration::ZERO, |arrival| now - arrival))
    }

    /// A refused `request` in arrival order takes (or renews) its manager's place in line.
    fn place_in_line(&mut self, request: &AcquireRequest, now: Instant) {
        if !request.in_arrival_order {
            return;
        }
        // Rule 18: the place ends `retry_within` from now.
        let until = now + mark_length(request.retry_within);
        self.lines.entry(request.name.clone()).or_default().place(
            &request.holder,
            request.access,
            (Self::arrival(request, now), until),
            now,
        );
    }

    /// A refused mutex `request` lists its manager for a release to wake: in line in
    /// arrival order; in the default mode if it says how long it will wait
    /// (`retry_within`), where its place holds nobody back.
    fn list_mutex_waiter(&mut self, request: &AcquireRequest, now: Instant) {
        if request.in_arrival_order {
            self.place_in_line(request, now);
        } else if !request.retry_within.is_zero() {
            // Rule 21: listed, holding nobody back.
            let until = now + mark_length(request.retry_within);
            self.lines.entry(request.name.clone()).or_default().list(
                &request.holder,
                (Self::arrival(request, now), until),
                now,
            );
        }
    }

    /// A granted manager (or one whose waiters gave up) leaves the line of `name`.
    /// Returns whether it had a place there, live or ended.
    fn leave_line(&mut self, name: &LockName, holder: &HolderId, now: Instant) -> bool {
        let Some(line) = self.lines.get_mut(name) else {
            return false;
        };
        let had_place = line.has_place_of(holder);
        if line.remove(holder, now) {
            self.lines.remove(name);
        }
        had_place
    }

    /// `holder`'s waiters for `name` gave up: its place in line and its writers' mark go,
    /// and those they held back are woken, as by a release.
    fn withdraw(&mut self, name: &LockName, holder: &HolderId, now: Instant) {
        // Rules 20 and 11: the place and the writers' mark go; those held back are told (rule 22).
        let left_line = self.leave_line(name, holder, now);
        let ended_mark = self
            .shared
            .get_mut(name)
            .is_some_and(|record| record.end_writers_mark(holder));
        if left_line || ended_mark {
            self.freed(name);
        }
    }

    /// `try_acquire` of a shared kind, under the store's lock.
    fn try_acquire_shared(
        &mut self,
        request: &AcquireRequest,
        now: Instant,
    ) -> Result<AcquireOutcome, StoreError> {
        let asked = request.access.kind();
        // Rule 7: a shared request on a mutex's record, or of another kind or count, is a mismatch.
        if self.records.contains_key(&request.name) {
            return Err(mismatch(&request.name, LockKind::Mutex, asked));
        }
        let record = self
            .shared
            .entry(request.name.clone())
            .or_insert_with(|| SharedRecord::new(asked));
        if !record.accepts(asked) {
            return Err(mismatch(&request.name, record.kind(), asked));
        }
        // Rule 16: an earlier place of another manager it waits behind goes first.
        if self.behind_in_line(request, now) {
            // A refusal by the line is contention like any other: inspection and the
            // holders' releases report the wait.
            if let Some(record) = self.shared.get_mut(&request.name) {
                record.contended(request, now);
            }
            self.place_in_line(request, now);
            let lease_left = self
                .shared
                .get(&request.name)
                .and_then(|record| record.first_lease_end(now));
            return Ok(AcquireOutcome::Busy {
                holder: None,
                lease_left,
            });
        }
        let Self {
            shared, last_token, ..
        } = self;
        let Some(record) = shared.get_mut(&request.name) else {
            return Ok(AcquireOutcome::busy(None));
        };
        match record.try_acquire(request, now, || reserve_tokens(last_token)) {
            SharedGrant::Granted(token) => {
                // Rule 17, then rule 16: a grant removes its holder's place.
                let readers_waited_over = self.readers_waited_over(request, now);
                self.leave_line(&request.name, &request.holder, now);
                self.recorded(&RecordEvent::Granted {
                    name: request.name.clone(),
                    holder: Some(request.holder.clone()),
                    token,
                    lease_left: request.lease_duration,
                });
                Ok(AcquireOutcome::Acquired {
                    token,
                    readers_waited_over,
                })
            }
            SharedGrant::Busy(holder, lease_left) => {
                // Rule 18.
                self.place_in_line(request, now);
                Ok(AcquireOutcome::Busy { holder, lease_left })
            }
        }
    }

    /// A shared record's hand-over, under the store's lock: `from`'s place is released if
    /// it still holds unexpired, then `to` is decided by the grant rules; the place is free
    /// (and waiters told) only if `to` was refused.
    fn hand_over_shared(
        &mut self,
        from: &LeaseKey,
        to: &AcquireRequest,
        now: Instant,
    ) -> HandOverOutcome {
        // Rule 2: only an unexpired place of `from` is handed over.
        let held = self
            .shared
            .get(&from.name)
            .is_some_and(|record| record.is_held_by(from.lease, now));
        let Some(contended_for) = self
            .shared
            .get_mut(&from.name)
            .filter(|_| held)
            .and_then(|record| record.release(from.lease, now))
        else {
            return HandOverOutcome::NotOwner;
        };
        // `to` is decided as any request is (rules 7 to 10, 16).
        match self.try_acquire_shared(to, now) {
            // A watch sees the grant, as MongoDB's change stream does.
            Ok(AcquireOutcome::Acquired { token, .. }) => HandOverOutcome::HandedOver {
                token,
                contended_for,
            },
            // Refused, or another kind asked for (which writes nothing): the place is free.
            Ok(AcquireOutcome::Busy { .. }) | Err(_) => {
                self.wake_let_in(&from.name, from.in_arrival_order, now);
                self.recorded(&RecordEvent::Released {
                    name: from.name.clone(),
                    forced: false,
                });
                HandOverOutcome::Released { contended_for }
            }
        }
    }

    /// Tells the watchers `name` is free; a full or closed feed loses the hint (the
    /// watcher polls), a closed one is dropped.
    /// Tells every release feed that `name` may be free.
    fn freed(&mut self, name: &LockName) {
        self.tell_watchers(name, |_| true);
    }

    /// A mutex's `name` was released: tells the feeds of the manager listed longest in its
    /// line (and those that hear every release), not the others; every feed when nobody is
    /// listed.
    fn wake_longest_waiting(&mut self, name: &LockName, now: Instant) {
        // Rule 22.
        let woken = self.lines.get_mut(name).and_then(|line| {
            line.last_woken = line.earliest(now).cloned();
            line.last_woken.clone()
        });
        // Nobody listed (a waiter refused only once is not): every waiting manager may go.
        self.tell_watchers(name, |served| {
            woken.is_none() || served.is_none_or(|served| Some(served) == woken.as_ref())
        });
    }

    /// A mutex request refused only by an earlier place (the lease had ended) wakes the
    /// manager of the earliest live place, unless the name's last wake went to it already:
    /// the manager a release woke may have been overtaken by the time its attempt came (its
    /// arrival is stamped again from its wait), and the lock must not sit free until the one
    /// that overtook it asks again.
    fn pass_wake_on(&mut self, name: &LockName, now: Instant) {
        // Rule 22.
        let Some(line) = self.lines.get_mut(name) else {
            return;
        };
        let Some(earliest) = line.earliest(now).cloned() else {
            return;
        };
        if line.last_woken.as_ref() == Some(&earliest) {
            return;
        }
        line.last_woken = Some(earliest.clone());
        self.tell_watchers(name, |served| {
            served.is_none_or(|served| *served == earliest)
        });
    }

    /// A shared record's `name` was released: with `in_line` (a lease of arrival order),
    /// tells the feeds of the managers its kind lets in next (and those that hear every
    /// release), nobody else's; every feed when no place is live or without `in_line`.
    fn wake_let_in(&mut self, name: &LockName, in_line: bool, now: Instant) {
        // Rule 22.
        let admits = self.shared.get(name).map(|record| record.admits(now));
        let woken: Option<Vec<HolderId>> = admits
            .filter(|_| in_line)
            .and_then(|admits| self.lines.get(name)?.let_in_next(admits, now))
            .map(|woken| woken.into_iter().cloned().collect());
        self.tell_watchers(name, |served| match (&woken, served) {
            (Some(woken), Some(served)) => woken.contains(served),
            _ => true,
        });
    }

    /// Sends `name` to the feeds whose served holder `tells` accepts; drops closed ones.
    fn tell_watchers(&mut self, name: &LockName, tells: impl Fn(Option<&HolderId>) -> bool) {
        self.watchers.retain(|(served, watcher)| {
            !tells(served.as_ref())
                || !matches!(
                    watcher.try_send(name.clone()),
                    Err(mpsc::error::TrySendError::Closed(_))
                )
        });
    }
}

/// Reserves the next block of tokens for one grant after `last_token` (the last reserved,
/// moved to the block's last); returns the block's first token.
fn reserve_tokens(last_token: &mut u64) -> u64 {
    let first = *last_token + 1;
    *last_token += TOKENS_PER_GRANT;
    first
}

impl Record {
    fn is_expired(&self, now: Instant) -> bool {
        self.expires_at <= now
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store whose sweeper runs every 60 s.
    ///
    /// ```
    /// let store = mongolock::MemoryStore::new();
    /// assert_eq!(store.len(), 0);
    /// ```
    pub fn new() -> Self {
        Self::with_sweep_interval(DEFAULT_SWEEP_INTERVAL)
    }

    /// An empty store whose sweeper runs every `interval` (at least a millisecond, at most
    /// [`MAX_LEASE_DURATION`](crate::MAX_LEASE_DURATION): a longer interval is that year).
    ///
    /// ```
    /// use std::time::Duration;
    /// let store = mongolock::MemoryStore::with_sweep_interval(Duration::from_secs(5));
    /// assert!(store.is_empty());
    /// ```
    pub fn with_sweep_interval(interval: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(MemoryState::default()),
                sweep_interval: interval.clamp(Duration::from_millis(1), MAX_LEASE_DURATION),
            }),
        }
    }

    /// How many records the store keeps (held or expired but not yet swept).
    ///
    /// ```
    /// assert_eq!(mongolock::MemoryStore::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        let state = self.state();
        state.records.len() + state.shared.len()
    }

    /// Whether the store keeps no record at all.
    ///
    /// ```
    /// assert!(mongolock::MemoryStore::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `lease` currently holds `name` (unexpired).
    ///
    /// ```
    /// use mongolock::{store::LeaseId, LockName, MemoryStore};
    /// let store = MemoryStore::new();
    /// assert!(!store.is_locked_by(&LockName::new("orders")?, LeaseId::new()));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn is_locked_by(&self, name: &LockName, lease: LeaseId) -> bool {
        let now = Instant::now();
        let state = self.state();
        state
            .records
            .get(name)
            .is_some_and(|record| record.lease == lease && !record.is_expired(now))
            || state
                .shared
                .get(name)
                .is_some_and(|record| record.is_held_by(lease, now))
    }

    /// Whether `name` has no unexpired lease (also true when there is no record).
    ///
    /// ```
    /// use mongolock::{LockName, MemoryStore};
    /// assert!(MemoryStore::new().is_expired(&LockName::new("orders")?));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn is_expired(&self, name: &LockName) -> bool {
        let now = Instant::now();
        let state = self.state();
        state
            .records
            .get(name)
            .is_none_or(|record| record.is_expired(now))
            && state
                .shared
                .get(name)
                .is_none_or(|record| record.is_expired(now))
    }

    /// Deletes the record of `name` whoever holds it, as an operator deleting a document would.
    /// Returns whether there was one. The holder learns of it at its next renewal.
    ///
    /// ```
    /// use mongolock::{LockName, MemoryStore};
    /// assert!(!MemoryStore::new().remove(&LockName::new("orders")?));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn remove(&self, name: &LockName) -> bool {
        let mut state = self.state();
        // A name is in one map at most (its record is of one kind), so `^` for `|` is a
        // mutant that survives; `|` (not `||`) keeps both removals unconditional anyway.
        let removed = state.records.remove(name).is_some() | state.shared.remove(name).is_some();
        if removed {
            // A deleted document takes its line with it, as on MongoDB.
            state.lines.remove(name);
            state.freed(name);
            state.recorded(&RecordEvent::Deleted { name: name.clone() });
        }
        removed
    }

    /// Removes every expired record now; returns how many were removed. The background
    /// sweeper calls this on its interval.
    ///
    /// ```
    /// assert_eq!(mongolock::MemoryStore::new().sweep_expired(), 0);
    /// ```
    pub fn sweep_expired(&self) -> usize {
        let now = Instant::now();
        let mut state = self.state();
        // The expiry check and the removal happen under one lock: a record re-taken since the
        // last look is unexpired again and stays: a compare-and-remove, never a blind delete.
        let mut swept = Vec::new();
        state.records.retain(|name, record| {
            let expired = record.is_expired(now);
            if expired {
                swept.push(name.clone());
            }
            !expired
        });
        state.shared.retain(|name, record| {
            let expired = record.is_expired(now);
            if expired {
                swept.push(name.clone());
            }
            !expired
        });
        state.lines.retain(|_, line| !line.has_ended(now));
        for name in &swept {
            state.recorded(&RecordEvent::Deleted { name: name.clone() });
        }
        swept.len()
    }

    fn state(&self) -> MutexGuard<'_, MemoryState> {
        // A panic while holding this mutex cannot leave a half-written record (every
        // mutation is a single map operation), so a poisoned lock is still consistent.
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start_sweeper(&self) {
        {
            let mut state = self.state();
            if state.sweeper_started {
                return;
            }
            state.sweeper_started = true;
        }
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let interval = self.shared.sweep_interval;
        // When the first sweep comes and whether it logs change no answer (their mutants
        // survive): only what a sweep removes matters, and the sweeper test pins that.
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(Instant::now() + interval, interval);
            loop {
                ticks.tick().await;
                // Stops once every clone of the store is gone.
                let Some(shared) = weak.upgrade() else { break };
                let swept = MemoryStore { shared }.sweep_expired();
                if swept > 0 {
                    tracing::debug!(swept, "memory store removed expired records");
                }
            }
        });
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    async fn prepare(&self) -> Result<(), StoreError> {
        self.start_sweeper();
        Ok(())
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        // Rule 5: a lease length no grant can have is refused before anything is written.
        check_lease_length(request.lease_duration)?;
        if let Access::Permit { permits } = request.access {
            check_permits(permits)?;
        }
        let now = Instant::now();
        let mut state = self.state();
        if request.access.kind().is_shared() {
            return state.try_acquire_shared(request, now);
        }
        // Rule 7: a mutex request on a shared record is a mismatch.
        if let Some(shared) = state.shared.get(&request.name) {
            return Err(mismatch(&request.name, shared.kind(), LockKind::Mutex));
        }
        // Rule 1: granted only if free or expired by the store's clock; refused, the grant is
        // marked contended since the earliest wait (rule 3).
        if let Some(current) = state.records.get_mut(&request.name)
            && !current.is_expired(now)
        {
            let waiting_since = MemoryState::arrival(request, now);
            current.contended_since = Some(
                current
                    .contended_since
                    .map_or(waiting_since, |since| since.min(waiting_since)),
            );
            let (holder, lease_left) = (current.holder.clone(), current.expires_at - now);
            // Rules 18 and 21: the refused manager takes its place in line, or is listed.
            state.list_mutex_waiter(request, now);
            return Ok(AcquireOutcome::Busy {
                holder: Some(holder),
                lease_left: Some(lease_left),
            });
        }
        // Rule 16: an earlier place of another manager goes first.
        if state.behind_in_line(request, now) {
            state.place_in_line(request, now);
            state.pass_wake_on(&request.name, now);
            return Ok(AcquireOutcome::busy(None));
        }
        // Rule 3: a grant made while others wait in the line (listed or in line) is
        // contended since the earliest of them arrived; a request that waits on nothing
        // (it has no `retry_within`) leaves the mark clear, as MongoDB's plain cycle does.
        let waits = request.in_arrival_order || !request.retry_within.is_zero();
        let contended_since = state
            .lines
            .get(&request.name)
            .filter(|_| waits)
            .and_then(|line| line.earliest_waiting_elsewhere(&request.holder, now));
        // Rule 16: a grant removes its holder's place.
        state.leave_line(&request.name, &request.holder, now);
        // Rules 1 and 6: one counter for the whole store, a block per grant.
        let token = reserve_tokens(&mut state.last_token);
        state.records.insert(
            request.name.clone(),
            Record {
                lease: request.lease,
                holder: request.holder.clone(),
                token,
                expires_at: now + request.lease_duration,
                contended_since,
            },
        );
        state.recorded(&RecordEvent::Granted {
            name: request.name.clone(),
            holder: Some(request.holder.clone()),
            token,
            lease_left: request.lease_duration,
        });
        Ok(AcquireOutcome::acquired(token))
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        check_lease_length(request.lease_duration)?;
        let now = Instant::now();
        let mut state = self.state();
        if request.key.shared {
            // Rule 2: only an unexpired place of the lease is extended.
            let extended = state
                .shared
                .get_mut(&request.key.name)
                .is_some_and(|record| {
                    record.extend(request.key.lease, request.lease_duration, now)
                });
            if !extended {
                return Ok(ExtendOutcome::NotOwner);
            }
            state.recorded(&RecordEvent::Renewed {
                name: request.key.name.clone(),
                lease_left: request.lease_duration,
            });
            return Ok(ExtendOutcome::Extended);
        }
        match state.records.get_mut(&request.key.name) {
            // Rule 2: only the lease's own unexpired grant is extended.
            Some(record) if record.lease == request.key.lease && !record.is_expired(now) => {
                record.expires_at = now + request.lease_duration;
                state.recorded(&RecordEvent::Renewed {
                    name: request.key.name.clone(),
                    lease_left: request.lease_duration,
                });
                Ok(ExtendOutcome::Extended)
            }
            _ => Ok(ExtendOutcome::NotOwner),
        }
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        Ok(self.state().release(key))
    }

    /// All under one lock: as one round trip would be.
    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        let mut state = self.state();
        keys.iter().map(|key| Ok(state.release(key))).collect()
    }

    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        check_permits(permits)?;
        let asked = LockKind::Semaphore { permits };
        let mut state = self.state();
        if state.records.contains_key(name) {
            return Err(mismatch(name, LockKind::Mutex, asked));
        }
        // Rule 7: only `set_permits` changes a count.
        match state.shared.get_mut(name) {
            Some(record) => match record.set_permits(permits) {
                Some(old) => {
                    // A higher count may admit waiters: wake them. (Waking them for the same
                    // count too would only cost them an attempt: the `>=` mutant survives.)
                    if permits > old {
                        state.freed(name);
                    }
                    Ok(Some(old))
                }
                None => Err(mismatch(name, record.kind(), asked)),
            },
            None => {
                state.shared.insert(name.clone(), SharedRecord::new(asked));
                Ok(None)
            }
        }
    }

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        check_hand_over(from, to)?;
        let now = Instant::now();
        let mut state = self.state();
        if from.shared {
            return Ok(state.hand_over_shared(from, to, now));
        }
        // Rule 2: only the unexpired lease's own grant is handed over.
        let held = state
            .records
            .get(&from.name)
            .is_some_and(|record| record.lease == from.lease && !record.is_expired(now));
        if !held {
            return Ok(HandOverOutcome::NotOwner);
        }
        // Rule 19.
        if state.behind_in_line(to, now) {
            // An earlier waiter elsewhere goes first: the place is released, and `to`'s
            // manager waits in line.
            let ReleaseOutcome::Released { contended_for } = state.release(from) else {
                return Ok(HandOverOutcome::NotOwner);
            };
            state.place_in_line(to, now);
            return Ok(HandOverOutcome::Released { contended_for });
        }
        state.leave_line(&to.name, &to.holder, now);
        let MemoryState {
            records,
            last_token,
            ..
        } = &mut *state;
        let Some(record) = records.get_mut(&from.name) else {
            return Ok(HandOverOutcome::NotOwner);
        };
        // Rules 1 and 6.
        let token = reserve_tokens(last_token);
        // The contention mark stays: the other managers are still waiting.
        record.lease = to.lease;
        record.holder = to.holder.clone();
        record.token = token;
        record.expires_at = now + to.lease_duration;
        let contended_for = record.contended_since.map(|since| now - since);
        state.recorded(&RecordEvent::Granted {
            name: to.name.clone(),
            holder: Some(to.holder.clone()),
            token,
            lease_left: to.lease_duration,
        });
        Ok(HandOverOutcome::HandedOver {
            token,
            contended_for,
        })
    }

    fn tokens_per_grant(&self) -> u64 {
        TOKENS_PER_GRANT
    }

    fn keeps_arrival_order(&self) -> bool {
        true
    }

    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        self.state().withdraw(name, holder, Instant::now());
        Ok(())
    }

    /// Each `extend` answers at once, without waiting: a batch of any size is one quick pass.
    /// (The size changes how many leases one call carries, never an answer, and the renewer
    /// clamps it to at least one: a mutant returning 0 or 1 here is equivalent.)
    fn max_extend_batch(&self) -> usize {
        usize::MAX
    }

    /// Costs nothing, so it reports releases whatever `demand` says about waiting; a
    /// mutex's release only to the feed of the manager it wakes (and to those serving no
    /// particular holder).
    async fn watch_releases(&self, demand: ReleaseDemand) -> Option<mpsc::Receiver<LockName>> {
        let (sender, receiver) = mpsc::channel(RELEASE_FEED_CAPACITY);
        self.state()
            .watchers
            .push((demand.holder().cloned(), sender));
        // It watches from now on, and never stops while the receiver lives.
        demand.watching();
        Some(receiver)
    }

    /// Every change, exactly as applied, at no cost.
    async fn watch_records(&self, names: &[LockName]) -> Option<mpsc::Receiver<RecordEvent>> {
        let (sender, receiver) = mpsc::channel(RECORD_FEED_CAPACITY);
        self.state().record_watchers.push(RecordWatcher {
            names: names.iter().cloned().collect(),
            sender,
            overflowed: false,
        });
        Some(receiver)
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        let now = Instant::now();
        let state = self.state();
        // Rule 20: the live places, earliest first.
        let queue = state
            .lines
            .get(name)
            .map(|line| line.queue(now))
            .unwrap_or_default();
        if let Some(record) = state.shared.get(name) {
            return Ok(Some(record.record(now).with_queue(queue)));
        }
        let record = state.records.get(name).map(|record| {
            let mut inspected = if record.is_expired(now) {
                LockRecord::free(record.token)
            } else {
                LockRecord::held(record.holder.clone(), record.token, record.expires_at - now)
            };
            // Rule 3.
            inspected.contended_for = record
                .contended_since
                .filter(|_| inspected.is_held())
                .map(|since| now - since);
            inspected
        });
        // A line outlives the record of a released mutex (which this store drops): the
        // name is then free, its last token forgotten.
        Ok(match (record, queue.is_empty()) {
            (Some(record), _) => Some(record.with_queue(queue)),
            (None, false) => Some(LockRecord::free(0).with_queue(queue)),
            (None, true) => None,
        })
    }
}
