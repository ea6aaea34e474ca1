//! Store-level conformance scenarios for the shared kinds (semaphores and reader/writer
//! locks): each calls the [`LockStore`] of a [`Backend`] directly, pinning the contract's
//! "Shared kinds" rules — capacity, owner checks, expiry, kind mismatches that write
//! nothing, `set_permits`, the readers' and writers' waiting marks, fencing tokens across
//! every grant of a name, `release_many`, inspection, and names as plain values. Each is
//! named `shared_records_…`, so that `cargo test shared_records` runs them all.
//!
//! Leases that must run out are [`SHORT`] and waits are a little longer, so the real-time
//! (MongoDB) run stays quick; under the memory store's paused clock they cost nothing. Every
//! other lease is [`LONG`], so nothing expires by accident on a slow machine.

use std::time::Duration;

use mongolock::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, LeaseId,
    LeaseKey, LockStore, ReleaseDemand, ReleaseOutcome,
};
use mongolock::{Access, HolderId, LockKind, LockName, LockRecord, MAX_PERMITS, StoreError};
use tokio::time::{Instant, sleep};

use super::Backend;

/// A lease that outlives every scenario.
pub(super) const LONG: Duration = Duration::from_secs(30);
/// A lease a scenario lets run out.
pub(super) const SHORT: Duration = Duration::from_millis(300);
/// How long past [`SHORT`] (or a waiting mark) a scenario waits before counting on its end:
/// room for scheduling and a round trip on a busy machine.
pub(super) const MARGIN: Duration = Duration::from_millis(200);

/// How long a release feed may take to report a change (a change stream on a busy
/// server); the memory store's reports at once.
pub(super) const FEED_WITHIN: Duration = Duration::from_secs(5);
/// How long a feed is watched for a report that must not come (one would come within
/// milliseconds).
pub(super) const FEED_QUIET: Duration = Duration::from_millis(300);

/// One would-be holder: its own manager identity and a fresh lease per attempt.
#[derive(Clone)]
pub(super) struct Caller {
    pub(super) holder: HolderId,
}

impl Caller {
    pub(super) fn new() -> Self {
        Self {
            holder: HolderId::generate(),
        }
    }

    /// An attempt on `name` for `access` with a lease of `lease` and no waiting mark.
    pub(super) fn request(
        &self,
        name: &LockName,
        access: Access,
        lease: Duration,
    ) -> AcquireRequest {
        AcquireRequest::new(name.clone(), LeaseId::new(), self.holder.clone(), lease)
            .with_access(access)
    }
}

pub(super) fn name(text: &str) -> LockName {
    LockName::new(text).unwrap_or_else(|error| panic!("{text:?} is a valid name: {error}"))
}

/// Runs `request`: `Some(token)` if granted, `None` if busy; an error fails the test.
pub(super) async fn attempt(store: &impl LockStore, request: &AcquireRequest) -> Option<u64> {
    match store.try_acquire(request).await {
        Ok(AcquireOutcome::Acquired { token, .. }) => Some(token),
        Ok(AcquireOutcome::Busy { .. }) => None,
        Ok(other) => panic!("{:?}: unexpected outcome {other:?}", request.access),
        Err(error) => panic!("{:?} on {}: {error}", request.access, request.name),
    }
}

/// Runs `request`, which must be granted; returns its key and token.
pub(super) async fn granted(store: &impl LockStore, request: &AcquireRequest) -> (LeaseKey, u64) {
    match attempt(store, request).await {
        Some(token) => (request.key(), token),
        None => panic!(
            "{:?} on {} was refused, expected a grant",
            request.access, request.name
        ),
    }
}

/// Runs `request`, which must be refused as busy.
pub(super) async fn refused(store: &impl LockStore, request: &AcquireRequest) {
    if let Some(token) = attempt(store, request).await {
        panic!(
            "{:?} on {} was granted (token {token}), expected busy",
            request.access, request.name
        );
    }
}

async fn release(store: &impl LockStore, key: &LeaseKey) -> ReleaseOutcome {
    store
        .release(key)
        .await
        .unwrap_or_else(|error| panic!("release of {}: {error}", key.name))
}

pub(super) async fn released(store: &impl LockStore, key: &LeaseKey) {
    let outcome = release(store, key).await;
    assert!(
        matches!(outcome, ReleaseOutcome::Released { .. }),
        "release of a held lease of {}: {outcome:?}",
        key.name
    );
}

async fn extend(store: &impl LockStore, key: &LeaseKey, lease: Duration) -> ExtendOutcome {
    store
        .extend(&ExtendRequest::new(key.clone(), lease))
        .await
        .unwrap_or_else(|error| panic!("extend of {}: {error}", key.name))
}

pub(super) async fn inspect(store: &impl LockStore, name: &LockName) -> Option<LockRecord> {
    store
        .inspect(name)
        .await
        .unwrap_or_else(|error| panic!("inspect of {name}: {error}"))
}

/// What a record says about who holds what, without the times (which move on between two
/// reads): kind, last token and each holding's holder, token and access, in order.
type Snapshot = (LockKind, u64, Vec<(HolderId, u64, Access)>);

async fn snapshot(store: &impl LockStore, name: &LockName) -> Option<Snapshot> {
    inspect(store, name).await.map(|record| {
        let holders = record
            .holders
            .iter()
            .map(|holding| (holding.holder.clone(), holding.token, holding.access))
            .collect();
        (record.kind, record.token, holders)
    })
}

/// Asserts `result` is a kind mismatch naming `found` and `asked`.
fn assert_mismatch<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    on: &LockName,
    found: LockKind,
    asked: LockKind,
) {
    match result {
        Err(StoreError::KindMismatch {
            name,
            found: was,
            asked: wanted,
        }) => {
            assert_eq!(name, on.as_str(), "the mismatch names the lock");
            assert_eq!((was, wanted), (found, asked), "mismatch on {on}");
        }
        other => panic!("{asked} on {on} ({found}): expected a kind mismatch, got {other:?}"),
    }
}

fn assert_rejected<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::Rejected { .. })),
        "{what}: expected Rejected, got {result:?}"
    );
}

