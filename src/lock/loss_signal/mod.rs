//! The loss protocol, both halves in one place: the runtime's private sending half
//! ([`HoldStatusSender`]) and the public receiving half ([`LossSignal`]), with the warning
//! that comes before a loss ([`AtRisk`]).
//!
//! While held, a hold may be **at risk**: a renewal came back unconfirmed (an error, or no
//! answer in time), or has gone unanswered for half the time it had until the deadline (a
//! store that stopped answering), and the loss deadline is still ahead. It recovers when a
//! renewal is confirmed, or ends in a loss at the deadline.
//!
//! A hold ends in exactly one of two ways. A **release** (by the guard, or by the runtime
//! for a guard nobody holds) is never a loss: receivers stay pending forever. Anything else —
//! a takeover, the renew deadline, shutdown, or the runtime actor dying with the hold live —
//! is a **loss** with its [`LossReason`]. A sender dropped while the hold is still live (the
//! actor panicked) reads as [`LossReason::RuntimeFailed`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ractor::{ActorRef, Message};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::LossReason;

#[derive(Debug, Clone, PartialEq, Eq)]
enum HoldStatus {
    Held,
    AtRisk(AtRisk),
    Lost(LossReason),
    Released,
}

impl HoldStatus {
    fn is_live(&self) -> bool {
        matches!(self, Self::Held | Self::AtRisk(_))
    }
}

/// When the last confirmed acquire or renewal was sent. Every write is one assignment: a
/// poisoned lock still holds a consistent instant.
fn confirmed(at: &Mutex<Instant>) -> MutexGuard<'_, Instant> {
    at.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A held lock whose renewals are failing: the last renewal came back unconfirmed (the
/// store failed or did not answer in time) and the loss deadline is still ahead. Unless a
/// renewal is confirmed before [`deadline`](Self::deadline), the holder is told of a loss
/// then. A warning, not a loss: the lock is still held, and nobody else can be granted it
/// before the deadline plus the loss margin.
///
/// The example fails renewals with the `testing` feature's store.
///
#[cfg_attr(feature = "testing", doc = "```")]
#[cfg_attr(not(feature = "testing"), doc = "```ignore")]
/// use mongolock::testing::FaultyStore;
/// use mongolock::{LockManager, LockOptions, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), mongolock::LockError> {
/// let store = FaultyStore::new(MemoryStore::new());
/// let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// store.fail(); // the next renewal fails
/// let risk = guard.at_risk().await;
/// assert!(risk.time_left() <= LockOptions::default().renew_deadline());
/// println!("renewals failing ({:?}); lost in {:?} unless the store answers", risk.last_error(), risk.time_left());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtRisk {
    pub(crate) since: Instant,
    pub(crate) deadline: Instant,
    pub(crate) last_error: Option<String>,
}

