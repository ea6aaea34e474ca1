//! Batched renewals: one per manager. Lock actors hand their due renewals to the renewer,
//! which sends the renewals that fall due together as one store call
//! ([`LockStore::extend_many`]) and answers each actor separately; each actor still keeps
//! its own loss deadline, so a slow or failed batch never delays a loss signal. A store
//! without a bulk write ([`LockStore::max_extend_batch`] of 1) gets each renewal as its own
//! call, side by side, each under its own lease's timeout.
//!
//! Actors schedule renewals on a grid of an eighth of their cadence (a renewal is never
//! sent later than one cadence after the last, and at most an eighth earlier), so renewals
//! of thousands of leases fall due at a few instants per cadence and go out in a few
//! commands instead of one per lease. At most [`IN_FLIGHT`] bulk commands run at once;
//! renewals that fall due meanwhile queue, and the next command takes all of them, earliest
//! deadline first, up to the size that can come back before the last of them is lost by
//! the cost per lease the manager has measured ([`BatchSize`]), and is waited for until
//! then. Batches thus grow with the load, without renewals piling up on a slow server or
//! taking the connection pool from acquisitions. While a command leaves renewals due
//! behind it, the manager's acquisition attempts wait for them ([`Renewer::behind`]):
//! on a server too slow for everything at once, what is held is renewed first. Attempts in
//! arrival order do not wait: each takes its task's place in line as it reaches the store.
//! A renewal whose holder's deadline comes before the command out must be back (a shorter
//! lease's, or an at-risk hold's retry, behind a large batch of long leases) does not wait
//! for it: it goes at once in a command of its own, one at a time ([`URGENT_IN_FLIGHT`]).
//! A renewal of a hold at risk (sent again beside one unanswered for half its time, see
//! `Hold::store_silent`, or retried after one failed) waits for neither command while an
//! earlier renewal of its lease is in one of them, which may be stuck: it goes in a lane of
//! its own ([`AGAIN_IN_FLIGHT`]). With none out, it is not sent ahead of anything: it is
//! dropped if an earlier one is queued here (that one is not stuck but waiting its turn, and
//! a copy sent ahead would add a command to a store already behind; its answer is the
//! hold's), and queued as any renewal otherwise.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, ActorStatus};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::batch_size::BatchSize;
use super::message::LockMsg;
use super::store_call::bounded;
use crate::error::StoreError;
use crate::store::{ExtendOutcome, ExtendRequest, LeaseId, LockStore};

/// The most renewals in one store call.
const MAX_BATCH: usize = 10_000;

/// Bulk renewal commands in flight at once. One: renewals that fall due while it is out
/// wait and go together in the next, so batches grow with the load and the server renews
/// leases in a few large commands instead of many small ones competing with each other
/// (on the test server, four at once cost seven times as much per lease as one); a
/// command's time is its own, which is what the batch size is measured from; and renewals
/// never take more than one of the driver's connections from acquisitions.
const IN_FLIGHT: usize = 1;

/// Commands in flight at once beside the bulk one, for renewals that cannot wait for it
/// (see the module's documentation): one more connection at most, and only while such a
/// renewal is queued.
const URGENT_IN_FLIGHT: usize = 1;

/// Commands in flight at once for renewals sent again beside their own stuck ones: one more
/// connection at most, and only while a command is stuck.
const AGAIN_IN_FLIGHT: usize = 1;

/// How long the renewer waits after the first renewal of a batch for others due at the same
/// instant (their actors' timers fired together but their messages are still on the way).
const COALESCE: Duration = Duration::from_millis(2);

/// A renewal an actor wants sent.
pub(crate) struct Renewal {
    pub(crate) request: ExtendRequest,
    /// The holder's loss deadline: a later answer is useless.
    pub(crate) deadline: Instant,
    pub(crate) actor: ActorRef<LockMsg>,
    /// The hold's count of renewals asked, this one included: answers to renewals asked
    /// before the hold's last confirmation came are out of date.
    pub(crate) number: u64,
    /// The hold is at risk: while an earlier renewal of its lease is in a command out
    /// (possibly stuck), this one must not wait behind it (see the module's
    /// documentation).
    pub(crate) again: bool,
}

