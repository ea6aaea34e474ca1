//! The renewer's tests: lanes, batches, deadlines and costs, against counting stores.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use ractor::ActorRef;

use super::lanes::send;
use super::queue::{Queue, SizedFor};
use super::*;
use crate::lock::message::LockMsg;
use crate::lock::timer::tests::probe;
use crate::name::LockName;
use crate::store::outcome::LockRecord;
use crate::store::{AcquireOutcome, AcquireRequest, LeaseId, LeaseKey, ReleaseOutcome};
use crate::store::{ExtendOutcome, ExtendRequest};

#[tokio::test(start_paused = true)]
async fn renewals_due_close_together_align_on_one_instant() {
    let renewer = Renewer::start(Arc::new(crate::store::memory::MemoryStore::new()));
    let cadence = Duration::from_secs(8);
    let start = Instant::now();
    let due = |ms: u64| start + cadence + Duration::from_millis(ms * 5);
    let aligned: Vec<Instant> = (0..100).map(|ms| renewer.align(due(ms), cadence)).collect();
    // 100 leases acquired over half a second renew at one or two grid points...
    let mut distinct = aligned.clone();
    distinct.dedup();
    assert!(distinct.len() <= 2, "{distinct:?}");
    // ...never later than due, at most a grid step (an eighth of the cadence) earlier.
    for (ms, at) in (0..100u64).zip(&aligned) {
        assert!(*at <= due(ms) && due(ms) - *at <= cadence / 8, "{ms}");
    }
}

/// Answers every renewal after [`SlowRenewals::TAKES`] (that the lease is gone, which
/// does not matter here), or at once with no answers if it `fails`, and counts the
/// calls; has nothing else.
#[derive(Default)]
struct SlowRenewals {
    calls: AtomicUsize,
    fails: bool,
    /// The largest batch, if not [`MAX_BATCH`].
    most: Option<usize>,
    /// Never answers.
    hangs: bool,
}

impl SlowRenewals {
    const TAKES: Duration = Duration::from_millis(100);
}

#[async_trait]
impl LockStore for SlowRenewals {
    async fn try_acquire(&self, _: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        Err(StoreError::backend("not in this test"))
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        let mut answers = self.extend_many(std::slice::from_ref(request)).await;
        answers.pop().unwrap_or(Ok(ExtendOutcome::NotOwner))
    }

    async fn extend_many(&self, all: &[ExtendRequest]) -> Vec<Result<ExtendOutcome, StoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fails {
            return Vec::new();
        }
        if self.hangs {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(Self::TAKES).await;
        vec![Ok(ExtendOutcome::NotOwner); all.len()]
    }

    fn max_extend_batch(&self) -> usize {
        self.most.unwrap_or(MAX_BATCH)
    }

    async fn release(&self, _: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        Err(StoreError::backend("not in this test"))
    }

    async fn inspect(&self, _: &LockName) -> Result<Option<LockRecord>, StoreError> {
        Ok(None)
    }
}

/// The bulk path, on a store whose renewals take a while.
#[tokio::test(start_paused = true)]
async fn renewals_due_while_a_command_is_out_go_together_in_the_next_and_late_ones_in_none() {
    let store = Arc::new(SlowRenewals::default());
    let renewer = Renewer::start(store.clone());
    let (holder, mut answered) = probe::<LockMsg>().await;
    let renewal = |i: usize, deadline: Instant| Renewal {
        request: ExtendRequest::new(
            LeaseKey::new(LockName::new(format!("lock-{i}")).unwrap(), LeaseId::new()),
            Duration::from_secs(6),
        ),
        deadline,
        actor: holder.clone(),
        number: 1,
        again: false,
    };
    let deadline = Instant::now() + Duration::from_secs(2);

    renewer.renew(renewal(0, deadline));
    // The first command is out (stalled); the next three fall due one by one meanwhile.
    for i in 1..=3 {
        tokio::time::sleep(COALESCE * 2).await;
        renewer.renew(renewal(i, deadline));
    }
    // One whose holder's deadline passed while it queued.
    renewer.renew(renewal(4, Instant::now()));

    // When the command each answer went in was sent, and whether it failed.
    let mut seen = Vec::new();
    for _ in 0..5 {
        let answer = answered.recv().await.expect("every renewal is answered");
        if let LockMsg::RenewDone {
            sent_at, result, ..
        } = answer
        {
            seen.push((sent_at, result.is_err()));
        }
    }
    let calls = store.calls.load(Ordering::SeqCst);
    assert_eq!(
        calls, 2,
        "one command for the first, one for the next three"
    );
    let late = seen.iter().filter(|(_, failed)| *failed).count();
    assert_eq!(
        late, 1,
        "the late renewal is answered without a call: {seen:?}"
    );
    let mut sent: Vec<Instant> = seen
        .iter()
        .filter(|(_, failed)| !*failed)
        .map(|(at, _)| *at)
        .collect();
    sent.dedup();
    assert_eq!(sent.len(), 2, "{seen:?}");
    assert!(
        sent[1] - sent[0] >= Duration::from_millis(100),
        "after the first came back"
    );
    holder.stop(None);
}

