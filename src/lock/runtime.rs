//! The running part of a manager that lock handles share: the supervisor actor, the store
//! and this manager's holder identity.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use tokio::sync::{mpsc, oneshot, watch};

use super::engine::ManagerContext;
use super::handle::Lock;
use super::renewer::Renewer;
use super::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use super::timer::Timers;
use super::watch::LockWatch;
use crate::error::{LockError, StoreError};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::request::HolderId;
use crate::store::{LockStore, ReleaseWaiters};

pub(crate) struct Runtime {
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    /// How many of the lock actors' timers are pending, for the crate's tests (the count
    /// only: the timer service ends with the actors, not with the last handle).
    #[cfg(feature = "testing")]
    pub(crate) pending_timers: Arc<std::sync::atomic::AtomicUsize>,
    /// Requests handles sent through the supervisor (not on a known route), for the
    /// crate's tests.
    #[cfg(feature = "testing")]
    pub(crate) routed_by_supervisor: AtomicU64,
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) holder: HolderId,
    shut_down: AtomicBool,
    /// Turns true at shutdown: watches end.
    closed: watch::Sender<bool>,
    /// Work that must finish before the locks are released at shutdown (campaigns draining
    /// their bound actors), by registration id (in that order).
    before_shutdown: Mutex<BTreeMap<u64, ShutdownHook>>,
    next_hook: AtomicU64,
}

/// Runs once at shutdown, before any lock is released.
pub(crate) type ShutdownHook = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Passes the store's release hints to the supervisor until the feed ends or the supervisor
/// stops (then dropping the receiver ends the store's feed, and its change stream, too): a
/// released name wakes its actor, and a feed that (re)started watching wakes every waiting
/// actor once (it saw nothing before).
async fn forward_releases(
    mut released: mpsc::Receiver<LockName>,
    mut feed_starts: watch::Receiver<u64>,
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
        let (release_waiters, demand) = ReleaseWaiters::new();
        let timers = Timers::start();
        #[cfg(feature = "testing")]
        let pending_timers = timers.count();
        let (alive, supervisor_gone) = oneshot::channel();
        let args = SupervisorArgs {
            alive,
            context: ManagerContext {
                timers,
                renewer: Renewer::start(store.clone()),
                release_waiters: release_waiters.clone(),
                store: store.clone(),
                holder: holder.clone(),
                idle_timeout,
            },
        };
        let (supervisor, _) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|error| {
                LockError::Store(StoreError::backend(format!(
                    "could not start the supervisor actor: {error}"
                )))
            })?;
        if let Some(released) = store.watch_releases(demand).await {
            tokio::spawn(forward_releases(
                released,
                release_waiters.feed_starts(),
                supervisor.clone(),
                supervisor_gone,
            ));
        }
        Ok(Arc::new(Self {
            supervisor,
            #[cfg(feature = "testing")]
            pending_timers,
            #[cfg(feature = "testing")]
            routed_by_supervisor: AtomicU64::new(0),
            store,
            holder,
            shut_down: AtomicBool::new(false),
            closed: watch::Sender::new(false),
            before_shutdown: Mutex::default(),
            next_hook: AtomicU64::new(0),
        }))
    }

    /// A handle on `name` with `options`.
    pub(crate) fn lock(self: &Arc<Self>, name: LockName, options: Arc<LockOptions>) -> Lock {
        Lock::new(name, options, self.clone())
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
        self.shut_down.load(Ordering::Acquire)
    }

    /// How many lock names have a live actor.
    pub(crate) async fn active_locks(&self) -> usize {
        let (reply, answer) = oneshot::channel();
        if self
            .supervisor
            .send_message(SupervisorMsg::ActiveLocks { reply })
            .is_err()
        {
            return 0;
        }
        answer.await.unwrap_or(0)
    }

    /// Tells every holder it lost its lock ([`LossReason::Shutdown`](crate::error::LossReason::Shutdown);
    /// each lease is freed once its guard lets go or the loss margin passes) and stops the
    /// actors; later calls fail with [`LockError::Shutdown`].
    pub(crate) async fn shutdown(&self) {
        // Voluntary hand-overs first: campaigns stop their bound actors and release.
        let hooks: Vec<ShutdownHook> = std::mem::take(&mut *self.hooks()).into_values().collect();
        futures::future::join_all(hooks.into_iter().map(|hook| hook())).await;
        self.shut_down.store(true, Ordering::Release);
        self.closed.send_replace(true);
        let (reply, done) = oneshot::channel();
        if self
            .supervisor
            .send_message(SupervisorMsg::Shutdown { reply })
            .is_ok()
        {
            let _ = done.await;
        }
    }
}