/// The sending side, shared by the actors of one manager.
#[derive(Clone)]
pub(crate) struct Renewer {
    queue: mpsc::UnboundedSender<Renewal>,
    /// Renewal times are aligned to a grid counted from here.
    epoch: Instant,
    /// Whether more renewals are due than the last bulk command could take in time.
    behind: watch::Receiver<bool>,
}

impl Renewer {
    /// Starts the renewer task; it ends when every sender is gone.
    pub(crate) fn start(store: Arc<dyn LockStore>) -> Self {
        let (queue, incoming) = mpsc::unbounded_channel();
        let (behind_sender, behind) = watch::channel(false);
        tokio::spawn(run(store, incoming, behind_sender));
        Self {
            queue,
            epoch: Instant::now(),
            behind,
        }
    }

    /// `None` while renewals keep up; while more are due than a command could take in
    /// time, a future ready once they have caught up, or after `at_most`. An acquisition
    /// attempt waits for it before it is sent: the server's time goes first to the leases
    /// this manager holds, since a lease won while others are lost for want of renewal is
    /// no gain, and on a server that has fallen behind every attempt sent delays the
    /// renewals queued behind it. Bounded, so a store that stays slow still serves
    /// attempts.
    pub(crate) fn behind(
        &self,
        at_most: Duration,
    ) -> Option<impl Future<Output = ()> + Send + use<>> {
        let now_behind = *self.behind.borrow();
        let mut behind = self.behind.clone();
        now_behind.then_some(async move {
            let _ = tokio::time::timeout(at_most, behind.wait_for(|behind| !behind)).await;
        })
    }

    /// Queues a renewal; its answer comes back to the actor as [`LockMsg::RenewDone`].
    pub(crate) fn renew(&self, renewal: Renewal) {
        if let Err(refused) = self.queue.send(renewal) {
            // The manager is shutting down: answer so the actor does not wait for nothing.
            let stopped = Err(StoreError::backend("the renewer has stopped"));
            answer(&refused.0, Instant::now(), stopped);
        }
    }

    /// The renewal time for a lease renewed every `cadence`, due at `due`: `due` moved back
    /// onto the grid of `cadence / 8`, so leases due close together renew together.
    pub(crate) fn align(&self, due: Instant, cadence: Duration) -> Instant {
        let grid = (cadence / 8).max(Duration::from_millis(1));
        let Some(since) = due.checked_duration_since(self.epoch) else {
            return due;
        };
        let past_grid = u64::try_from(since.as_nanos() % grid.as_nanos());
        due - past_grid.map_or(Duration::ZERO, Duration::from_nanos)
    }
}

