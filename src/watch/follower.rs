//! The task behind a watch: reads the records of the watched names once, then follows the
//! store's record feed ([`LockStore::watch_records`]) where there is one — every grant,
//! renewal, release and deletion, in order — and polls [`LockStore::inspect`] every
//! [`POLL_INTERVAL`] where there is none.
//!
//! A lease that runs out is no write, so expiry is noticed by the task itself: it keeps each
//! held lease's end (from the lease length the store reported, counted on this process's
//! clock from when it heard of the write) and, when that passes, asks the store whether the
//! lease is still held. A shared record's events do not say which holder left or renewed,
//! so after each of its grants and releases the task reads the record and reports the
//! difference, holder by holder.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::change::LockChange;
use super::known::{End, Held, Known, ended};
use crate::error::StoreError;
use crate::kind::LockKind;
use crate::name::LockName;
use crate::store::outcome::LockRecord;
use crate::store::request::HolderId;
use crate::store::{LockStore, RecordEvent};

/// How often the records are read when the store has no record feed.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long after a failed read it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// A grant as the feed (or a read standing in for it) reported it.
struct Grant {
    holder: Option<HolderId>,
    token: u64,
    lease_left: Duration,
}

/// Why a shared record is compared with what is known.
enum Cause {
    /// The feed reported a grant (the one the event names).
    Grant(Grant),
    /// The feed reported a release of some holder (which, the record tells).
    Release { forced: bool },
    /// A lease's end came, or a poll: nothing was written that the watch knows of.
    Read,
}

/// How long a grant that was already gone when its record was read counts as held: time
/// for its release to come through the feed, after which it is taken as expired.
const GONE_GRANT_GRACE: Duration = RETRY_AFTER;

/// Starts the task that watches `names` of `store` and sends what it sees to `changes`,
/// until their reader is gone or `closed` says the manager shut down.
pub(super) fn spawn(
    store: Arc<dyn LockStore>,
    names: Vec<LockName>,
    changes: mpsc::Sender<LockChange>,
    closed: watch::Receiver<bool>,
) {
    let watcher = Watcher {
        store,
        names,
        known: BTreeMap::new(),
        changes,
    };
    tokio::spawn(watcher.run(closed));
}

/// The task behind a watch.
struct Watcher {
    store: Arc<dyn LockStore>,
    names: Vec<LockName>,
    known: BTreeMap<LockName, Known>,
    changes: mpsc::Sender<LockChange>,
}

/// The watcher's reader went away, or the manager shut down: stop.
struct Stop;

impl Watcher {
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

    async fn emit(&self, changes: impl IntoIterator<Item = LockChange>) -> Result<(), Stop> {
        for change in changes {
            self.changes.send(change).await.map_err(|_| Stop)?;
        }
        Ok(())
    }

    /// Reads `name`'s record: `None` when it cannot be read in time (the caller decides
    /// when to read it again).
    async fn read(&self, name: &LockName) -> Option<Option<LockRecord>> {
        let bound = RETRY_AFTER * 10;
        let read = match tokio::time::timeout(bound, self.store.inspect(name)).await {
            Ok(read) => read,
            Err(_) => Err(StoreError::Timeout(bound)),
        };
        read.inspect_err(|error| tracing::debug!(%error, %name, "watch: could not read the record"))
            .ok()
    }

    /// Reads every record and reports it as [`LockChange::Current`] (one per holding); a
    /// name that cannot be read is retried until it can.
    async fn resync(&mut self) -> Result<(), Stop> {
        for name in self.names.clone() {
            let record = loop {
                match self.read(&name).await {
                    Some(record) => break record,
                    None => tokio::time::sleep(RETRY_AFTER).await,
                }
            };
            let known = Known::from_record(record.as_ref(), Instant::now());
            let holdings = record.as_ref().map_or(&[][..], |record| &record.holders);
            let mut current: Vec<LockChange> = holdings
                .iter()
                .map(|holding| LockChange::Current {
                    name: name.clone(),
                    holder: Some(holding.holder.clone()),
                    token: holding.token,
                    expires_in: Some(holding.expires_in),
                })
                .collect();
            if current.is_empty() {
                current.push(LockChange::Current {
                    name: name.clone(),
                    holder: None,
                    token: known.token,
                    expires_in: None,
                });
            }
            self.emit(current).await?;
            self.known.insert(name, known);
        }
        Ok(())
    }

    /// One round of polling: each record read and diffed with what was known.
    async fn poll(&mut self) -> Result<(), Stop> {
        for name in self.names.clone() {
            let Some(record) = self.read(&name).await else {
                continue;
            };
            let known = self.known.get(&name);
            match record {
                Some(record) => self.reconcile(&name, &record, Cause::Read).await?,
                None if known.is_some_and(|known| known.is_held() || known.token != 0) => {
                    self.forget(&name).await?;
                }
                // A grant that began and ended between two reads shows only as a new token
                // on a free record: nothing to report.
                None => {}
            }
        }
        Ok(())
    }

