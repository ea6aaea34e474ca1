//! Conformance scenarios for the primitives beside the mutex — [`Semaphore`], [`RwLock`] and
//! [`MultiLock`] — through the public API, on every store: each keeps the mutex's
//! guarantees (a bounded number of holders, loss told before anyone else can take the
//! place, cancel-safe acquisition, tokens that only increase) and its own rules (counts
//! fixed by the record, fairness between readers and writers, all-or-nothing members).
//!
//! [`Semaphore`]: mongolock::Semaphore
//! [`RwLock`]: mongolock::RwLock
//! [`MultiLock`]: mongolock::MultiLock

use std::time::Duration;

use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};
use mongolock::testing::FaultyStore;
use mongolock::{Access, HolderId, LockError, LockKind, LockName, LossReason};
use tokio::time::{Instant, timeout};

use super::{Backend, SLACK, eventually, fast_options, start, start_with};

/// A semaphore of 2 admits two holders across processes and no third; a release lets the
/// waiting third in, and a holder whose process vanished (a grant nobody renews) gives its
/// permit back when its lease runs out — never before.
pub(crate) async fn semaphore_admits_its_count_and_gets_crashed_permits_back<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let pair_a = a.semaphore("pair", 2).unwrap();
    let pair_b = b.semaphore("pair", 2).unwrap();
    let first = pair_a.acquire().await.unwrap();
    let second = pair_b.acquire().await.unwrap();
    assert!(second.token() > first.token());
    assert_eq!(first.access(), Access::Permit { permits: 2 });
    assert!(
        pair_a.try_acquire().await.unwrap().is_none(),
        "a third permit of two was granted"
    );
    let waiting = {
        let pair = pair_b.clone();
        tokio::spawn(async move { pair.acquire().await })
    };
    first.release().await.unwrap();
    let third = timeout(Duration::from_secs(5), waiting)
        .await
        .expect("a released permit did not reach the waiter")
        .unwrap()
        .unwrap();
    assert!(third.token() > second.token());
    drop((second, third));

    // A process that took a permit and crashed: its lease is never renewed.
    let crashed_lease = fast_options().lease_duration();
    let crashed = AcquireRequest::new(
        LockName::new("crashed").unwrap(),
        LeaseId::new(),
        HolderId::from_string("crashed-process".into()),
        crashed_lease,
    )
    .with_access(Access::Permit { permits: 1 });
    let granted_at = Instant::now();
    assert!(matches!(
        store.try_acquire(&crashed).await.unwrap(),
        AcquireOutcome::Acquired { .. }
    ));
    let after_crash = a
        .semaphore("crashed", 1)
        .unwrap()
        .acquire_timeout(crashed_lease * 4)
        .await
        .expect("the crashed holder's permit never came back");
    assert!(
        granted_at.elapsed() >= crashed_lease - Duration::from_millis(100),
        "the permit came back {:?} after the grant, before its lease ran out",
        granted_at.elapsed()
    );
    after_crash.release().await.unwrap();
}

/// A permit released while a task of the same process waits goes through the store, so
/// the waiter's token is larger than every token granted meanwhile to other processes —
/// a local pass would give it the next token of the old grant's block.
pub(crate) async fn permit_tokens_increase_across_processes<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let pair_a = a.semaphore("tokens", 2).unwrap();
    let first = pair_a.acquire().await.unwrap();
    let other = b.semaphore("tokens", 2).unwrap().acquire().await.unwrap();
    let waiting = {
        let pair = pair_a.clone();
        tokio::spawn(async move { pair.acquire().await })
    };
    tokio::task::yield_now().await;
    first.release().await.unwrap();
    let next = timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the local waiter never got the released permit")
        .unwrap()
        .unwrap();
    assert!(
        next.token() > other.token(),
        "token {} after another process was granted {}",
        next.token(),
        other.token()
    );
}

