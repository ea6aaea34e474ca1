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
//! `HeldLease::store_silent`, or retried after one failed) waits for neither command while an
//! earlier renewal of its lease is in one of them, which may be stuck: it goes in a lane of
//! its own ([`AGAIN_IN_FLIGHT`]). With none out, it is not sent ahead of anything: it is
//! dropped if an earlier one is queued here (that one is not stuck but waiting its turn, and
//! a copy sent ahead would add a command to a store already behind; its answer is the
//! hold's), and queued as any renewal otherwise.

mod batch_size;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use ractor::{ActorRef, ActorStatus};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;

use self::batch_size::BatchSize;
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
    let mut batching = Batching::new(store, most, behind);
    let mut open = true;
    loop {
        tokio::select! {
            received = incoming.recv(), if open => match received {
                Some(renewal) => {
                    // Nothing is out (so nothing queued either: renewals queue only behind
                    // a command that is out).
                    let idle = batching.lane(Kind::Bulk).commands.is_empty();
                    batching.enqueue(renewal);
                    if idle {
                        // Its neighbours on the grid are on their way: wait for them.
                        let until = Instant::now() + COALESCE;
                        while let Ok(Some(renewal)) =
                            tokio::time::timeout_at(until, incoming.recv()).await
                        {
                            batching.enqueue(renewal);
                        }
                    }
                }
                None => open = false,
            },
            Some((kind, done)) = batching.next_back() => batching.back(kind, done),
            // Every sender is gone (so are the actors) and every command is back.
            else => break,
        }
        while let Ok(renewal) = incoming.try_recv() {
            batching.enqueue(renewal);
        }
        batching.send_what_is_due();
    }
}

/// The renewer's lanes: each sends batches of renewals as commands, at most its own
/// number at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Renewals sent again beside their own stuck ones, from the copies' queue.
    Again,
    /// The bulk commands, from the queue.
    Bulk,
    /// Renewals that cannot wait for the bulk command out, from the same queue.
    Urgent,
}

impl Kind {
    /// In the order they are filled after every event: the copies first (their holds are
    /// at risk), then the bulk command, then what cannot wait for it.
    const ALL: [Self; 3] = [Self::Again, Self::Bulk, Self::Urgent];

    fn most_in_flight(self) -> usize {
        match self {
            Self::Again => AGAIN_IN_FLIGHT,
            Self::Bulk => IN_FLIGHT,
            Self::Urgent => URGENT_IN_FLIGHT,
        }
    }

    /// Which renewal a batch is sized for. Sized for its first, a command cannot wait, so
    /// it is given until the first deadline, not the last, and the lane is free again by
    /// then; a bulk command is given until its last (see [`send`]).
    fn sized_for(self) -> SizedFor {
        match self {
            Self::Bulk => SizedFor::Last,
            Self::Again | Self::Urgent => SizedFor::First,
        }
    }
}

/// One lane's commands out.
struct Lane {
    kind: Kind,
    commands: JoinSet<Sent>,
    /// When the last command sent gives up (its batch's first or last deadline, by the
    /// lane), until it is back.
    out_until: Option<Instant>,
}

/// Everything the renewer keeps while it batches: the two queues, the lanes, the leases in
/// commands out and the measured batch size.
struct Batching {
    store: Arc<dyn LockStore>,
    /// Renewals waiting for the bulk or the urgent lane.
    queue: Queue,
    /// Renewals sent again beside their own stuck ones, waiting for their lane.
    again: Queue,
    lanes: [Lane; 3],
    out: Out,
    batch_size: BatchSize,
    /// Tells the actors whether more renewals are due than the bulk command could take.
    behind: watch::Sender<bool>,
}

impl Batching {
    fn new(store: Arc<dyn LockStore>, most: usize, behind: watch::Sender<bool>) -> Self {
        Self {
            store,
            queue: Queue::default(),
            again: Queue::default(),
            lanes: Kind::ALL.map(|kind| Lane {
                kind,
                commands: JoinSet::new(),
                out_until: None,
            }),
            out: Out::default(),
            batch_size: BatchSize::new(most),
            behind,
        }
    }