/// A renewal whose holder's deadline comes before the command out must be back (here a
/// shorter lease's, behind a command of long leases) goes at once, beside it; it would
/// have been sent after the command came back, too late to be answered in time. It
/// takes the renewals queued behind it along, as any batch does.
#[tokio::test(start_paused = true)]
async fn a_renewal_that_cannot_wait_for_the_command_out_goes_beside_it() {
    let store = Arc::new(SlowRenewals::default());
    let (renewer, holder, mut answered) = with_a_command_out(&store).await;
    let long = Instant::now() + Duration::from_secs(20);
    let queued_at = Instant::now();
    let soon = queued_at + SlowRenewals::TAKES * 3 / 2;
    renewer.renew(renewal_for(&holder, soon));
    renewer.renew(renewal_for(&holder, long));
    let mut answers = Vec::new();
    for _ in 0..3 {
        if let Some(LockMsg::RenewDone {
            sent_at, result, ..
        }) = answered.recv().await
        {
            answers.push((sent_at, result.is_ok()));
        }
    }
    assert_eq!(answers.len(), 3);
    assert!(answers.iter().all(|(_, ok)| *ok), "{answers:?}");
    let urgent_sent = answers
        .iter()
        .map(|(at, _)| *at)
        .filter(|at| *at >= queued_at)
        .min();
    assert_eq!(urgent_sent, Some(queued_at), "sent as it came: {answers:?}");
    assert_eq!(store.calls.load(Ordering::SeqCst), 2, "{answers:?}");
    holder.stop(None);
}

/// A queue keeps its renewals in their holders' deadlines' order: a retry due sooner
/// than those queued before it goes in the next batch first.
#[tokio::test(start_paused = true)]
async fn a_renewal_due_sooner_goes_ahead_of_those_queued_before_it() {
    let (holder, _answered) = probe::<LockMsg>().await;
    let now = Instant::now();
    let mut queue = Queue::default();
    for secs in [10, 20, 5, 20, 15] {
        queue.push(renewal_for(&holder, now + Duration::from_secs(secs)));
    }
    assert_eq!(queue.first_deadline(), Some(now + Duration::from_secs(5)));
    let batch = queue.take(|_| 3, SizedFor::First).expect("a batch");
    let deadlines: Vec<u64> = batch
        .iter()
        .map(|renewal| (renewal.deadline - now).as_secs())
        .collect();
    assert_eq!(deadlines, [5, 10, 15]);
    holder.stop(None);
}

/// A bulk batch is sized for the time its last renewal has: a nearly lost renewal at
/// the head of the queue does not shrink the batch behind it (on a server that has
/// fallen behind, that is how every batch would shrink to a few leases and every hold
/// be lost); an urgent batch is sized for its first.
#[tokio::test(start_paused = true)]
async fn a_bulk_batch_is_sized_for_its_last_renewal_not_a_nearly_lost_first() {
    let (holder, _answered) = probe::<LockMsg>().await;
    let now = Instant::now();
    let fill = || {
        let mut queue = Queue::default();
        queue.push(renewal_for(&holder, now + Duration::from_millis(10)));
        for _ in 0..9 {
            queue.push(renewal_for(&holder, now + Duration::from_secs(10)));
        }
        queue
    };
    // One renewal fits in 10 ms, ten in 10 s.
    let limit = |left: Duration| if left < Duration::from_secs(1) { 1 } else { 10 };
    let bulk = fill().take(limit, SizedFor::Last).expect("a batch");
    assert_eq!(bulk.len(), 10);
    let urgent = fill().take(limit, SizedFor::First).expect("a batch");
    assert_eq!(urgent.len(), 1);
    holder.stop(None);
}