impl AtRisk {
    /// When the first unconfirmed renewal came back, or went unanswered too long.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// When the holder will be told of a loss unless a renewal is confirmed first.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// How long until [`deadline`](Self::deadline), from now.
    pub fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The last error the store reported, if it reported one (a renewal that timed out
    /// reports none).
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

/// How a live hold's state changed, for the campaigns that publish it.
#[derive(Debug, Clone)]
pub(crate) enum HoldChange {
    AtRisk(AtRisk),
    Recovered,
    Lost(LossReason),
}

/// The runtime's half: owned by the hold, it says once how the hold ended.
#[derive(Debug)]
pub(crate) struct HoldStatusSender {
    status: watch::Sender<HoldStatus>,
    confirmed: Arc<Mutex<Instant>>,
    /// How long after the last confirmed send the hold is lost (`None`: a combination of
    /// holds, each with its own).
    renew_deadline: Option<Duration>,
}

impl HoldStatusSender {
    /// A live hold whose acquisition was sent at `sent_at`.
    pub(crate) fn new(sent_at: Instant) -> Self {
        Self {
            status: watch::channel(HoldStatus::Held).0,
            confirmed: Arc::new(Mutex::new(sent_at)),
            renew_deadline: None,
        }
    }

    /// The hold is lost `renew_deadline` after its last confirmed send, which its guards
    /// can then tell by themselves (see [`LossSignal::deadline_passed`]).
    pub(crate) fn with_renew_deadline(mut self, renew_deadline: Duration) -> Self {
        self.renew_deadline = Some(renew_deadline);
        self
    }

    /// The sender for the next hold of the same lease (passed to a local waiter): it starts
    /// from this one's last confirmed renewal.
    pub(crate) fn successor(&self) -> Self {
        Self {
            renew_deadline: self.renew_deadline,
            ..Self::new(*confirmed(&self.confirmed))
        }
    }

    /// A receiving half for a guard or a watcher.
    pub(crate) fn subscribe(&self) -> LossSignal {
        LossSignal {
            receiver: self.status.subscribe(),
            confirmed: self.confirmed.clone(),
            renew_deadline: self.renew_deadline,
        }
    }

    /// A renewal sent at `sent_at` was confirmed.
    pub(crate) fn confirmed(&self, sent_at: Instant) {
        let mut confirmed = confirmed(&self.confirmed);
        *confirmed = (*confirmed).max(sent_at);
    }

    /// Renewals are failing: the hold is at risk (or still is, with a newer error).
    pub(crate) fn at_risk(&self, risk: AtRisk) {
        self.replace_if(HoldStatus::is_live, HoldStatus::AtRisk(risk));
    }

    /// Moves the status to `next` if it `applies` to the current one. Called with
    /// [`HoldStatus::is_live`], an ended status stays as it ended (for a shared sender,
    /// whichever end comes first stays).
    fn replace_if(&self, applies: fn(&HoldStatus) -> bool, next: HoldStatus) {
        self.status.send_if_modified(|status| {
            let applies = applies(status);
            if applies {
                *status = next;
            }
            applies
        });
    }

    /// A renewal was confirmed after the hold was at risk.
    pub(crate) fn recovered(&self) {
        let at_risk = |status: &_| matches!(status, HoldStatus::AtRisk(_));
        self.replace_if(at_risk, HoldStatus::Held);
    }

    /// The hold was lost: every receiver resolves with `reason`.
    pub(crate) fn lost(&self, reason: LossReason) {
        self.status.send_replace(HoldStatus::Lost(reason));
    }

    /// Resolves once every receiver is gone: the guard was dropped or released (and so were
    /// the loss signals cloned from it), so nobody acts on the hold any more. A loss is
    /// acknowledged this way.
    pub(crate) async fn acknowledged(&self) {
        self.status.closed().await;
    }

    /// Ends a live status as released, for a sender that is shared (a multi-lock's, which
    /// a forwarding task may also end with a loss): whichever comes first stays.
    pub(crate) fn release_shared(&self) {
        self.replace_if(HoldStatus::is_live, HoldStatus::Released);
    }

    /// Makes this status the combination of `members`' (a multi-lock's): lost as soon as any
    /// member is lost (with the first loss seen), at risk while any is at risk (with the
    /// warning whose deadline comes first: the loss that would come first), held again once
    /// none is. Returns once this status is lost, or once every member has ended without a
    /// loss.
    pub(crate) async fn follow_all(&self, members: Vec<LossSignal>) {
        let mut receivers: Vec<_> = members.into_iter().map(|member| member.receiver).collect();
        let mut told: Option<AtRisk> = None;
        loop {
            let statuses: Vec<HoldStatus> = receivers
                .iter_mut()
                .map(|receiver| receiver.borrow_and_update().clone())
                .collect();
            let mut risks = Vec::new();
            for status in statuses {
                match status {
                    HoldStatus::Lost(reason) => {
                        return self.replace_if(HoldStatus::is_live, HoldStatus::Lost(reason));
                    }
                    HoldStatus::AtRisk(member) => risks.push(member),
                    HoldStatus::Held | HoldStatus::Released => {}
                }
            }
            let risk = risks.into_iter().min_by_key(|member| member.deadline);
            if risk != told {
                match &risk {
                    Some(risk) => self.at_risk(risk.clone()),
                    None => self.recovered(),
                }
                told = risk;
            }
            if receivers.is_empty() {
                return;
            }
            let changes = receivers
                .iter_mut()
                .map(|receiver| Box::pin(receiver.changed()));
            let (changed, index, _) = futures::future::select_all(changes).await;
            if changed.is_err() {
                // That member's sender is gone: with its hold live, its actor failed (a
                // loss, as `ended` reads it); otherwise it has nothing more to say.
                // (A release of the combination that came first stays.)
                if receivers[index].borrow().is_live() {
                    let failed = HoldStatus::Lost(LossReason::RuntimeFailed);
                    return self.replace_if(HoldStatus::is_live, failed);
                }
                receivers.swap_remove(index);
            }
        }
    }

    /// The hold was released: receivers never resolve.
    pub(crate) fn released(self) {
        self.status.send_replace(HoldStatus::Released);
    }
}

/// A cloneable, owned view of one hold's loss notification: the same signal as
/// [`LockGuard::lost`](super::guard::LockGuard::lost), usable from other tasks and actors while the
/// guard stays where it is.
///
/// ```
/// use mongolock::{LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// let signal = guard.loss_signal();
/// let watcher = tokio::spawn(async move { signal.lost().await });
/// manager.shutdown().await;
/// assert_eq!(watcher.await.unwrap(), mongolock::LossReason::Shutdown);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LossSignal {
    receiver: watch::Receiver<HoldStatus>,
    /// When the last confirmed acquire or renewal was sent.
    confirmed: Arc<Mutex<Instant>>,
    renew_deadline: Option<Duration>,
}

impl LossSignal {
    /// When the last acquire or renewal the store confirmed was sent.
    pub(crate) fn last_confirmed(&self) -> Instant {
        *confirmed(&self.confirmed)
    }