    /// The earliest end of a held lease.
    fn next_end(&self) -> Option<Instant> {
        self.known
            .values()
            .flat_map(|known| known.held.values())
            .map(|held| held.ends_at)
            .min()
    }

    /// A name one of whose leases has reached its end.
    fn ended_lease(&self) -> Option<LockName> {
        let now = Instant::now();
        self.known
            .iter()
            .find(|(_, known)| known.held.values().any(|held| held.ends_at <= now))
            .map(|(name, _)| name.clone())
    }

    /// A lease of `name` should have ended: asks the store (its clock decides).
    async fn check_expiry(&mut self, name: &LockName) -> Result<(), Stop> {
        let Some(record) = self.read(name).await else {
            // Asked again after a while.
            let now = Instant::now();
            if let Some(known) = self.known.get_mut(name) {
                for held in known.held.values_mut().filter(|held| held.ends_at <= now) {
                    held.ends_at = now + RETRY_AFTER;
                }
            }
            return Ok(());
        };
        if let Some(record) = record {
            return self.reconcile(name, &record, Cause::Read).await;
        }
        // Gone before the feed said so: the last grant ran out.
        let Some((token, held)) = self
            .known
            .get_mut(name)
            .and_then(|known| known.held.pop_last())
        else {
            return Ok(());
        };
        self.emit([ended(name, held.holder, token, End::Expired)])
            .await
    }

    /// A new grant as its event reports it. A mutex's (`replaces`) takes the place of the
    /// one held before, which ran out unless the lock was handed over within one manager
    /// (the same holder); a shared record's is one more holding.
    async fn granted(&mut self, name: &LockName, grant: Grant, replaces: bool) -> Result<(), Stop> {
        let known = self.known.entry(name.clone()).or_default();
        let holder = grant.holder.or_else(|| known.holder.clone());
        let mut changes = Vec::new();
        if replaces {
            for (token, held) in std::mem::take(&mut known.held) {
                if held.holder != holder {
                    changes.push(ended(name, held.holder, token, End::Expired));
                }
            }
        }
        let ends_at = Instant::now() + grant.lease_left;
        changes.push(known.add(name, grant.token, Held { holder, ends_at }));
        self.emit(changes).await
    }

