//! [`LockManager`]: the top of the crate — it starts the runtime and hands out locks and
//! elections — and [`LockManagerBuilder`], its settings.

mod builder;

use std::sync::Arc;

use crate::election::{Election, ElectionOptions};
use crate::error::LockError;
use crate::lock::{Lock, MultiLock, Runtime, RwLock, Semaphore};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::LockStore;
use crate::store::request::HolderId;
use crate::watch::LockWatch;

pub use builder::LockManagerBuilder;

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
    /// Starts a manager with `defaults` as its default lock options and every manager
    /// setting at its default: the shortcut for
    /// `LockManager::builder(store).with_default_lock_options(defaults).start()` (see
    /// [`LockManagerBuilder`]).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] for invalid defaults; [`LockError::Store`] if the
    /// store cannot be prepared (for MongoDB: unreachable, or older than 5.0).
    ///
    /// # Cancel safety
    ///
    /// As [`LockManagerBuilder::start`].
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
        Self::builder(store)
            .with_default_lock_options(defaults)
            .start()
            .await
    }

    /// A builder for a manager with settings of its own (identity, idle actor timeout,
    /// default lock options).
    ///
    /// ```
    /// use mongolock::{LockManager, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let manager = LockManager::builder(MemoryStore::new())
    ///     .with_idle_actor_timeout(Duration::from_secs(5))
    ///     .start()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(store: impl LockStore) -> LockManagerBuilder {
        LockManagerBuilder::new(Arc::new(store))
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
    /// [`LockError::InvalidOptions`] or [`LockError::InvalidName`] for bad input.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let nightly = manager.lock_with(
    ///     "nightly-report",
    ///     LockOptions::default().with_lease_duration(Duration::from_secs(120)).with_lock_name_label(true),
    /// )?;
    /// # Ok(()) }
    /// ```
    pub fn lock_with(
        &self,
        name: impl AsRef<str>,
        options: LockOptions,
    ) -> Result<Lock, LockError> {
        options.validate()?;
        check_fairness(&options, self.runtime.store.as_ref(), None)?;
        Ok(self.runtime.lock(LockName::new(name)?, Arc::new(options)))
    }

    /// A semaphore `name` of `permits` with the manager's default options: up to `permits`
    /// holders at once, across processes (see [`Semaphore`]). Validates; does no I/O.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidName`] for a bad name; [`LockError::InvalidOptions`] for a count
    /// of 0 or above [`MAX_PERMITS`](crate::MAX_PERMITS).
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let imports = manager.semaphore("nightly-import", 3)?;
    /// let _permit = imports.acquire().await?;
    /// assert!(manager.semaphore("nightly-import", 0).is_err());
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl AsRef<str>, permits: u32) -> Result<Semaphore, LockError> {
        Semaphore::new(self.lock(name)?, permits)
    }

    /// A semaphore with its own options (see [`semaphore`](Self::semaphore)).
    ///
    /// # Errors
    ///
    /// As [`semaphore`](Self::semaphore), and [`LockError::InvalidOptions`] for bad options.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let options = LockOptions::default().with_lease_duration(Duration::from_secs(60));
    /// let imports = manager.semaphore_with("nightly-import", 3, options)?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore_with(
        &self,
        name: impl AsRef<str>,
        permits: u32,
        options: LockOptions,
    ) -> Result<Semaphore, LockError> {
        Semaphore::new(self.lock_with(name, options)?, permits)
    }

    /// A reader/writer lock `name` with the manager's default options (see [`RwLock`]).
    /// Validates the name; does no I/O.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidName`] for a bad name.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock("schema")?;
    /// let _reading = schema.read().await?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock(&self, name: impl AsRef<str>) -> Result<RwLock, LockError> {
        Ok(RwLock::new(self.lock(name)?))
    }

    /// A reader/writer lock with its own options (see [`rw_lock`](Self::rw_lock)).
    ///
    /// # Errors
    ///
    /// As [`rw_lock`](Self::rw_lock), and [`LockError::InvalidOptions`] for bad options.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let schema = manager.rw_lock_with("schema", LockOptions::default().with_lock_name_label(true))?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock_with(
        &self,
        name: impl AsRef<str>,
        options: LockOptions,
    ) -> Result<RwLock, LockError> {
        Ok(RwLock::new(self.lock_with(name, options)?))
    }

    /// The locks `names` taken all or nothing, with the manager's default options (see
    /// [`MultiLock`]): in one canonical order whatever order `names` has (duplicates
    /// once). Validates the names; does no I/O.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidName`] for a bad name; [`LockError::InvalidOptions`] if `names`
    /// is empty.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["account-a", "account-b"])?.acquire().await?;
    /// assert!(manager.multi_lock(Vec::<&str>::new()).is_err());
    /// # Ok(()) }
    /// ```
    pub fn multi_lock<I, N>(&self, names: I) -> Result<MultiLock, LockError>
    where
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        self.multi_lock_with(names, (*self.defaults).clone())
    }

    /// [`multi_lock`](Self::multi_lock) with options of its own for every member.
    ///
    /// # Errors
    ///
    /// As [`multi_lock`](Self::multi_lock), and [`LockError::InvalidOptions`] for bad options.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let options = LockOptions::default().with_lease_duration(Duration::from_secs(60));
    /// let both = manager.multi_lock_with(["a", "b"], options)?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock_with<I, N>(
        &self,
        names: I,
        options: LockOptions,
    ) -> Result<MultiLock, LockError>
    where
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        options.validate()?;
        check_fairness(&options, self.runtime.store.as_ref(), Some("a multi-lock"))?;
        let options = Arc::new(options);
        let members = names
            .into_iter()
            .map(|name| Ok(self.runtime.lock(LockName::new(name)?, options.clone())))
            .collect::<Result<Vec<_>, LockError>>()?;
        MultiLock::new(members)
    }

    /// A candidate in the leader election `name` (a lock of that name with the election's
    /// timings). Validates name and options; does no I/O until it campaigns.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] or [`LockError::InvalidName`] for bad input.
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

    /// Watches the locks `names`: what happens to them from now on, from every process, in
    /// one stream (see [`LockWatch`]). It starts with each lock's current state, in the order
    /// given (duplicates once).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidName`] for a name that cannot be used (nothing is watched).
    ///
    /// ```
    /// # use mongolock::{LockChange, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let mut changes = manager.watch(["orders", "payments"])?;
    /// while let Some(change) = changes.recv().await {
    ///     println!("{}: {change:?}", change.name());
    /// #   break;
    /// }
    /// assert!(manager.watch(["ok", ""]).is_err());
    /// # Ok(()) }
    /// ```
    pub fn watch<I, N>(&self, names: I) -> Result<LockWatch, LockError>
    where
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        let mut unique = Vec::new();
        for name in names {
            let name = LockName::new(name)?;
            if !unique.contains(&name) {
                unique.push(name);
            }
        }
        Ok(self.runtime.watch(unique))
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
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
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

    /// Tells every holder it lost its lock ([`LossReason::Shutdown`](crate::LossReason::Shutdown)),
    /// fails pending acquisitions with [`LockError::Shutdown`], and stops all actors.
    /// Idempotent.
    ///
    /// Each held lease is freed on the store as soon as its guard is dropped or released
    /// (campaigns and elections drop theirs after stopping their bound actors), and at the
    /// latest once the loss margin (`expiry − renew_deadline`) has passed: like any loss,
    /// a shutdown gives a holder that margin to stop before another process can be granted
    /// its lock. Drop guards when told, and their locks are free at once. Returns without
    /// waiting for that.
    ///
    /// It does wait for what the manager frees on nobody's behalf: the release of a guard
    /// dropped before the shutdown, a grant that reached the store after its caller gave
    /// up (timed out or cancelled) or its answer came too late. Each is waited for at most
    /// its call timeout (the renew deadline), so with the store answering a process may
    /// exit once this returns and leave no lease that only its expiry frees.
    ///
    /// # Cancel safety
    ///
    /// The shutdown is under way once the future is first polled; dropping it then lets
    /// the shutdown finish in the background (`shutdown` is idempotent: call it again
    /// to wait for it).
    ///
    /// ```
    /// # use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// manager.shutdown().await;
    /// assert!(matches!(lock.acquire().await, Err(LockError::Shutdown)));
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

/// Refuses [`Fairness::ArrivalOrder`](crate::options::Fairness::ArrivalOrder) where it cannot
/// be kept: on a store that keeps no line, or for `combined` (a multi-lock, named for the
/// message), whose members are taken one after another and never wait in line.
pub(crate) fn check_fairness(
    options: &LockOptions,
    store: &dyn LockStore,
    combined: Option<&str>,
) -> Result<(), LockError> {
    if !options.in_arrival_order() {
        return Ok(());
    }
    if !store.keeps_arrival_order() {
        return Err(LockError::InvalidOptions(
            "Fairness::ArrivalOrder needs a store that keeps a line of waiters (MongoStore and MemoryStore do; this store does not): use Fairness::Bounded".to_owned(),
        ));
    }
    match combined {
        Some(what) => Err(LockError::InvalidOptions(format!(
            "Fairness::ArrivalOrder applies to locks, semaphores and reader/writer locks; {what} takes Fairness::Bounded (pass options with it to the `_with` constructor)"
        ))),
        None => Ok(()),
    }
}
