//! [`LockManager`]: the top of the crate — it starts the runtime and hands out locks and
//! elections.

use std::sync::Arc;

use crate::election::{Election, ElectionOptions};
use crate::error::LockError;
use crate::lock::{Lock, Runtime};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{HolderId, LockStore};

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
    runtime: Arc<Runtime>,
    defaults: Arc<LockOptions>,
}

impl LockManager {
    /// Validates `defaults`, prepares the store (server checks, indexes, housekeeping) and
    /// starts the supervisor. Must be called inside a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] for invalid defaults; [`LockError::Store`] if the
    /// store cannot be prepared (for MongoDB: unreachable, or older than 5.0).
    ///
    /// ```
    /// use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let bad = LockOptions::default().with_renew_deadline(Duration::from_secs(60));
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
    /// # Errors
    ///
    /// As [`start`](Self::start).
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
        let runtime =
            Runtime::start(Arc::new(store), holder, defaults.idle_actor_timeout()).await?;
        Ok(Self {
            runtime,
            defaults: Arc::new(defaults),
        })
    }

    /// A handle to the lock `name` with the manager's default options. Validates the name
    /// (see [`LockName`]); does no I/O.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidName`] for a name that cannot be used.
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
        Ok(self
            .runtime
            .lock(LockName::new(name)?, self.defaults.clone()))
    }

    /// A handle to the lock `name` with its own options (for example a longer expiry, or the
    /// `lock` metrics label). The options are validated here.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] or [`LockError::InvalidName`] for bad input, including
    /// an [`idle_actor_timeout`](LockOptions::idle_actor_timeout) other than the manager's.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let nightly = manager.lock_with(
    ///     "nightly-report",
    ///     LockOptions::default().with_expiry(Duration::from_secs(120)).with_lock_name_label(true),
    /// )?;
    /// // The idle actor timeout is the manager's, not a lock's:
    /// let idle = LockOptions::default().with_idle_actor_timeout(Duration::from_secs(1));
    /// assert!(matches!(manager.lock_with("x", idle), Err(mongolock::LockError::InvalidOptions(_))));
    /// # Ok(()) }
    /// ```
    pub fn lock_with(
        &self,
        name: impl AsRef<str>,
        options: LockOptions,
    ) -> Result<Lock, LockError> {
        options.validate()?;
        if options.idle_actor_timeout() != self.defaults.idle_actor_timeout() {
            return Err(LockError::InvalidOptions(format!(
                "idle_actor_timeout ({:?}) is a manager setting and differs from this manager's ({:?}); set it in the defaults given to LockManager::start",
                options.idle_actor_timeout(),
                self.defaults.idle_actor_timeout()
            )));
        }
        Ok(self.runtime.lock(LockName::new(name)?, Arc::new(options)))
    }

    /// A candidate in the leader election `name` (a lock of that name with the election's
    /// timings). Validates name and options; does no I/O until it campaigns.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] or [`LockError::InvalidName`] for bad input, including
    /// an [`idle_actor_timeout`](LockOptions::idle_actor_timeout) other than the manager's.
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
        options: ElectionOptions,
    ) -> Result<Election, LockError> {
        let lock = self.lock_with(name, options.lock_options(&self.defaults)?)?;
        Election::new(lock, &options)
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
        &self.runtime.holder
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
        self.runtime.active_locks().await
    }

    /// Test hook: how many lock-actor timers are pending (one per held lock, one per actor
    /// backing off or idle), as the timer service last counted.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn pending_timers(&self) -> usize {
        self.runtime
            .pending_timers
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Test hook: how many requests lock handles sent through the supervisor because they
    /// knew no open route to the lock's actor.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn requests_routed_by_supervisor(&self) -> u64 {
        self.runtime
            .routed_by_supervisor
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Tells every holder it lost its lock ([`LossReason::Shutdown`](crate::LossReason::Shutdown)),
    /// fails pending acquisitions with [`LockError::ShutDown`], and stops all actors.
    /// Idempotent.
    ///
    /// Each held lease is freed on the store as soon as its guard is dropped or released
    /// (campaigns and elections drop theirs after stopping their bound actors), and at the
    /// latest once the loss margin (`expiry − renew_deadline`) has passed: like any loss,
    /// a shutdown gives a holder that margin to stop before another process can be granted
    /// its lock. Drop guards when told, and their locks are free at once. Returns without
    /// waiting for that.
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
        self.runtime.shutdown().await;
    }
}

impl std::fmt::Debug for LockManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockManager")
            .field("holder", &self.runtime.holder)
            .field("defaults", &self.defaults)
            .finish()
    }
}
