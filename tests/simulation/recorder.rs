//! The oracle's eyes on the store: a [`LockStore`] wrapper between one manager and its
//! (faulty) store that notes when each call was *sent* and what it answered. From that the
//! history knows, independently of the runtime's own bookkeeping, which lease each fencing
//! token belongs to and until when its holder may at most believe it holds the lock: the
//! send time of the lease's last confirmed acquire or renewal plus the renew deadline.
//!
//! A second wrapper, the [`Witness`], sits right on the shared store, under every fault
//! switch: it sees each grant in the order the store applied it, whoever asked and whether
//! or not the asker still waited for the answer, so tokens can be checked in the store's
//! own order (answers reach managers in another order when calls stall).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use mongolock::LockRecord;
use mongolock::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, LeaseId,
    LeaseKey, RecordEvent, ReleaseDemand, ReleaseOutcome,
};
use mongolock::{
    Access, HolderId, LockKind, LockName, MAX_LEASE_DURATION, StoreError, store::LockStore,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::wakes::WakeLedger;

/// A store call, for counting what a manager still sends after its shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Call {
    Acquire,
    Extend,
    Release,
    HandOver,
    Inspect,
    SetPermits,
}

/// What every recorder has seen, shared by all managers of one schedule.
#[derive(Default)]
pub(crate) struct Ledger {
    /// Each granted lease: its name and its last confirmed send.
    leases: HashMap<LeaseId, LeaseFacts>,
    /// Per name, grant token → lease (local holders after a grant carry the next tokens).
    by_token: BTreeMap<String, BTreeMap<u64, LeaseId>>,
    /// Per manager, each call as (sent at, kind).
    calls: BTreeMap<usize, Vec<(Instant, Call)>>,
    /// When the store released each lease (applied a release that answered `Released`).
    released: HashMap<LeaseId, Instant>,
    /// When each lease's holder first sent its release: it let go then.
    release_sent: HashMap<LeaseId, Instant>,
    /// Per name, every token the store issued, as (applied at, token), in the store's order.
    issued: BTreeMap<String, Vec<(Instant, u64)>>,
    /// What the witness found wrong, for the history to report.
    store_violations: Vec<String>,
    /// Per name and permit token, the semaphore's count in its record when the store
    /// granted it: the count the grant is held to (a request of a count the record had
    /// before `set_permits` changed it is decided by the current one).
    counts: HashMap<(String, u64), u32>,
    /// Per name, the line of managers waiting in arrival order as the store's answers
    /// built it (holder → access, arrival, end), in the store's order.
    lines: BTreeMap<String, HashMap<HolderId, (Access, Instant, Instant)>>,
    /// Per read granted in arrival order, the arrival of the earliest writer of another
    /// manager live in line when the store granted it (`None`: none was): the readers of
    /// its manager that share it must have arrived before.
    writers_behind_read: HashMap<LeaseId, Option<Instant>>,
    /// Whom each release woke, against the line the store's answers built.
    pub(crate) wakes: WakeLedger,
}

struct LeaseFacts {
    /// When the call that granted the lease was sent: local passes under it follow only
    /// within the fairness bound of this.
    granted_send: Instant,
    confirmed_send: Instant,
    /// How long others had waited, as the hand-over that granted the lease reported.
    contended_for: Option<Duration>,
    /// For a lease asked for in arrival order: the arrival of the task it was asked for
    /// (the send minus the request's `waited`).
    claimed_arrival: Option<Instant>,
}

impl Ledger {
    pub(crate) fn granted(&mut self, name: &LockName, token: u64, lease: LeaseId, sent: Instant) {
        self.leases.insert(
            lease,
            LeaseFacts {
                granted_send: sent,
                confirmed_send: sent,
                contended_for: None,
                claimed_arrival: None,
            },
        );
        self.by_token
            .entry(name.as_str().to_owned())
            .or_default()
            .insert(token, lease);
    }

    fn extended(&mut self, lease: LeaseId, sent: Instant) {
        if let Some(facts) = self.leases.get_mut(&lease) {
            facts.confirmed_send = facts.confirmed_send.max(sent);
        }
    }

