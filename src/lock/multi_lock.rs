//! [`MultiLock`] and [`MultiLockGuard`]: several locks taken all or nothing, in one
//! canonical order, released in one store call.

use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, Message};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::cleanup::Cleanups;
use super::guard::LockGuard;
use super::handle::Lock;
use super::loss_signal::{AtRisk, HoldStatusSender, LossSignal};
use super::message::LockMsg;
use super::store_call::bounded;
use crate::error::{LockError, LossReason, StoreError};
use crate::name::LockName;
use crate::store::{LeaseKey, LockStore, ReleaseOutcome};

/// Several locks taken together: all of them or none.
///
/// - **Deadlock-free by construction.** Members are taken in one canonical order — their
///   names' byte order, whatever order the caller gave — so two multi-locks over the same
///   names can never each hold what the other waits for. A first pass tries every member
///   at once without waiting; only if one is taken does it fall back to waiting for each
///   in order.
/// - **Cancel safe.** A timeout, a cancelled future or a failure releases every member
///   taken so far: no member stays held.
/// - **Fenced per member.** [`MultiLockGuard::token`] gives each member's own token.
/// - **One loss signal.** [`MultiLockGuard::lost`] fires when any member is lost, and
///   [`MultiLockGuard::at_risk`] warns first when any member's renewals are failing (see
///   [`MultiLockGuard::loss_signal`]).
/// - **One release.** Members are released together in one store call where the store
///   allows it ([`LockStore::release_many`](crate::store::LockStore::release_many)).
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let transfer = manager.multi_lock(["account-b", "account-a"])?;
/// let both = transfer.acquire().await?;
/// let (a, b) = (both.token("account-a"), both.token("account-b"));
/// assert!(a.is_some() && b.is_some());
/// assert!(manager.lock("account-a")?.try_acquire().await?.is_none());
/// both.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    /// The members in canonical order, without duplicates.
    members: Vec<Lock>,
}

impl MultiLock {
    /// A multi-lock over `members` (already validated), put in canonical order.
    pub(crate) fn new(mut members: Vec<Lock>) -> Result<Self, LockError> {
        members.sort_by(|a, b| a.name().cmp(b.name()));
        members.dedup_by(|a, b| a.name() == b.name());
        if members.is_empty() {
            return Err(LockError::InvalidOptions(
                "a multi-lock needs at least one lock name".to_owned(),
            ));
        }
        Ok(Self { members })
    }