/// A semaphore of N admits exactly N distinct leases, each with its own token; the next is
/// busy (told the first holder); a release frees exactly one lease's places.
pub(crate) async fn rule_8_semaphore_grants_exactly_its_permits<B: Backend>(backend: &B) {
    const PERMITS: u32 = 3;
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let sem = name("permits");
    let access = Access::Permit { permits: PERMITS };
    let callers: Vec<Caller> = (0..5).map(|_| Caller::new()).collect();
    let mut held = Vec::new();
    for (i, caller) in callers.iter().take(PERMITS as usize).enumerate() {
        // Alternate the two "processes": they share one record.
        let on: &B::Store = if i % 2 == 0 { &store } else { &peer };
        held.push(granted(on, &caller.request(&sem, access, LONG)).await);
    }
    let leases: std::collections::HashSet<_> = held.iter().map(|(key, _)| key.lease).collect();
    assert_eq!(leases.len(), PERMITS as usize, "distinct leases");
    assert!(
        held.iter().all(|(key, _)| key.shared),
        "permit keys are shared keys"
    );
    let tokens: Vec<u64> = held.iter().map(|(_, token)| *token).collect();
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "each grant its own, larger token: {tokens:?}"
    );
    match store
        .try_acquire(&callers[3].request(&sem, access, LONG))
        .await
    {
        Ok(AcquireOutcome::Busy { holder, .. }) => assert_eq!(
            holder.as_ref(),
            Some(&callers[0].holder),
            "a full semaphore names its first holder"
        ),
        other => panic!("a fourth permit of three: {other:?}"),
    }
    assert_eq!(
        inspect(&store, &sem)
            .await
            .map(|record| record.held_count()),
        Some(PERMITS as usize),
        "the refused attempt took no place"
    );
    released(&peer, &held[1].0).await;
    let (fourth, _) = granted(&peer, &callers[3].request(&sem, access, LONG)).await;
    refused(&store, &callers[4].request(&sem, access, LONG)).await;
    assert!(
        matches!(release(&store, &held[1].0).await, ReleaseOutcome::NotOwner),
        "a released permit cannot be released twice"
    );
    for key in [&held[0].0, &held[2].0, &fourth] {
        released(&store, key).await;
    }
    let record = inspect(&store, &sem).await.expect("the record stays");
    assert!(!record.is_held() && record.holders.is_empty(), "{record:?}");
    granted(&store, &callers[4].request(&sem, access, LONG)).await;

    // The same request sent twice (the store has no way to tell) takes two places under
    // one lease; its release frees both, and nothing is left to extend.
    let twice = name("permits-twice");
    let again = callers[0].request(&twice, Access::Permit { permits: 2 }, LONG);
    let (key, _) = granted(&store, &again).await;
    granted(&store, &again).await;
    released(&store, &key).await;
    let record = inspect(&store, &twice).await;
    assert_eq!(
        record.map(|record| record.held_count()),
        Some(0),
        "both places freed"
    );
    assert_eq!(extend(&store, &key, LONG).await, ExtendOutcome::NotOwner);
}

/// A release reports contention only if another manager waits: a manager holding a
/// place keeps asking for its other waiters, and those refusals alone (served by its own
/// releases) are nobody else's to step back for. Once another manager is refused too, the
/// release reports the wait, and inspection shows it while the place is held.
pub(crate) async fn rule_3_a_shared_release_reports_only_other_managers_waits<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let sem = name("own-waiters");
    let access = Access::Permit { permits: 1 };
    let (holding, elsewhere) = (Caller::new(), Caller::new());
    let waited = Duration::from_secs(2);
    let (held, _) = granted(&store, &holding.request(&sem, access, LONG)).await;
    refused(
        &store,
        &holding.request(&sem, access, LONG).with_waited(waited),
    )
    .await;
    match release(&store, &held).await {
        ReleaseOutcome::Released {
            contended_for: None,
        } => {}
        other => panic!("only the holder's own waiter was refused: {other:?}"),
    }
    let (held, _) = granted(&store, &holding.request(&sem, access, LONG)).await;
    refused(
        &store,
        &holding.request(&sem, access, LONG).with_waited(waited),
    )
    .await;
    refused(
        &store,
        &elsewhere
            .request(&sem, access, LONG)
            .with_waited(Duration::from_millis(500)),
    )
    .await;
    // Inspection shows the same while the place is held (what `mongolock status` prints).
    let shown = inspect(&store, &sem)
        .await
        .and_then(|record| record.contended_for);
    assert!(
        shown.is_some_and(|since| since >= waited),
        "a held record others wait for shows the earliest wait: {shown:?}"
    );
    match release(&store, &held).await {
        ReleaseOutcome::Released {
            contended_for: Some(since),
        } => assert!(since >= waited, "the earliest wait is reported: {since:?}"),
        other => panic!("another manager waits: {other:?}"),
    }
}

/// Extending a permit pushes its own expiry only; a foreign lease, a mutex key for a shared
/// lease and an expired lease are `NotOwner`; a batch mixing mutex and shared keys answers
/// each in order.
pub(crate) async fn rule_2_shared_extend_is_owner_checked<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let sem = name("extended");
    let access = Access::Permit { permits: 4 };
    let (renewed, _) = granted(&store, &Caller::new().request(&sem, access, SHORT)).await;
    let (lapsing, _) = granted(&store, &Caller::new().request(&sem, access, SHORT)).await;
    let (batched, _) = granted(&store, &Caller::new().request(&sem, access, LONG)).await;
    let mutex = name("extended-mutex");
    let (mutex_key, _) = granted(
        &store,
        &Caller::new().request(&mutex, Access::Exclusive, LONG),
    )
    .await;
    assert!(!mutex_key.shared);

    assert_eq!(
        extend(&store, &renewed, LONG).await,
        ExtendOutcome::Extended
    );
    let foreign = LeaseKey::shared(sem.clone(), LeaseId::new());
    assert_eq!(
        extend(&store, &foreign, LONG).await,
        ExtendOutcome::NotOwner
    );
    let as_mutex = LeaseKey::new(sem.clone(), renewed.lease);
    assert_eq!(
        extend(&store, &as_mutex, LONG).await,
        ExtendOutcome::NotOwner,
        "a shared lease is not a mutex's lease"
    );
    let as_shared = LeaseKey::shared(mutex.clone(), mutex_key.lease);
    assert_eq!(
        extend(&store, &as_shared, LONG).await,
        ExtendOutcome::NotOwner,
        "a mutex's lease is not a shared holder"
    );

    sleep(SHORT + MARGIN).await;
    assert_eq!(
        extend(&store, &lapsing, LONG).await,
        ExtendOutcome::NotOwner,
        "an expired permit cannot be renewed"
    );
    let record = inspect(&store, &sem).await.expect("record");
    assert_eq!(
        record.held_count(),
        2,
        "the renewed permit outlived its first lease"
    );
    assert!(
        record
            .holders
            .iter()
            .all(|holding| holding.expires_in > SHORT),
        "{record:?}"
    );

    let batch = [
        ExtendRequest::new(mutex_key.clone(), LONG),
        ExtendRequest::new(renewed.clone(), LONG),
        ExtendRequest::new(lapsing.clone(), LONG),
        ExtendRequest::new(batched.clone(), LONG),
        ExtendRequest::new(foreign.clone(), LONG),
    ];
    let outcomes: Vec<_> = store
        .extend_many(&batch)
        .await
        .into_iter()
        .map(|result| result.unwrap_or_else(|error| panic!("extend_many: {error}")))
        .collect();
    use ExtendOutcome::{Extended, NotOwner};
    assert_eq!(outcomes, [Extended, Extended, NotOwner, Extended, NotOwner]);
    let all_held = [
        ExtendRequest::new(mutex_key, LONG),
        ExtendRequest::new(renewed, LONG),
        ExtendRequest::new(batched, LONG),
    ];
    let outcomes: Vec<_> = store
        .extend_many(&all_held)
        .await
        .into_iter()
        .map(|result| result.unwrap_or_else(|error| panic!("extend_many: {error}")))
        .collect();
    assert_eq!(outcomes, [Extended, Extended, Extended]);
}

/// A permit whose holder went silent comes back once its lease ends: the next grant gets a
/// larger token, and the old lease can neither be renewed nor released.
pub(crate) async fn rule_8_expired_permit_comes_back<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let sem = name("lapsed");
    let access = Access::Permit { permits: 1 };
    let (silent, first) = granted(&store, &Caller::new().request(&sem, access, SHORT)).await;
    let next = Caller::new();
    refused(&peer, &next.request(&sem, access, LONG)).await;
    sleep(SHORT + MARGIN).await;
    let record = inspect(&store, &sem).await.expect("record");
    assert!(
        record.holders.is_empty(),
        "an expired holder is not shown: {record:?}"
    );
    let (taken, second) = granted(&peer, &next.request(&sem, access, LONG)).await;
    assert!(second > first, "token {second} after {first}");
    assert_eq!(extend(&store, &silent, LONG).await, ExtendOutcome::NotOwner);
    assert!(matches!(
        release(&store, &silent).await,
        ReleaseOutcome::NotOwner
    ));
    let record = inspect(&store, &sem).await.expect("record");
    assert_eq!(record.holder(), Some(&next.holder));
    assert_eq!(record.token, second);
    released(&peer, &taken).await;
}

