use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;

use super::guard::LockGuard;
use super::message::LockMsg;
use super::route::CachedRoute;
use super::runtime::Runtime;
use super::store_call::bounded;
use super::supervisor::SupervisorMsg;
use crate::error::LockError;
use crate::kind::Access;
use crate::metrics::{LockMetrics, StoreOp};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::outcome::LockRecord;
use crate::store::request::HolderId;
use crate::watch::LockWatch;

/// A handle to one named lock. Cheap to create and to clone; creating it validates the name
/// and touches nothing else.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let lock = manager.lock("orders")?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("holding {} with token {}", guard.name(), guard.token());
/// # manager.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    name: LockName,
    options: Arc<LockOptions>,
    runtime: Arc<Runtime>,
    /// The route to the name's actor once the supervisor has given it (shared by clones).
    route: Arc<CachedRoute>,
}

impl Runtime {
    /// A handle on `name` with `options` (here rather than in `runtime.rs`: a handle uses
    /// the runtime, and the runtime does not know handles).
    pub(crate) fn lock(self: &Arc<Self>, name: LockName, options: Arc<LockOptions>) -> Lock {
        Lock::new(name, options, self.clone())
    }
}

impl Lock {
    pub(crate) fn new(name: LockName, options: Arc<LockOptions>, runtime: Arc<Runtime>) -> Self {
        Self {
            name,
            options,
            runtime,
            route: Arc::default(),
        }
    }