    /// The member names, in the order they are taken.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["b", "a", "b"])?;
    /// let names: Vec<&str> = both.names().map(|name| name.as_str()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &LockName> {
        self.members.iter().map(Lock::name)
    }

    /// Waits until every member is held.
    ///
    /// # Errors
    ///
    /// As [`Lock::acquire`] for any member (every member taken so far is then released).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases every member taken so far and leaves no
    /// grant held.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let all = manager.multi_lock(["a", "b", "c"])?.acquire().await?;
    /// assert_eq!(all.len(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<MultiLockGuard, LockError> {
        let span = tracing::info_span!("mongolock.acquire_all", locks = self.members.len());
        async {
            if let Some(all) = self.try_acquire().await? {
                return Ok(all);
            }
            // Someone holds a member: wait for each in canonical order. A member held while
            // waiting for a later one can only be waited for by callers that hold nothing
            // later in the order, so no cycle of waits can form.
            loop {
                let mut held = Vec::with_capacity(self.members.len());
                for member in &self.members {
                    held.push(member.acquire().await?);
                }
                // A member taken early may have been lost while a later one was waited
                // for (and somebody else may hold it now): a guard is only ever handed
                // out with every member held, so give all back and start over.
                if self.all_held_now(&held) {
                    return self.guard(held);
                }
                tracing::debug!(
                    "a multi-lock member was lost while waiting for the others; retrying"
                );
                drop(held);
            }
        }
        .instrument(span)
        .await
    }

    /// Whether every member in `held` (one guard per member, in the members' order) is held
    /// now: not lost, and its loss deadline still ahead. A member's deadline can pass
    /// before its actor has told its guard (a process paused while the others were waited
    /// for wakes with the deadline timer and this check due at once), and a member past it
    /// may be somebody else's already. `<` as in the hold's own validity: at the deadline
    /// instant the member is lost (no test lands this check on that very instant, so its
    /// `<=` mutant survives).
    fn all_held_now(&self, held: &[LockGuard]) -> bool {
        let now = Instant::now();
        held.len() == self.members.len()
            && held.iter().zip(&self.members).all(|(guard, member)| {
                guard.loss().is_none()
                    && now < guard.last_renewed() + member.options().renew_deadline()
            })
    }

    /// The guard over `held` (every member, or those to give back).
    fn guard(&self, held: Vec<LockGuard>) -> Result<MultiLockGuard, LockError> {
        let Some(first) = self.members.first() else {
            return Err(LockError::InvalidOptions(
                "a multi-lock needs at least one lock name".to_owned(),
            ));
        };
        let release_timeout = self
            .members
            .iter()
            .map(|member| member.options().renew_deadline())
            .min()
            .unwrap_or_default();
        let runtime = first.runtime();
        Ok(MultiLockGuard::new(
            held,
            runtime.store.clone(),
            runtime.cleanups.clone(),
            release_timeout,
        ))
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` with
    /// [`LockError::Timeout`]; no member is held then.
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`]; otherwise as [`acquire`](Self::acquire).
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
    /// let _b = manager.lock("b")?.acquire().await?;
    /// let both = manager.multi_lock(["a", "b"])?;
    /// assert!(matches!(both.acquire_timeout(Duration::from_millis(50)).await, Err(LockError::Timeout(_))));
    /// assert!(manager.lock("a")?.try_acquire().await?.is_some(), "a was released");
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<MultiLockGuard, LockError> {
        tokio::time::timeout(timeout, self.acquire())
            .await
            .map_err(|_| LockError::Timeout(timeout))?
    }

    /// One attempt at every member at once: `Some` if all were free, `None` (with every
    /// member taken meanwhile released) if any was held.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_acquire`] for any member (the others are released).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: members granted after the caller left are released.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let _c = manager.lock("c")?.acquire().await?;
    /// assert!(manager.multi_lock(["a", "c"])?.try_acquire().await?.is_none());
    /// assert!(manager.lock("a")?.try_acquire().await?.is_some(), "a was given back");
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<MultiLockGuard>, LockError> {
        let attempts = self.members.iter().map(Lock::try_acquire);
        let mut held = Vec::with_capacity(self.members.len());
        let (mut complete, mut failed) = (true, None);
        for attempt in futures::future::join_all(attempts).await {
            match attempt {
                Ok(Some(guard)) => held.push(guard),
                Ok(None) => complete = false,
                Err(error) => failed = failed.or(Some(error)),
            }
        }
        // A member already lost is not held: all or nothing. (Only a member lost between
        // its grant and this line makes the check matter, a race no test builds: its `||`
        // mutant survives.)
        let complete = complete && self.all_held_now(&held);
        if complete && failed.is_none() {
            return self.guard(held).map(Some);
        }
        if !held.is_empty() {
            // Give back what was taken, in one call.
            let _ = self.guard(held)?.release().await;
        }
        failed.map_or(Ok(None), Err)
    }
}

/// Proof that every member of a [`MultiLock`] is held, for as long as none is lost.
///
/// Dropping it releases every member (in the background, in one store call);
/// [`release`](Self::release) does the same and waits for the store's answer.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let both = manager.multi_lock(["account-a", "account-b"])?.acquire().await?;
/// tokio::select! {
///     reason = both.lost() => eprintln!("a member was lost: {reason}"),
///     _ = async { /* move money, each write fenced with both.token(..) */ } => {}
/// }
/// both.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases every member at once"]
pub struct MultiLockGuard {
    /// The members' guards, in canonical order.
    members: Vec<LockGuard>,
    store: Arc<dyn LockStore>,
    /// Where a dropped guard's release runs, for the manager's shutdown to wait for.
    cleanups: Cleanups,
    /// How long the one release call may take (the shortest member renew deadline).
    release_timeout: Duration,
    status: Arc<HoldStatusSender>,
    loss: LossSignal,
    /// Turns the members' warnings and first loss into this guard's.
    forwarder: JoinHandle<()>,
}

impl MultiLockGuard {
    fn new(
        members: Vec<LockGuard>,
        store: Arc<dyn LockStore>,
        cleanups: Cleanups,
        release_timeout: Duration,
    ) -> Self {
        let status = Arc::new(HoldStatusSender::new(Instant::now()));
        let loss = status.subscribe();
        let signals: Vec<LossSignal> = members.iter().map(LockGuard::loss_signal).collect();
        let forwarding = status.clone();
        let forwarder = tokio::spawn(async move { forwarding.follow_all(signals).await });
        Self {
            members,
            store,
            cleanups,
            release_timeout,
            status,
            loss,
            forwarder,
        }
    }

