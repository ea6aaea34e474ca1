use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ractor::{Actor, ActorRef};
use tokio::sync::oneshot;

use super::lock::Lock;
use crate::actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use crate::store::{HolderId, LockStore};
use crate::{LockError, LockName, LockOptions};

/// The entry point: starts the runtime (a supervisor actor owning the store) and hands out
/// [`Lock`] handles.
///
/// Cloning is cheap; clones share the runtime. Start one manager per process and store
/// namespace; its [`holder_id`](Self::holder_id) identifies it in the store.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// // ... critical section ...
/// guard.release().await?;
/// manager.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockManager {
    shared: Arc<ManagerShared>,
}

/// What every handle of one manager shares.
pub(crate) struct ManagerShared {
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    pub(crate) store: Arc<dyn LockStore>,
    defaults: Arc<LockOptions>,
    pub(crate) holder: HolderId,
    shut_down: AtomicBool,
}

impl ManagerShared {
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }
}

impl LockManager {
    /// Validates `defaults`, prepares the store (server checks, indexes, housekeeping) and
    /// starts the supervisor. Must be called inside a Tokio runtime.
    ///
    /// ```
    /// use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let bad = LockOptions::default().renew_deadline(Duration::from_secs(60));
    /// let started = LockManager::start(MemoryStore::new(), bad).await;
    /// assert!(matches!(started, Err(LockError::InvalidOptions(_))));
    /// # }
    /// ```
    pub async fn start(store: impl LockStore, defaults: LockOptions) -> Result<Self, LockError> {
        Self::start_with_holder(store, defaults, HolderId::generate()).await
    }

    /// Like [`start`](Self::start), with an explicit identity shown to operators
    /// (default: `host:pid:random`). Identities must be unique among live managers.
    ///
    /// ```
    /// use mongolock::{store::HolderId, LockManager, LockOptions, MemoryStore};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let id = HolderId::from_string("billing-worker-1".into());
    /// let manager = LockManager::start_with_holder(MemoryStore::new(), LockOptions::default(), id).await?;
    /// assert_eq!(manager.holder_id().as_str(), "billing-worker-1");
    /// # Ok(()) }
    /// ```
    pub async fn start_with_holder(
        store: impl LockStore,
        defaults: LockOptions,
        holder: HolderId,
    ) -> Result<Self, LockError> {
        defaults.validate()?;
        store.prepare().await?;
        let store: Arc<dyn LockStore> = Arc::new(store);
        let args = SupervisorArgs {
            store: store.clone(),
            holder: holder.clone(),
        };
        let (supervisor, _) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|error| {
                LockError::Store(crate::StoreError::Backend(format!(
                    "could not start the supervisor actor: {error}"
                )))
            })?;
        Ok(Self {
            shared: Arc::new(ManagerShared {
                supervisor,
                store,
                defaults: Arc::new(defaults),
                holder,
                shut_down: AtomicBool::new(false),
            }),
        })
    }

    /// A handle to the lock `name` with the manager's default options. Validates the name
    /// (see [`LockName`]); does no I/O.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// assert!(manager.lock("").is_err());
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: impl AsRef<str>) -> Result<Lock, LockError> {
        Ok(Lock::new(
            LockName::new(name)?,
            self.shared.defaults.clone(),
            self.shared.clone(),
        ))
    }

    /// A handle to the lock `name` with its own options (for example a longer expiry, or the
    /// `lock` metrics label). The options are validated here.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let nightly = manager.lock_with(
    ///     "nightly-report",
    ///     LockOptions::default().expiry(Duration::from_secs(120)).lock_name_label(true),
    /// )?;
    /// # Ok(()) }
    /// ```
    pub fn lock_with(
        &self,
        name: impl AsRef<str>,
        options: LockOptions,
    ) -> Result<Lock, LockError> {
        options.validate()?;
        Ok(Lock::new(
            LockName::new(name)?,
            Arc::new(options),
            self.shared.clone(),
        ))
    }

    /// A candidate in the leader election `name` (a lock of that name with the election's
    /// timings). Validates name and options; does no I/O until it campaigns.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// election.campaign().await?;
    /// # Ok(()) }
    /// ```
    pub fn election(
        &self,
        name: impl AsRef<str>,
        options: crate::ElectionOptions,
    ) -> Result<crate::Election, LockError> {
        let lock = self.lock_with(name, options.lock_options()?)?;
        crate::Election::new(lock, &options)
    }

    /// This manager's identity as stored with the locks it holds.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// println!("I am {}", manager.holder_id());
    /// # Ok(()) }
    /// ```
    pub fn holder_id(&self) -> &HolderId {
        &self.shared.holder
    }

    /// How many per-name lock actors are alive (locks held, waited for, or idle for less than
    /// their idle timeout). 0 after shutdown.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let _guard = manager.lock("orders")?.acquire().await?;
    /// assert_eq!(manager.active_locks().await, 1);
    /// # Ok(()) }
    /// ```
    pub async fn active_locks(&self) -> usize {
        let (reply, answer) = oneshot::channel();
        if self
            .shared
            .supervisor
            .send_message(SupervisorMsg::ActiveLocks { reply })
            .is_err()
        {
            return 0;
        }
        answer.await.unwrap_or(0)
    }

    /// Releases every held lock (their guards report [`LossReason::Shutdown`](crate::LossReason::Shutdown)),
    /// fails pending acquisitions with [`LockError::ShutDown`], and stops all actors.
    /// Idempotent.
    ///
    /// ```
    /// # use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// manager.shutdown().await;
    /// assert!(matches!(lock.acquire().await, Err(LockError::ShutDown)));
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self) {
        self.shared.shut_down.store(true, Ordering::Release);
        let (reply, done) = oneshot::channel();
        if self
            .shared
            .supervisor
            .send_message(SupervisorMsg::Shutdown { reply })
            .is_ok()
        {
            let _ = done.await;
        }
    }
}

impl std::fmt::Debug for LockManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockManager")
            .field("holder", &self.shared.holder)
            .field("defaults", &self.shared.defaults)
            .finish()
    }
}