/// A request of another kind (or another count) than the record's is refused with
/// `KindMismatch` and changes nothing, in every direction.
pub(crate) async fn rule_7_kind_mismatches_change_nothing<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let caller = Caller::new();
    let mutex = name("a-mutex");
    let sem = name("a-semaphore");
    let rw = name("a-rwlock");
    let three = LockKind::Semaphore { permits: 3 };
    let (mutex_key, _) = granted(&store, &caller.request(&mutex, Access::Exclusive, LONG)).await;
    let (sem_key, _) = granted(
        &store,
        &caller.request(&sem, Access::Permit { permits: 3 }, LONG),
    )
    .await;
    let (rw_key, _) = granted(&store, &caller.request(&rw, Access::Read, LONG)).await;
    let mut before = Vec::new();
    for on in [&mutex, &sem, &rw] {
        before.push(snapshot(&store, on).await);
    }

    let other = Caller::new();
    let asks = [
        (&mutex, Access::Permit { permits: 3 }, LockKind::Mutex),
        (&mutex, Access::Read, LockKind::Mutex),
        (&mutex, Access::Write, LockKind::Mutex),
        (&sem, Access::Exclusive, three),
        (&sem, Access::Permit { permits: 4 }, three),
        (&sem, Access::Permit { permits: 2 }, three),
        (&sem, Access::Read, three),
        (&sem, Access::Write, three),
        (&rw, Access::Exclusive, LockKind::ReadWrite),
        (&rw, Access::Permit { permits: 3 }, LockKind::ReadWrite),
    ];
    for (on, access, found) in asks {
        let request = other
            .request(on, access, LONG)
            .with_retry_within(Duration::from_secs(5));
        assert_mismatch(store.try_acquire(&request).await, on, found, access.kind());
    }
    assert_mismatch(
        store.set_permits(&mutex, 2).await,
        &mutex,
        LockKind::Mutex,
        LockKind::Semaphore { permits: 2 },
    );
    assert_mismatch(
        store.set_permits(&rw, 2).await,
        &rw,
        LockKind::ReadWrite,
        LockKind::Semaphore { permits: 2 },
    );

    for (on, was) in [&mutex, &sem, &rw].into_iter().zip(before) {
        assert_eq!(snapshot(&store, on).await, was, "{on} changed");
    }
    // A refused read with a waiting mark would hold writers back, and a refused write
    // readers; the mismatched attempts above left neither.
    granted(&store, &other.request(&rw, Access::Read, LONG)).await;
    for key in [&mutex_key, &sem_key, &rw_key] {
        assert_eq!(extend(&store, key, LONG).await, ExtendOutcome::Extended);
    }
}

/// `set_permits` creates a semaphore or changes its count: a raise admits more at once, a
/// cut admits nobody new until fewer hold than the new count, a request of a count the
/// record had before is decided by the new count (its waiters are admitted), one of a count
/// it never had is a mismatch; a count of 0 or above `MAX_PERMITS` is rejected and writes
/// nothing.
pub(crate) async fn rule_7_set_permits_changes_the_count<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let caller = Caller::new();
    let fresh = name("created-by-count");
    assert_eq!(
        store.set_permits(&fresh, 2).await.expect("set_permits"),
        None
    );
    let (kind, _, holders) = snapshot(&store, &fresh).await.expect("a record");
    assert_eq!(kind, LockKind::Semaphore { permits: 2 });
    assert!(holders.is_empty());
    assert_mismatch(
        store
            .try_acquire(&caller.request(&fresh, Access::Exclusive, LONG))
            .await,
        &fresh,
        LockKind::Semaphore { permits: 2 },
        LockKind::Mutex,
    );
    granted(
        &store,
        &caller.request(&fresh, Access::Permit { permits: 2 }, LONG),
    )
    .await;

    let sem = name("recounted");
    let two = Access::Permit { permits: 2 };
    let (a, _) = granted(&store, &caller.request(&sem, two, LONG)).await;
    let (b, _) = granted(&store, &caller.request(&sem, two, LONG)).await;
    refused(&store, &caller.request(&sem, two, LONG)).await;
    assert_eq!(store.set_permits(&sem, 3).await.expect("raise"), Some(2));
    let three = Access::Permit { permits: 3 };
    let (c, _) = granted(&store, &caller.request(&sem, two, LONG)).await;
    refused(&store, &caller.request(&sem, three, LONG)).await;
    refused(&store, &caller.request(&sem, two, LONG)).await;
    assert_mismatch(
        store
            .try_acquire(&caller.request(&sem, Access::Permit { permits: 4 }, LONG))
            .await,
        &sem,
        LockKind::Semaphore { permits: 3 },
        LockKind::Semaphore { permits: 4 },
    );

    assert_eq!(store.set_permits(&sem, 1).await.expect("cut"), Some(3));
    let one = Access::Permit { permits: 1 };
    assert_eq!(
        inspect(&store, &sem)
            .await
            .map(|record| record.held_count()),
        Some(3),
        "holders keep their permits after a cut"
    );
    refused(&store, &caller.request(&sem, one, LONG)).await;
    released(&store, &a).await;
    released(&store, &b).await;
    refused(&store, &caller.request(&sem, one, LONG)).await;
    released(&store, &c).await;
    granted(&store, &caller.request(&sem, one, LONG)).await;

    let before = snapshot(&store, &sem).await;
    assert_rejected(store.set_permits(&sem, 0).await, "a count of 0");
    assert_rejected(
        store.set_permits(&sem, MAX_PERMITS + 1).await,
        "a count above MAX_PERMITS",
    );
    assert_rejected(
        store
            .try_acquire(&caller.request(&sem, Access::Permit { permits: 0 }, LONG))
            .await,
        "a permit of a semaphore of 0",
    );
    assert_rejected(
        store
            .try_acquire(&caller.request(
                &sem,
                Access::Permit {
                    permits: MAX_PERMITS + 1,
                },
                LONG,
            ))
            .await,
        "a permit of a semaphore above MAX_PERMITS",
    );
    assert_eq!(snapshot(&store, &sem).await, before, "a rejection wrote");
    let untouched = name("never-counted");
    assert_rejected(store.set_permits(&untouched, 0).await, "a new count of 0");
    assert_eq!(
        inspect(&store, &untouched).await,
        None,
        "a rejection created a record"
    );
    assert_eq!(
        store
            .set_permits(&sem, MAX_PERMITS)
            .await
            .expect("the largest count"),
        Some(1)
    );
}

