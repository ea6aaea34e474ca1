//! The storage backend contract: [`LockStore`] and the requests and answers that cross it.
//!
//! A [`LockStore`] is what the runtime needs from a database to run leases, each call one
//! round trip, owner-checked by [`LeaseId`] and timed by the store's own clock so client
//! clocks never matter: four required calls (`try_acquire`, `extend`, `release`,
//! `inspect`) and nine with defaults (`prepare`, `extend_many` and its `max_extend_batch`,
//! `release_many`, `set_permits`, `hand_over`, `tokens_per_grant`, `watch_releases`,
//! `watch_records`). Like `deadpool`'s
//! `Manager`, it is the one small trait a backend implements; the actors do everything else
//! (waiting, backoff, renewal cadence, loss deadlines, timeouts, metrics).
//!
//! This module is for implementing a backend or calling one directly. The backends
//! themselves are [`MemoryStore`](crate::MemoryStore) (embedded, for tests and
//! single-process use) and, with the `mongodb` feature,
//! `MongoStore`; what a store reports to users —
//! [`LockRecord`], [`HolderId`],
//! [`StoreError`] — lives at the crate root; a backend's own error travels inside a
//! [`StoreError`] as its [`BackendCause`].

pub(crate) mod memory;
#[cfg(feature = "mongodb")]
pub(crate) mod mongo;
pub(crate) mod outcome;
mod record_event;
mod release_demand;
pub(crate) mod request;

use async_trait::async_trait;
use tokio::sync::mpsc;

pub use crate::error::BackendCause;
pub use outcome::{AcquireOutcome, ExtendOutcome, HandOverOutcome, ReleaseOutcome};
pub use record_event::{RECORD_FEED_CAPACITY, RecordEvent};
pub use release_demand::ReleaseDemand;
pub(crate) use release_demand::{ReleaseWaiters, WaitingForRelease};
pub use request::{AcquireRequest, ExtendRequest, LeaseId, LeaseKey};
pub(crate) use request::{check_hand_over, check_lease_length, check_permits};

use crate::error::StoreError;
#[cfg(doc)]
use crate::kind::{Access, LockKind, MAX_PERMITS};
use crate::name::LockName;
use outcome::LockRecord;
use request::HolderId;

/// How many release hints may wait unread in a store's release feed before new ones are
/// dropped (a dropped hint costs a waiter one backoff interval, never safety).
pub(crate) const RELEASE_FEED_CAPACITY: usize = 1024;

/// How many consecutive fencing tokens each grant of the built-in stores reserves (see
/// [`LockStore::tokens_per_grant`]): enough for a burst of local hand-overs, few enough that
/// tokens stay far behind the server clock's thousand per millisecond.
const TOKENS_PER_GRANT: u64 = 16;