/// A permit released while a task of the same process waits for it reaches that task in
/// one hand-over call — no release and no new attempt — with the store's next token;
/// the last holder, with nobody waiting, releases plainly.
pub(crate) async fn released_permit_reaches_a_local_waiter_in_one_call<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let counting = FaultyStore::new(store.clone());
    // Backoff long enough that the waiter's only attempts are the ones counted below.
    let options =
        fast_options().with_retry_backoff(Duration::from_secs(20), Duration::from_secs(30));
    let a = start_with(counting.clone(), options).await;
    let one = a.semaphore("relay-permit", 1).unwrap();
    let first = one.acquire().await.unwrap();
    let waiting = {
        let one = one.clone();
        tokio::spawn(async move { one.acquire().await })
    };
    assert!(
        eventually(SLACK * 5, async || counting.acquire_calls() >= 2).await,
        "the waiter's attempt was refused"
    );
    // A store with a release feed opens it for the waiter and wakes it once (one more
    // refused attempt); after that, nothing but a release makes it try.
    tokio::time::sleep(SLACK).await;
    let attempts = counting.acquire_calls();
    let first_token = first.token();
    first.release().await.unwrap();
    let next = timeout(SLACK * 5, waiting)
        .await
        .expect("the released permit did not reach the waiter")
        .unwrap()
        .unwrap();
    assert!(next.token() > first_token);
    assert_eq!(
        (counting.acquire_calls(), counting.hand_over_calls()),
        (attempts, 1),
        "after the refused attempts, one hand-over and no other attempt"
    );
    next.release().await.unwrap();
    assert_eq!(
        counting.hand_over_calls(),
        1,
        "nobody waits: a plain release"
    );
    let record = store
        .inspect(&LockName::new("relay-permit").unwrap())
        .await
        .unwrap();
    assert!(record.is_none_or(|record| record.holders.is_empty()));
}

/// A handle asking for another count, or a mutex on a semaphore's name, gets a typed
/// error and writes nothing; `set_permits` changes the count for everyone.
pub(crate) async fn semaphore_counts_are_fixed_by_the_record<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let three = a.semaphore("imports", 3).unwrap();
    let held = three.acquire().await.unwrap();
    let before = three.inspect().await.unwrap().expect("a record");
    assert_eq!(before.kind, LockKind::Semaphore { permits: 3 });

    let five = b.semaphore("imports", 5).unwrap();
    match five.try_acquire().await {
        Err(LockError::KindMismatch { found, asked, .. }) => {
            assert_eq!(found, LockKind::Semaphore { permits: 3 });
            assert_eq!(asked, LockKind::Semaphore { permits: 5 });
        }
        other => panic!("a count mismatch gave {other:?}"),
    }
    assert!(matches!(
        b.lock("imports").unwrap().try_acquire().await,
        Err(LockError::KindMismatch { .. })
    ));
    assert!(matches!(
        b.rw_lock("imports").unwrap().try_read().await,
        Err(LockError::KindMismatch { .. })
    ));
    let after = three.inspect().await.unwrap().expect("a record");
    // Time left moves on (and renewals run) in real time: compare who holds what.
    let holdings = |record: &mongolock::LockRecord| {
        let holders = record.holders.iter();
        holders
            .map(|h| (h.holder.clone(), h.token, h.access))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (holdings(&after), after.kind),
        (holdings(&before), before.kind),
        "a refused request wrote"
    );
    assert!(matches!(
        a.semaphore("imports", 0),
        Err(LockError::InvalidOptions(_))
    ));

    assert_eq!(five.set_permits(5).await.unwrap(), Some(3));
    let record = three.inspect().await.unwrap().expect("a record");
    assert_eq!(record.kind, LockKind::Semaphore { permits: 5 });
    assert!(five.try_acquire().await.unwrap().is_some());
    // A handle of the old count is judged by the new one (three of five held now).
    let by_the_new_count = three.try_acquire().await.unwrap();
    assert!(
        by_the_new_count.is_some(),
        "a handle of the old count was refused a place the new count has"
    );
    assert!(
        matches!(
            b.semaphore("imports", 4).unwrap().try_acquire().await,
            Err(LockError::KindMismatch { .. })
        ),
        "a count the record never had must be told"
    );
    drop(by_the_new_count);
    held.release().await.unwrap();
}