/// Readers share a reader/writer lock; a writer is refused while any reader holds, and
/// readers and other writers while a writer holds.
pub(crate) async fn rule_9_10_readers_share_and_writers_exclude<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let rw = name("shared-data");
    let (reader, writer) = (Caller::new(), Caller::new());
    let mut readers = Vec::new();
    for i in 0..3 {
        let on: &B::Store = if i % 2 == 0 { &store } else { &peer };
        readers.push(
            granted(on, &reader.request(&rw, Access::Read, LONG))
                .await
                .0,
        );
    }
    refused(&peer, &writer.request(&rw, Access::Write, LONG)).await;
    // A refused writer without a waiting mark holds nobody back.
    readers.push(
        granted(&store, &reader.request(&rw, Access::Read, LONG))
            .await
            .0,
    );
    assert_eq!(
        inspect(&store, &rw).await.map(|record| record.held_count()),
        Some(4)
    );
    for key in &readers[1..] {
        released(&store, key).await;
    }
    refused(&peer, &writer.request(&rw, Access::Write, LONG)).await;
    released(&peer, &readers[0]).await;
    let (written, _) = granted(&peer, &writer.request(&rw, Access::Write, LONG)).await;
    refused(&store, &reader.request(&rw, Access::Read, LONG)).await;
    refused(&store, &Caller::new().request(&rw, Access::Write, LONG)).await;
    released(&peer, &written).await;
    granted(&store, &reader.request(&rw, Access::Read, LONG)).await;
}

/// A writer refused with `retry_within` holds back new readers until its mark ends; a
/// second refusal within the mark pushes it to the later end; once it ends readers come in
/// again (the reader already in keeps its place throughout).
pub(crate) async fn rule_10_waiting_writer_holds_back_new_readers<B: Backend>(backend: &B) {
    const MARK: Duration = Duration::from_millis(500);
    let store = backend.fresh().await;
    let rw = name("writer-waits");
    let (reader, writer) = (Caller::new(), Caller::new());
    let (first, _) = granted(&store, &reader.request(&rw, Access::Read, LONG)).await;
    let waiting = || {
        writer
            .request(&rw, Access::Write, LONG)
            .with_retry_within(MARK)
    };
    refused(&store, &waiting()).await;
    refused(&store, &reader.request(&rw, Access::Read, LONG)).await;
    sleep(MARK * 3 / 5).await;
    refused(&store, &waiting()).await; // the mark now ends MARK after this
    sleep(MARK * 3 / 5).await;
    // The first mark has ended, the second has not.
    refused(&store, &reader.request(&rw, Access::Read, LONG)).await;
    sleep(MARK * 2 / 5 + MARGIN).await;
    let (second, _) = granted(&store, &reader.request(&rw, Access::Read, LONG)).await;
    assert_eq!(
        inspect(&store, &rw).await.map(|record| record.held_count()),
        Some(2)
    );
    // A writer that gets in clears its mark: a long one (which would hold readers back for
    // the whole test) is gone with its grant, and after its release readers come in at once.
    released(&store, &first).await;
    let long_wait = || {
        writer
            .request(&rw, Access::Write, LONG)
            .with_retry_within(LONG)
    };
    refused(&store, &long_wait()).await;
    released(&store, &second).await;
    let (written, _) = granted(&store, &long_wait()).await;
    released(&store, &written).await;
    granted(&store, &reader.request(&rw, Access::Read, LONG)).await;

    // In arrival order the line orders the two sides instead, and a refused writer leaves no
    // mark: a reader in the default mode (which does not look at the line) still comes in.
    let lined = name("writer-in-line");
    granted(&store, &reader.request(&lined, Access::Read, LONG)).await;
    let in_line = writer
        .request(&lined, Access::Write, LONG)
        .with_retry_within(LONG)
        .with_arrival_order(true);
    refused(&store, &in_line).await;
    granted(&store, &reader.request(&lined, Access::Read, LONG)).await;
}

/// Writers of different managers go in the order their managers were first refused: the
/// earliest live mark's writer gets in first, whoever asks first once the place is free (a
/// newcomer too), and one writer's grant leaves the other managers' marks on, so new readers
/// and that manager's next writer stay out until the writer marked next got in. Each
/// manager's mark ends on its own (at its end exactly, too): other writers' refusals do not
/// keep it on, and once ended it begins again behind every live one.
pub(crate) async fn rule_11_the_earliest_marked_writer_goes_first<B: Backend>(backend: &B) {
    const MARK: Duration = Duration::from_millis(500);
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let rw = name("two-writers-wait");
    let (reader, first_writer, later_writer, newcomer) =
        (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let waiting = |writer: &Caller, mark: Duration| {
        writer
            .request(&rw, Access::Write, LONG)
            .with_retry_within(mark)
    };
    let (read, _) = granted(&store, &reader.request(&rw, Access::Read, LONG)).await;
    refused(&store, &waiting(&first_writer, LONG)).await;
    refused(&peer, &waiting(&later_writer, LONG)).await;
    released(&store, &read).await;
    // The place is free, but the first writer to have waited goes first.
    refused(&peer, &waiting(&later_writer, LONG)).await;
    refused(&peer, &newcomer.request(&rw, Access::Write, LONG)).await;
    let (first, _) = granted(&store, &waiting(&first_writer, LONG)).await;
    released(&store, &first).await;
    // The later writer still waits: a new reader, and the first writer's manager writing
    // again, are held back, not let past it.
    refused(&store, &reader.request(&rw, Access::Read, LONG)).await;
    refused(&store, &first_writer.request(&rw, Access::Write, LONG)).await;
    let (later, _) = granted(&peer, &waiting(&later_writer, LONG)).await;
    released(&peer, &later).await;
    // Nobody who marked waits any more.
    let (read, _) = granted(&store, &reader.request(&rw, Access::Read, LONG)).await;

    // The later writer marks and gives up. The first writer, refused behind it and again
    // halfway through, keeps its own mark on, not the later writer's: at that mark's end the
    // first writer gets in, and its grant leaves no mark.
    refused(&peer, &waiting(&later_writer, MARK)).await;
    refused(&store, &waiting(&first_writer, LONG)).await;
    sleep(MARK / 2).await;
    refused(&store, &waiting(&first_writer, LONG)).await;
    sleep(MARK - MARK / 2).await;
    released(&store, &read).await;
    let (first, _) = granted(&store, &waiting(&first_writer, LONG)).await;
    released(&store, &first).await;
    let (read, _) = granted(&store, &reader.request(&rw, Access::Read, LONG)).await;

    // A mark that ended (at its end exactly, too) begins again behind every live one: the
    // first writer, refused again once its own mark is over, now waits behind the later.
    // (First every mark set above has ended.)
    sleep(MARGIN).await;
    refused(&store, &waiting(&first_writer, MARK)).await;
    refused(&peer, &waiting(&later_writer, LONG)).await;
    sleep(MARK).await;
    refused(&store, &waiting(&first_writer, LONG)).await;
    released(&store, &read).await;
    refused(&store, &waiting(&first_writer, LONG)).await;
    granted(&peer, &waiting(&later_writer, LONG)).await;
}

/// A manager whose writers gave up withdraws its writers' mark (`withdraw`): the writer
/// marked after it and new readers go at once, without waiting for the mark to end, while
/// the other managers' marks stay in their order. A store with a release feed reports the
/// withdrawal there, as it does a release, so those held back try again at once. A
/// withdrawal with nothing to take off writes nothing.
pub(crate) async fn rule_11_a_withdrawn_writers_mark_lets_the_others_in<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let rw = name("$writersMarkedBy.holder");
    let (reader, gave_up, behind, last) =
        (Caller::new(), Caller::new(), Caller::new(), Caller::new());
    let waiting = |writer: &Caller| {
        writer
            .request(&rw, Access::Write, LONG)
            .with_retry_within(LONG)
    };
    let withdraw = async |store: &B::Store, caller: &Caller, lock: &LockName| {
        store
            .withdraw(lock, &caller.holder)
            .await
            .unwrap_or_else(|error| panic!("withdraw from {lock}: {error}"));
    };
    let (read, _) = granted(&store, &reader.request(&rw, Access::Read, LONG)).await;
    refused(&store, &waiting(&gave_up)).await;
    refused(&peer, &waiting(&behind)).await;
    refused(&peer, &waiting(&last)).await;
    released(&store, &read).await;
    refused(&peer, &waiting(&behind)).await; // the first marked goes first
    let mut feed = open_feed(backend, &peer).await;

    withdraw(&store, &gave_up, &rw).await;
    if let Some(feed) = feed.as_mut() {
        assert!(
            feed_reports(feed, &rw, FEED_WITHIN).await,
            "the release feed reports a withdrawn mark"
        );
    }
    // The writer marked next goes now, long before the withdrawn mark would have ended.
    let (write, _) = granted(&peer, &waiting(&behind)).await;
    released(&peer, &write).await;
    // The last marked writer still waits: it holds new readers back, and goes next.
    refused(&store, &reader.request(&rw, Access::Read, LONG)).await;
    let (write, _) = granted(&peer, &waiting(&last)).await;
    released(&peer, &write).await;
    granted(&store, &reader.request(&rw, Access::Read, LONG)).await;

    // Again (its mark is gone), and for a name never used: nothing is written, and the
    // feed hears of nothing.
    if let Some(feed) = feed.as_mut() {
        feed_is_open(&store, feed).await; // past what the feed reported so far
    }
    withdraw(&store, &gave_up, &rw).await;
    if let Some(feed) = feed.as_mut() {
        assert!(
            !feed_reports(feed, &rw, FEED_QUIET).await,
            "a withdrawal with nothing to take off is no release"
        );
    }
    let unused = name("never-marked");
    withdraw(&store, &gave_up, &unused).await;
    assert!(
        inspect(&store, &unused).await.is_none(),
        "a withdrawal with nothing to take off creates no record"
    );
}