/// A command is waited for until its last renewal's deadline: a renewal whose holder
/// had more time than the batch's first gets the answer, not a timeout (and a second
/// command beside the first, which the server carries on with anyway).
#[tokio::test(start_paused = true)]
async fn a_command_is_awaited_until_its_last_renewal_is_lost_not_its_first() {
    let store = Arc::new(SlowRenewals::default());
    let renewer = Renewer::start(store.clone());
    let (holder, mut answered) = probe::<LockMsg>().await;
    let soon = Instant::now() + SlowRenewals::TAKES / 2;
    let later = Instant::now() + Duration::from_secs(2);
    let (first, second) = (renewal_for(&holder, soon), renewal_for(&holder, later));
    let second_lease = second.request.key.lease;
    renewer.renew(first);
    renewer.renew(second);
    let mut answers = Vec::new();
    for _ in 0..2 {
        if let Some(LockMsg::RenewDone { lease, result, .. }) = answered.recv().await {
            answers.push((lease, result.is_ok()));
        }
    }
    assert!(
        answers.contains(&(second_lease, true)),
        "the later renewal was answered with a timeout: {answers:?}"
    );
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        1,
        "one command for both"
    );
    holder.stop(None);
}

/// While a command leaves renewals due behind it, `behind` gives acquisition attempts
/// something to wait for, at most its bound; once the queue is taken, nothing.
#[tokio::test(start_paused = true)]
async fn attempts_wait_while_renewals_are_left_behind() {
    let start = Instant::now();
    let (_store, renewer, holder, mut answered) =
        one_left_behind(start + Duration::from_secs(2)).await;
    let wait = Duration::from_secs(60);
    let waiting = Instant::now();
    renewer
        .behind(Duration::from_millis(10))
        .expect("one of three is left behind the first command")
        .await;
    assert_eq!(waiting.elapsed(), Duration::from_millis(10), "bounded");
    renewer.behind(wait).expect("still behind").await;
    assert_eq!(
        start.elapsed(),
        COALESCE + SlowRenewals::TAKES,
        "caught up when the first command (sent after waiting for its neighbours) is \
         back and the last renewal goes"
    );
    assert!(renewer.behind(wait).is_none(), "all caught up");
    for _ in 0..3 {
        answered.recv().await.expect("every renewal is answered");
    }
    holder.stop(None);
}

/// A renewal that arrives while the bulk command is out and another is left behind it does
/// not end the wait: acquisition attempts still wait until a command takes what was left.
#[tokio::test(start_paused = true)]
async fn a_renewal_arriving_while_one_is_left_behind_keeps_attempts_waiting() {
    let start = Instant::now();
    let (_store, renewer, holder, mut answered) =
        one_left_behind(start + Duration::from_secs(2)).await;
    let wait = Duration::from_secs(60);
    assert!(
        renewer.behind(wait).is_some(),
        "one of three is left behind"
    );
    renewer.renew(renewal_for(&holder, start + Duration::from_secs(30)));
    tokio::time::sleep(COALESCE * 2).await;
    assert!(
        renewer.behind(wait).is_some(),
        "still behind: the bulk command is out, and the renewal left behind still waits"
    );
    for _ in 0..4 {
        answered.recv().await.expect("every renewal is answered");
    }
    holder.stop(None);
}

/// Renewals left behind and taken by an urgent command (one due sooner went and took
/// them along) are no longer behind: attempts stop waiting then, not when the bulk
/// command out comes back.
#[tokio::test(start_paused = true)]
async fn renewals_left_behind_and_taken_urgently_are_no_longer_behind() {
    let start = Instant::now();
    let (store, renewer, holder, mut answered) =
        one_left_behind(start + Duration::from_secs(20)).await;
    assert!(
        renewer.behind(Duration::from_secs(60)).is_some(),
        "one of three is left behind the first command"
    );
    renewer.renew(renewal_for(
        &holder,
        Instant::now() + SlowRenewals::TAKES / 2,
    ));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(
        start.elapsed() < COALESCE + SlowRenewals::TAKES,
        "the bulk command is out"
    );
    assert!(
        renewer.behind(Duration::from_secs(60)).is_none(),
        "the urgent command took what was left behind"
    );
    assert_eq!(store.calls.load(Ordering::SeqCst), 2);
    for _ in 0..4 {
        answered.recv().await.expect("every renewal is answered");
    }
    holder.stop(None);
}

