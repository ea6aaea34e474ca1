//! The running part of a manager that lock handles share: the supervisor actor, the store,
//! this manager's holder identity, and the claims on per-name settings.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ractor::{Actor, ActorRef};
use tokio::sync::oneshot;

use super::handle::Lock;
use super::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use crate::error::{LockError, StoreError};
use crate::name::LockName;
use crate::options::{LockOptions, PerNameSettings};
use crate::store::{HolderId, LockStore};

pub(crate) struct Runtime {
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) holder: HolderId,
    shut_down: AtomicBool,
    claims: Mutex<Claims>,
}

/// Per-name settings of the live handles, by name. Entries whose handles are all gone are
/// dead weak references, pruned as the map grows.
#[derive(Default)]
struct Claims {
    by_name: HashMap<LockName, Weak<PerNameSettings>>,
    pruned_at: usize,
}

impl Runtime {
    /// Starts the supervisor over a prepared store.
    pub(crate) async fn start(
        store: Arc<dyn LockStore>,
        holder: HolderId,
    ) -> Result<Arc<Self>, LockError> {
        let args = SupervisorArgs {
            store: store.clone(),
            holder: holder.clone(),
        };
        let (supervisor, _) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|error| {
                LockError::Store(StoreError::backend(format!(
                    "could not start the supervisor actor: {error}"
                )))
            })?;
        Ok(Arc::new(Self {
            supervisor,
            store,
            holder,
            shut_down: AtomicBool::new(false),
            claims: Mutex::default(),
        }))
    }

    /// A handle on `name`, provided its per-name settings agree with every live handle of
    /// the same name.
    pub(crate) fn lock(
        self: &Arc<Self>,
        name: LockName,
        options: Arc<LockOptions>,
    ) -> Result<Lock, LockError> {
        let claim = self.claim(&name, options.per_name())?;
        Ok(Lock::new(name, options, claim, self.clone()))
    }

    fn claim(
        &self,
        name: &LockName,
        wanted: &PerNameSettings,
    ) -> Result<Arc<PerNameSettings>, LockError> {
        let mut claims = self.claims();
        if let Some(live) = claims.by_name.get(name).and_then(Weak::upgrade) {
            return if *live == *wanted {
                Ok(live)
            } else {
                Err(LockError::ConflictingOptions {
                    name: name.to_string(),
                    difference: live.difference(wanted),
                })
            };
        }
        let claim = Arc::new(wanted.clone());
        claims.by_name.insert(name.clone(), Arc::downgrade(&claim));
        if claims.by_name.len() >= 2 * claims.pruned_at.max(512) {
            claims.by_name.retain(|_, claim| claim.strong_count() > 0);
            claims.pruned_at = claims.by_name.len();
        }
        Ok(claim)
    }

    fn claims(&self) -> MutexGuard<'_, Claims> {
        // Every mutation is a single map operation: a poisoned map is still consistent.
        self.claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

impl PerNameSettings {
    /// The settings that differ from `other`, by name, for an error message.
    fn difference(&self, other: &Self) -> String {
        let mut differ = Vec::new();
        if (self.busy_wait_min, self.busy_wait_max) != (other.busy_wait_min, other.busy_wait_max) {
            differ.push(format!(
                "busy_wait {:?}..={:?} vs {:?}..={:?}",
                self.busy_wait_min, self.busy_wait_max, other.busy_wait_min, other.busy_wait_max
            ));
        }
        if self.adaptive_backoff != other.adaptive_backoff {
            differ.push(format!(
                "adaptive_backoff {} vs {}",
                self.adaptive_backoff, other.adaptive_backoff
            ));
        }
        if self.idle_actor_timeout != other.idle_actor_timeout {
            differ.push(format!(
                "idle_actor_timeout {:?} vs {:?}",
                self.idle_actor_timeout, other.idle_actor_timeout
            ));
        }
        if self.lock_name_label != other.lock_name_label {
            differ.push(format!(
                "lock_name_label {:?} vs {:?}",
                self.lock_name_label, other.lock_name_label
            ));
        }
        differ.join(", ")
    }
}
