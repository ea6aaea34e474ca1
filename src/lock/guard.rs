use std::fmt;

use ractor::ActorRef;
use tokio::sync::oneshot;

use super::loss_signal::{AtRisk, LossSignal};
use super::message::LockMsg;
use crate::error::{LockError, LossReason};
use crate::kind::Access;
use crate::name::LockName;
use crate::store::LeaseId;

/// Proof that this process holds a lock, for as long as it is not lost: the whole of a
/// mutex, a permit of a [`Semaphore`](crate::Semaphore), a read or the write of an
/// [`RwLock`](crate::RwLock), each with the same guarantees — its own lease, renewed in the
/// manager's batches, a loss told before anyone else can take its place, an owner-checked
/// release, and a token larger than every token issued for the name before.
///
/// The runtime renews the lease in the background; user code never waits on renewals and
/// renewals never wait on user code. Dropping the guard releases the lock (in the
/// background); [`release`](Self::release) does the same and waits for the store's answer.
///
/// Pass [`token`](Self::token) to the resource the lock protects and let it reject writes
/// carrying a smaller token than it has seen: only that makes a lease safe against a holder
/// that was paused past its lease.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// tokio::select! {
///     reason = guard.lost() => println!("lost the lock: {reason}"),
///     _ = async { /* critical section, writes fenced with guard.token() */ } => {}
/// }
/// guard.release().await?;
/// # manager.shutdown().await;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    name: LockName,
    token: u64,
    access: Access,
    lease: LeaseId,
    actor: ActorRef<LockMsg>,
    loss: LossSignal,
    armed: bool,
}

impl LockGuard {
    pub(crate) fn new(
        name: LockName,
        token: u64,
        access: Access,
        lease: LeaseId,
        actor: ActorRef<LockMsg>,
        loss: LossSignal,
    ) -> Self {
        Self {
            name,
            token,
            access,
            lease,
            actor,
            loss,
            armed: true,
        }
    }

    /// Takes the guard apart without releasing, for a multi-lock that releases its members
    /// in one store call: the lease, its token and the actor that holds it.
    pub(crate) fn into_parts(mut self) -> (LockName, LeaseId, u64, ActorRef<LockMsg>) {
        self.armed = false;
        (
            self.name.clone(),
            self.lease,
            self.token,
            self.actor.clone(),
        )
    }

    /// Drops the guard without releasing: for a guard that never reached its caller.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// The fencing token of this hold: larger than every token issued for this name before.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// let first = lock.acquire().await?.token();
    /// let second = lock.acquire().await?.token();
    /// assert!(second > first);
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The name of the held lock.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert_eq!(guard.name().as_str(), "orders");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// What this guard holds: the whole of a mutex ([`Access::Exclusive`]), one permit of a
    /// semaphore ([`Access::Permit`], with the count it was acquired under), a read lock or
    /// the write lock of a reader/writer lock. Code handed a guard can tell whether it may
    /// write under it.
    ///
    /// ```
    /// use mongolock::Access;
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let read = manager.rw_lock("config")?.read().await?;
    /// assert_eq!(read.access(), Access::Read);
    /// let permit = manager.semaphore("workers", 4)?.acquire().await?;
    /// assert_eq!(permit.access(), Access::Permit { permits: 4 });
    /// assert_eq!(manager.lock("orders")?.acquire().await?.access(), Access::Exclusive);
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Access {
        self.access
    }

    /// When the last acquire or renewal that the store confirmed was *sent* (the runtime's
    /// monotonic clock): the loss deadline counts from here. A holder whose renewals keep
    /// failing sees this fall behind by more than the cadence.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert!(guard.last_renewed().elapsed() < LockOptions::default().renew_interval());
    /// # Ok(()) }
    /// ```
    pub fn last_renewed(&self) -> tokio::time::Instant {
        self.loss.last_confirmed()
    }

    /// Whether the hold's loss deadline passed before the runtime could say so (the process
    /// was paused): the lease may be someone else's already.
    pub(crate) fn deadline_passed(&self) -> bool {
        self.loss.deadline_passed()
    }