/// Renewals of another lease length, queued beside a batch, are not renewals the
/// batch could not take in time: nothing waits for them.
#[tokio::test(start_paused = true)]
async fn another_lease_length_queued_beside_a_batch_is_not_falling_behind() {
    let (holder, _answered) = probe::<LockMsg>().await;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut queue = Queue::default();
    let mut other = renewal_for(&holder, deadline);
    other.request.lease_duration = Duration::from_secs(30);
    queue.push(other);
    queue.push(renewal_for(&holder, deadline));
    queue.push(renewal_for(&holder, deadline));
    let batch = queue.take(|_| 2, SizedFor::Last).expect("a batch");
    assert_eq!(batch.len(), 2);
    assert!(!queue.left_behind);
    assert!(!queue.is_empty());
    queue.push(renewal_for(&holder, deadline));
    queue.push(renewal_for(&holder, deadline));
    queue.push(renewal_for(&holder, deadline));
    // Deadlines tie: the shorter lease's queue goes first.
    let batch = queue.take(|_| 2, SizedFor::Last).expect("a batch");
    assert_eq!(batch[0].request.lease_duration, Duration::from_secs(6));
    assert!(queue.left_behind, "three of one length, two taken");
    holder.stop(None);
}

/// An urgent command is given until its first renewal's deadline, not its last: it
/// went because that renewal could not wait, and if it hangs the urgent lane is free
/// again by then for the next one that cannot.
#[tokio::test(start_paused = true)]
async fn an_urgent_command_gives_up_at_its_first_deadline() {
    let store = Arc::new(SlowRenewals {
        hangs: true,
        ..SlowRenewals::default()
    });
    let (renewer, holder, mut answered) = with_a_command_out(&store).await;
    let queued_at = Instant::now();
    let soon = queued_at + Duration::from_millis(150);
    renewer.renew(renewal_for(&holder, soon));
    renewer.renew(renewal_for(&holder, queued_at + Duration::from_secs(10)));
    for _ in 0..2 {
        let Some(LockMsg::RenewDone { result, .. }) = answered.recv().await else {
            panic!("not a renewal's answer");
        };
        assert!(result.is_err());
    }
    assert_eq!(
        queued_at.elapsed(),
        soon - queued_at,
        "given up at the first deadline"
    );
    holder.stop(None);
}

/// A renewal sent again beside its own stuck one waits neither for the bulk command
/// out nor for the urgent one (either may be the stuck one), and such renewals go one
/// command at a time.
#[tokio::test(start_paused = true)]
async fn renewals_sent_again_go_in_a_lane_of_their_own() {
    let (store, renewer, holder, bulk_copy) = with_a_stuck_command().await;
    let calls = || store.calls.load(Ordering::SeqCst);
    let urgent = renewal_for(&holder, Instant::now() + Duration::from_secs(10));
    let copies = [bulk_copy, again(&urgent)];
    renewer.renew(urgent);
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(calls(), 2, "bulk and urgent out");
    for copy in copies {
        renewer.renew(copy);
        tokio::time::sleep(COALESCE * 2).await;
        assert_eq!(
            calls(),
            3,
            "the first sent again goes beside both, the next waits for it"
        );
    }
    holder.stop(None);
}

/// A marked renewal with no renewal of its lease out (a hold's retry after its copy
/// failed) does not wait for the copies' lane, busy with a stuck copy: it is queued at
/// once as any renewal, and here, unable to wait for the stuck bulk command, goes in
/// the urgent one.
#[tokio::test(start_paused = true)]
async fn a_marked_renewal_with_nothing_out_waits_for_no_copy() {
    let (store, renewer, holder, copy) = with_a_stuck_command().await;
    let calls = || store.calls.load(Ordering::SeqCst);
    renewer.renew(copy);
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(
        calls(),
        2,
        "the bulk command and the copy beside it, both stuck"
    );
    let retry = again(&renewal_for(
        &holder,
        Instant::now() + Duration::from_secs(10),
    ));
    renewer.renew(retry);
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(calls(), 3, "the retry waited for the copies' lane");
    holder.stop(None);
}