/// A release feed on `store`, open (see [`feed_is_open`]); `None` where the backend has
/// none that reports: a server without change streams has a feed that never does (its
/// waiters poll).
pub(super) async fn open_feed<B: Backend>(
    backend: &B,
    store: &B::Store,
) -> Option<tokio::sync::mpsc::Receiver<LockName>> {
    if backend.watches_by_polling() {
        return None;
    }
    let mut feed = store.watch_releases(ReleaseDemand::always()).await?;
    feed_is_open(store, &mut feed).await;
    Some(feed)
}

/// Whether `feed` reports `lock` within `within` (other names it reports are skipped).
pub(super) async fn feed_reports(
    feed: &mut tokio::sync::mpsc::Receiver<LockName>,
    lock: &LockName,
    within: Duration,
) -> bool {
    let reported = tokio::time::timeout(within, async {
        while let Some(freed) = feed.recv().await {
            if freed == *lock {
                return true;
            }
        }
        false
    });
    matches!(reported.await, Ok(true))
}

/// Returns once `feed` reports releases: a change stream starts watching some time after
/// it was asked for, and misses what happened before. Releases a probe lock until the
/// feed reports one.
pub(super) async fn feed_is_open(
    store: &impl LockStore,
    feed: &mut tokio::sync::mpsc::Receiver<LockName>,
) {
    let probe = name("release-feed-probe");
    for _ in 0..20 {
        let (held, _) = granted(
            store,
            &Caller::new().request(&probe, Access::Exclusive, LONG),
        )
        .await;
        released(store, &held).await;
        if feed_reports(feed, &probe, Duration::from_millis(500)).await {
            return;
        }
    }
    panic!("the release feed reported none of 20 releases");
}

/// Readers refused while a writer held (with `retry_within`) go before a waiting writer once
/// that writer releases: the readers' turn. It admits the readers that waited since before
/// it began (by their `waited`), not newcomers, and ends once they got in and left, so the
/// waiting writer is next. Without waiting readers a release lets the waiting writer in at
/// once, and a reader refused with no `retry_within` leaves no mark.
pub(crate) async fn rule_13_readers_go_first_after_a_write<B: Backend>(backend: &B) {
    const MARK: Duration = Duration::from_millis(500);
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let (reader, first_writer, next_writer) = (Caller::new(), Caller::new(), Caller::new());

    // No reader waits: the waiting writer is next.
    let plain = name("writer-next");
    let (held, _) = granted(&store, &first_writer.request(&plain, Access::Write, LONG)).await;
    refused(&peer, &reader.request(&plain, Access::Read, LONG)).await; // no mark
    let next = || {
        next_writer
            .request(&plain, Access::Write, LONG)
            .with_retry_within(MARK)
    };
    refused(&peer, &next()).await;
    released(&store, &held).await;
    let (held, _) = granted(&peer, &next()).await;
    released(&peer, &held).await;

    // Readers wait: they go first.
    let rw = name("readers-turn");
    let (held, _) = granted(&store, &first_writer.request(&rw, Access::Write, LONG)).await;
    let waiting_since = Instant::now();
    let waiting_reader = |caller: &Caller| {
        caller
            .request(&rw, Access::Read, LONG)
            .with_retry_within(MARK)
            .with_waited(waiting_since.elapsed())
    };
    let waiting_writer = || {
        next_writer
            .request(&rw, Access::Write, LONG)
            .with_retry_within(MARK)
    };
    refused(&peer, &waiting_reader(&reader)).await;
    refused(&peer, &waiting_writer()).await;
    sleep(MARGIN).await; // the readers' wait began well before the turn
    released(&store, &held).await;
    sleep(MARGIN).await;
    refused(&peer, &waiting_writer()).await;
    // A reader that started waiting after the writer left waits behind the writer.
    refused(&store, &Caller::new().request(&rw, Access::Read, LONG)).await;
    let (read, _) = granted(&peer, &waiting_reader(&reader)).await;
    // Every reader that waited before the turn gets in, from any process.
    let (other, _) = granted(&store, &waiting_reader(&Caller::new())).await;
    refused(&peer, &waiting_writer()).await; // the turn's readers hold
    released(&peer, &read).await;
    released(&store, &other).await;
    // The turn let its readers in and nobody holds: it is over, so a reader who waited
    // since before it but comes only now waits behind the writer, and the writer goes, well
    // before the readers' mark ends.
    refused(&store, &waiting_reader(&Caller::new())).await;
    granted(&peer, &waiting_writer()).await;
}