    /// Compares a record as read with what is known of it and reports the difference: the
    /// grants that ended — released if before their lease's end by this clock (forced if a
    /// forced release was reported), expired after it — then the new grants in grant order
    /// (the reported one among them, also if it has ended since). A grant event does not
    /// say which holder left in a shared record's hand-over, nor a release event which
    /// holder left: the record does. A mutex's new grant takes the place of the one before,
    /// which ran out unless it was handed over within one manager (the same holder), as in
    /// [`granted`](Self::granted).
    async fn reconcile(
        &mut self,
        name: &LockName,
        record: &LockRecord,
        cause: Cause,
    ) -> Result<(), Stop> {
        let now = Instant::now();
        let known = self.known.entry(name.clone()).or_default();
        known.kind = Some(record.kind);
        let present: BTreeMap<u64, _> = record
            .holders
            .iter()
            .map(|holding| (holding.token, holding))
            .collect();
        let let_go = End::let_go(matches!(cause, Cause::Release { forced: true }));
        let successor = present
            .range(known.token.saturating_add(1)..)
            .next_back()
            .filter(|_| record.kind == LockKind::Mutex)
            .map(|(_, holding)| &holding.holder);
        let mut changes = Vec::new();
        known.held.retain(|&token, held| {
            let Some(holding) = present.get(&token) else {
                let end = match successor {
                    Some(next) if held.holder.as_ref() == Some(next) => return false,
                    _ if successor.is_some() || held.ends_at <= now => End::Expired,
                    _ => let_go,
                };
                changes.push(ended(name, held.holder.take(), token, end));
                return false;
            };
            held.ends_at = now + holding.expires_in;
            true
        });
        let mut new: BTreeMap<u64, Held> = present
            .range(known.token.saturating_add(1)..)
            .map(|(&token, holding)| (token, Held::of(holding, now)))
            .collect();
        if let Cause::Grant(grant) = cause
            && grant.token > known.token
        {
            let fallback = known.holder.clone();
            new.entry(grant.token).or_insert_with(|| Held {
                holder: grant.holder.or(fallback),
                // Already gone: its release may still be on its way through the feed.
                ends_at: now + grant.lease_left.max(GONE_GRANT_GRACE),
            });
        }
        for (token, held) in new {
            changes.push(known.add(name, token, held));
        }
        self.emit(changes).await
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
                if token <= known.token {
                    return Ok(()); // already reported (from a read)
                }
                let grant = Grant {
                    holder,
                    token,
                    lease_left,
                };
                if known.kind == Some(LockKind::Mutex) {
                    return self.granted(&name, grant, true).await;
                }
                match self.read(&name).await {
                    Some(Some(record)) if record.kind.is_shared() => {
                        self.reconcile(&name, &record, Cause::Grant(grant)).await
                    }
                    Some(Some(_)) => self.granted(&name, grant, true).await,
                    // Gone again, or unreadable: the grant as reported, beside the others
                    // of a shared record (the next read or event settles the rest).
                    _ => {
                        let shared = known.kind.is_some_and(LockKind::is_shared);
                        self.granted(&name, grant, !shared).await
                    }
                }
            }
            RecordEvent::Renewed { name, lease_left } => {
                // A shared record's renewal does not say whose: each holding's end is read
                // when it comes.
                if let Some(known) = self.known.get_mut(&name)
                    && known.kind == Some(LockKind::Mutex)
                    && let Some(held) = known.held.values_mut().next_back()
                {
                    held.ends_at = now + lease_left;
                }
                Ok(())
            }
            RecordEvent::Released { name, forced } => {
                let Some(known) = self.known.get_mut(&name).filter(|known| known.is_held()) else {
                    return Ok(()); // already reported as expired
                };
                if known.kind.is_some_and(LockKind::is_shared) {
                    return match self.read(&name).await {
                        Some(Some(record)) if record.kind.is_shared() => {
                            self.reconcile(&name, &record, Cause::Release { forced })
                                .await
                        }
                        Some(None) => self.forget(&name).await,
                        _ => Ok(()),
                    };
                }
                let Some((token, held)) = known.held.pop_last() else {
                    return Ok(());
                };
                known.held.clear();
                self.emit([ended(&name, held.holder, token, End::let_go(forced))])
                    .await
            }
            RecordEvent::Deleted { name } => self.forget(&name).await,
            // Resync, and variants a newer store may add: read everything again.
            _ => self.resync().await,
        }
    }

    /// The record of `name` is gone: forgotten, as the store forgot it (its next grant is
    /// new whatever its token, and may be of another kind). Only a held lock's deletion is
    /// news; a free lock's record being cleaned up (a TTL index, a sweeper) changes nothing
    /// for anyone.
    async fn forget(&mut self, name: &LockName) -> Result<(), Stop> {
        let known = self.known.insert(name.clone(), Known::default());
        if known.is_some_and(|known| known.is_held()) {
            self.emit([LockChange::Deleted { name: name.clone() }])
                .await
        } else {
            Ok(())
        }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::{Cause, Watcher};
    use crate::name::LockName;
    use crate::store::memory::MemoryStore;
    use crate::store::outcome::LockRecord;
    use crate::store::request::HolderId;
    use crate::watch::change::LockChange;
    use crate::watch::known::Known;

    const LEASE: Duration = Duration::from_secs(10);

    /// What a watcher that knew `before` reports when it reads `after`, at `later` past the
    /// first read.
    async fn read_after(
        before: &LockRecord,
        later: Duration,
        after: &LockRecord,
    ) -> Vec<LockChange> {
        let name = LockName::new("watched").unwrap();
        let (changes, mut reported) = mpsc::channel(16);
        let mut watcher = Watcher {
            store: Arc::new(MemoryStore::new()),
            names: vec![name.clone()],
            known: BTreeMap::new(),
            changes,
        };
        let known = Known::from_record(Some(before), Instant::now());
        watcher.known.insert(name.clone(), known);
        tokio::time::advance(later).await;
        assert!(watcher.reconcile(&name, after, Cause::Read).await.is_ok());
        drop(watcher);
        let mut all = Vec::new();
        while let Some(change) = reported.recv().await {
            all.push(change);
        }
        all
    }

    fn holder(id: &str) -> HolderId {
        HolderId::from_string(id.to_owned())
    }

    /// The change `what` (acquired, released or expired) of `id`'s grant `token`.
    fn change(what: &str, id: &str, token: u64) -> LockChange {
        let (name, holder) = (LockName::new("watched").unwrap(), Some(holder(id)));
        match what {
            "acquired" => LockChange::Acquired {
                name,
                holder,
                token,
            },
            "released" => LockChange::Released {
                name,
                holder,
                token,
            },
            _ => LockChange::Expired {
                name,
                holder,
                token,
            },
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_mutex_taken_over_reports_the_old_grant_expired_unless_handed_to_its_holder() {
        let held_by_a = LockRecord::held(holder("a"), 1, LEASE);
        let taken_by_b = LockRecord::held(holder("b"), 2, LEASE);
        assert_eq!(
            read_after(&held_by_a, Duration::ZERO, &taken_by_b).await,
            [change("expired", "a", 1), change("acquired", "b", 2)]
        );
        let handed_to_a = LockRecord::held(holder("a"), 2, LEASE);
        assert_eq!(
            read_after(&held_by_a, Duration::ZERO, &handed_to_a).await,
            [change("acquired", "a", 2)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_mutex_read_free_was_released_before_its_end_and_expired_after_it() {
        let held_by_a = LockRecord::held(holder("a"), 1, LEASE);
        let free = LockRecord::free(1);
        assert_eq!(
            read_after(&held_by_a, LEASE / 2, &free).await,
            [change("released", "a", 1)]
        );
        assert_eq!(
            read_after(&held_by_a, LEASE, &free).await,
            [change("expired", "a", 1)]
        );
    }
}