    /// The lease a guard with `token` on `name` holds: the grant's, or an earlier grant's of
    /// the same block (a local pass).
    pub(crate) fn lease_of(&self, name: &str, token: u64, block: u64) -> Option<LeaseId> {
        let (&granted, &lease) = self.by_token.get(name)?.range(..=token).next_back()?;
        (token < granted + block).then_some(lease)
    }

    /// The last confirmed send of `lease`: its holder may believe it holds the lock until
    /// this plus the renew deadline, never longer.
    pub(crate) fn confirmed_send(&self, lease: LeaseId) -> Option<Instant> {
        self.leases.get(&lease).map(|facts| facts.confirmed_send)
    }

    /// How long others had waited when the hand-over that granted `lease` was applied.
    pub(crate) fn contended_for(&self, lease: LeaseId) -> Option<Duration> {
        self.leases.get(&lease)?.contended_for
    }

    /// When the call that granted `lease` was sent.
    pub(crate) fn granted_send(&self, lease: LeaseId) -> Option<Instant> {
        self.leases.get(&lease).map(|facts| facts.granted_send)
    }

    /// When the store released `lease`, if it has.
    pub(crate) fn released_at(&self, lease: LeaseId) -> Option<Instant> {
        self.released.get(&lease).copied()
    }

    /// When `lease`'s release (or a hand-over from it) was first sent, if it was.
    pub(crate) fn release_sent(&self, lease: LeaseId) -> Option<Instant> {
        self.release_sent.get(&lease).copied()
    }

    /// The store applied a grant of `token` on `name` to `lease` now: every token it issues
    /// for a name must be above every one it issued for it before.
    pub(crate) fn issued(&mut self, name: &LockName, token: u64) {
        let now = Instant::now();
        let issued = self.issued.entry(name.as_str().to_owned()).or_default();
        if let Some(&(_, last)) = issued.last()
            && !mongolock::history::token_increases(last, token)
        {
            let problem = format!(
                "the store issued token {token} on {name}, not above {last} it issued before"
            );
            self.store_violations.push(problem);
        }
        issued.push((now, token));
    }

    /// A lease granted to `request` sent at `sent`: if in arrival order, the arrival of
    /// the task it was asked for.
    fn claimed(&mut self, request: &AcquireRequest, sent: Instant) {
        if let Some(facts) = self.leases.get_mut(&request.lease)
            && request.in_arrival_order
        {
            facts.claimed_arrival = Some(sent.checked_sub(request.waited).unwrap_or(sent));
        }
    }

    /// The arrival the grant of `lease` was asked for (arrival order only).
    pub(crate) fn claimed_arrival(&self, lease: LeaseId) -> Option<Instant> {
        self.leases.get(&lease)?.claimed_arrival
    }

    /// The grant tokens of `name`'s leases asked for in arrival order for a task that
    /// arrived within `slack` of `arrival`.
    pub(crate) fn grants_claiming(
        &self,
        name: &str,
        arrival: Instant,
        slack: Duration,
    ) -> Vec<u64> {
        let Some(grants) = self.by_token.get(name) else {
            return Vec::new();
        };
        grants
            .iter()
            .filter(|(_, lease)| {
                self.claimed_arrival(**lease)
                    .is_some_and(|claimed| claimed.max(arrival) - claimed.min(arrival) <= slack)
            })
            .map(|(token, _)| *token)
            .collect()
    }

    /// For a read granted in arrival order as `lease`: the arrival of the earliest writer
    /// of another manager that was live in line at the grant (`Some(None)`: none was).
    pub(crate) fn writers_behind_read(&self, lease: LeaseId) -> Option<Option<Instant>> {
        self.writers_behind_read.get(&lease).copied()
    }

