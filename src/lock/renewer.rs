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
//! commands instead of one per lease. How many go in one command is learnt from how long
//! commands take ([`BatchSize`]); at most [`IN_FLIGHT`] bulk commands run at once, so
//! renewals leave the connection pool to acquisitions and do not pile up on a slow server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::batch_size::BatchSize;
use super::message::LockMsg;
use super::store_call::bounded;
use crate::error::StoreError;
use crate::store::{ExtendRequest, LockStore};

/// The most renewals in one store call.
const MAX_BATCH: usize = 10_000;

/// Bulk renewal commands in flight at once: enough to overlap round trips.
const IN_FLIGHT: usize = 4;

/// How long the renewer waits after the first renewal of a batch for others due at the same
/// instant (their actors' timers fired together but their messages are still on the way).
const COALESCE: Duration = Duration::from_millis(2);

/// A renewal an actor wants sent.
pub(crate) struct Renewal {
    pub(crate) request: ExtendRequest,
    /// The holder's loss deadline: a later answer is useless.
    pub(crate) deadline: Instant,
    pub(crate) actor: ActorRef<LockMsg>,
}

/// The sending side, shared by the actors of one manager.
#[derive(Clone)]
pub(crate) struct Renewer {
    queue: mpsc::UnboundedSender<Renewal>,
    /// Renewal times are aligned to a grid counted from here.
    epoch: Instant,
}

impl Renewer {
    /// Starts the renewer task; it ends when every sender is gone.
    pub(crate) fn start(store: Arc<dyn LockStore>) -> Self {
        let (queue, incoming) = mpsc::unbounded_channel();
        tokio::spawn(run(store, incoming));
        Self {
            queue,
            epoch: Instant::now(),
        }
    }

    /// Queues a renewal; its answer comes back to the actor as [`LockMsg::RenewDone`].
    pub(crate) fn renew(&self, renewal: Renewal) {
        if let Err(refused) = self.queue.send(renewal) {
            // The manager is shutting down: answer so the actor does not wait for nothing.
            let renewal = refused.0;
            let _ = renewal.actor.send_message(LockMsg::RenewDone {
                lease: renewal.request.key.lease,
                sent_at: Instant::now(),
                result: Err(StoreError::backend("the renewer has stopped")),
            });
        }
    }

    /// The renewal time for a lease renewed every `cadence`, due at `due`: `due` moved back
    /// onto the grid of `cadence / 8`, so leases due close together renew together.
    pub(crate) fn align(&self, due: Instant, cadence: Duration) -> Instant {
        let grid = (cadence / 8).max(Duration::from_millis(1));
        let Some(since) = due.checked_duration_since(self.epoch) else {
            return due;
        };
        let steps = since.as_nanos() / grid.as_nanos();
        let aligned = u32::try_from(steps)
            .ok()
            .and_then(|steps| grid.checked_mul(steps))
            .and_then(|offset| self.epoch.checked_add(offset));
        aligned.unwrap_or(due)
    }
}

/// What the sending tasks share: the store, the learnt batch size, and the slots for bulk
/// commands (none for a store without bulk writes: each lease's call runs on its own, so
/// one that hangs holds up no other).
struct Sender {
    store: Arc<dyn LockStore>,
    batch_size: Mutex<BatchSize>,
    slots: Option<Semaphore>,
}

impl Sender {
    fn batch_size(&self) -> std::sync::MutexGuard<'_, BatchSize> {
        self.batch_size
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

async fn run(store: Arc<dyn LockStore>, mut incoming: mpsc::UnboundedReceiver<Renewal>) {
    let most = store.max_extend_batch().clamp(1, MAX_BATCH);
    let sender = Arc::new(Sender {
        store,
        batch_size: Mutex::new(BatchSize::new(most)),
        slots: (most > 1).then(|| Semaphore::new(IN_FLIGHT)),
    });
    while let Some(first) = incoming.recv().await {
        let mut batch = vec![first];
        let until = Instant::now() + COALESCE;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(until, incoming.recv()).await {
                Ok(Some(renewal)) => batch.push(renewal),
                Ok(None) | Err(_) => break,
            }
        }
        // One store call per lease length: a bulk extend sets one expiry for all.
        let mut by_expiry: BTreeMap<Duration, Vec<Renewal>> = BTreeMap::new();
        for renewal in batch {
            by_expiry
                .entry(renewal.request.lease_duration)
                .or_default()
                .push(renewal);
        }
        let most = sender.batch_size().limit();
        for mut group in by_expiry.into_values() {
            while group.len() > most {
                let rest = group.split_off(most);
                tokio::spawn(send(sender.clone(), group));
                group = rest;
            }
            tokio::spawn(send(sender.clone(), group));
        }
    }
}

/// Sends one group (one lease length, at most the current batch size) once a slot is free,
/// answers each actor, and tells the batch size how long it took.
async fn send(sender: Arc<Sender>, group: Vec<Renewal>) {
    let _slot = match &sender.slots {
        Some(slots) => slots.acquire().await.ok(),
        None => None,
    };
    let store = &sender.store;
    let requests: Vec<ExtendRequest> = group.iter().map(|r| r.request.clone()).collect();
    let sent_at = Instant::now();
    let within = group
        .iter()
        .map(|renewal| renewal.deadline)
        .min()
        .map_or(Duration::ZERO, |deadline| {
            deadline.saturating_duration_since(sent_at)
        });
    let answered = bounded(within, async {
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
    // A quick failure says nothing about what a batch costs; a timeout says it was too big.
    if answered.is_ok() || took >= within {
        sender.batch_size().record(group.len(), took, within);
    }
    match answered {
        Ok(results) => {
            for (renewal, result) in group.into_iter().zip(results) {
                answer(&renewal, sent_at, result);
            }
        }
        Err(error) => {
            for renewal in &group {
                answer(renewal, sent_at, Err(error.clone()));
            }
        }
    }
}

fn answer(
    renewal: &Renewal,
    sent_at: Instant,
    result: Result<crate::store::ExtendOutcome, StoreError>,
) {
    // The actor may have stopped meanwhile (released, shut down): nobody needs the answer.
    let _ = renewal.actor.send_message(LockMsg::RenewDone {
        lease: renewal.request.key.lease,
        sent_at,
        result,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn renewals_due_close_together_align_on_one_instant() {
        let renewer = Renewer::start(Arc::new(crate::store::memory::MemoryStore::new()));
        let cadence = Duration::from_secs(8);
        let start = Instant::now();
        let aligned: Vec<Instant> = (0..100)
            .map(|ms| renewer.align(start + cadence + Duration::from_millis(ms * 5), cadence))
            .collect();
        // 100 leases acquired over half a second renew at one or two grid points...
        let mut distinct = aligned.clone();
        distinct.dedup();
        assert!(distinct.len() <= 2, "{distinct:?}");
        // ...never later than due, at most a grid step (an eighth of the cadence) earlier.
        for (ms, at) in (0..100u64).zip(&aligned) {
            let due = start + cadence + Duration::from_millis(ms * 5);
            assert!(*at <= due && due - *at <= cadence / 8, "{ms}");
        }
    }
}
