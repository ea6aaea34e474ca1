//! The running part of a manager that lock handles share: the supervisor actor, the store
//! and this manager's holder identity.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use tokio::sync::oneshot;

use super::handle::Lock;
use super::renewer::Renewer;
use super::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use crate::error::{LockError, StoreError};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{HolderId, LockStore};

pub(crate) struct Runtime {
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) holder: HolderId,
    shut_down: AtomicBool,
    /// Work that must finish before the locks are released at shutdown (campaigns draining
    /// their bound actors), by registration id.
    before_shutdown: Mutex<HashMap<u64, ShutdownHook>>,
    next_hook: AtomicU64,
}

/// Runs once at shutdown, before any lock is released.
pub(crate) type ShutdownHook = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

impl Runtime {
    /// Starts the supervisor over a prepared store; idle per-name actors stop after
    /// `idle_timeout`.
    pub(crate) async fn start(
        store: Arc<dyn LockStore>,
        holder: HolderId,
        idle_timeout: Duration,
    ) -> Result<Arc<Self>, LockError> {
        let args = SupervisorArgs {
            renewer: Renewer::start(store.clone()),
            store: store.clone(),
            holder: holder.clone(),
            idle_timeout,
        };
        let (supervisor, _) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|error| {
                LockError::Store(StoreError::backend(format!(
                    "could not start the supervisor actor: {error}"
                )))
            })?;
        if let Some(mut released) = store.watch_releases().await {
            let supervisor = supervisor.clone();
            // Ends when the store's feed ends or the supervisor is gone.
            tokio::spawn(async move {
                while let Some(name) = released.recv().await {
                    if supervisor
                        .send_message(SupervisorMsg::Released { name })
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        Ok(Arc::new(Self {
            supervisor,
            store,
            holder,
            shut_down: AtomicBool::new(false),
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

    fn hooks(&self) -> MutexGuard<'_, HashMap<u64, ShutdownHook>> {
        // Every mutation is a single map operation: a poisoned map is still consistent.
        self.before_shutdown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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

    /// Releases every held lock (guards see [`LossReason::Shutdown`](crate::error::LossReason::Shutdown))
    /// and stops the actors; later calls fail with [`LockError::ShutDown`].
    pub(crate) async fn shutdown(&self) {
        // Voluntary hand-overs first: campaigns stop their bound actors and release.
        let hooks: Vec<ShutdownHook> = self.hooks().drain().map(|(_, hook)| hook).collect();
        futures::future::join_all(hooks.into_iter().map(|hook| hook())).await;
        self.shut_down.store(true, Ordering::Release);
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