/// A renewal sent again with no renewal of its lease out is sent ahead of nothing: with
/// one queued it is dropped (that one answers), with none it is queued as any renewal.
#[tokio::test(start_paused = true)]
async fn a_renewal_sent_again_with_nothing_out_is_not_sent_ahead() {
    let store = Arc::new(SlowRenewals::default());
    let (renewer, holder, mut answered) = with_a_command_out(&store).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let queued = renewal_for(&holder, deadline);
    let alone = again(&renewal_for(&holder, deadline));
    let beside_queued = again(&queued);
    for renewal in [queued, beside_queued, alone] {
        renewer.renew(renewal);
    }
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(store.calls.load(Ordering::SeqCst), 1, "nothing went beside");
    let mut numbers = Vec::new();
    while numbers.len() < 3 {
        let next = tokio::time::timeout(Duration::from_secs(5), answered.recv()).await;
        let Ok(Some(LockMsg::RenewDone { number, .. })) = next else {
            panic!("answers {numbers:?}, then none");
        };
        numbers.push(number);
    }
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        [1, 1, 2],
        "the first command's, the queued one's, the lone copy's"
    );
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        2,
        "both went in the next command"
    );
    tokio::time::sleep(SlowRenewals::TAKES * 2).await;
    assert!(
        answered.try_recv().is_err(),
        "the copy beside a queued one was dropped"
    );
    holder.stop(None);
}

/// A lease's renewals are counted out only until their commands are back (bulk or
/// copies' lane): a marked renewal of a lease whose renewals all came back has nothing
/// out to go beside, so it waits for the bulk command out (of another lease) instead of
/// taking the copies' lane, and is sent once that command is back.
#[tokio::test(start_paused = true)]
async fn a_lease_whose_renewals_came_back_has_nothing_out() {
    let store = Arc::new(SlowRenewals::default());
    let calls = || store.calls.load(Ordering::SeqCst);
    let renewer = Renewer::start(store.clone());
    let (holder, mut answered) = probe::<LockMsg>().await;
    let mut answers = async |n: usize| {
        let mut numbers = Vec::new();
        while numbers.len() < n {
            let next = tokio::time::timeout(Duration::from_secs(5), answered.recv()).await;
            let Ok(Some(LockMsg::RenewDone { number, .. })) = next else {
                panic!("answers {numbers:?}, then none");
            };
            numbers.push(number);
        }
        numbers
    };
    let first = renewal_for(&holder, Instant::now() + Duration::from_secs(30));
    let (copy, retry) = (again(&first), again(&again(&first)));
    renewer.renew(first);
    tokio::time::sleep(COALESCE * 2).await;
    renewer.renew(copy);
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(calls(), 2, "the renewal and its copy beside it");
    assert_eq!(answers(2).await.len(), 2, "both came back");
    renewer.renew(renewal_for(
        &holder,
        Instant::now() + Duration::from_secs(20),
    ));
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(calls(), 3, "another lease's command is out");
    renewer.renew(retry);
    tokio::time::sleep(COALESCE * 2).await;
    assert_eq!(
        calls(),
        3,
        "the retry went beside a command of another lease"
    );
    assert_eq!(
        answers(2).await,
        [1, 3],
        "the other lease's, then the retry's"
    );
    assert_eq!(calls(), 4, "the retry went in the next bulk command");
    holder.stop(None);
}

/// A renewer on a store that never answers, with a bulk command out and stuck (one
/// renewal with 20 s left): the store, the renewer, the holder, and a copy of that
/// renewal to send again.
async fn with_a_stuck_command() -> (Arc<SlowRenewals>, Renewer, ActorRef<LockMsg>, Renewal) {
    let store = Arc::new(SlowRenewals {
        hangs: true,
        ..SlowRenewals::default()
    });
    let renewer = Renewer::start(store.clone());
    let (holder, _answered) = probe::<LockMsg>().await;
    let bulk = renewal_for(&holder, Instant::now() + Duration::from_secs(20));
    let copy = again(&bulk);
    renewer.renew(bulk);
    tokio::time::sleep(COALESCE * 2).await;
    (store, renewer, holder, copy)
}

/// A copy of `renewal` sent again (the hold's second renewal, at risk).
fn again(renewal: &Renewal) -> Renewal {
    Renewal {
        request: renewal.request.clone(),
        deadline: renewal.deadline,
        actor: renewal.actor.clone(),
        number: renewal.number + 1,
        again: true,
    }
}