/// The name's record decides its kind, not the first request this process made: a mistaken
/// request of another kind is refused by the record and leaves nothing behind, and a name
/// released here as a lock, its record gone, can be taken as a semaphore at once.
pub(crate) async fn a_name_is_the_kind_its_record_says<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let held_elsewhere = b.semaphore("exports", 2).unwrap().acquire().await.unwrap();
    assert!(matches!(
        a.lock("exports").unwrap().try_acquire().await,
        Err(LockError::KindMismatch {
            found: LockKind::Semaphore { permits: 2 },
            ..
        })
    ));
    let permit = a.semaphore("exports", 2).unwrap().try_acquire().await;
    assert!(
        matches!(permit, Ok(Some(_))),
        "a permit was refused after a mistaken lock request: {permit:?}"
    );
    drop((permit, held_elsewhere));

    let name = "reports";
    a.lock(name)
        .unwrap()
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // A store may keep a freed lock's record for its tokens; once it is gone (as a TTL
    // monitor removes it), nothing here remembers the name's old kind.
    backend
        .delete_record(&store, &LockName::new(name).unwrap())
        .await;
    let permit = a.semaphore(name, 2).unwrap().try_acquire().await;
    assert!(
        matches!(permit, Ok(Some(_))),
        "a name whose lock record is gone was refused as a semaphore: {permit:?}"
    );
}

/// Readers share, the writer excludes everyone, and every grant's token is larger than
/// every one before it, reads included: a fenced resource orders the writer after the
/// readers it excluded.
pub(crate) async fn rw_lock_readers_share_and_the_writer_excludes<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let schema_a = a.rw_lock("schema").unwrap();
    let schema_b = b.rw_lock("schema").unwrap();
    let read_a = schema_a.read().await.unwrap();
    let read_b = schema_b.read().await.unwrap();
    assert_eq!(
        (read_a.access(), read_b.access()),
        (Access::Read, Access::Read)
    );
    let record = schema_a.inspect().await.unwrap().expect("a record");
    assert_eq!(record.kind, LockKind::ReadWrite);
    assert_eq!(record.holders.len(), 2);
    assert!(record.holders.iter().all(|h| h.access == Access::Read));
    assert!(schema_b.try_write().await.unwrap().is_none());
    let last_read = read_a.token().max(read_b.token());
    drop((read_a, read_b));
    let writing = timeout(Duration::from_secs(5), schema_b.write())
        .await
        .expect("the writer did not get in after the readers left")
        .unwrap();
    assert!(writing.token() > last_read);
    assert_eq!(
        writing.access(),
        Access::Write,
        "a guard says it is the writer's"
    );
    assert!(schema_a.try_read().await.unwrap().is_none());
    assert!(schema_a.try_write().await.unwrap().is_none());
    let written = writing.token();
    writing.release().await.unwrap();
    let reading = schema_a.read().await.unwrap();
    assert!(reading.token() > written);
    reading.release().await.unwrap();
    // Free again: a try gets the write at once.
    let tried = schema_b
        .try_write()
        .await
        .unwrap()
        .expect("a free lock's write");
    assert_eq!(tried.access(), Access::Write);
    assert!(tried.token() > written);
    tried.release().await.unwrap();
    assert!(matches!(
        a.lock("schema").unwrap().try_acquire().await,
        Err(LockError::KindMismatch { .. })
    ));
}