async fn run(
    store: Arc<dyn LockStore>,
    mut incoming: mpsc::UnboundedReceiver<Renewal>,
    behind: watch::Sender<bool>,
) {
    let most = store.max_extend_batch().clamp(1, MAX_BATCH);
    if most == 1 {
        // No bulk write: each lease's call runs on its own, so one that hangs holds up no
        // other.
        while let Some(renewal) = incoming.recv().await {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let sent_at = Instant::now();
                let within = renewal.deadline.saturating_duration_since(sent_at);
                let result = bounded(within, store.extend(&renewal.request)).await;
                answer(&renewal, sent_at, result);
            });
        }
        return;
    }
    let mut queue = Queue::default();
    let mut batch_size = BatchSize::new(most);
    let mut in_flight = JoinSet::<Sent>::new();
    // When the bulk command out gives up: its last renewal's deadline.
    let mut out_until = None;
    let mut urgent = JoinSet::new();
    let mut again = Queue::default();
    let mut again_out = JoinSet::new();
    let mut out = Out::default();
    let mut open = true;
    loop {
        tokio::select! {
            received = incoming.recv(), if open => match received {
                Some(renewal) => {
                    // Nothing is out (so nothing queued either: renewals queue only behind
                    // a command that is out).
                    let idle = in_flight.is_empty();
                    enqueue(renewal, &mut queue, &mut again, &out);
                    if idle {
                        // Its neighbours on the grid are on their way: wait for them.
                        let until = Instant::now() + COALESCE;
                        while let Ok(Some(renewal)) =
                            tokio::time::timeout_at(until, incoming.recv()).await
                        {
                            enqueue(renewal, &mut queue, &mut again, &out);
                        }
                    }
                }
                None => open = false,
            },
            Some(done) = in_flight.join_next() => {
                out_until = None;
                if let Ok(sent) = done {
                    out.back(&sent.leases);
                    if let Some((leases, took, time_left)) = sent.measured {
                        batch_size.record(leases, took, time_left);
                    }
                }
            }
            // Its time is not a bulk command's own (one was out beside it): not measured.
            Some(done) = urgent.join_next() => out.back_from(done),
            Some(done) = again_out.join_next() => out.back_from(done),
            // Every sender is gone (so are the actors) and every command is back.
            else => break,
        }
        while let Ok(renewal) = incoming.try_recv() {
            enqueue(renewal, &mut queue, &mut again, &out);
        }
        while again_out.len() < AGAIN_IN_FLIGHT {
            let Some(batch) = again.take_needed(&batch_size, SizedFor::First) else {
                break;
            };
            // (Its earlier renewal may have come back while it waited for the lane: then it
            // is one command more, for a hold that is at risk.)
            if let Some(until) = batch.iter().map(|renewal| renewal.deadline).min() {
                out.sent(&batch);
                again_out.spawn(send(Arc::clone(&store), batch, until));
            }
        }
        while in_flight.len() < IN_FLIGHT {
            let Some(batch) = queue.take_needed(&batch_size, SizedFor::Last) else {
                behind.send_if_modified(|behind| std::mem::replace(behind, false));
                break;
            };
            // What the command could not take in time waits for the next.
            let left_behind = queue.left_behind;
            behind.send_if_modified(|behind| std::mem::replace(behind, left_behind) != left_behind);
            out_until = batch.iter().map(|renewal| renewal.deadline).max();
            if let Some(until) = out_until {
                out.sent(&batch);
                in_flight.spawn(send(Arc::clone(&store), batch, until));
            }
        }
        // A renewal already late is answered so by the next batch, urgent or not. (`<=` for
        // the first `<` survives mutation testing, and is equivalent: a renewal due this
        // very instant would be answered as late by the urgent lane's `still_needed`
        // instead of the next batch's, at the same instant, and its holder's own timer
        // has already ended its hold.)
        let cannot_wait =
            |due: Instant| Instant::now() < due && out_until.is_some_and(|out| due < out);
        while urgent.len() < URGENT_IN_FLIGHT && queue.first_deadline().is_some_and(cannot_wait) {
            let Some(batch) = queue.take_needed(&batch_size, SizedFor::First) else {
                break;
            };
            // It cannot wait, so neither does the command: it is given until the first
            // deadline, not the last, and the lane is free again by then.
            if let Some(until) = batch.iter().map(|renewal| renewal.deadline).min() {
                out.sent(&batch);
                urgent.spawn(send(Arc::clone(&store), batch, until));
            }
        }
        if queue.is_empty() {
            behind.send_if_modified(|behind| std::mem::replace(behind, false));
        }
    }
}

/// The leases in commands out, with how many commands each is in.
#[derive(Default)]
struct Out(LeaseCounts);

impl Out {
    fn sent(&mut self, batch: &[Renewal]) {
        for renewal in batch {
            self.0.add(renewal.request.key.lease);
        }
    }

    fn back(&mut self, leases: &[LeaseId]) {
        for &lease in leases {
            self.0.remove(lease);
        }
    }

    /// A command's task ended (a task that panicked left its leases counted: a renewal of
    /// one sent again later is then sent, one command more, never one less).
    fn back_from(&mut self, done: Result<Sent, tokio::task::JoinError>) {
        if let Ok(sent) = done {
            self.back(&sent.leases);
        }
    }

    fn has(&self, lease: LeaseId) -> bool {
        self.0.has(lease)
    }
}

/// How many renewals of each lease are in one place (queued, or in commands out).
#[derive(Default)]
struct LeaseCounts(HashMap<LeaseId, u32>);

impl LeaseCounts {
    fn add(&mut self, lease: LeaseId) {
        *self.0.entry(lease).or_default() += 1;
    }

    /// Takes one from `lease`'s count, and the lease out at none.
    fn remove(&mut self, lease: LeaseId) {
        if let Some(count) = self.0.get_mut(&lease) {
            *count -= 1;
            if *count == 0 {
                self.0.remove(&lease);
            }
        }
    }

    fn has(&self, lease: LeaseId) -> bool {
        self.0.contains_key(&lease)
    }
}

