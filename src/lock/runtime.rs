//! The running part of a manager that lock handles share: the supervisor actor, the store
//! and this manager's holder identity.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use tokio::sync::{mpsc, oneshot, watch};

use super::cleanup::Cleanups;
use super::engine::ManagerContext;
use super::renewer::Renewer;
use super::supervisor::{Supervisor, SupervisorMsg};
use super::timer::Timers;
use crate::error::{LockError, StoreError};
use crate::name::LockName;
use crate::store::request::HolderId;
use crate::store::{LockStore, ReleaseWaiters};
use crate::watch::LockWatch;

pub(crate) struct Runtime {
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    /// How many of the lock actors' timers are pending, for the crate's tests (the count
    /// only: the timer service ends with the actors, not with the last handle).
    #[cfg(test)]
    pub(crate) pending_timers: Arc<std::sync::atomic::AtomicUsize>,
    /// Requests handles sent through the supervisor (not on a known route), for the
    /// crate's tests.
    #[cfg(test)]
    pub(crate) routed_by_supervisor: AtomicU64,
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) holder: HolderId,
    /// Turns true at shutdown: watches end, and later calls fail.
    closed: watch::Sender<bool>,
    /// Work that must finish before the locks are released at shutdown (campaigns draining
    /// their bound actors), by registration id (in that order).
    before_shutdown: Mutex<BTreeMap<u64, ShutdownHook>>,
    next_hook: AtomicU64,
    /// The releases of leases nobody owns still running: the shutdown waits for them.
    pub(crate) cleanups: Cleanups,
}

/// Runs once at shutdown, before any lock is released.
pub(crate) type ShutdownHook = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Passes the store's release hints to the supervisor until the feed ends or the supervisor
/// stops (then dropping the receiver ends the store's feed, and its change stream, too): a
/// released name wakes its actor, and a feed that (re)started watching wakes every waiting
/// actor once (it saw nothing before).
async fn forward_releases(
    mut released: mpsc::Receiver<LockName>,
    (mut feed_starts, mut feed_live): (watch::Receiver<u64>, watch::Receiver<bool>),
    supervisor: ActorRef<SupervisorMsg>,
    mut supervisor_gone: oneshot::Receiver<()>,
) {
    loop {
        let message = tokio::select! {
            biased;
            _ = &mut supervisor_gone => return,
            name = released.recv() => match name {
                Some(name) => SupervisorMsg::Released { name },
                None => return,
            },
            started = feed_starts.changed() => match started {
                Ok(()) => SupervisorMsg::WakeAll,
                Err(_) => return,
            },
            // Waiters waiting quietly counted on the feed: once it stops they poll again.
            // (It starting again bumps `feed_starts` too.)
            changed = feed_live.changed() => match changed {
                Ok(()) if !*feed_live.borrow_and_update() => SupervisorMsg::WakeAll,
                Ok(()) => continue,
                Err(_) => return,
            },
        };
        if supervisor.send_message(message).is_err() {
            return;
        }
    }
}

impl Runtime {
    /// Starts the supervisor over a prepared store; idle per-name actors stop after
    /// `idle_timeout`.
    pub(crate) async fn start(
        store: Arc<dyn LockStore>,
        holder: HolderId,
        idle_timeout: Duration,
    ) -> Result<Arc<Self>, LockError> {
        let (release_waiters, demand) = ReleaseWaiters::new(holder.clone());
        let timers = Timers::start();
        #[cfg(test)]
        let pending_timers = timers.count();
        let (alive, supervisor_gone) = oneshot::channel();
        let cleanups = Cleanups::default();
        let context = ManagerContext {
            cleanups: cleanups.clone(),
            timers,
            renewer: Renewer::start(store.clone()),
            release_waiters: release_waiters.clone(),
            store: store.clone(),
            holder: holder.clone(),
            idle_timeout,
        };
        let (supervisor, _) = Actor::spawn(None, Supervisor, (context, alive))
            .await
            .map_err(|error| {
                LockError::Store(StoreError::backend(format!(
                    "could not start the supervisor actor: {error}"
                )))
            })?;
        if let Some(released) = store.watch_releases(demand).await {
            tokio::spawn(forward_releases(
                released,
                (release_waiters.feed_starts(), release_waiters.feed_live()),
                supervisor.clone(),
                supervisor_gone,
            ));
        }
        Ok(Arc::new(Self {
            supervisor,
            #[cfg(test)]
            pending_timers,
            #[cfg(test)]
            routed_by_supervisor: AtomicU64::new(0),
            store,
            holder,
            closed: watch::Sender::new(false),
            before_shutdown: Mutex::default(),
            next_hook: AtomicU64::new(0),
            cleanups,
        }))
    }