    /// The store answered `request` (in arrival order) now, granting it or not: a grant
    /// must find no other manager's live place that arrived earlier, and takes its
    /// manager's place out; a refusal puts its manager in line.
    fn answered_in_line(&mut self, request: &AcquireRequest, granted: bool) {
        if !request.in_arrival_order {
            return;
        }
        let now = Instant::now();
        let arrival = now
            .checked_sub(request.waited.min(MAX_LEASE_DURATION))
            .unwrap_or(now);
        let line = self
            .lines
            .entry(request.name.as_str().to_owned())
            .or_default();
        if !granted {
            let until = now + request.retry_within.min(MAX_LEASE_DURATION);
            line.insert(request.holder.clone(), (request.access, arrival, until));
            return;
        }
        line.remove(&request.holder);
        if request.access == Access::Read {
            let earliest_writer = line
                .values()
                .filter(|(access, _, until)| *until > now && *access != Access::Read)
                .map(|(_, arrival, _)| *arrival)
                .min();
            self.writers_behind_read
                .insert(request.lease, earliest_writer);
        }
        // Readers do not wait behind readers; every other access waits behind every place.
        let waits_behind =
            |earlier: Access| !(request.access == Access::Read && earlier == Access::Read);
        let ahead: Vec<String> = line
            .iter()
            .filter(|(_, (access, earlier, until))| {
                *until > now && *earlier < arrival && waits_behind(*access)
            })
            .map(|(holder, (access, earlier, _))| {
                format!(
                    "{holder} ({}, waiting {:?})",
                    access.as_str(),
                    now - *earlier
                )
            })
            .collect();
        if !ahead.is_empty() {
            let problem = format!(
                "the store granted {} ({}) to {} in arrival order (waiting {:?}) ahead of {}",
                request.name,
                request.access.as_str(),
                request.holder,
                now - arrival,
                ahead.join(", ")
            );
            self.store_violations.push(problem);
        }
    }

    /// An operator deleted `name`'s record, and its line with it.
    pub(crate) fn line_deleted(&mut self, name: &str) {
        self.lines.remove(name);
        self.wakes.deleted(name);
    }

    /// The store released `lease` now (the first time counts).
    fn released(&mut self, lease: LeaseId) {
        self.released.entry(lease).or_insert_with(Instant::now);
    }

    /// The largest token the store issued for `name` strictly before `before`.
    pub(crate) fn largest_issued_before(&self, name: &str, before: Instant) -> Option<u64> {
        self.issued
            .get(name)?
            .iter()
            .take_while(|(at, _)| *at < before)
            .map(|(_, token)| *token)
            .max()
    }

    /// The token the store granted `lease` (a local pass carries a later one of its block).
    pub(crate) fn grant_token(&self, name: &str, lease: LeaseId) -> Option<u64> {
        self.by_token
            .get(name)?
            .iter()
            .find(|(_, granted)| **granted == lease)
            .map(|(token, _)| *token)
    }

    /// The semaphore's count a permit grant of `token` on `name` was decided by, if the
    /// witness saw it.
    pub(crate) fn count_of(&self, name: &str, token: u64) -> Option<u32> {
        self.counts.get(&(name.to_owned(), token)).copied()
    }