/// Tokens strictly increase across every grant of a shared name — reads and writes mixed,
/// after releases, after a holder's expiry and after the record's deletion — each at least
/// a reserved block past the one before; the record shows the last grant's.
pub(crate) async fn rule_14_shared_tokens_strictly_increase<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let block = store.tokens_per_grant();
    let caller = Caller::new();
    let mut tokens = Vec::new();

    let rw = name("fenced-rw");
    let (r1, t) = granted(&store, &caller.request(&rw, Access::Read, LONG)).await;
    tokens.push(t);
    let (r2, t) = granted(&peer, &caller.request(&rw, Access::Read, LONG)).await;
    tokens.push(t);
    released(&store, &r1).await;
    refused(&store, &caller.request(&rw, Access::Write, LONG)).await;
    released(&peer, &r2).await;
    let (w, t) = granted(&store, &caller.request(&rw, Access::Write, LONG)).await;
    tokens.push(t);
    released(&store, &w).await;
    let (_silent, t) = granted(&peer, &caller.request(&rw, Access::Write, SHORT)).await;
    tokens.push(t);
    sleep(SHORT + MARGIN).await;
    let (r3, t) = granted(&store, &caller.request(&rw, Access::Read, LONG)).await;
    tokens.push(t);
    released(&store, &r3).await;
    backend.delete_record(&store, &rw).await;
    let (_r4, t) = granted(&peer, &caller.request(&rw, Access::Read, LONG)).await;
    tokens.push(t);
    let last = *tokens.last().unwrap_or(&0);
    assert_eq!(
        inspect(&store, &rw).await.map(|record| record.token),
        Some(last)
    );

    let sem = name("fenced-semaphore");
    let two = Access::Permit { permits: 2 };
    let (p1, t) = granted(&store, &caller.request(&sem, two, LONG)).await;
    let mut sem_tokens = vec![t];
    let (_p2, t) = granted(&peer, &caller.request(&sem, two, LONG)).await;
    sem_tokens.push(t);
    released(&store, &p1).await;
    let (_p3, t) = granted(&store, &caller.request(&sem, two, SHORT)).await;
    sem_tokens.push(t);
    backend.delete_record(&store, &sem).await;
    let (_p4, t) = granted(&peer, &caller.request(&sem, two, LONG)).await;
    sem_tokens.push(t);

    for tokens in [&tokens, &sem_tokens] {
        assert!(
            tokens.windows(2).all(|pair| pair[1] >= pair[0] + block),
            "tokens must increase by at least a block of {block}: {tokens:?}"
        );
    }
}

/// What a release answered, for comparing lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Released {
    Yes,
    NotOwner,
}

async fn release_all(store: &impl LockStore, keys: &[LeaseKey]) -> Vec<Released> {
    store
        .release_many(keys)
        .await
        .into_iter()
        .map(|result| match result {
            Ok(ReleaseOutcome::Released { .. }) => Released::Yes,
            Ok(ReleaseOutcome::NotOwner) => Released::NotOwner,
            Ok(other) => panic!("release_many: unexpected {other:?}"),
            Err(error) => panic!("release_many: {error}"),
        })
        .collect()
}

/// `release_many` over keys of several names and kinds releases each held one (applying
/// the readers' turn to a released write), answers `NotOwner` for a foreign or already
/// released one, and leaves other holders alone.
pub(crate) async fn shared_records_release_many_spans_names_and_kinds<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let (ours, theirs) = (Caller::new(), Caller::new());
    let mutex = name("many-mutex");
    let sem = name("many-semaphore");
    let rw = name("many-rwlock");
    let three = Access::Permit { permits: 3 };
    let (mutex_key, _) = granted(&store, &ours.request(&mutex, Access::Exclusive, LONG)).await;
    let (permit_a, _) = granted(&store, &ours.request(&sem, three, LONG)).await;
    let (_kept, kept_token) = granted(&peer, &theirs.request(&sem, three, LONG)).await;
    let (permit_b, _) = granted(&store, &ours.request(&sem, three, LONG)).await;
    let (write_key, _) = granted(&store, &ours.request(&rw, Access::Write, LONG)).await;
    // Readers and a writer wait for the write lock, with marks.
    let waiting_since = Instant::now();
    let waiting_reader = || {
        theirs
            .request(&rw, Access::Read, LONG)
            .with_retry_within(LONG)
            .with_waited(waiting_since.elapsed())
    };
    refused(&peer, &waiting_reader()).await;
    refused(
        &peer,
        &theirs
            .request(&rw, Access::Write, LONG)
            .with_retry_within(LONG),
    )
    .await;
    // The store reads a reader's arrival as its clock less `waited`, measured here before the
    // request is sent: its transit makes the reader look later by as much. The wait begins
    // well before the turn, so a slow machine does not make it look like a late-comer.
    sleep(MARGIN).await;

    let keys = [
        mutex_key.clone(),
        permit_a.clone(),
        LeaseKey::new(mutex.clone(), LeaseId::new()),
        write_key.clone(),
        permit_b.clone(),
        LeaseKey::shared(sem.clone(), LeaseId::new()),
    ];
    use Released::{NotOwner, Yes};
    assert_eq!(
        release_all(&store, &keys).await,
        [Yes, Yes, NotOwner, Yes, Yes, NotOwner]
    );
    assert_eq!(
        release_all(&store, &keys).await,
        [NotOwner; 6],
        "released keys cannot be released again"
    );
    granted(&peer, &theirs.request(&mutex, Access::Exclusive, LONG)).await;
    let (_, _, holders) = snapshot(&store, &sem).await.expect("record");
    assert_eq!(
        holders,
        [(theirs.holder.clone(), kept_token, three)],
        "only our permits were released"
    );
    // The released write let the waiting readers' turn begin, ahead of the waiting writer.
    granted(&peer, &waiting_reader()).await;

    let (x, _) = granted(
        &store,
        &ours.request(&name("many-x"), Access::Exclusive, LONG),
    )
    .await;
    let (y, _) = granted(&store, &ours.request(&name("many-y"), Access::Read, LONG)).await;
    assert_eq!(release_all(&store, &[x, y]).await, [Yes, Yes]);
    assert!(release_all(&store, &[]).await.is_empty());
}

/// Inspection of a shared record shows its kind and every unexpired holding in grant order
/// (holder, token, access, time left); `holder` is the first, `token` the last grant's,
/// `expires_in` the longest time left.
pub(crate) async fn shared_records_inspect_shows_shared_holders<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (first, second) = (Caller::new(), Caller::new());
    let sem = name("seen-semaphore");
    let three = Access::Permit { permits: 3 };
    let (a, ta) = granted(&store, &first.request(&sem, three, LONG)).await;
    let (_b, tb) = granted(&store, &second.request(&sem, three, LONG / 2)).await;
    let record = inspect(&store, &sem).await.expect("record");
    assert_eq!(record.kind, LockKind::Semaphore { permits: 3 });
    assert_eq!(record.holder(), Some(&first.holder));
    assert_eq!(record.token, tb);
    let seen: Vec<_> = record
        .holders
        .iter()
        .map(|holding| (holding.holder.clone(), holding.token, holding.access))
        .collect();
    assert_eq!(
        seen,
        [
            (first.holder.clone(), ta, three),
            (second.holder.clone(), tb, three)
        ]
    );
    let window = |lease: Duration| lease - Duration::from_secs(5)..=lease;
    assert!(
        window(LONG).contains(&record.holders[0].expires_in),
        "{record:?}"
    );
    assert!(
        window(LONG / 2).contains(&record.holders[1].expires_in),
        "{record:?}"
    );
    assert_eq!(record.expires_in(), Some(record.holders[0].expires_in));
    released(&store, &a).await;
    let record = inspect(&store, &sem).await.expect("record");
    assert_eq!(record.holder(), Some(&second.holder), "{record:?}");
    assert_eq!(record.held_count(), 1);

    let rw = name("seen-rwlock");
    let (r1, t1) = granted(&store, &first.request(&rw, Access::Read, LONG)).await;
    let (r2, t2) = granted(&store, &second.request(&rw, Access::Read, LONG)).await;
    assert_eq!(
        snapshot(&store, &rw).await,
        Some((
            LockKind::ReadWrite,
            t2,
            vec![
                (first.holder.clone(), t1, Access::Read),
                (second.holder.clone(), t2, Access::Read)
            ]
        ))
    );
    released(&store, &r1).await;
    released(&store, &r2).await;
    let (_w, tw) = granted(&store, &second.request(&rw, Access::Write, LONG)).await;
    assert_eq!(
        snapshot(&store, &rw).await,
        Some((
            LockKind::ReadWrite,
            tw,
            vec![(second.holder.clone(), tw, Access::Write)]
        ))
    );
    assert_eq!(inspect(&store, &name("seen-nothing")).await, None);
}