    /// Registers `hook` to run at shutdown before any lock is released; returns the id to
    /// [`forget_before_shutdown`](Self::forget_before_shutdown) it with.
    pub(crate) fn before_shutdown(&self, hook: ShutdownHook) -> u64 {
        let id = self.next_hook.fetch_add(1, Ordering::Relaxed);
        self.hooks().insert(id, hook);
        id
    }

    pub(crate) fn forget_before_shutdown(&self, id: u64) {
        self.hooks().remove(&id);
    }

    fn hooks(&self) -> MutexGuard<'_, BTreeMap<u64, ShutdownHook>> {
        // Every mutation is a single map operation: a poisoned map is still consistent.
        self.before_shutdown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches `names` until the watch is dropped or the manager shuts down.
    pub(crate) fn watch(&self, names: Vec<LockName>) -> LockWatch {
        LockWatch::start(self.store.clone(), names, self.closed.subscribe())
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        *self.closed.borrow()
    }

    /// How many lock names have a live actor.
    pub(crate) async fn active_locks(&self) -> usize {
        let active = self.ask(|reply| SupervisorMsg::ActiveLocks { reply });
        active.await.unwrap_or(0)
    }

    /// Sends the supervisor `message` and waits for its reply (`None`: it has stopped).
    async fn ask<T>(&self, message: impl FnOnce(oneshot::Sender<T>) -> SupervisorMsg) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.supervisor.send_message(message(reply)).ok()?;
        answer.await.ok()
    }

    /// Tells every holder it lost its lock ([`LossReason::Shutdown`](crate::error::LossReason::Shutdown);
    /// each lease is freed once its guard lets go or the loss margin passes) and stops the
    /// actors, then waits for the releases of leases nobody owns (each within its call
    /// timeout); later calls fail with [`LockError::Shutdown`].
    pub(crate) async fn shutdown(&self) {
        // Voluntary hand-overs first: campaigns stop their bound actors and release.
        let hooks: Vec<ShutdownHook> = std::mem::take(&mut *self.hooks()).into_values().collect();
        futures::future::join_all(hooks.into_iter().map(|hook| hook())).await;
        self.closed.send_replace(true);
        self.ask(|reply| SupervisorMsg::Shutdown { reply }).await;
        // A grant answered after its actor stopped is released by its claim; a caller that
        // exits once this returns must not take that release down with it.
        self.cleanups.settled().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::lock::handle::Lock;
    use crate::lock::timer::tests::probe;
    use crate::options::LockOptions;
    use crate::store::memory::MemoryStore;

    /// A runtime on a fresh memory store whose idle lock actors stop after `idle`, and a
    /// handle on `name` in it.
    async fn lock_idling_after(idle: Duration, name: &str) -> (Arc<Runtime>, Lock) {
        let store = MemoryStore::new();
        store.prepare().await.unwrap();
        let runtime = Runtime::start(Arc::new(store), HolderId::generate(), idle)
            .await
            .unwrap();
        let options = Arc::new(LockOptions::default());
        let lock = runtime.lock(LockName::new(name).unwrap(), options);
        (runtime, lock)
    }

    fn routed_by_supervisor(runtime: &Runtime) -> u64 {
        runtime.routed_by_supervisor.load(Ordering::Relaxed)
    }

    /// A hook forgotten (a campaign that ended) does not run at shutdown; one kept does.
    #[tokio::test(start_paused = true)]
    async fn a_forgotten_shutdown_hook_does_not_run() {
        let (runtime, _lock) = lock_idling_after(Duration::from_secs(60), "hooked").await;
        let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hook = |which: &'static str| -> ShutdownHook {
            let ran = ran.clone();
            Box::new(move || Box::pin(async move { ran.lock().unwrap().push(which) }))
        };
        let forgotten = runtime.before_shutdown(hook("forgotten"));
        runtime.before_shutdown(hook("kept"));
        runtime.forget_before_shutdown(forgotten);
        runtime.shutdown().await;
        assert_eq!(*ran.lock().unwrap(), ["kept"]);
    }

    /// No task or timer outlives its purpose: after many acquire/release cycles the runtime
    /// is back to the tasks it had before, and the timer service holds no timer of a
    /// released hold (they are cancelled, not left until they fire; a loss notification of
    /// a released hold ends).
    #[tokio::test(start_paused = true)]
    async fn released_holds_leave_no_sleeping_timers() {
        let (runtime, lock) = lock_idling_after(Duration::from_secs(60), "cycled").await;
        let pending_timers = || runtime.pending_timers.load(Ordering::Relaxed);
        let alive = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        lock.acquire().await.unwrap().release().await.unwrap();
        // Let the first cycle's background work finish; what is alive now is the baseline
        // (the supervisor, the lock actor, the renewer, the timer service, the store's
        // sweeper).
        tokio::time::sleep(Duration::from_millis(1)).await;
        let baseline = alive() + 1; // the probe actor below
        let (probe, _received) = probe::<()>().await;
        for _ in 0..200 {
            let guard = lock.acquire().await.unwrap();
            guard.notify(&probe, |_| ()); // watches for a loss that never comes
            guard.release().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        let cycles = "left behind by 200 acquire/release cycles";
        assert_eq!(alive(), baseline, "tasks {cycles}");
        assert_eq!(
            pending_timers(),
            1,
            "timers {cycles} (only the idle actor's stop is due)"
        );
        let held = lock.acquire().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(pending_timers(), 1, "one timer per held lock");
        held.release().await.unwrap();
        runtime.shutdown().await;
    }

    /// After the supervisor has routed a handle's first request, the handle and its clones
    /// reach the lock's actor directly; once the actor stopped for idleness the next request
    /// goes through the supervisor again, which starts a fresh actor.
    #[tokio::test(start_paused = true)]
    async fn handles_reach_their_actor_directly_after_the_first_request() {
        let idle = Duration::from_millis(100);
        let (runtime, lock) = lock_idling_after(idle, "direct").await;
        for _ in 0..50 {
            let clone = lock.clone();
            clone.acquire().await.unwrap().release().await.unwrap();
            assert!(lock.try_acquire().await.unwrap().is_some());
        }
        assert_eq!(routed_by_supervisor(&runtime), 1);
        tokio::time::sleep(idle * 3).await;
        assert_eq!(runtime.active_locks().await, 0, "the idle actor stopped");
        lock.acquire().await.unwrap().release().await.unwrap();
        assert_eq!(routed_by_supervisor(&runtime), 2);
        runtime.shutdown().await;
    }

    /// Requests racing an actor's idle stop are never lost: each either reaches the actor
    /// before it retires (and keeps it) or goes through the supervisor to a fresh one.
    #[tokio::test(start_paused = true)]
    async fn requests_racing_an_idle_stop_are_never_lost() {
        let (runtime, lock) = lock_idling_after(Duration::from_millis(1), "racy").await;
        let tasks = (0..8_u64).map(|task| {
            let lock = lock.clone();
            tokio::spawn(async move {
                for round in 0..100_u64 {
                    // Pauses around the idle timeout, so requests arrive just before, at and
                    // just after the actor retires.
                    let pause = Duration::from_micros((task * 131 + round * 17) % 2_500);
                    tokio::time::sleep(pause).await;
                    let acquired = lock.acquire_timeout(Duration::from_secs(5)).await;
                    acquired
                        .expect("an acquisition was lost")
                        .release()
                        .await
                        .unwrap();
                }
            })
        });
        for task in tasks.collect::<Vec<_>>() {
            task.await.unwrap();
        }
        let restarted = routed_by_supervisor(&runtime) > 1;
        assert!(restarted, "the actor stopped and was restarted");
        runtime.shutdown().await;
    }
}