    /// What the witness found wrong since the last call.
    pub(crate) fn take_store_violations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.store_violations)
    }

    /// Calls `manager` sent at or after `since`, other than releases.
    pub(crate) fn calls_since(&self, manager: usize, since: Instant) -> Vec<(Instant, Call)> {
        self.calls
            .get(&manager)
            .map(|calls| {
                calls
                    .iter()
                    .filter(|(at, call)| *at >= since && *call != Call::Release)
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Records what one manager sends to `inner`; says `inner`'s bulk renewal limit, or
/// `bulk_limit` if that is smaller.
pub(crate) struct Recorder<S> {
    inner: S,
    manager: usize,
    ledger: Arc<Mutex<Ledger>>,
    bulk_limit: Option<usize>,
}

impl<S> Recorder<S> {
    pub(crate) fn new(
        inner: S,
        manager: usize,
        ledger: Arc<Mutex<Ledger>>,
        bulk_limit: Option<usize>,
    ) -> Self {
        Self {
            inner,
            manager,
            ledger,
            bulk_limit,
        }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    fn sent(&self, call: Call) -> Instant {
        let now = Instant::now();
        self.ledger()
            .calls
            .entry(self.manager)
            .or_default()
            .push((now, call));
        now
    }
}

pub(crate) fn lock(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl<S: LockStore> LockStore for Recorder<S> {
    async fn prepare(&self) -> Result<(), StoreError> {
        self.inner.prepare().await
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        let sent = self.sent(Call::Acquire);
        let result = self.inner.try_acquire(request).await;
        if let Ok(AcquireOutcome::Acquired { token, .. }) = &result {
            let mut ledger = self.ledger();
            ledger.granted(&request.name, *token, request.lease, sent);
            ledger.claimed(request, sent);
        }
        result
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        let sent = self.sent(Call::Extend);
        let result = self.inner.extend(request).await;
        if let Ok(ExtendOutcome::Extended) = &result {
            self.ledger().extended(request.key.lease, sent);
        }
        result
    }

    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let sent = self.sent(Call::Extend);
        let results = self.inner.extend_many(requests).await;
        let mut ledger = self.ledger();
        for (request, result) in requests.iter().zip(&results) {
            if let Ok(ExtendOutcome::Extended) = result {
                ledger.extended(request.key.lease, sent);
            }
        }
        results
    }

    fn max_extend_batch(&self) -> usize {
        let limit = self.inner.max_extend_batch();
        self.bulk_limit
            .map_or(limit, |bulk_limit| bulk_limit.min(limit))
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        let sent = self.sent(Call::Release);
        self.ledger().release_sent.entry(key.lease).or_insert(sent);
        self.inner.release(key).await
    }

    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        let sent = self.sent(Call::Release);
        {
            let mut ledger = self.ledger();
            for key in keys {
                ledger.release_sent.entry(key.lease).or_insert(sent);
            }
        }
        self.inner.release_many(keys).await
    }

    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        self.sent(Call::SetPermits);
        self.inner.set_permits(name, permits).await
    }

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        let sent = self.sent(Call::HandOver);
        // A hand-over lets go of `from` as a release does.
        self.ledger().release_sent.entry(from.lease).or_insert(sent);
        let result = self.inner.hand_over(from, to).await;
        if let Ok(HandOverOutcome::HandedOver {
            token,
            contended_for,
        }) = &result
        {
            let mut ledger = self.ledger();
            ledger.granted(&to.name, *token, to.lease, sent);
            ledger.claimed(to, sent);
            if let Some(facts) = ledger.leases.get_mut(&to.lease) {
                facts.contended_for = *contended_for;
            }
        }
        result
    }

    fn tokens_per_grant(&self) -> u64 {
        self.inner.tokens_per_grant()
    }

    fn keeps_arrival_order(&self) -> bool {
        self.inner.keeps_arrival_order()
    }

    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        self.inner.withdraw(name, holder).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        self.sent(Call::Inspect);
        self.inner.inspect(name).await
    }

    async fn watch_releases(&self, demand: ReleaseDemand) -> Option<mpsc::Receiver<LockName>> {
        self.inner.watch_releases(demand).await
    }

    async fn watch_records(&self, names: &[LockName]) -> Option<mpsc::Receiver<RecordEvent>> {
        self.inner.watch_records(names).await
    }
}

/// Room in a release feed the witness hands on (the memory store's own is as large).
const FEED_CAPACITY: usize = 1024;

/// Sees every grant as the shared store applies it (see the module docs), and whom each
/// release woke; forwards every call unchanged, and every feed's reports as the call
/// that made them returns.
#[derive(Clone)]
pub(crate) struct Witness<S> {
    inner: S,
    ledger: Arc<Mutex<Ledger>>,
    /// Every manager's release feed, which the witness hands on as each call returns.
    feeds: Arc<Mutex<Vec<Feed>>>,
}

/// A manager's release feed, between the store and the manager: what the store reports
/// on it is noted, then passed on at once.
struct Feed {
    holder: Option<HolderId>,
    from_store: mpsc::Receiver<LockName>,
    to_manager: mpsc::Sender<LockName>,
}

/// Which managers' feeds each name was reported to by one store call, among every
/// manager's feed.
#[derive(Default)]
pub(crate) struct Wakes {
    by_name: BTreeMap<String, BTreeSet<String>>,
    feeds: BTreeSet<String>,
}

impl Wakes {
    fn of(&self, name: &str) -> (&BTreeSet<String>, &BTreeSet<String>) {
        static NOBODY: BTreeSet<String> = BTreeSet::new();
        (self.by_name.get(name).unwrap_or(&NOBODY), &self.feeds)
    }
}

impl<S> Witness<S> {
    pub(crate) fn new(inner: S, ledger: Arc<Mutex<Ledger>>) -> Self {
        Self {
            inner,
            ledger,
            feeds: Arc::default(),
        }
    }