    /// Whether the hold's loss deadline has passed, whether or not the runtime has said so
    /// yet: a process paused past it resumes with its tasks in no particular order.
    pub(crate) fn deadline_passed(&self) -> bool {
        self.renew_deadline
            .is_some_and(|deadline| Instant::now() >= self.last_confirmed() + deadline)
    }

    /// Resolves when the hold is lost, with the reason; never while it is held. Resolves at
    /// once if it is already lost. A manual release is not a loss.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing, and a later call sees the same loss.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// let signal = guard.loss_signal();
    /// assert!(tokio::time::timeout(Duration::from_millis(5), signal.lost()).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) -> LossReason {
        match self.ended().await {
            Some(reason) => reason,
            // Released: never lost, so never resolves.
            None => std::future::pending().await,
        }
    }

    /// Resolves when the hold ends: `Some(reason)` for a loss, `None` for a release.
    async fn ended(&self) -> Option<LossReason> {
        match self.first(|status| !status.is_live()).await {
            Ok(HoldStatus::Lost(reason)) => Some(reason),
            Ok(_) => None,
            // The sender is gone while the hold was live (an ended status it sent is seen
            // first): the actor failed.
            Err(_) => Some(LossReason::RuntimeFailed),
        }
    }

    /// The first status, now or later, that is `wanted`; `Err` with the last status if the
    /// sender is gone first.
    async fn first(
        &self,
        wanted: impl FnMut(&HoldStatus) -> bool,
    ) -> Result<HoldStatus, HoldStatus> {
        let mut receiver = self.receiver.clone();
        let seen = receiver.wait_for(wanted).await.map(|status| status.clone());
        seen.map_err(|_| receiver.borrow().clone())
    }

    /// The renewal trouble of the hold, if it is at risk now (see [`AtRisk`]).
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert_eq!(guard.loss_signal().risk(), None);
    /// # Ok(()) }
    /// ```
    pub fn risk(&self) -> Option<AtRisk> {
        match &*self.receiver.borrow() {
            HoldStatus::AtRisk(risk) => Some(risk.clone()),
            _ => None,
        }
    }