    /// Resolves when the lock is lost, with the reason; never resolves while it is held.
    /// Called after the loss, it resolves at once. A release is not a loss.
    ///
    /// The holder learns of a loss no later than the renew deadline after the last
    /// successful renewal was sent — before the lease can expire on the store.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing, and a later call sees the same
    /// loss.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// let still_held = tokio::time::timeout(Duration::from_millis(10), guard.lost()).await.is_err();
    /// assert!(still_held);
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) -> LossReason {
        self.loss.lost().await
    }

    /// The loss reason if the lock is already lost, without waiting.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert_eq!(guard.loss(), None);
    /// # Ok(()) }
    /// ```
    pub fn loss(&self) -> Option<LossReason> {
        self.loss.loss()
    }

    /// The renewal trouble of this hold, if it is at risk now: renewals are failing and the
    /// loss deadline is still ahead (see [`AtRisk`]).
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert!(guard.risk().is_none());
    /// # Ok(()) }
    /// ```
    pub fn risk(&self) -> Option<AtRisk> {
        self.loss.risk()
    }

    /// Resolves when this hold is at risk — a warning before a loss: renewals are failing
    /// and, unless one is confirmed in [`AtRisk::time_left`], the holder is told of a loss.
    /// Never resolves once the hold has ended. See [`LossSignal::at_risk`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// tokio::select! {
    ///     risk = guard.at_risk() => eprintln!("renewals failing; lost in {:?} unless renewed", risk.time_left()),
    ///     () = tokio::time::sleep(Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn at_risk(&self) -> AtRisk {
        self.loss.at_risk().await
    }

    /// An owned, cloneable handle on this hold's loss notification, for other tasks.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// let signal = guard.loss_signal();
    /// tokio::spawn(async move { eprintln!("lost: {}", signal.lost().await) });
    /// # Ok(()) }
    /// ```
    pub fn loss_signal(&self) -> LossSignal {
        self.loss.clone()
    }

    /// Sends `to_message(reason)` to `actor` if this lock is lost (never on release); see
    /// [`LossSignal::notify`] for a full example, with the actor and a loss.
    ///
    /// ```
    /// use mongolock::{LockGuard, LossReason, ractor::ActorRef};
    ///
    /// fn tell(guard: &LockGuard, worker: &ActorRef<LossReason>) {
    ///     guard.notify(worker, |reason| reason);
    /// }
    /// ```
    pub fn notify<M: ractor::Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl FnOnce(LossReason) -> M + Send + 'static,
    ) {
        self.loss.notify(actor, to_message);
    }

    /// Releases the lock and waits until the store confirmed it.
    ///
    /// # Errors
    ///
    /// - [`LockError::Lost`]: the hold was lost before or during the release, or the release
    ///   reached the runtime after the hold's loss deadline (a paused process) — even if
    ///   nobody took the lock meanwhile, the critical section may not have been exclusive.
    /// - [`LockError::Store`]: the store failed. After a transient failure
    ///   the runtime tries again in the background until the lease would have expired.
    /// - [`LockError::ActorFailed`]: the runtime actor is gone.
    ///
    /// # Cancel safety
    ///
    /// The release is sent before the first await: dropping the future still releases the
    /// lock, only its answer is lost.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("orders")?;
    /// lock.acquire().await?.release().await?;
    /// assert!(lock.try_acquire().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<(), LockError> {
        self.armed = false;
        if let Some(reason) = self.loss() {
            return Err(LockError::Lost(reason));
        }
        let (reply, answer) = oneshot::channel();
        let message = LockMsg::Release {
            lease: self.lease,
            token: self.token,
            reply: Some(reply),
        };
        let failed = || LockError::ActorFailed(self.name.clone());
        self.actor.send_message(message).map_err(|_| failed())?;
        // A loss told while the release is under way is the answer: the lock was not held to
        // the end (and the runtime waits for this guard to let go before it frees the lease).
        tokio::select! {
            biased;
            answer = answer => {
                answer.map_err(|_| failed())??;
                match self.loss() {
                    Some(reason) => Err(LockError::Lost(reason)),
                    None => Ok(()),
                }
            }
            reason = self.loss.lost() => Err(LockError::Lost(reason)),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.armed {
            // Fire and forget: the actor releases in the background. If it is gone
            // (shutdown, failure) there is nothing left to release from here.
            let _ = self.actor.send_message(LockMsg::Release {
                lease: self.lease,
                token: self.token,
                reply: None,
            });
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name)
            .field("token", &self.token)
            .field("access", &self.access)
            .field("lost", &self.loss())
            .finish()
    }
}