    /// Passes on what the store reported to each manager's release feed and says who got
    /// which names. The memory store reports as it applies a call, without yielding, so
    /// whatever is found right after a call came from it. A feed its manager closed goes.
    pub(crate) fn hand_on(&self) -> Wakes {
        let mut wakes = Wakes::default();
        let mut feeds = self
            .feeds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        feeds.retain_mut(|feed| {
            let mut open = true;
            if let Some(holder) = &feed.holder {
                wakes.feeds.insert(holder.as_str().to_owned());
            }
            while let Ok(name) = feed.from_store.try_recv() {
                if let Some(holder) = &feed.holder {
                    wakes
                        .by_name
                        .entry(name.as_str().to_owned())
                        .or_default()
                        .insert(holder.as_str().to_owned());
                }
                // A full feed loses the hint, as the store's own does.
                open &= !matches!(
                    feed.to_manager.try_send(name),
                    Err(mpsc::error::TrySendError::Closed(_))
                );
            }
            open && !feed.to_manager.is_closed()
        });
        wakes
    }

    /// Rule 11 for a mutex release of `name` that woke `wakes`, `expected` being whom the
    /// line let in next as it came.
    fn judge_release(&self, name: &LockName, expected: &BTreeSet<String>, wakes: &Wakes) {
        let mut ledger = lock(&self.ledger);
        if let Some(problem) = ledger.wakes.judge(
            name.as_str(),
            expected,
            wakes.of(name.as_str()),
            Instant::now(),
        ) {
            ledger.store_violations.push(problem);
        }
    }
}

impl<S: LockStore> Witness<S> {
    /// Rule 11 for a shared record's release of `name` (`in_line`: of a lease of arrival
    /// order) that woke `wakes`: judged against the record as the release left it, read
    /// right after (the memory store answers without yielding, so nothing runs between).
    async fn judge_shared_release(&self, name: &LockName, in_line: bool, wakes: &Wakes) {
        // A lease of the default mode leaves the line alone: its release wakes everyone.
        let record = if in_line {
            self.inner.inspect(name).await.ok().flatten()
        } else {
            None
        };
        let now = Instant::now();
        let mut ledger = lock(&self.ledger);
        let expected = record
            .as_ref()
            .and_then(|record| ledger.wakes.next_shared(name.as_str(), record, now));
        if let Some(problem) = ledger.wakes.judge_shared(
            name.as_str(),
            expected.as_ref(),
            wakes.of(name.as_str()),
            now,
        ) {
            ledger.store_violations.push(problem);
        }
    }

    /// Notes the count a permit grant of `token` was decided by: the record's, read right
    /// after the grant (the memory store answers without yielding, so nothing runs
    /// between the two calls).
    async fn count_granted(&self, request: &AcquireRequest, token: u64) {
        if !matches!(request.access, Access::Permit { .. }) {
            return;
        }
        if let Ok(Some(record)) = self.inner.inspect(&request.name).await
            && let LockKind::Semaphore { permits } = record.kind
        {
            lock(&self.ledger)
                .counts
                .insert((request.name.as_str().to_owned(), token), permits);
        }
    }
}