/// A lease store: the operations a distributed lock needs, each meant to be one round trip
/// using the store's clock.
///
/// Contract every implementation must keep. The rules are numbered once, here: each store
/// cites a rule by its number (`// Rule 9`) where it implements it, and the conformance
/// suite in `tests/common` names the scenario that checks it after it (`rule_9_…`), so the
/// stores can be read side by side, rule by rule.
/// - **Rule 1 (grant).** `try_acquire` grants iff the lock is free or its lease has expired
///   *by the store's clock*, atomically with writing the new lease, and returns a fencing
///   token larger than every token ever issued for that name — also after release, expiry
///   and deletion of the record.
/// - **Rule 2 (owner check).** `extend` and `release` (and [`hand_over`](LockStore::hand_over)
///   of its `from`) change nothing unless the record still carries the caller's lease.
/// - **Rule 3 (contention).** A `try_acquire` that finds the lock held marks the current
///   grant as contended since its "now" minus `request.waited` (keeping the earliest);
///   `release` reports how long that was and `inspect` shows it. A new grant clears the
///   mark, except that a mutex granted to a request that waits (in line, or with a
///   `retry_within`) while other managers' places are live in the line (listed or in line)
///   is contended from the start, since the earliest of them arrived: they wait for it as
///   if they had just asked. On a shared record a release (or hand-over) reports it only if a manager other
///   than the releasing lease's was refused since the last grant: a manager's own waiters
///   are served by its own releases.
/// - **Rule 4 (names are values).** Lock names are opaque values, never interpreted as keys,
///   paths or query operators.
/// - **Rule 5 (lengths).** A lease length of zero or beyond
///   [`MAX_LEASE_DURATION`](crate::MAX_LEASE_DURATION) is refused with
///   [`StoreError::Rejected`], and nothing is written. A `waited` or `retry_within` beyond it
///   counts as that long (up to `Duration::MAX`, still an answer, never an error).
/// - **Rule 6 (token blocks).** A grant with token `t` reserves the tokens
///   `t .. t + tokens_per_grant()`: the next grant of that name returns a token of at least
///   `t + tokens_per_grant()`; the record ([`LockRecord::token`]) shows `t`.
///
/// Shared kinds ([`AcquireRequest::access`] other than [`Access::Exclusive`]) keep one record
/// per name listing its holders, each with its own lease, token and expiry; their
/// [`LeaseKey`]s have `shared` set. On top of the rules above:
/// - **Rule 7 (kind).** The record's kind ([`LockKind`], with a semaphore's count) is fixed
///   by the grant that creates it and stays while the record exists; a request of another
///   kind or count gets [`StoreError::KindMismatch`] and writes nothing. So does a mutex
///   request on a shared record, and the reverse. Only [`set_permits`](LockStore::set_permits)
///   changes a count; a permit request of a count the record had before that is decided by
///   the record's count (those waiting under the old count are admitted by a higher one).
/// - **Rule 8 (permit).** `Permit { .. }` is granted iff fewer unexpired holders remain than
///   the record's count.
/// - **Rule 9 (write).** `Write` is granted iff no unexpired holder remains, the readers' turn
///   (rule 13) is not on or has let a reader in, and no live writer's mark (rule 11) of
///   another [`HolderId`] is earlier than the requester's own.
/// - **Rule 10 (read).** `Read` is granted iff no unexpired writer holds it, fewer than
///   [`MAX_PERMITS`] readers do, and no writer waits (rule 11) — unless the readers' turn
///   (rule 13) is on, the reader has waited since it began (the store's now minus
///   `request.waited` is not after the turn's start), and the turn has not yet let a reader
///   in and emptied since.
/// - **Rule 11 (writers' marks).** A refused `Write` with a `retry_within` marks "a writer of
///   its holder waits" until the store's now + `retry_within` (the later of that and that
///   holder's mark already there); each holder has one mark, and the marks are ordered by
///   when each began (a mark that ended begins again behind every live one). "A writer
///   waits" while any mark is live. A granted `Write` ends its holder's mark and any readers'
///   turn; other holders' marks stay, so one writer's grant lets neither new readers nor that
///   manager's next writer past a writer of another manager still waiting: writers of
///   different managers go in the order they were first refused.
///   [`withdraw`](LockStore::withdraw) ends a holder's mark (its writers gave up).
/// - **Rule 12 (readers' mark).** A refused `Read` with a `retry_within` marks "readers wait"
///   until the store's now + `retry_within` (the later of that and the mark already there).
///   Like a writer's (rule 11), each mark lasts no longer than a waiter's retry interval
///   after its last attempt.
/// - **Rule 13 (readers' turn).** Releasing a write while readers wait (rule 12) turns the
///   readers' turn on, from now until their mark ends: readers waiting when a writer leaves
///   go before the next writer, and a writer waiting holds new readers back. A turn lasts
///   while its readers arrive: once one got in and nobody holds, it is over and the waiting
///   writer goes next (readers who missed it have the turn after that writer).
/// - **Rule 14 (shared tokens).** Every grant's token is larger than every token issued for
///   the name before (shared grants included), and each reserves a block as in rule 6.
///
/// A store that [keeps arrival order](LockStore::keeps_arrival_order) also keeps, per name
/// (of any kind), a line of waiting managers:
/// - **Rule 15 (the line).** At most one place per [`HolderId`], each with the access it
///   waits for, its arrival (the store's now minus the request's `waited`) and an end (the
///   store's now plus its `retry_within`), live until that end. A request *waits behind* a
///   place unless both are reads.
///
/// For a request with [`in_arrival_order`](AcquireRequest::in_arrival_order):
/// - **Rule 16 (grant in line).** It is granted iff its kind's rule admits it and no live
///   place of another holder that it waits behind arrived earlier than it did; a grant
///   removes its holder's place. On a shared record the kind's rule is then the count alone
///   (a permit while fewer hold than the count; the write while nobody holds; a read while
///   no writer holds and fewer than [`MAX_PERMITS`] read): the waiting marks and the
///   readers' turn (rules 11 to 13) are neither read nor written.
/// - **Rule 17 (readers who may share).** A read granted so answers how long the earliest
///   live place of another holder that a reader waits behind (a writer's) had waited, zero
///   if none ([`AcquireOutcome::Acquired`]'s `readers_waited_over`): the holder's readers
///   that had waited longer arrived before it, and may share the grant; every other grant
///   answers `None`.
/// - **Rule 18 (refused in line).** Refused, its holder's place becomes its access, arrival
///   and end (replacing the one before).
/// - **Rule 19 (hand-over in line).** [`hand_over`](LockStore::hand_over) decides `to` the
///   same way: when an earlier place is in line, `from` is released and `to`'s holder is
///   placed in line ([`HandOverOutcome::Released`]).
/// - **Rule 20 (keeping the line).** A release keeps the line,
///   [`withdraw`](LockStore::withdraw) removes a holder's place, and
///   [`inspect`](LockStore::inspect) lists the live places ([`LockRecord::queue`]). Expired
///   places are dropped by any write.
///
/// Requests without it never wait behind the line.
/// - **Rule 21 (listing).** A refused mutex request without it and with a `retry_within`
///   *lists* its holder on the line instead: a place (one per [`HolderId`], arrival and end
///   as in rule 15) that holds nobody back, and that `inspect`'s queue does not show, but
///   that a release reads.
/// - **Rule 22 (whom a release wakes).** A release (a hand-over that releases for an
///   earlier place included) is reported by [`watch_releases`](LockStore::watch_releases)
///   to the feeds of the managers the record lets in next, and to feeds that serve no
///   particular manager ([`ReleaseDemand::holder`]), not to the feeds of other managers:
///   with many processes waiting for one lock, a turn costs one wake-up per manager that
///   can go. Who is let in next is read from the record as the release leaves it, among the
///   live places of its line (a place *arrived before* another if its arrival is strictly
///   earlier):
///   - a mutex: the manager of the earliest-arrived live place of either sort;
///   - a semaphore of count `c` that `h` unexpired holders still hold: the managers of the
///     places that fewer than `c − h` live places arrived before (the earliest `c − h`, in
///     arrival order; ties go together), nobody when `h ≥ c`;
///   - a reader/writer lock: the manager of a write place that no live place arrived
///     before, if no unexpired holder remains; and the managers of the read places that no
///     live write place arrived before (the leading run of reads, up to the first write),
///     if no unexpired writer holds and fewer than [`MAX_PERMITS`] readers do.
///
///   With no live place, every feed hears it; with live places of which none is let in, no
///   manager's feed does. A mutex request in arrival order refused only by an
///   earlier place (the lease had ended) wakes the manager of the earliest live place the
///   same way, unless the name's last wake named it already: the manager a release woke
///   may have been overtaken by the time its attempt comes (a retry's arrival is stamped
///   again from its wait, so it moves with each call's latency), and the lock must not stay
///   free until the manager that overtook it asks again. A shared record's hand-over that
///   grants its waiter is no release and wakes nobody. A shared lease granted without
///   arrival order
///   ([`LeaseKey::in_arrival_order`] unset: its release leaves the line alone, so that the
///   plain cycle stays small) has its release reported to every feed; so, on a shared
///   record, a waiter without a place hears of a release only then or when no place is
///   live, and otherwise finds room by its backoff. Withdrawals, count changes
///   ([`set_permits`](LockStore::set_permits)) and deletions are reported to every feed.
///   A store may also report a release to a manager whose [`HolderId`] is a part, between
///   spaces, of a woken manager's (MongoDB's feeds match the woken in one string): a
///   spurious wake, which costs that manager one attempt; a manager to wake is never
///   missed.
///
/// The runtime bounds every call with a timeout shorter than the remaining lease and treats a
/// timed-out acquire as "maybe granted" (it releases that lease id), so implementations need
/// no timeouts of their own.
///
/// ```
/// use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
/// use mongolock::HolderId;
/// use mongolock::{LockName, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::new();
/// let request = AcquireRequest::new(
///     LockName::new("orders")?,
///     LeaseId::new(),
///     HolderId::generate(),
///     Duration::from_secs(30),
/// );
/// assert!(matches!(store.try_acquire(&request).await?, AcquireOutcome::Acquired { .. }));
/// assert!(matches!(store.try_acquire(&request).await?, AcquireOutcome::Busy { .. }));
/// # Ok(()) }
/// ```
#[async_trait]
pub trait LockStore: Send + Sync + 'static {
    /// Called once by [`LockManager::start`](crate::LockManager::start) before any lock is
    /// used: check the server, create indexes, start background housekeeping.
    async fn prepare(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Takes the lock for `request.lease` if it is free or expired.
    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError>;

    /// Extends a held lease; [`ExtendOutcome::NotOwner`] means the lock was lost.
    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError>;

    /// Extends several leases (at most [`max_extend_batch`](Self::max_extend_batch), all with
    /// one expiry), answering each in order. The default calls [`LockStore::extend`] for
    /// each in turn; a backend with a bulk write answers all of them in one round trip and
    /// says so in `max_extend_batch`.
    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let mut results = Vec::with_capacity(requests.len());
        for request in requests {
            results.push(self.extend(request).await);
        }
        results
    }

    /// How many renewals one [`extend_many`](Self::extend_many) call may carry.
    ///
    /// The default, 1, suits a store that keeps the default `extend_many` (one `extend`
    /// after another): the runtime then sends each renewal as its own `extend` call, side by
    /// side, each bounded by its own lease's timeout — a slow call delays only its own lease,
    /// as if nothing were batched. A backend whose `extend_many` is one bulk write returns
    /// the most leases that write should carry.
    ///
    /// ```
    /// use mongolock::{store::LockStore, MemoryStore};
    /// assert!(MemoryStore::new().max_extend_batch() > 1);
    /// ```
    fn max_extend_batch(&self) -> usize {
        1
    }

    /// Releases a held lease, only if the record still carries it.
    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError>;

    /// Releases several held leases (of different names, any kinds), answering each in order
    /// with what [`release`](Self::release) would have: for a multi-lock letting go of all
    /// its members. The default releases one after another; a backend with a bulk write
    /// should use one round trip.
    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        let mut results = Vec::with_capacity(keys.len());
        for key in keys {
            results.push(self.release(key).await);
        }
        results
    }

    /// Sets the count of the semaphore `name` to `permits` (creating its record if there is
    /// none), returning the count it had (`None`: no record). Holders keep their permits: a
    /// lower count admits nobody new until fewer than `permits` hold one; a higher count
    /// admits waiters at their next attempt, whatever count they ask for among those the
    /// record has had; a count it never had still gets [`StoreError::KindMismatch`].
    ///
    /// # Errors
    ///
    /// [`StoreError::KindMismatch`] if `name` is a lock of another kind;
    /// [`StoreError::Rejected`] for a count of 0 or above [`MAX_PERMITS`]; the default,
    /// [`StoreError::Unsupported`].
    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        let _ = (name, permits);
        Err(StoreError::Unsupported(
            "this store cannot change a semaphore's count".to_owned(),
        ))
    }

    /// Passes the lock from the held lease `from` straight to `to.lease` (another of this
    /// manager's waiters), so it is never free in between: owner-checked like
    /// [`release`](Self::release) (and only while `from` is unexpired), fenced like
    /// [`try_acquire`](Self::try_acquire) (the new lease gets a larger token), keeping the
    /// record's contention mark (other managers are still waiting).
    ///
    /// On a shared record (`from.shared`) it is [`release`](Self::release) of `from` and
    /// then [`try_acquire`](Self::try_acquire) of `to`, as one write: `from`'s place is
    /// removed, then the grant rules decide `to` exactly as for any request (a semaphore
    /// whose count was lowered, or a reader while a writer waits elsewhere, is refused:
    /// [`HandOverOutcome::Released`], and the place is free). `to`'s token is the store's
    /// next, larger than every token issued for the name, like any grant's.
    ///
    /// The default releases and then tries to acquire: two calls, and another manager may
    /// win in between ([`HandOverOutcome::Released`]). A backend that can do it in one round
    /// trip should.
    ///
    /// # Errors
    ///
    /// [`StoreError::Rejected`], with nothing written (`from` keeps its place), when `to`
    /// names another lock than `from`, asks for another sort of hold (a shared place for a
    /// mutex's lease, or a mutex's lease for a shared place), or asks for a lease length or
    /// semaphore count no grant can have. Otherwise what [`release`](Self::release) or
    /// [`try_acquire`](Self::try_acquire) would return;
    /// an error after `from` was released leaves `to` possibly granted (the runtime then
    /// releases both). A [`StoreError::KindMismatch`] for `to` writes nothing for it:
    /// answered [`HandOverOutcome::Released`].
    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        release_then_acquire(self, from, to).await
    }

    /// How many consecutive fencing tokens each grant reserves for its holder, starting with
    /// the granted one (see the contract above). The runtime passes a held lock to another
    /// of its own waiters without any store call while reserved tokens remain, giving each
    /// the next one; the lease, its expiry and its renewals carry on unchanged. The default,
    /// 1, reserves nothing: every hand-over then goes through [`hand_over`](Self::hand_over).
    ///
    /// ```
    /// use mongolock::{store::LockStore, MemoryStore};
    /// assert!(MemoryStore::new().tokens_per_grant() > 1);
    /// ```
    fn tokens_per_grant(&self) -> u64 {
        1
    }

    /// Whether the store keeps a line of waiters per name for requests
    /// [`in_arrival_order`](AcquireRequest::in_arrival_order) (see the contract above). The
    /// default, `false`: the store ignores the flag, and the runtime refuses
    /// [`Fairness::ArrivalOrder`](crate::Fairness::ArrivalOrder) on it.
    ///
    /// ```
    /// use mongolock::{store::LockStore, MemoryStore};
    /// assert!(MemoryStore::new().keeps_arrival_order());
    /// ```
    fn keeps_arrival_order(&self) -> bool {
        false
    }

    /// `holder`'s waiters for `name` gave up: takes its place in the name's line out and
    /// ends its writers' mark (a reader/writer lock's "a writer of this holder waits"), so
    /// that those it held back need not wait for either to end, and tells the release feed
    /// ([`watch_releases`](LockStore::watch_releases)) of `name` when either was there, as
    /// a release does: those held back try again at once. Idempotent; writes nothing when
    /// `holder` has neither. The default does nothing: places and marks then last to their
    /// end, which costs those behind time, never safety.
    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        let _ = (name, holder);
        Ok(())
    }

    /// Reads what the store knows about `name` (`None`: it has never seen it or forgot it).
    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError>;

    /// Names of locks that became free — released, or their record deleted — as the store
    /// learns of it (from any process), so that waiters try again at once instead of at
    /// their next poll. The runtime asks once per manager. Hints only: a missed or
    /// spurious name costs a poll interval or one extra attempt, never safety. A feed that
    /// costs something runs only while `demand` says someone waits (see [`ReleaseDemand`]).
    /// `None` (the default): the store cannot tell, and waiters poll with backoff.
    async fn watch_releases(&self, demand: ReleaseDemand) -> Option<mpsc::Receiver<LockName>> {
        let _ = demand;
        None
    }

    /// What happens to the records of `names`, as the store applies it (grants, renewals,
    /// releases, deletions; see [`RecordEvent`]), from every process, for
    /// [`Lock::watch`](crate::Lock::watch) and [`LockManager::watch`](crate::LockManager::watch).
    /// The feed runs until the receiver is dropped; it says [`RecordEvent::Resync`] when it
    /// may have missed events, and ends (drops its sender) when it cannot go on. `None` (the
    /// default): the store cannot tell, and watchers poll [`inspect`](Self::inspect).
    async fn watch_records(&self, names: &[LockName]) -> Option<mpsc::Receiver<RecordEvent>> {
        let _ = names;
        None
    }
}

