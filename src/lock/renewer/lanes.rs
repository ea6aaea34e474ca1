//! The renewer's lanes — the copies of stuck renewals, the bulk command, and what cannot
//! wait for it — as one type, filled in turn after every event, and how one batch is sent.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;

use super::batch_size::BatchSize;
use super::queue::{Out, Queue, SizedFor, enqueue};
use super::renewal::{Renewal, answer};
use crate::error::StoreError;
use crate::lock::store_call::bounded;
use crate::store::{ExtendRequest, LeaseId, LockStore};

/// Bulk renewal commands in flight at once. One: renewals that fall due while it is out
/// wait and go together in the next, so batches grow with the load and the server renews
/// leases in a few large commands instead of many small ones competing with each other
/// (on the test server, four at once cost seven times as much per lease as one); a
/// command's time is its own, which is what the batch size is measured from; and renewals
/// never take more than one of the driver's connections from acquisitions.
pub(super) const IN_FLIGHT: usize = 1;

/// Commands in flight at once beside the bulk one, for renewals that cannot wait for it
/// (see the module's documentation): one more connection at most, and only while such a
/// renewal is queued.
pub(super) const URGENT_IN_FLIGHT: usize = 1;

/// Commands in flight at once for renewals sent again beside their own stuck ones: one more
/// connection at most, and only while a command is stuck.
pub(super) const AGAIN_IN_FLIGHT: usize = 1;

/// The renewer's lanes: each sends batches of renewals as commands, at most its own
/// number at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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
pub(super) struct Lane {
    kind: Kind,
    commands: JoinSet<Sent>,
    /// When the last command sent gives up (its batch's first or last deadline, by the
    /// lane), until it is back.
    out_until: Option<Instant>,
}

/// Everything the renewer keeps while it batches: the two queues, the lanes, the leases in
/// commands out and the measured batch size.
pub(super) struct Batching {
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

impl Lane {
    /// Whether none of its commands is out.
    pub(super) fn is_idle(&self) -> bool {
        self.commands.is_empty()
    }
}

impl Batching {
    pub(super) fn new(store: Arc<dyn LockStore>, most: usize, behind: watch::Sender<bool>) -> Self {
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

    pub(super) fn lane(&self, kind: Kind) -> &Lane {
        &self.lanes[kind as usize]
    }

    pub(super) fn enqueue(&mut self, renewal: Renewal) {
        enqueue(renewal, &mut self.queue, &mut self.again, &self.out);
    }

    /// The next command back, from any lane.
    pub(super) async fn next_back(&mut self) -> Option<(Kind, Result<Sent, JoinError>)> {
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
    pub(super) fn back(&mut self, kind: Kind, done: Result<Sent, JoinError>) {
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
    pub(super) fn send_what_is_due(&mut self) {
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

/// Sends one batch (one lease length), gives it `until` to be answered, answers each
/// actor, and says for the batch size how it went: how many leases, how long it took, and
/// the time it had when it was sent. A bulk command is given until its last renewal's
/// deadline: each holder's own timer ends a hold whose deadline comes first, and the
/// renewals still in time get the answer instead of a timeout and a second command for the
/// server to do beside the first (which it carries on with whether or not anyone waits).
/// A quick failure says nothing about what a batch costs (`None`), a timeout that it was
/// too big.
pub(super) async fn send(store: Arc<dyn LockStore>, batch: Vec<Renewal>, until: Instant) -> Sent {
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
pub(super) struct Sent {
    pub(super) leases: Vec<LeaseId>,
    pub(super) measured: Option<(usize, Duration, Duration)>,
}