/// Once a writer waits anywhere, a new reader waits behind it, and the writer gets in as
/// soon as the readers already inside leave.
pub(crate) async fn rw_lock_waiting_writer_holds_new_readers_back<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let c = start(backend.peer(&store).await).await;
    let reading = a.rw_lock("ledger").unwrap().read().await.unwrap();
    let writer = {
        let lock = b.rw_lock("ledger").unwrap();
        tokio::spawn(async move { lock.write().await })
    };
    // The writer has been refused once: its mark is on the record.
    let late_reader = c.rw_lock("ledger").unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || {
            late_reader.try_read().await.unwrap().is_none()
        })
        .await,
        "a new reader got in while a writer waited"
    );
    let read_token = reading.token();
    reading.release().await.unwrap();
    let writing = timeout(Duration::from_secs(5), writer)
        .await
        .expect("the waiting writer did not get in after the reader left")
        .unwrap()
        .unwrap();
    assert!(writing.token() > read_token);
    let next_read = {
        let lock = late_reader.clone();
        tokio::spawn(async move { lock.read().await })
    };
    writing.release().await.unwrap();
    let reading = timeout(Duration::from_secs(5), next_read)
        .await
        .expect("the reader did not get in after the writer left")
        .unwrap()
        .unwrap();
    reading.release().await.unwrap();
}

/// A reader queued in a process behind that process's own waiting writer still takes the
/// readers' turn when another process's writer leaves: readers waiting when a writer leaves
/// go before the next writer, wherever that writer waits.
pub(crate) async fn rw_lock_reader_behind_a_local_waiting_writer_takes_the_readers_turn<
    B: Backend,
>(
    backend: &B,
) {
    let store = backend.fresh().await;
    // Backoff long enough that the readers' mark (twice the longest) comfortably outlasts
    // the moment between the writer's release and the reader's next attempt.
    let options =
        fast_options().with_retry_backoff(Duration::from_millis(50), Duration::from_millis(500));
    let a = super::start_with(store.clone(), options.clone()).await;
    let counted = FaultyStore::new(backend.peer(&store).await);
    let b = super::start_with(counted.clone(), options).await;
    let writing = a.rw_lock("journal").unwrap().write().await.unwrap();
    let attempts = counted.acquire_calls();
    let writer = {
        let lock = b.rw_lock("journal").unwrap();
        tokio::spawn(async move { lock.write().await })
    };
    assert!(
        eventually(Duration::from_secs(5), async || counted.acquire_calls()
            > attempts)
        .await,
        "the writer never asked"
    );
    let reader = {
        let lock = b.rw_lock("journal").unwrap();
        tokio::spawn(async move { lock.read().await })
    };
    // The writer has asked again and the reader behind it once (its mark is on the record).
    let attempts = counted.acquire_calls();
    assert!(
        eventually(Duration::from_secs(5), async || counted.acquire_calls()
            >= attempts + 2)
        .await,
        "the process stopped asking"
    );
    let written = writing.token();
    writing.release().await.unwrap();
    let reading = timeout(Duration::from_secs(5), reader)
        .await
        .expect("the reader waiting behind its own process's writer never got the readers' turn")
        .unwrap()
        .unwrap();
    assert!(
        !writer.is_finished(),
        "the writer got in beside or before the reader"
    );
    assert!(reading.token() > written);
    let read = reading.token();
    reading.release().await.unwrap();
    let writing = timeout(Duration::from_secs(5), writer)
        .await
        .expect("the writer did not get in after the reader left")
        .unwrap()
        .unwrap();
    assert!(writing.token() > read);
}

/// A permit holder whose store stops answering is told of its loss by its deadline, before
/// the lease can run out and another process be given the place.
pub(crate) async fn permit_loss_is_told_before_the_place_is_given<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let faulty = FaultyStore::new(store.clone());
    let a = start(faulty.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let options = fast_options();
    let permit = a.semaphore("single", 1).unwrap().acquire().await.unwrap();
    let acquired = Instant::now();
    faulty.hang();
    let taker = {
        let single = b.semaphore("single", 1).unwrap();
        tokio::spawn(async move {
            let permit = single.acquire_timeout(Duration::from_secs(10)).await;
            (Instant::now(), permit)
        })
    };
    let reason = timeout(options.renew_deadline() + SLACK, permit.lost())
        .await
        .expect("the holder was not told by its deadline");
    assert_eq!(reason, LossReason::DeadlineExceeded);
    let told = Instant::now();
    assert!(told - acquired < options.lease_duration());
    let (taken_at, taken) = taker.await.unwrap();
    let taken = taken.expect("the place was never given to the other process");
    assert!(taken_at > told, "given before the holder was told");
    assert!(taken.token() > permit.token());
    faulty.heal();
}

