//! [`LockManagerBuilder`]: the settings of a whole manager, apart from the per-lock options.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::LockManager;
use crate::error::LockError;
use crate::lock::Runtime;
use crate::options::{LockOptions, MAX_LEASE_DURATION, MIN_SETTING_DURATION};
use crate::store::LockStore;
use crate::store::request::HolderId;

/// How long an idle per-name actor lingers unless the builder says otherwise.
const DEFAULT_IDLE_ACTOR_TIMEOUT: Duration = Duration::from_secs(60);

/// Configures and starts a [`LockManager`]: what belongs to the manager as a whole — its
/// identity in the store, how long idle per-name actors linger — and the default options
/// of its locks. Per-lock options ([`LockOptions`]) cannot contradict these.
///
/// [`LockManager::start`] is the shortcut for a builder with only default lock options.
///
/// ```
/// use mongolock::{HolderId, LockManager, LockOptions, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::builder(MemoryStore::new())
///     .with_holder_id(HolderId::from_string("billing-worker-1".into()))
///     .with_idle_actor_timeout(Duration::from_secs(10))
///     .with_default_lock_options(LockOptions::default().with_lease_duration(Duration::from_secs(10)))
///     .start()
///     .await?;
/// assert_eq!(manager.holder_id().as_str(), "billing-worker-1");
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct LockManagerBuilder {
    store: Arc<dyn LockStore>,
    defaults: LockOptions,
    holder: Option<HolderId>,
    idle_actor_timeout: Duration,
}

impl LockManagerBuilder {
    pub(super) fn new(store: Arc<dyn LockStore>) -> Self {
        Self {
            store,
            defaults: LockOptions::default(),
            holder: None,
            idle_actor_timeout: DEFAULT_IDLE_ACTOR_TIMEOUT,
        }
    }

    /// The options [`LockManager::lock`] and [`LockManager::election`] start from
    /// (default: [`LockOptions::default`]).
    ///
    /// ```
    /// use mongolock::{LockManager, LockOptions, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let defaults = LockOptions::default().with_lease_duration(Duration::from_secs(5));
    /// let manager = LockManager::builder(MemoryStore::new())
    ///     .with_default_lock_options(defaults.clone())
    ///     .start()
    ///     .await?;
    /// assert_eq!(manager.lock("orders")?.options(), &defaults);
    /// # Ok(()) }
    /// ```
    pub fn with_default_lock_options(mut self, defaults: LockOptions) -> Self {
        self.defaults = defaults;
        self
    }

    /// This manager's identity in the store, shown to operators (default:
    /// [`HolderId::generate`], `host:pid:random`). Identities must be unique among live
    /// managers: two managers with one identity would each take the other's records for
    /// their own.
    ///
    /// ```
    /// use mongolock::{HolderId, LockManager, MemoryStore};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let manager = LockManager::builder(MemoryStore::new())
    ///     .with_holder_id(HolderId::from_string("scheduler-a".into()))
    ///     .start()
    ///     .await?;
    /// assert_eq!(manager.holder_id().as_str(), "scheduler-a");
    /// # Ok(()) }
    /// ```
    pub fn with_holder_id(mut self, holder: HolderId) -> Self {
        self.holder = Some(holder);
        self
    }

    /// How long a per-name actor stays alive with no holder and no waiter before it is
    /// stopped, bounding memory by the number of active locks (default: 60 s; at least
    /// [`MIN_SETTING_DURATION`](crate::MIN_SETTING_DURATION), at most a year).
    ///
    /// ```
    /// use mongolock::{LockManager, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), mongolock::LockError> {
    /// let manager = LockManager::builder(MemoryStore::new())
    ///     .with_idle_actor_timeout(Duration::from_secs(1))
    ///     .start()
    ///     .await?;
    /// manager.lock("orders")?.acquire().await?.release().await?;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert_eq!(manager.active_locks().await, 0);
    /// # Ok(()) }
    /// ```
    pub fn with_idle_actor_timeout(mut self, timeout: Duration) -> Self {
        self.idle_actor_timeout = timeout;
        self
    }

    /// Validates the settings, prepares the store (server checks, indexes, housekeeping)
    /// and starts the supervisor. Must be called inside a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] for invalid default lock options or idle timeout;
    /// [`LockError::Store`] if the store cannot be prepared (for MongoDB: unreachable,
    /// older than 5.0, or an invalid namespace).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes leaves no manager running; the store may
    /// have been prepared (its indexes created), which is harmless.
    ///
    /// ```
    /// use mongolock::{LockError, LockManager, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let started = LockManager::builder(MemoryStore::new())
    ///     .with_idle_actor_timeout(Duration::ZERO)
    ///     .start()
    ///     .await;
    /// assert!(matches!(started, Err(LockError::InvalidOptions(_))));
    /// # }
    /// ```
    pub async fn start(self) -> Result<LockManager, LockError> {
        self.defaults.validate()?;
        super::check_fairness(&self.defaults, self.store.as_ref(), None)?;
        if !(MIN_SETTING_DURATION..=MAX_LEASE_DURATION).contains(&self.idle_actor_timeout) {
            return Err(LockError::InvalidOptions(format!(
                "idle_actor_timeout ({:?}) must be at least {MIN_SETTING_DURATION:?} and at most {MAX_LEASE_DURATION:?}",
                self.idle_actor_timeout
            )));
        }
        self.store.prepare().await?;
        let holder = self.holder.unwrap_or_else(HolderId::generate);
        let runtime = Runtime::start(self.store, holder, self.idle_actor_timeout).await?;
        Ok(LockManager {
            runtime,
            defaults: Arc::new(self.defaults),
        })
    }
}

impl fmt::Debug for LockManagerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManagerBuilder")
            .field("defaults", &self.defaults)
            .field("holder", &self.holder)
            .field("idle_actor_timeout", &self.idle_actor_timeout)
            .finish_non_exhaustive()
    }
}