#[async_trait]
impl<S: LockStore> LockStore for Witness<S> {
    async fn prepare(&self) -> Result<(), StoreError> {
        self.inner.prepare().await
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        let result = self.inner.try_acquire(request).await;
        let wakes = self.hand_on();
        if let Ok(outcome) = &result {
            let granted = matches!(outcome, AcquireOutcome::Acquired { .. });
            let mut ledger = lock(&self.ledger);
            ledger.answered_in_line(request, granted);
            if granted {
                ledger.wakes.granted(request.name.as_str(), &request.holder);
            } else {
                let passed_to = wakes.of(request.name.as_str()).0;
                ledger.wakes.refused(request, Instant::now(), passed_to);
            }
        }
        if let Ok(AcquireOutcome::Acquired { token, .. }) = &result {
            lock(&self.ledger).issued(&request.name, *token);
            self.count_granted(request, *token).await;
        }
        result
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        self.inner.extend(request).await
    }

    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        self.inner.extend_many(requests).await
    }

    fn max_extend_batch(&self) -> usize {
        self.inner.max_extend_batch()
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        let expected = lock(&self.ledger)
            .wakes
            .next(key.name.as_str(), Instant::now());
        let result = self.inner.release(key).await;
        let wakes = self.hand_on();
        if let Ok(ReleaseOutcome::Released { .. }) = &result {
            lock(&self.ledger).released(key.lease);
            if key.shared {
                self.judge_shared_release(&key.name, key.in_arrival_order, &wakes)
                    .await;
            } else {
                self.judge_release(&key.name, &expected, &wakes);
            }
        }
        result
    }

    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        let expected: Vec<BTreeSet<String>> = {
            let ledger = lock(&self.ledger);
            let now = Instant::now();
            keys.iter()
                .map(|key| ledger.wakes.next(key.name.as_str(), now))
                .collect()
        };
        let results = self.inner.release_many(keys).await;
        let wakes = self.hand_on();
        // A shared record's releases in one batch wake, together, whom the record lets in
        // once they are all done: each admits no fewer than the one before.
        let mut shared_released: BTreeMap<&LockName, bool> = BTreeMap::new();
        for ((key, result), expected) in keys.iter().zip(&results).zip(&expected) {
            if let Ok(ReleaseOutcome::Released { .. }) = result {
                lock(&self.ledger).released(key.lease);
                if key.shared {
                    *shared_released.entry(&key.name).or_default() |= key.in_arrival_order;
                } else {
                    self.judge_release(&key.name, expected, &wakes);
                }
            }
        }
        for (name, in_line) in shared_released {
            self.judge_shared_release(name, in_line, &wakes).await;
        }
        results
    }

    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        let result = self.inner.set_permits(name, permits).await;
        self.hand_on();
        result
    }

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        let expected = lock(&self.ledger)
            .wakes
            .next(from.name.as_str(), Instant::now());
        let result = self.inner.hand_over(from, to).await;
        let wakes = self.hand_on();
        match &result {
            Ok(HandOverOutcome::HandedOver { .. }) => {
                let mut ledger = lock(&self.ledger);
                ledger.answered_in_line(to, true);
                ledger.wakes.granted(to.name.as_str(), &to.holder);
                if let Some(problem) = ledger
                    .wakes
                    .judge_handed_over(to.name.as_str(), wakes.of(to.name.as_str()).0)
                {
                    ledger.store_violations.push(problem);
                }
            }
            Ok(HandOverOutcome::Released { .. }) => {
                // `to` was asked before the release's wake: its refusal is not a woken
                // manager's next attempt.
                {
                    let mut ledger = lock(&self.ledger);
                    ledger.answered_in_line(to, false);
                    ledger.wakes.hand_over_refused(to, Instant::now());
                }
                if !from.shared {
                    self.judge_release(&from.name, &expected, &wakes);
                }
                // The store placed `to`'s manager before it judged whom to wake.
                if from.shared {
                    self.judge_shared_release(&from.name, from.in_arrival_order, &wakes)
                        .await;
                }
            }
            _ => {}
        }
        if let Ok(HandOverOutcome::HandedOver { token, .. }) = &result {
            lock(&self.ledger).issued(&to.name, *token);
            self.count_granted(to, *token).await;
        }
        result
    }

    fn tokens_per_grant(&self) -> u64 {
        self.inner.tokens_per_grant()
    }

    fn keeps_arrival_order(&self) -> bool {
        self.inner.keeps_arrival_order()
    }

    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        let result = self.inner.withdraw(name, holder).await;
        self.hand_on();
        if result.is_ok() {
            let mut ledger = lock(&self.ledger);
            ledger.wakes.withdrawn(name.as_str(), holder);
            if let Some(line) = ledger.lines.get_mut(name.as_str()) {
                line.remove(holder);
            }
        }
        result
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        self.inner.inspect(name).await
    }

    /// The store's feed, handed on by [`Witness::hand_on`] after each call.
    async fn watch_releases(&self, demand: ReleaseDemand) -> Option<mpsc::Receiver<LockName>> {
        let holder = demand.holder().cloned();
        let from_store = self.inner.watch_releases(demand).await?;
        let (to_manager, receiver) = mpsc::channel(FEED_CAPACITY);
        self.feeds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Feed {
                holder,
                from_store,
                to_manager,
            });
        Some(receiver)
    }

    async fn watch_records(&self, names: &[LockName]) -> Option<mpsc::Receiver<RecordEvent>> {
        self.inner.watch_records(names).await
    }
}