/// [`LockStore::hand_over`] in two calls: `release(from)`, then `try_acquire(to)` (the
/// default, and a backend's way when its one-call hand-over cannot apply).
pub(crate) async fn release_then_acquire<S: LockStore + ?Sized>(
    store: &S,
    from: &LeaseKey,
    to: &AcquireRequest,
) -> Result<HandOverOutcome, StoreError> {
    check_hand_over(from, to)?;
    let contended_for = match store.release(from).await? {
        ReleaseOutcome::Released { contended_for } => contended_for,
        ReleaseOutcome::NotOwner => return Ok(HandOverOutcome::NotOwner),
    };
    match store.try_acquire(to).await {
        Ok(AcquireOutcome::Acquired { token, .. }) => Ok(HandOverOutcome::HandedOver {
            token,
            contended_for,
        }),
        Ok(AcquireOutcome::Busy { .. }) | Err(StoreError::KindMismatch { .. }) => {
            Ok(HandOverOutcome::Released { contended_for })
        }
        Err(error) => Err(error),
    }
}

/// A shared store is a store: lets one code path hold any backend as `Arc<dyn LockStore>`.
///
/// ```
/// use mongolock::{LockManager, LockOptions, store::LockStore, MemoryStore};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new());
/// let manager = LockManager::start(store, LockOptions::default()).await?;
/// # Ok(()) }
/// ```
#[async_trait]
impl<S: LockStore + ?Sized> LockStore for std::sync::Arc<S> {
    async fn prepare(&self) -> Result<(), StoreError> {
        (**self).prepare().await
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        (**self).try_acquire(request).await
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        (**self).extend(request).await
    }

    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        (**self).extend_many(requests).await
    }

    fn max_extend_batch(&self) -> usize {
        (**self).max_extend_batch()
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        (**self).release(key).await
    }

    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        (**self).release_many(keys).await
    }

    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        (**self).set_permits(name, permits).await
    }

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        (**self).hand_over(from, to).await
    }

    fn tokens_per_grant(&self) -> u64 {
        (**self).tokens_per_grant()
    }

    fn keeps_arrival_order(&self) -> bool {
        (**self).keeps_arrival_order()
    }

    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        (**self).withdraw(name, holder).await
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        (**self).inspect(name).await
    }

    async fn watch_releases(&self, demand: ReleaseDemand) -> Option<mpsc::Receiver<LockName>> {
        (**self).watch_releases(demand).await
    }

    async fn watch_records(&self, names: &[LockName]) -> Option<mpsc::Receiver<RecordEvent>> {
        (**self).watch_records(names).await
    }
}