/// All or nothing: a multi-lock that times out because one member is held elsewhere leaves
/// none of its members held, and once free it takes every member with its own token.
pub(crate) async fn multi_lock_is_all_or_nothing<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let blocker = b.lock("account-b").unwrap().acquire().await.unwrap();
    let transfer = a.multi_lock(["account-b", "account-a"]).unwrap();
    assert!(transfer.try_acquire().await.unwrap().is_none());
    assert!(matches!(
        transfer.acquire_timeout(Duration::from_millis(300)).await,
        Err(LockError::Timeout(_))
    ));
    // A cancelled acquisition frees what it took in the background, as a dropped guard
    // does: within a store round trip, not necessarily before the timeout returns.
    let member = b.lock("account-a").unwrap();
    assert!(
        eventually(Duration::from_secs(2), async || {
            match member.try_acquire().await.unwrap() {
                Some(guard) => {
                    guard.release().await.unwrap();
                    true
                }
                None => false,
            }
        })
        .await,
        "a member stayed held after the multi-lock timed out"
    );
    let waiting = {
        let transfer = transfer.clone();
        tokio::spawn(async move { transfer.acquire().await })
    };
    blocker.release().await.unwrap();
    let both = timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the multi-lock did not get its members once free")
        .unwrap()
        .unwrap();
    let (token_a, token_b) = (both.token("account-a"), both.token("account-b"));
    assert!(token_a.is_some() && token_b.is_some());
    assert!(
        b.lock("account-a")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    both.release().await.unwrap();
    let again = transfer.acquire().await.unwrap();
    assert!(again.token("account-a") > token_a && again.token("account-b") > token_b);
}

/// A member taken while the multi-lock waits for a later one, and lost meanwhile (its
/// renewals fail until the deadline, and another process takes it), is never handed out:
/// the multi-lock starts over and answers only with every member held.
pub(crate) async fn multi_lock_never_answers_with_a_lost_member<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let faulty = FaultyStore::new(store.clone());
    let a = start(faulty.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let blocker = b.lock("lost-b").unwrap().acquire().await.unwrap();
    let waiting = {
        let both = a.multi_lock(["lost-a", "lost-b"]).unwrap();
        tokio::spawn(async move { both.acquire().await })
    };
    // A takes "lost-a" and waits for "lost-b"; then its store fails past the deadline.
    let first = b.lock("lost-a").unwrap();
    assert!(
        eventually(Duration::from_secs(5), async || first
            .try_acquire()
            .await
            .unwrap()
            .is_none())
        .await,
        "the multi-lock never took its first member"
    );
    faulty.fail();
    let taken = timeout(fast_options().lease_duration() * 4, first.acquire())
        .await
        .expect("the lost member was never free for another process")
        .unwrap();
    faulty.heal();
    drop(blocker);
    // While B holds "lost-a", the multi-lock must not answer.
    tokio::time::sleep(fast_options().renew_interval()).await;
    assert!(
        !waiting.is_finished(),
        "answered while another process holds a member"
    );
    let taken_token = taken.token();
    drop(taken);
    let both = timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the multi-lock never got its members back")
        .unwrap()
        .unwrap();
    assert_eq!(both.loss(), None, "handed out with a lost member");
    assert!(both.token("lost-a") > Some(taken_token));
}