    /// Resolves when the hold is at risk — its renewals are failing and the loss deadline
    /// is still ahead — at once if it is now; never once the hold has ended (a loss without
    /// a warning first, such as a takeover, resolves only [`lost`](Self::lost)).
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
    /// let signal = guard.loss_signal();
    /// tokio::select! {
    ///     risk = signal.at_risk() => eprintln!("slowing down: lost in {:?} unless renewed", risk.time_left()),
    ///     reason = signal.lost() => eprintln!("lost: {reason}"),
    ///     () = tokio::time::sleep(Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn at_risk(&self) -> AtRisk {
        let seen =
            self.first(|status| matches!(status, HoldStatus::AtRisk(_)) || !status.is_live());
        match seen.await {
            Ok(HoldStatus::AtRisk(risk)) => risk,
            _ => std::future::pending().await,
        }
    }

    /// Resolves when the hold is held and not at risk — at once if it is now, else when a
    /// renewal is confirmed after failing ones; never once the hold has ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// guard.loss_signal().recovered().await; // not at risk: at once
    /// # Ok(()) }
    /// ```
    pub async fn recovered(&self) {
        let seen = self.first(|status| !matches!(status, HoldStatus::AtRisk(_)));
        if !matches!(seen.await, Ok(HoldStatus::Held)) {
            std::future::pending::<()>().await;
        }
    }

    /// Sends `to_message(change)` to `actor` for every change of a live hold — at risk,
    /// recovered, lost — until it ends; for the campaigns that publish them as events.
    pub(crate) fn forward_changes<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl Fn(HoldChange) -> M + Send + 'static,
    ) {
        let (mut receiver, actor) = (self.receiver.clone(), actor.clone());
        tokio::spawn(async move {
            let mut was_at_risk = false;
            loop {
                let changed = receiver.changed().await;
                let status = receiver.borrow_and_update().clone();
                let change = match (changed, status) {
                    // The sender is gone while the hold was live (an ended status it sent
                    // is seen first, and ends this task): the actor failed.
                    (Err(_), _) => HoldChange::Lost(LossReason::RuntimeFailed),
                    (Ok(()), HoldStatus::Released) => return,
                    (Ok(()), HoldStatus::Lost(reason)) => HoldChange::Lost(reason),
                    (Ok(()), HoldStatus::AtRisk(risk)) => HoldChange::AtRisk(risk),
                    (Ok(()), HoldStatus::Held) if was_at_risk => HoldChange::Recovered,
                    (Ok(()), HoldStatus::Held) => continue,
                };
                was_at_risk = matches!(change, HoldChange::AtRisk(_));
                let ended = matches!(change, HoldChange::Lost(_));
                if actor.send_message(to_message(change)).is_err() || ended {
                    return;
                }
            }
        });
    }

    /// The loss reason if the hold is already lost, without waiting.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// assert_eq!(guard.loss_signal().loss(), None);
    /// # Ok(()) }
    /// ```
    pub fn loss(&self) -> Option<LossReason> {
        match &*self.receiver.borrow() {
            HoldStatus::Lost(reason) => Some(reason.clone()),
            HoldStatus::Released => None,
            HoldStatus::Held | HoldStatus::AtRisk(_) => self
                .receiver
                .has_changed()
                .is_err()
                .then_some(LossReason::RuntimeFailed),
        }
    }

    /// Sends `to_message(reason)` to `actor` when the hold is lost (never on release). The
    /// wait runs on its own task: a slow or stopped actor delays nothing, renewal included.
    ///
    /// ```
    /// # use mongolock::{LockManager, LockOptions, LossReason, MemoryStore};
    /// use ractor::{Actor, ActorProcessingErr, ActorRef};
    ///
    /// struct Worker;
    /// enum WorkerMsg { LockLost(LossReason) }
    ///
    /// impl Actor for Worker {
    ///     type Msg = WorkerMsg;
    ///     type State = ();
    ///     type Arguments = ();
    ///     async fn pre_start(&self, _: ActorRef<WorkerMsg>, _: ()) -> Result<(), ActorProcessingErr> { Ok(()) }
    ///     async fn handle(&self, me: ActorRef<WorkerMsg>, msg: WorkerMsg, _: &mut ()) -> Result<(), ActorProcessingErr> {
    ///         let WorkerMsg::LockLost(reason) = msg;
    ///         println!("stopping: {reason}");
    ///         me.stop(None);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let (worker, stopped) = Actor::spawn(None, Worker, ()).await?;
    /// let guard = manager.lock("orders")?.acquire().await?;
    /// guard.notify(&worker, WorkerMsg::LockLost);
    /// manager.shutdown().await; // a loss (Shutdown) for the guard
    /// stopped.await?;
    /// # Ok(()) }
    /// ```
    pub fn notify<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl FnOnce(LossReason) -> M + Send + 'static,
    ) {
        let (signal, actor) = (self.clone(), actor.clone());
        tokio::spawn(async move {
            // Ends on release too, so a released hold leaves no task waiting forever.
            if let Some(reason) = signal.ended().await {
                let _ = actor.send_message(to_message(reason));
            }
        });
    }
}

#[cfg(test)]
mod tests;
