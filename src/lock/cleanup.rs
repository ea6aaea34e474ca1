//! Cleanups: the work in the background that frees a lease no guard owns any more — the
//! release of a dropped guard, a grant that came too late to use, a release tried again
//! after a transient failure. A shutdown waits for them (each for at most its bound), so a
//! process that exits once [`LockManager::shutdown`] returns leaves behind no lease that
//! only its expiry would free.
//!
//! [`LockManager::shutdown`]: crate::manager::LockManager::shutdown

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// The cleanups of one manager. Clones share them.
#[derive(Clone, Default)]
pub(crate) struct Cleanups(Arc<Registry>);

#[derive(Default)]
struct Registry {
    /// Each cleanup still running, by id: until when a shutdown waits for it.
    running: watch::Sender<BTreeMap<u64, Instant>>,
    next: AtomicU64,
}

/// One cleanup's place in the registry, given up when dropped.
pub(crate) struct Pending {
    id: u64,
    cleanups: Cleanups,
}

impl Cleanups {
    /// Registers a cleanup a shutdown waits for until `bound` from now: the call timeout
    /// of the store call it waits for, past which the call has failed anyway.
    pub(crate) fn pending(&self, bound: Duration) -> Pending {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        let until = Instant::now() + bound;
        self.0.running.send_modify(|running| {
            running.insert(id, until);
        });
        Pending {
            id,
            cleanups: self.clone(),
        }
    }

    /// Runs `cleanup` on its own task, registered for `bound`.
    pub(crate) fn spawn(
        &self,
        bound: Duration,
        cleanup: impl Future<Output = ()> + Send + 'static,
    ) {
        let pending = self.pending(bound);
        tokio::spawn(async move {
            cleanup.await;
            drop(pending);
        });
    }

    /// Waits until every cleanup has finished or is past its bound. Cleanups registered
    /// while it waits (a late answer's release) are waited for too.
    pub(crate) async fn settled(&self) {
        let mut running = self.0.running.subscribe();
        loop {
            let latest = running.borrow_and_update().values().max().copied();
            let Some(latest) = latest else {
                return;
            };
            if tokio::time::timeout_at(latest, running.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.cleanups.0.running.send_modify(|running| {
            running.remove(&self.id);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With nothing registered, a shutdown has nothing to wait for.
    #[tokio::test(start_paused = true)]
    async fn nothing_running_is_settled_at_once() {
        let started = Instant::now();
        Cleanups::default().settled().await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    /// A cleanup is waited for until it ends, and one registered meanwhile too.
    #[tokio::test(start_paused = true)]
    async fn a_running_cleanup_and_the_one_it_starts_are_waited_for() {
        let cleanups = Cleanups::default();
        let started = Instant::now();
        cleanups.spawn(Duration::from_secs(5), {
            let cleanups = cleanups.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                cleanups.spawn(Duration::from_secs(5), async {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                });
            }
        });
        cleanups.settled().await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    /// A cleanup that outlives its bound (a call that hangs) is waited for only that long.
    #[tokio::test(start_paused = true)]
    async fn a_cleanup_is_waited_for_no_longer_than_its_bound() {
        let cleanups = Cleanups::default();
        let started = Instant::now();
        cleanups.spawn(Duration::from_secs(2), std::future::pending());
        cleanups.settled().await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