    /// The lock's name.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// assert_eq!(manager.lock("orders")?.name().as_str(), "orders");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The options this lock is acquired with.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let options = LockOptions::default().with_lease_duration(Duration::from_secs(5));
    /// let lock = manager.lock_with("reports", options.clone())?;
    /// assert_eq!(lock.options(), &options);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &LockOptions {
        &self.options
    }

    /// Waits until the lock is held. Local waiters are served first come, first served; while
    /// another process holds the lock, one store attempt per backoff interval is made for all
    /// of them together. A grant that reaches the caller only after its loss deadline (the
    /// process was paused in between) may be someone else's lock by then: it is let go and
    /// asked for again, in the same place, so the guard returned is always live.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] after
    /// [`LockManager::shutdown`](crate::LockManager::shutdown); [`LockError::Store`] when
    /// the store refuses the request for good
    /// ([`StoreError::Rejected`](crate::StoreError::Rejected) and other non-transient
    /// errors: transient ones are retried); [`LockError::ActorFailed`] if the runtime actor
    /// failed (retrying is safe).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future (for example in `select!` or under a timeout) leaves
    /// nothing held — a grant that arrives after the caller left is released at once, and one
    /// whose outcome is unknown is waited for and released.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert!(guard.token() > 0);
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        self.acquire_as(Access::Exclusive).await
    }

    /// [`acquire`](Self::acquire) for `access` (a mutex, a permit, a read or the write).
    pub(crate) async fn acquire_as(&self, access: Access) -> Result<LockGuard, LockError> {
        let span = tracing::info_span!(
            "mongolock.acquire",
            lock = %self.name,
            access = access.as_str(),
            token = tracing::field::Empty
        );
        async {
            let requested_at = Instant::now();
            loop {
                let (reply, answer) = oneshot::channel();
                self.send(LockMsg::Acquire {
                    access,
                    options: self.options.clone(),
                    requested_at,
                    reply,
                })?;
                let mut waiting = TellsWhenLeaving {
                    lock: self,
                    answer,
                    armed: true,
                };
                let guard = self.answer(&mut waiting.answer).await;
                waiting.armed = false;
                let guard = guard??;
                if guard.deadline_passed() {
                    // Granted, then the process was paused past the loss deadline before
                    // this task took the guard: someone else may hold the lock now. Let it
                    // go and wait again, in the same place.
                    tracing::warn!(lock = %self.name, token = guard.token(), "a grant reached its caller after its loss deadline; asking again");
                    drop(guard);
                    continue;
                }
                tracing::Span::current().record("token", guard.token());
                return Ok(guard);
            }
        }
        .instrument(span)
        .await
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` with
    /// [`LockError::Timeout`]; nothing is held then.
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`] if the lock was not held within `timeout`; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// ```
    /// # use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// let _held = lock.acquire().await?;
    /// let second = lock.acquire_timeout(Duration::from_millis(50)).await;
    /// assert!(matches!(second, Err(LockError::Timeout(_))));
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<LockGuard, LockError> {
        self.acquire_timeout_as(Access::Exclusive, timeout).await
    }

    /// [`acquire_timeout`](Self::acquire_timeout) for `access`.
    pub(crate) async fn acquire_timeout_as(
        &self,
        access: Access,
        timeout: Duration,
    ) -> Result<LockGuard, LockError> {
        tokio::time::timeout(timeout, self.acquire_as(access))
            .await
            .map_err(|_| LockError::Timeout(timeout))?
    }

    /// Exactly one store attempt: `Some(guard)` if it won, `None` if the lock is held
    /// elsewhere (or if the grant reached the caller only after its loss deadline: a paused
    /// process). Returns `None` without a store call when this process already holds the
    /// lock or has tasks waiting for it (locks are not re-entrant, and it does not jump the
    /// local queue).
    ///
    /// # Errors
    ///
    /// [`LockError::Store`] if the one attempt failed; [`LockError::Shutdown`] after
    /// shutdown.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a grant whose caller left is released at once.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// let first = lock.try_acquire().await?;
    /// assert!(first.is_some());
    /// assert!(lock.try_acquire().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>, LockError> {
        self.try_acquire_as(Access::Exclusive).await
    }

    /// [`try_acquire`](Self::try_acquire) for `access`.
    pub(crate) async fn try_acquire_as(
        &self,
        access: Access,
    ) -> Result<Option<LockGuard>, LockError> {
        let (reply, answer) = oneshot::channel();
        self.send(LockMsg::TryAcquire {
            access,
            options: self.options.clone(),
            reply,
        })?;
        // A grant that reached this task after its loss deadline (a paused process) may be
        // someone else's already: not won.
        Ok(self
            .answer(answer)
            .await??
            .filter(|guard| !guard.deadline_passed()))
    }

    /// What the store says about this lock: holder identity, last token, time left.
    ///
    /// # Errors
    ///
    /// [`LockError::Store`] if the store cannot be read within the renew deadline;
    /// [`LockError::Shutdown`] after
    /// [`LockManager::shutdown`](crate::LockManager::shutdown) (a shut-down manager sends
    /// nothing more to the store).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// let guard = lock.acquire().await?;
    /// let record = lock.inspect().await?.expect("a held lock has a record");
    /// assert_eq!(record.holder(), Some(manager.holder_id()));
    /// assert_eq!(record.token, guard.token());
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self) -> Result<Option<LockRecord>, LockError> {
        if self.runtime.is_shut_down() {
            return Err(LockError::Shutdown);
        }
        let store = &self.runtime.store;
        let started = Instant::now();
        let result = bounded(self.options.renew_deadline(), store.inspect(&self.name)).await;
        LockMetrics::new(&self.name, self.options.lock_name_label()).store_call(
            StoreOp::Inspect,
            started.elapsed(),
            result.is_err(),
        );
        Ok(result?)
    }

    /// Sets the count of the semaphore of this name in the store (see
    /// [`Semaphore::set_permits`](super::semaphore::Semaphore::set_permits)).
    pub(crate) async fn set_permits(&self, permits: u32) -> Result<Option<u32>, LockError> {
        if self.runtime.is_shut_down() {
            return Err(LockError::Shutdown);
        }
        let store = &self.runtime.store;
        Ok(bounded(
            self.options.renew_deadline(),
            store.set_permits(&self.name, permits),
        )
        .await?)
    }

    /// Watches this lock: what happens to it from now on, from every process (see
    /// [`LockWatch`]). It starts with the lock's current state. After
    /// [`LockManager::shutdown`](crate::LockManager::shutdown) the watch ends at once.
    ///
    /// ```
    /// # use mongolock::{LockChange, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let mut changes = manager.lock("orders")?.watch();
    /// if let Some(LockChange::Current { holder, .. }) = changes.recv().await {
    ///     println!("held by {holder:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(&self) -> LockWatch {
        self.runtime.watch(vec![self.name.clone()])
    }

    /// Whether the store says this manager holds the lock (an unexpired lease of ours).
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// assert!(!lock.is_held_by_this_manager().await?);
    /// let _guard = lock.acquire().await?;
    /// assert!(lock.is_held_by_this_manager().await?);
    /// # Ok(()) }
    /// ```
    pub async fn is_held_by_this_manager(&self) -> Result<bool, LockError> {
        Ok(self.holder().await?.as_ref() == Some(&self.runtime.holder))
    }

    /// Whether the store says another manager holds the lock.
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let store = MemoryStore::new();
    /// let a = LockManager::start(store.clone(), LockOptions::default()).await?;
    /// let b = LockManager::start(store, LockOptions::default()).await?;
    /// let _guard = a.lock("orders")?.acquire().await?;
    /// assert!(b.lock("orders")?.is_held_by_another_manager().await?);
    /// assert!(!a.lock("orders")?.is_held_by_another_manager().await?);
    /// # Ok(()) }
    /// ```
    pub async fn is_held_by_another_manager(&self) -> Result<bool, LockError> {
        Ok(self
            .holder()
            .await?
            .is_some_and(|holder| holder != self.runtime.holder))
    }

    async fn holder(&self) -> Result<Option<HolderId>, LockError> {
        Ok(self
            .inspect()
            .await?
            .and_then(|record| record.holder().cloned()))
    }

    /// The runtime this handle belongs to.
    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Makes this lock's actor panic (see `testing::inject_actor_panic`).
    #[cfg(feature = "testing")]
    pub(crate) fn inject_actor_panic(&self) -> Result<(), LockError> {
        self.send(LockMsg::InjectPanic)
    }

    /// The route to the name's actor, once known: lets the crate's tests queue messages
    /// back to back.
    #[cfg(test)]
    pub(crate) fn cached_route(&self) -> Option<super::route::Route> {
        self.route.get()
    }

    /// Sends a request straight to the name's actor when the route is known and open,
    /// otherwise through the supervisor (which starts the actor if needed and gives the route).
    fn send(&self, mut request: LockMsg) -> Result<(), LockError> {
        if let Some(route) = self.route.get() {
            match route.send_request(request) {
                Ok(()) => return Ok(()),
                Err(refused) => {
                    self.route.forget(&route);
                    request = refused;
                }
            }
        }
        #[cfg(test)]
        self.runtime
            .routed_by_supervisor
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let supervisor: &ActorRef<SupervisorMsg> = &self.runtime.supervisor;
        supervisor
            .send_message(SupervisorMsg::Forward {
                name: self.name.clone(),
                message: request,
                route: self.route.clone(),
            })
            .map_err(|_| LockError::Shutdown)
    }

    async fn answer<T>(
        &self,
        answer: impl Future<Output = Result<T, oneshot::error::RecvError>>,
    ) -> Result<T, LockError> {
        answer.await.map_err(|_| {
            if self.runtime.is_shut_down() {
                LockError::Shutdown
            } else {
                LockError::ActorFailed(self.name.clone())
            }
        })
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("options", &self.options)
            .finish()
    }
}

/// Tells the lock's actor when an acquire is dropped before its answer (cancelled, timed
/// out), so that with nobody left waiting the manager's place in the name's line (arrival
/// order) goes at once, and neither a retry nor an attempt still waiting for renewals is
/// sent for nobody.
struct TellsWhenLeaving<'a, T> {
    lock: &'a Lock,
    answer: oneshot::Receiver<T>,
    armed: bool,
}

impl<T> Drop for TellsWhenLeaving<'_, T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Closed first, so the actor sees this waiter gone when the message arrives.
        self.answer.close();
        // Not routed yet: the request is still with the supervisor, and the actor finds
        // the waiter gone when it gets there.
        if let Some(route) = self.lock.route.get() {
            let _ = route.actor.send_message(LockMsg::WaiterLeft);
        }
    }
}
