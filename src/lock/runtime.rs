//! The running part of a manager that lock handles share: the supervisor actor, the store
//! and this manager's holder identity.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
}

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
        }))
    }

    /// A handle on `name` with `options`.
    pub(crate) fn lock(self: &Arc<Self>, name: LockName, options: Arc<LockOptions>) -> Lock {
        Lock::new(name, options, self.clone())
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