/// Names that look like operators or paths are plain values for the shared kinds too: each
/// is its own record, and none touches another.
pub(crate) async fn rule_4_operator_like_names_are_values_for_shared_kinds<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let caller = Caller::new();
    let two = Access::Permit { permits: 2 };
    let gt = name("$gt");
    granted(&store, &caller.request(&gt, two, LONG)).await;
    granted(&store, &caller.request(&gt, two, LONG)).await;
    refused(&store, &caller.request(&gt, two, LONG)).await;
    let dotted = name("a.b");
    granted(&store, &caller.request(&dotted, Access::Read, LONG)).await;
    refused(&store, &caller.request(&dotted, Access::Write, LONG)).await;
    let path = name("holders.0");
    let (written, _) = granted(&store, &caller.request(&path, Access::Write, LONG)).await;
    let counted = name("{\"$ne\": 1}");
    assert_eq!(
        store.set_permits(&counted, 4).await.expect("set_permits"),
        None
    );
    let where_ = name("$where");
    granted(&store, &caller.request(&where_, Access::Read, LONG)).await;
    for (on, kind) in [
        (&gt, LockKind::Semaphore { permits: 2 }),
        (&dotted, LockKind::ReadWrite),
        (&path, LockKind::ReadWrite),
        (&counted, LockKind::Semaphore { permits: 4 }),
        (&where_, LockKind::ReadWrite),
    ] {
        let record = inspect(&store, on).await.expect("its own record");
        assert_eq!(record.kind, kind, "{on}");
    }
    for plain in ["a", "holders", "gt", "$ne"] {
        assert_eq!(
            inspect(&store, &name(plain)).await,
            None,
            "{plain:?} was touched"
        );
    }
    granted(&store, &caller.request(&name("a"), Access::Exclusive, LONG)).await;
    assert_eq!(
        extend(&store, &written, LONG).await,
        ExtendOutcome::Extended
    );
    released(&store, &written).await;
}

/// Attempts racing from several processes on a name nobody used yet (so racing to create
/// its record) fill a semaphore exactly: as many grants as permits, each its own token,
/// the rest busy.
pub(crate) async fn rule_8_racing_first_grants_fill_the_semaphore<B: Backend>(backend: &B) {
    const PERMITS: u32 = 4;
    const ATTEMPTS: usize = 12;
    let store = backend.fresh().await;
    let mut stores = vec![store.clone()];
    for _ in 1..3 {
        stores.push(backend.peer(&store).await);
    }
    let sem = name("raced");
    let access = Access::Permit { permits: PERMITS };
    let mut attempts = Vec::new();
    for i in 0..ATTEMPTS {
        let on = stores[i % stores.len()].clone();
        let request = Caller::new().request(&sem, access, LONG);
        attempts.push(tokio::spawn(async move { attempt(&on, &request).await }));
    }
    let mut tokens = Vec::new();
    for task in attempts {
        if let Some(token) = task.await.expect("an attempt panicked") {
            tokens.push(token);
        }
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(
        tokens.len(),
        PERMITS as usize,
        "{ATTEMPTS} racing attempts on {PERMITS} permits: {tokens:?}"
    );
    assert_eq!(
        inspect(&store, &sem)
            .await
            .map(|record| record.held_count()),
        Some(PERMITS as usize)
    );
}

pub(super) async fn hand_over(
    store: &impl LockStore,
    from: &LeaseKey,
    to: &AcquireRequest,
) -> HandOverOutcome {
    store
        .hand_over(from, to)
        .await
        .unwrap_or_else(|error| panic!("hand-over on {}: {error}", from.name))
}

/// A mutex's hand-over is owner-checked as its release is: a lease that is not the
/// holder's, or the holder's own once it ran out, hands nothing over and writes nothing; the
/// holder's unexpired lease passes the lock on with a larger token. (The shared kinds' rule
/// is pinned by the scenario below; this one shares its helpers.)
pub(crate) async fn rule_2_mutex_hand_over_is_owner_checked<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let (ours, theirs) = (Caller::new(), Caller::new());
    let mutex = name("hand-over-mutex");
    let (held, first) = granted(&store, &ours.request(&mutex, Access::Exclusive, LONG)).await;

    let stranger = LeaseKey::new(mutex.clone(), LeaseId::new());
    let theirs_next = || theirs.request(&mutex, Access::Exclusive, LONG);
    assert_eq!(
        hand_over(&store, &stranger, &theirs_next()).await,
        HandOverOutcome::NotOwner,
        "a lease that is not the holder's"
    );
    let record = inspect(&store, &mutex).await.expect("the held record");
    assert_eq!(
        (record.holder(), record.token),
        (Some(&ours.holder), first),
        "a refused hand-over writes nothing"
    );

    let next = ours.request(&mutex, Access::Exclusive, SHORT);
    let second = match hand_over(&store, &held, &next).await {
        HandOverOutcome::HandedOver { token, .. } => token,
        other => panic!("the holder's own lease hands over, got {other:?}"),
    };
    assert!(second > first, "{second} after {first}");

    sleep(SHORT + MARGIN).await; // the handed-over lease runs out
    assert_eq!(
        hand_over(&store, &next.key(), &theirs_next()).await,
        HandOverOutcome::NotOwner,
        "the holder's own lease once it ran out"
    );
    let record = inspect(&store, &mutex)
        .await
        .expect("the record keeps its token");
    assert_eq!(record.token, second, "a refused hand-over writes nothing");
    assert_ne!(record.holder(), Some(&theirs.holder));
}