/// Two processes locking the same names in opposite orders never deadlock: both finish
/// every round.
pub(crate) async fn multi_locks_in_opposite_orders_never_deadlock<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let forward = a.multi_lock(["x", "y", "z"]).unwrap();
    let backward = b.multi_lock(["z", "y", "x"]).unwrap();
    let rounds = |multi: mongolock::MultiLock| {
        tokio::spawn(async move {
            for _ in 0..10 {
                let all = multi.acquire().await?;
                tokio::task::yield_now().await;
                all.release().await?;
            }
            Ok::<(), LockError>(())
        })
    };
    let (one, two) = (rounds(forward), rounds(backward));
    let finished = timeout(Duration::from_secs(30), async {
        (one.await.unwrap(), two.await.unwrap())
    })
    .await
    .expect("multi-locks over the same names deadlocked");
    finished.0.unwrap();
    finished.1.unwrap();
}

/// A lost member is the whole multi-lock's loss, told through its one signal.
pub(crate) async fn multi_lock_reports_any_member_loss<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let both = a.multi_lock(["m1", "m2"]).unwrap().acquire().await.unwrap();
    let signal = both.loss_signal();
    let (actor, mut told) = super::embedding::probe().await;
    both.notify(&actor, super::embedding::Recorded::Loss);
    backend
        .delete_record(&store, &LockName::new("m2").unwrap())
        .await;
    let reason = timeout(fast_options().renew_deadline() + SLACK, signal.lost())
        .await
        .expect("the loss of a member was not told");
    assert_eq!(reason, LossReason::Superseded);
    assert_eq!(both.loss(), Some(LossReason::Superseded), "loss() agrees");
    let message = timeout(SLACK, told.recv()).await;
    assert!(
        matches!(
            message,
            Ok(Some(super::embedding::Recorded::Loss(
                LossReason::Superseded
            )))
        ),
        "the actor was not told: {message:?}"
    );
    actor.stop(None);
    assert!(matches!(both.release().await, Err(LockError::Lost(_))));
}

/// Raising a semaphore's count admits the waiters at their next attempt, in every process:
/// the waiters of the handle it was called on and those of another process's handle of the
/// old count get permits under the new count, never a `KindMismatch`; a handle of the old
/// count asking afterwards is judged by the new count too (the count the record had is no
/// misconfiguration), while a count the record never had is still refused.
pub(crate) async fn semaphore_raised_count_admits_waiters_of_the_old_count<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let a = start(store.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let here = a.semaphore("raised", 1).unwrap();
    let there = b.semaphore("raised", 1).unwrap();
    let held = here.acquire().await.unwrap();
    let waiting_here = tokio::spawn({
        let here = here.clone();
        async move { here.acquire().await }
    });
    let waiting_there = tokio::spawn({
        let there = there.clone();
        async move { there.acquire().await }
    });

    assert_eq!(here.set_permits(3).await.unwrap(), Some(1));
    let within = Duration::from_secs(5);
    let admitted_here = timeout(within, waiting_here)
        .await
        .expect("the waiter on the raised handle was not admitted")
        .expect("the waiter panicked")
        .expect("the waiter on the raised handle failed");
    let admitted_there = timeout(within, waiting_there)
        .await
        .expect("the other process's waiter was not admitted")
        .expect("the waiter panicked")
        .expect("the other process's waiter of the old count failed");
    assert!(admitted_here.token() > held.token() && admitted_there.token() > held.token());
    assert_eq!(
        there
            .try_acquire()
            .await
            .unwrap()
            .map(|guard| guard.token()),
        None,
        "a fourth permit of three"
    );
    match b.semaphore("raised", 2).unwrap().try_acquire().await {
        Err(LockError::KindMismatch { found, asked, .. }) => {
            assert_eq!(found, LockKind::Semaphore { permits: 3 });
            assert_eq!(asked, LockKind::Semaphore { permits: 2 });
        }
        other => panic!("a count the record never had gave {other:?}"),
    }
    drop((held, admitted_here, admitted_there));
    a.shutdown().await;
    b.shutdown().await;
}