/// Queues `renewal` where it goes (see the module's documentation): in the copies' lane if
/// it is marked and an earlier renewal of its lease is in a command out; nowhere if it is
/// marked and one is queued (that one answers); in the queue as any renewal otherwise.
fn enqueue(renewal: Renewal, queue: &mut Queue, again: &mut Queue, out: &Out) {
    let lease = renewal.request.key.lease;
    if !renewal.again {
        queue.push(renewal);
    } else if out.has(lease) {
        again.push(renewal);
    } else if !queue.has(lease) {
        queue.push(renewal);
    }
}

/// Renewals waiting for a bulk command, one queue per lease length (a bulk extend sets one
/// expiry for all); each queue in the order of its holders' deadlines.
#[derive(Default)]
struct Queue {
    by_expiry: BTreeMap<Duration, VecDeque<Renewal>>,
    /// How many renewals of each lease are queued.
    leases: LeaseCounts,
    /// Whether the last batch taken left renewals of its lease length queued: more were
    /// due than it could take in time.
    left_behind: bool,
}

impl Queue {
    /// Renewals mostly arrive in their deadlines' order (to within a grid step), so the
    /// place is looked for from the back; an at-risk hold's retry, due sooner than the
    /// renewals queued before it, goes ahead of them.
    fn push(&mut self, renewal: Renewal) {
        self.leases.add(renewal.request.key.lease);
        let queue = self
            .by_expiry
            .entry(renewal.request.lease_duration)
            .or_default();
        let after = queue
            .iter()
            .rposition(|queued| queued.deadline <= renewal.deadline)
            .map_or(0, |at| at + 1);
        queue.insert(after, renewal);
    }

    fn is_empty(&self) -> bool {
        self.by_expiry.is_empty()
    }

    /// Whether a renewal of `lease` is queued.
    fn has(&self, lease: LeaseId) -> bool {
        self.leases.has(lease)
    }

    /// The queued renewal whose holder's deadline is nearest.
    fn first(&self) -> Option<(&Duration, &Renewal)> {
        self.by_expiry
            .iter()
            .filter_map(|(expiry, queue)| Some((expiry, queue.front()?)))
            .min_by_key(|(_, first)| first.deadline)
    }

    /// The nearest deadline of a queued renewal's holder.
    fn first_deadline(&self) -> Option<Instant> {
        self.first().map(|(_, first)| first.deadline)
    }

    /// The next batch [`BatchSize`] allows for the time of the renewal it is `sized_for`,
    /// less what is [`still_needed`] (possibly nothing).
    fn take_needed(&mut self, batch_size: &BatchSize, sized_for: SizedFor) -> Option<Vec<Renewal>> {
        self.take(|time_left| batch_size.limit(time_left), sized_for)
            .map(still_needed)
    }

    /// The next batch: from the queue whose first renewal's deadline is nearest, as many as
    /// `limit` allows for the time left of the renewal it is `sized_for`. A bulk batch is
    /// sized for its *last* renewal. Sized for its first, one nearly lost hold would shrink
    /// every batch behind it: on a server that has fallen behind, each batch's first
    /// renewal is nearly lost, batches shrink to a few leases whose round trip dominates
    /// their cost, fewer leases are renewed per second, and every hold is lost in turn. A
    /// renewal too near its deadline for the batch it goes in is lost by its holder's own
    /// timer, as it would be in a smaller one (and a retry due sooner than the command out
    /// goes beside it).
    fn take(
        &mut self,
        limit: impl Fn(Duration) -> usize,
        sized_for: SizedFor,
    ) -> Option<Vec<Renewal>> {
        let (&expiry, _) = self.first()?;
        let queue = self.by_expiry.get_mut(&expiry)?;
        let now = Instant::now();
        let fits = |size: usize| {
            let last = queue.get(size.saturating_sub(1))?;
            Some(limit(last.deadline.saturating_duration_since(now)).clamp(1, queue.len()))
        };
        // The most `n` with `n <= limit(time left of the n-th)`. Deadlines rise along the
        // queue and `limit` with them, so every size between a size's limit and the size
        // fails too: the search jumps down to the limit until one fits.
        let mut most = match sized_for {
            SizedFor::First => fits(1)?,
            SizedFor::Last => queue.len(),
        };
        while let Some(fit) = fits(most).filter(|&fit| fit < most) {
            most = fit;
        }
        let batch: Vec<Renewal> = queue.drain(..most).collect();
        self.left_behind = !queue.is_empty();
        if queue.is_empty() {
            self.by_expiry.remove(&expiry);
        }
        for renewal in &batch {
            self.leases.remove(renewal.request.key.lease);
        }
        Some(batch)
    }
}