/// A hand-over on a shared record is a release and an attempt in one write: the new lease
/// takes the old one's place with the store's next token (past every token issued, also one
/// another process was granted meanwhile); the grant rules still decide, so a reader is
/// refused while a writer waits elsewhere and a write is refused during the readers' turn
/// (the place is then free: `Released`); a lease that holds no unexpired place hands
/// nothing over and writes nothing; a request of another count writes nothing for it.
pub(crate) async fn shared_records_hand_over_is_a_release_and_an_attempt_in_one<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let peer = backend.peer(&store).await;
    let (ours, theirs) = (Caller::new(), Caller::new());
    let block = store.tokens_per_grant();
    let handed = |outcome: HandOverOutcome| match outcome {
        HandOverOutcome::HandedOver { token, .. } => token,
        other => panic!("expected a hand-over, got {other:?}"),
    };

    // A semaphore of 2, both places held: one passes from our lease to our next one.
    let sem = name("hand-over-semaphore");
    let two = Access::Permit { permits: 2 };
    let (first, t1) = granted(&store, &ours.request(&sem, two, LONG)).await;
    let (_their, t2) = granted(&peer, &theirs.request(&sem, two, LONG)).await;
    refused(&peer, &theirs.request(&sem, two, LONG)).await;
    let next = ours.request(&sem, two, LONG);
    let t3 = handed(hand_over(&store, &first, &next).await);
    assert!(
        t3 >= t2 + block && t2 >= t1 + block,
        "a handed-over place takes the next token: {t1}, {t2}, {t3}"
    );
    refused(&peer, &theirs.request(&sem, two, LONG)).await; // still full
    assert_eq!(
        hand_over(&store, &first, &ours.request(&sem, two, LONG)).await,
        HandOverOutcome::NotOwner,
        "the old lease's place is gone"
    );
    let holders = snapshot(&store, &sem).await.map(|(_, _, holders)| holders);
    let tokens: Vec<u64> = holders
        .iter()
        .flatten()
        .map(|(_, token, _)| *token)
        .collect();
    assert_eq!(
        tokens,
        vec![t2, t3],
        "the two places: theirs and the handed-over one"
    );

    // A count that differs writes nothing for the new lease: the old place is released.
    let three = Access::Permit { permits: 3 };
    let outcome = hand_over(&store, &next.key(), &ours.request(&sem, three, LONG)).await;
    assert!(
        matches!(outcome, HandOverOutcome::Released { .. }),
        "another count is refused as a grant: {outcome:?}"
    );
    granted(&peer, &theirs.request(&sem, two, LONG)).await; // the place was freed

    // An expired place hands nothing over.
    let short = name("hand-over-expired");
    let one = Access::Permit { permits: 1 };
    let (gone, _) = granted(&store, &ours.request(&short, one, SHORT)).await;
    sleep(SHORT + MARGIN).await;
    assert_eq!(
        hand_over(&store, &gone, &ours.request(&short, one, LONG)).await,
        HandOverOutcome::NotOwner
    );
    granted(&peer, &theirs.request(&short, one, LONG)).await;

    // Reader to reader while a writer waits elsewhere: refused, and the place is free.
    let rw = name("hand-over-rw");
    let (read, _) = granted(&store, &ours.request(&rw, Access::Read, LONG)).await;
    let waiting_writer = || {
        theirs
            .request(&rw, Access::Write, LONG)
            .with_retry_within(LONG)
    };
    refused(&peer, &waiting_writer()).await;
    let outcome = hand_over(&store, &read, &ours.request(&rw, Access::Read, LONG)).await;
    assert!(
        matches!(outcome, HandOverOutcome::Released { .. }),
        "a reader does not overtake a waiting writer: {outcome:?}"
    );
    let (write, _) = granted(&peer, &waiting_writer()).await;

    // Writer to writer while readers wait elsewhere: the readers' turn refuses it.
    let waiting_reader = || {
        ours.request(&rw, Access::Read, LONG)
            .with_retry_within(LONG)
    };
    refused(&store, &waiting_reader()).await;
    let outcome = hand_over(&peer, &write, &theirs.request(&rw, Access::Write, LONG)).await;
    assert!(
        matches!(outcome, HandOverOutcome::Released { .. }),
        "waiting readers go before the next writer: {outcome:?}"
    );
    let (read, t_read) = granted(&store, &waiting_reader()).await;

    // Reader to writer, nobody else holding and nobody's mark on: the write goes through.
    let quiet = name("hand-over-rw-quiet");
    let (read_quiet, t_quiet) = granted(&store, &ours.request(&quiet, Access::Read, LONG)).await;
    let t_write = handed(
        hand_over(
            &store,
            &read_quiet,
            &ours.request(&quiet, Access::Write, LONG),
        )
        .await,
    );
    assert!(t_write >= t_quiet + block);
    refused(&peer, &theirs.request(&quiet, Access::Read, LONG)).await;
    released(&store, &read).await;
    assert!(t_read > 0);
}

/// Requests at the edges of their types are answered, never a panic: a `retry_within` or
/// `waited` of `Duration::MAX` is an ordinary attempt (a refused writer's mark then holds
/// new readers back); a hand-over whose new lease asks for a semaphore of 0 permits or
/// above `MAX_PERMITS`, for another name than the one it passes, or for another sort of
/// hold (a mutex's lease to a shared request, a shared place to a mutex's), is `Rejected`
/// before anything is written: the old lease keeps its place and no record of a count
/// nobody can hold is left behind.
pub(crate) async fn rule_5_requests_at_the_edges_are_answered_not_panicked<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let (ours, theirs) = (Caller::new(), Caller::new());
    let forever = Duration::MAX;

    let rw = name("edges-rw");
    let (read, _) = granted(&store, &ours.request(&rw, Access::Read, LONG)).await;
    refused(
        &store,
        &theirs
            .request(&rw, Access::Write, LONG)
            .with_retry_within(forever)
            .with_waited(forever),
    )
    .await;
    refused(&store, &ours.request(&rw, Access::Read, LONG)).await; // the writer waits
    released(&store, &read).await;
    let (written, _) = granted(&store, &theirs.request(&rw, Access::Write, LONG)).await;
    refused(
        &store,
        &ours
            .request(&rw, Access::Read, LONG)
            .with_retry_within(forever)
            .with_waited(forever),
    )
    .await;
    released(&store, &written).await;

    let sem = name("edges-semaphore");
    let two = Access::Permit { permits: 2 };
    let (first, _) = granted(
        &store,
        &ours
            .request(&sem, two, LONG)
            .with_retry_within(forever)
            .with_waited(forever),
    )
    .await;
    granted(&store, &theirs.request(&sem, two, LONG)).await;
    refused(
        &store,
        &theirs
            .request(&sem, two, LONG)
            .with_retry_within(forever)
            .with_waited(forever),
    )
    .await;
    let mutex = name("edges-mutex");
    let (held, _) = granted(
        &store,
        &ours
            .request(&mutex, Access::Exclusive, LONG)
            .with_retry_within(forever),
    )
    .await;
    refused(
        &store,
        &theirs
            .request(&mutex, Access::Exclusive, LONG)
            .with_retry_within(forever)
            .with_waited(forever),
    )
    .await;

    let before = snapshot(&store, &sem).await;
    for permits in [0, MAX_PERMITS + 1] {
        let to = ours.request(&sem, Access::Permit { permits }, LONG);
        assert_rejected(
            store.hand_over(&first, &to).await,
            &format!("a hand-over to a semaphore of {permits}"),
        );
    }
    let elsewhere = name("edges-elsewhere");
    for (from, access) in [(&first, Access::Permit { permits: 0 }), (&first, two)] {
        let to = ours.request(&elsewhere, access, LONG);
        assert_rejected(
            store.hand_over(from, &to).await,
            "a hand-over to another name",
        );
    }
    assert_rejected(
        store
            .hand_over(&held, &ours.request(&elsewhere, Access::Exclusive, LONG))
            .await,
        "a mutex hand-over to another name",
    );
    // A hold passes as it is: a mutex's lease to a shared request, or a place to a mutex's.
    let holding = |record: Option<LockRecord>| record.map(|r| (r.holder().cloned(), r.token));
    let mutex_before = holding(inspect(&store, &mutex).await);
    for access in [Access::Read, two] {
        assert_rejected(
            store
                .hand_over(&held, &ours.request(&mutex, access, LONG))
                .await,
            &format!("a mutex's lease handed to a request for {access:?}"),
        );
    }
    assert_rejected(
        store
            .hand_over(&first, &ours.request(&sem, Access::Exclusive, LONG))
            .await,
        "a permit handed to a mutex's request",
    );
    assert_eq!(
        holding(inspect(&store, &mutex).await),
        mutex_before,
        "a rejection wrote"
    );
    assert_eq!(snapshot(&store, &sem).await, before, "a rejection wrote");
    assert_eq!(
        inspect(&store, &elsewhere).await,
        None,
        "a rejected hand-over created a record"
    );
    assert_eq!(extend(&store, &first, LONG).await, ExtendOutcome::Extended);
    assert_eq!(extend(&store, &held, LONG).await, ExtendOutcome::Extended);
    released(&store, &first).await;
    granted(&store, &theirs.request(&sem, two, LONG)).await;
    granted(&store, &theirs.request(&elsewhere, two, LONG)).await;
}
