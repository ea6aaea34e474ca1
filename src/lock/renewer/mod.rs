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
//! commands instead of one per lease. At most [`IN_FLIGHT`](lanes::IN_FLIGHT) bulk commands run at once;
//! renewals that fall due meanwhile queue, and the next command takes all of them, earliest
//! deadline first, up to the size that can come back before the last of them is lost by
//! the cost per lease the manager has measured ([`BatchSize`](batch_size::BatchSize)), and is waited for until
//! then. Batches thus grow with the load, without renewals piling up on a slow server or
//! taking the connection pool from acquisitions. While a command leaves renewals due
//! behind it, the manager's acquisition attempts wait for them ([`Renewer::behind`]):
//! on a server too slow for everything at once, what is held is renewed first. Attempts in
//! arrival order do not wait: each takes its task's place in line as it reaches the store.
//! A renewal whose holder's deadline comes before the command out must be back (a shorter
//! lease's, or an at-risk hold's retry, behind a large batch of long leases) does not wait
//! for it: it goes at once in a command of its own, one at a time ([`URGENT_IN_FLIGHT`](lanes::URGENT_IN_FLIGHT)).
//! A renewal of a hold at risk (sent again beside one unanswered for half its time, see
//! `HeldLease::store_silent`, or retried after one failed) waits for neither command while an
//! earlier renewal of its lease is in one of them, which may be stuck: it goes in a lane of
//! its own ([`AGAIN_IN_FLIGHT`](lanes::AGAIN_IN_FLIGHT)). With none out, it is not sent ahead of anything: it is
//! dropped if an earlier one is queued here (that one is not stuck but waiting its turn, and
//! a copy sent ahead would add a command to a store already behind; its answer is the
//! hold's), and queued as any renewal otherwise.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the [`Renewer`] the actors hand renewals to, and the task that runs the lanes |
//! | `renewal.rs` | a renewal, and how its answer goes back to its actor |
//! | `queue.rs` | the queues renewals wait in, and how a batch is taken from one |
//! | `lanes.rs` | the three lanes as one type, filled in turn, and how a batch is sent |
//! | `batch_size/` | how many renewals go in one command, from the measured time of recent ones (`tests.rs`: its tests) |
//! | `tests.rs` | the renewer's tests: lanes, batches, deadlines and costs |

mod batch_size;
mod lanes;
mod queue;
pub(crate) mod renewal;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use self::lanes::{Batching, Kind};
use self::renewal::{Renewal, answer};
use super::store_call::bounded;
use crate::error::StoreError;
use crate::store::LockStore;

/// The most renewals in one store call.
const MAX_BATCH: usize = 10_000;

/// How long the renewer waits after the first renewal of a batch for others due at the same
/// instant (their actors' timers fired together but their messages are still on the way).
const COALESCE: Duration = Duration::from_millis(2);

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

    /// Queues a renewal; its answer comes back to the actor as
    /// [`LockMsg::RenewDone`](crate::lock::message::LockMsg::RenewDone).
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
                    let idle = batching.lane(Kind::Bulk).is_idle();
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

#[cfg(test)]
mod tests;
