//! Where renewals wait for a command: the queues (one per lease length, in deadline order),
//! how a batch is taken from one, and the count of leases in commands out.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use ractor::ActorStatus;
use tokio::time::Instant;

use super::batch_size::BatchSize;
use super::renewal::{Renewal, answer};
use crate::error::StoreError;
use crate::store::LeaseId;

/// The leases in commands out, with how many commands each is in.
#[derive(Default)]
pub(super) struct Out(LeaseCounts);

impl Out {
    pub(super) fn sent(&mut self, batch: &[Renewal]) {
        for renewal in batch {
            self.0.add(renewal.request.key.lease);
        }
    }

    pub(super) fn back(&mut self, leases: &[LeaseId]) {
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
pub(super) fn enqueue(renewal: Renewal, queue: &mut Queue, again: &mut Queue, out: &Out) {
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
pub(super) struct Queue {
    by_expiry: BTreeMap<Duration, VecDeque<Renewal>>,
    /// How many renewals of each lease are queued.
    leases: LeaseCounts,
    /// Whether the last batch taken left renewals of its lease length queued: more were
    /// due than it could take in time.
    pub(super) left_behind: bool,
}

impl Queue {
    /// Renewals mostly arrive in their deadlines' order (to within a grid step), so the
    /// place is looked for from the back; an at-risk hold's retry, due sooner than the
    /// renewals queued before it, goes ahead of them.
    pub(super) fn push(&mut self, renewal: Renewal) {
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

    pub(super) fn is_empty(&self) -> bool {
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
    pub(super) fn first_deadline(&self) -> Option<Instant> {
        self.first().map(|(_, first)| first.deadline)
    }

    /// The next batch [`BatchSize`] allows for the time of the renewal it is `sized_for`,
    /// less what is [`still_needed`] (possibly nothing).
    pub(super) fn take_needed(
        &mut self,
        batch_size: &BatchSize,
        sized_for: SizedFor,
    ) -> Option<Vec<Renewal>> {
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
    pub(super) fn take(
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
pub(super) enum SizedFor {
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