/// Which renewal of a batch its size is chosen for: the time it has left bounds how long
/// the batch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SizedFor {
    /// An urgent batch: for the renewal that cannot wait, which goes first.
    First,
    /// A bulk batch: for the last renewal in it (see [`Queue::take`]).
    Last,
}

/// The renewals of a batch still worth a store call. Those whose lock actor has stopped
/// while they queued (released, shut down) go nowhere: once a manager's shutdown returns it
/// renews nothing (what it still sends is the release of leases whose holders let go, or
/// whose loss margin ran out). Those whose loss deadline passed are answered at once (their
/// holders are being told of the loss; a call for them would only take the server's time
/// from leases still held).
fn still_needed(mut batch: Vec<Renewal>) -> Vec<Renewal> {
    let now = Instant::now();
    batch.retain(|renewal| {
        let status = renewal.actor.get_status();
        let stopped = matches!(status, ActorStatus::Stopping | ActorStatus::Stopped);
        if !stopped && renewal.deadline <= now {
            answer(renewal, now, Err(StoreError::Timeout(Duration::ZERO)));
        }
        !stopped && renewal.deadline > now
    });
    batch
}

/// Sends one batch (one lease length), gives it `until` to be answered, answers each
/// actor, and says for the batch size how it went: how many leases, how long it took, and
/// the time it had when it was sent. A bulk command is given until its last renewal's
/// deadline: each holder's own timer ends a hold whose deadline comes first, and the
/// renewals still in time get the answer instead of a timeout and a second command for the
/// server to do beside the first (which it carries on with whether or not anyone waits).
/// A quick failure says nothing about what a batch costs (`None`), a timeout that it was
/// too big.
async fn send(store: Arc<dyn LockStore>, batch: Vec<Renewal>, until: Instant) -> Sent {
    let requests: Vec<ExtendRequest> = batch.iter().map(|r| r.request.clone()).collect();
    let sent_at = Instant::now();
    let time_left = until.saturating_duration_since(sent_at);
    let answered = bounded(time_left, async {
        if let [request] = requests.as_slice() {
            return Ok(vec![store.extend(request).await]);
        }
        let results = store.extend_many(&requests).await;
        if results.len() == requests.len() {
            Ok(results)
        } else {
            Err(StoreError::backend(format!(
                "extend_many answered {} of {} renewals",
                results.len(),
                requests.len()
            )))
        }
    })
    .await;
    let took = sent_at.elapsed();
    tracing::debug!(
        leases = batch.len(),
        ?took,
        ?time_left,
        answered = answered.is_ok(),
        "renewal batch"
    );
    let measured =
        (answered.is_ok() || took >= time_left).then_some((batch.len(), took, time_left));
    let results = answered.unwrap_or_else(|error| vec![Err(error); batch.len()]);
    for (renewal, result) in batch.iter().zip(results) {
        answer(renewal, sent_at, result);
    }
    Sent {
        leases: batch
            .iter()
            .map(|renewal| renewal.request.key.lease)
            .collect(),
        measured,
    }
}

/// A command that is back: its leases, and for the batch size how many, how long it took
/// and the time it had (see [`send`]).
struct Sent {
    leases: Vec<LeaseId>,
    measured: Option<(usize, Duration, Duration)>,
}

fn answer(renewal: &Renewal, sent_at: Instant, result: Result<ExtendOutcome, StoreError>) {
    // The actor may have stopped meanwhile (released, shut down): nobody needs the answer.
    let _ = renewal.actor.send_message(LockMsg::RenewDone {
        lease: renewal.request.key.lease,
        number: renewal.number,
        sent_at,
        result,
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::lock::timer::tests::probe;
    use crate::name::LockName;
    use crate::store::outcome::LockRecord;
    use crate::store::{AcquireOutcome, AcquireRequest, LeaseId, LeaseKey, ReleaseOutcome};

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

        async fn extend_many(
            &self,
            all: &[ExtendRequest],
        ) -> Vec<Result<ExtendOutcome, StoreError>> {
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
}