    /// How many locks are held.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// assert_eq!(manager.multi_lock(["a", "b"])?.acquire().await?.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether no lock is held (never: a multi-lock has at least one member).
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// assert!(!manager.multi_lock(["a"])?.acquire().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The fencing token of member `name`, `None` if it is not a member.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// assert!(both.token("a").is_some());
    /// assert_eq!(both.token("z"), None);
    /// # Ok(()) }
    /// ```
    pub fn token(&self, name: impl AsRef<str>) -> Option<u64> {
        let name = name.as_ref();
        self.members
            .iter()
            .find(|member| member.name().as_str() == name)
            .map(LockGuard::token)
    }

    /// Every member's name and token, in canonical order.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["b", "a"])?.acquire().await?;
    /// let names: Vec<&str> = both.tokens().map(|(name, _)| name.as_str()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn tokens(&self) -> impl Iterator<Item = (&LockName, u64)> {
        self.members
            .iter()
            .map(|member| (member.name(), member.token()))
    }

    /// The members' own guards, in canonical order.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// assert_eq!(both.guards()[0].name().as_str(), "a");
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.members
    }

    /// Resolves when any member is lost, with its reason; never while all are held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a later call sees the same loss.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// assert!(tokio::time::timeout(Duration::from_millis(10), both.lost()).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) -> LossReason {
        self.loss.lost().await
    }

    /// The loss reason if a member is already lost, without waiting.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// assert_eq!(both.loss(), None);
    /// # Ok(()) }
    /// ```
    pub fn loss(&self) -> Option<LossReason> {
        self.members
            .iter()
            .find_map(LockGuard::loss)
            .or_else(|| self.loss.loss())
    }

    /// One owned, cloneable signal over every member, behaving as a single guard's
    /// [`LossSignal`] with the members taken together:
    ///
    /// - **lost** ([`LossSignal::lost`], [`LossSignal::loss`]) as soon as any member is
    ///   lost, with that member's reason;
    /// - **at risk** ([`LossSignal::at_risk`], [`LossSignal::risk`]) while any member is at
    ///   risk and none is lost, with the [`AtRisk`] whose deadline comes first (the first
    ///   loss that may follow); a loss without a warning (a takeover) skips it;
    /// - **recovered** ([`LossSignal::recovered`]) once no member is at risk any more;
    /// - never resolved by a release.
    ///
    /// The members' own signals ([`guards`](Self::guards)) say which one it is. This
    /// signal follows them on a task of its own, so it may lag a member's by a scheduling
    /// step; [`loss`](Self::loss) and [`risk`](Self::risk) read the members directly.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// let signal = both.loss_signal();
    /// let watcher = tokio::spawn(async move { signal.lost().await });
    /// manager.shutdown().await;
    /// assert_eq!(watcher.await.unwrap(), mongolock::LossReason::Shutdown);
    /// # Ok(()) }
    /// ```
    pub fn loss_signal(&self) -> LossSignal {
        self.loss.clone()
    }

    /// The most urgent member's renewal trouble (the earliest deadline) if any member is
    /// at risk now and none is lost, without waiting.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// assert_eq!(both.risk(), None);
    /// # Ok(()) }
    /// ```
    pub fn risk(&self) -> Option<AtRisk> {
        if self.loss().is_some() {
            return None;
        }
        self.members
            .iter()
            .filter_map(LockGuard::risk)
            .min_by_key(AtRisk::deadline)
    }

    /// Resolves when any member is at risk — a warning before a loss: its renewals are
    /// failing and, unless one is confirmed in [`AtRisk::time_left`], the multi-lock is
    /// lost. Never resolves once a member is lost or the guard is released. See
    /// [`loss_signal`](Self::loss_signal).
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
    /// let both = manager.multi_lock(["a", "b"])?.acquire().await?;
    /// tokio::select! {
    ///     risk = both.at_risk() => eprintln!("renewals failing; lost in {:?} unless renewed", risk.time_left()),
    ///     () = tokio::time::sleep(Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn at_risk(&self) -> AtRisk {
        self.loss.at_risk().await
    }

    /// Sends `to_message(reason)` to `actor` when any member is lost (never on release), as
    /// [`LossSignal::notify`] does for one hold (its example shows the actor and a loss).
    ///
    /// ```
    /// use mongolock::{LossReason, MultiLockGuard, ractor::ActorRef};
    ///
    /// fn tell(both: &MultiLockGuard, worker: &ActorRef<LossReason>) {
    ///     both.notify(worker, |reason| reason);
    /// }
    /// ```
    pub fn notify<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl FnOnce(LossReason) -> M + Send + 'static,
    ) {
        self.loss.notify(actor, to_message);
    }

    /// Releases every member in one store call (where the store allows) and waits for its
    /// answer.
    ///
    /// # Errors
    ///
    /// [`LockError::Lost`] if any member was lost (the others are still released);
    /// [`LockError::Store`] if the store failed (the leases expire on their own);
    /// [`LockError::ActorFailed`] if a member's actor is gone.
    ///
    /// # Cancel safety
    ///
    /// The release runs on its own task once called: dropping the future still releases
    /// every member, only the answer is lost.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let all = manager.multi_lock(["a", "b"])?;
    /// all.acquire().await?.release().await?;
    /// assert!(all.try_acquire().await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<(), LockError> {
        let lost = self.loss();
        let members = std::mem::take(&mut self.members);
        let release = tokio::spawn(release_members(
            members,
            self.store.clone(),
            self.release_timeout,
        ));
        let released = release.await.map_err(|_| {
            LockError::Store(StoreError::Panicked(
                "the multi-lock release task failed".to_owned(),
            ))
        })?;
        match lost {
            Some(reason) => Err(LockError::Lost(reason)),
            None => released,
        }
    }
}