/// A renewer whose store takes two leases per command, just after three renewals
/// whose holders' deadline is `deadline` fell due together (nothing was behind before):
/// the command out took two, one is left behind. Its store, the holder the answers go
/// to, and where they arrive.
async fn one_left_behind(
    deadline: Instant,
) -> (
    Arc<SlowRenewals>,
    Renewer,
    ActorRef<LockMsg>,
    mpsc::UnboundedReceiver<LockMsg>,
) {
    let store = Arc::new(SlowRenewals {
        most: Some(2),
        ..SlowRenewals::default()
    });
    let renewer = Renewer::start(store.clone());
    let (holder, answered) = probe::<LockMsg>().await;
    assert!(
        renewer.behind(Duration::from_secs(60)).is_none(),
        "nothing is due"
    );
    for _ in 0..3 {
        renewer.renew(renewal_for(&holder, deadline));
    }
    tokio::time::sleep(COALESCE * 2).await;
    (store, renewer, holder, answered)
}

/// A renewer on `store` with a bulk command out (one renewal with 20 s left), the
/// holder its answers go to, and where they arrive.
async fn with_a_command_out(
    store: &Arc<SlowRenewals>,
) -> (Renewer, ActorRef<LockMsg>, mpsc::UnboundedReceiver<LockMsg>) {
    let renewer = Renewer::start(store.clone());
    let (holder, answered) = probe::<LockMsg>().await;
    renewer.renew(renewal_for(
        &holder,
        Instant::now() + Duration::from_secs(20),
    ));
    tokio::time::sleep(COALESCE * 2).await;
    (renewer, holder, answered)
}

fn renewal_for(holder: &ActorRef<LockMsg>, deadline: Instant) -> Renewal {
    Renewal {
        request: ExtendRequest::new(
            LeaseKey::new(LockName::new("lock").unwrap(), LeaseId::new()),
            Duration::from_secs(6),
        ),
        deadline,
        actor: holder.clone(),
        number: 1,
        again: false,
    }
}

/// A renewal that falls due just after another, with nothing out, goes in the same
/// command; one whose deadline has come when it would be sent is answered as late and
/// never sent.
#[tokio::test(start_paused = true)]
async fn renewals_due_together_share_a_command_and_one_due_now_gets_none() {
    let store = Arc::new(SlowRenewals::default());
    let renewer = Renewer::start(store.clone());
    let (holder, mut answered) = probe::<LockMsg>().await;
    let deadline = Instant::now() + Duration::from_secs(2);
    renewer.renew(renewal_for(&holder, deadline));
    tokio::time::sleep(COALESCE / 2).await;
    renewer.renew(renewal_for(&holder, deadline));
    for _ in 0..2 {
        answered.recv().await.expect("every renewal is answered");
    }
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        1,
        "one command for both"
    );

    // Due when the renewer is done waiting for its neighbours.
    renewer.renew(renewal_for(&holder, Instant::now() + COALESCE));
    let Some(LockMsg::RenewDone { result, .. }) = answered.recv().await else {
        panic!("the late renewal was not answered");
    };
    assert!(
        result.is_err(),
        "a renewal past its deadline is answered as late"
    );
    tokio::time::sleep(SlowRenewals::TAKES * 2).await;
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        1,
        "the late renewal was sent"
    );
    assert!(
        answered.try_recv().is_err(),
        "the late renewal was answered twice"
    );
    holder.stop(None);
}

/// What a command tells the batch size: its leases, its time and the time they had
/// when it was answered or ran out of time; nothing when it failed at once (that says
/// nothing of what a batch costs).
#[tokio::test(start_paused = true)]
async fn a_command_reports_its_cost_unless_it_failed_at_once() {
    let (holder, _answered) = probe::<LockMsg>().await;
    let batch = |time_left: Duration| {
        let deadline = Instant::now() + time_left;
        vec![
            renewal_for(&holder, deadline),
            renewal_for(&holder, deadline),
        ]
    };
    let slow = Arc::new(SlowRenewals::default());
    let (plenty, short) = (Duration::from_secs(1), SlowRenewals::TAKES / 2);
    let until = |left: Duration| Instant::now() + left;
    assert_eq!(
        send(slow.clone(), batch(plenty), until(plenty))
            .await
            .measured,
        Some((2, SlowRenewals::TAKES, plenty))
    );
    assert_eq!(
        send(slow, batch(short), until(short)).await.measured,
        Some((2, short, short))
    );
    let failing = Arc::new(SlowRenewals {
        fails: true,
        ..SlowRenewals::default()
    });
    let sent = send(failing, batch(plenty), until(plenty)).await;
    assert_eq!(sent.measured, None);
    assert_eq!(sent.leases.len(), 2, "its leases are back all the same");
    holder.stop(None);
}