    fn lane(&self, kind: Kind) -> &Lane {
        &self.lanes[kind as usize]
    }

    fn enqueue(&mut self, renewal: Renewal) {
        enqueue(renewal, &mut self.queue, &mut self.again, &self.out);
    }

    /// The next command back, from any lane.
    async fn next_back(&mut self) -> Option<(Kind, Result<Sent, JoinError>)> {
        std::future::poll_fn(|cx| {
            let mut any_out = false;
            for lane in &mut self.lanes {
                match lane.commands.poll_join_next(cx) {
                    Poll::Ready(Some(done)) => return Poll::Ready(Some((lane.kind, done))),
                    Poll::Ready(None) => {}
                    Poll::Pending => any_out = true,
                }
            }
            if any_out {
                Poll::Pending
            } else {
                Poll::Ready(None)
            }
        })
        .await
    }

    /// A command is back (a task that panicked left its leases counted: a renewal of one
    /// sent again later is then sent, one command more, never one less). Only a bulk
    /// command's time is measured: the others' is not their own (one was out beside them).
    fn back(&mut self, kind: Kind, done: Result<Sent, JoinError>) {
        self.lanes[kind as usize].out_until = None;
        let Ok(sent) = done else {
            return;
        };
        self.out.back(&sent.leases);
        if let (Kind::Bulk, Some((leases, took, time_left))) = (kind, sent.measured) {
            self.batch_size.record(leases, took, time_left);
        }
    }

    /// Fills each lane, in turn, with the batches it may send now.
    fn send_what_is_due(&mut self) {
        for kind in Kind::ALL {
            while self.lane(kind).commands.len() < kind.most_in_flight() {
                if kind == Kind::Urgent && !self.cannot_wait() {
                    break;
                }
                let queue = match kind {
                    Kind::Again => &mut self.again,
                    Kind::Bulk | Kind::Urgent => &mut self.queue,
                };
                let Some(batch) = queue.take_needed(&self.batch_size, kind.sized_for()) else {
                    if kind == Kind::Bulk {
                        self.behind
                            .send_if_modified(|behind| std::mem::replace(behind, false));
                    }
                    break;
                };
                if kind == Kind::Bulk {
                    // What the command could not take in time waits for the next.
                    let left_behind = queue.left_behind;
                    self.behind.send_if_modified(|behind| {
                        std::mem::replace(behind, left_behind) != left_behind
                    });
                }
                // (A copy's earlier renewal may have come back while it waited for the
                // lane: then it is one command more, for a hold that is at risk.)
                let deadlines = batch.iter().map(|renewal| renewal.deadline);
                let until = match kind.sized_for() {
                    SizedFor::First => deadlines.min(),
                    SizedFor::Last => deadlines.max(),
                };
                let lane = &mut self.lanes[kind as usize];
                lane.out_until = until;
                if let Some(until) = until {
                    self.out.sent(&batch);
                    lane.commands
                        .spawn(send(Arc::clone(&self.store), batch, until));
                }
            }
        }
        if self.queue.is_empty() {
            self.behind
                .send_if_modified(|behind| std::mem::replace(behind, false));
        }
    }

    /// Whether the queue's first renewal cannot wait for the bulk command out: it is due
    /// before that command gives up. A renewal already late is answered so by the next
    /// batch, urgent or not. (`<=` for the first `<` survives mutation testing, and is
    /// equivalent: a renewal due this very instant would be answered as late by the urgent
    /// lane's `still_needed` instead of the next batch's, at the same instant, and its
    /// holder's own timer has already ended its hold.)
    fn cannot_wait(&self) -> bool {
        let out_until = self.lane(Kind::Bulk).out_until;
        self.queue
            .first_deadline()
            .is_some_and(|due| Instant::now() < due && out_until.is_some_and(|out| due < out))
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
mod tests;