/// Takes each member's lease from its actor, releases them all in one store call, and
/// tells each actor the answer (as if it had made the call itself).
async fn release_members(
    members: Vec<LockGuard>,
    store: Arc<dyn LockStore>,
    timeout: Duration,
) -> Result<(), LockError> {
    let mut first_error = None;
    let mut asked = Vec::with_capacity(members.len());
    for member in members {
        let (name, lease, token, actor) = member.into_parts();
        let (reply, answer) = oneshot::channel();
        if actor
            .send_message(LockMsg::Detach {
                lease,
                token,
                reply,
            })
            .is_err()
        {
            first_error = first_error.or(Some(LockError::ActorFailed(name)));
            continue;
        }
        asked.push((name, actor, answer));
    }
    let mut detached: Vec<(LeaseKey, ActorRef<LockMsg>)> = Vec::with_capacity(asked.len());
    for (name, actor, answer) in asked {
        match answer.await {
            Ok(Ok(key)) => detached.push((key, actor)),
            Ok(Err(error)) => first_error = first_error.or(Some(error)),
            Err(_) => first_error = first_error.or(Some(LockError::ActorFailed(name))),
        }
    }
    if detached.is_empty() {
        return first_error.map_or(Ok(()), Err);
    }
    let keys: Vec<LeaseKey> = detached.iter().map(|(key, _)| key.clone()).collect();
    let sent_at = Instant::now();
    let answered = bounded(timeout, async { Ok(store.release_many(&keys).await) }).await;
    // A store answering another number of leases than it was asked is broken; the
    // built-in stores never are (so this guard's mutant survives).
    let results = match answered {
        Ok(results) if results.len() == keys.len() => results,
        Ok(_) => vec![
            Err(StoreError::backend(
                "release_many answered a different number of leases"
            ));
            keys.len()
        ],
        Err(error) => vec![Err(error); keys.len()],
    };
    for ((key, actor), result) in detached.into_iter().zip(results) {
        let error = match &result {
            Ok(ReleaseOutcome::NotOwner) => Some(LockError::Lost(LossReason::Superseded)),
            Err(error) => Some(LockError::Store(error.clone())),
            Ok(_) => None,
        };
        first_error = first_error.or(error);
        let _ = actor.send_message(LockMsg::ReleaseDone {
            lease: key.lease,
            sent_at,
            result,
        });
    }
    first_error.map_or(Ok(()), Err)
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        self.forwarder.abort();
        self.status.release_shared();
        if self.members.is_empty() {
            return;
        }
        let members = std::mem::take(&mut self.members);
        match tokio::runtime::Handle::try_current() {
            Ok(_) => {
                let (store, timeout) = (self.store.clone(), self.release_timeout);
                self.cleanups.spawn(timeout, async move {
                    // Nobody waits for the answer: each actor is told it.
                    let _ = release_members(members, store, timeout).await;
                });
            }
            // Outside a runtime each member releases itself through its actor.
            Err(_) => drop(members),
        }
    }
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("members", &self.members)
            .field("lost", &self.loss())
            .finish()
    }
}
