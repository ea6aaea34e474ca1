//! Both ends of the link between a store's release feed and the waiters that want it: the
//! runtime's end ([`ReleaseWaiters`]) counts its lock actors waiting for another process to
//! release, and the store's end ([`ReleaseDemand`]) lets a feed that costs something (a
//! change stream's `getMore` per event) run only while anyone is waiting, and say when it
//! starts watching, so the waiters retry once for releases it could not have seen.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::request::HolderId;

/// The store's end: whether this manager has waiters for a release, and where to say that
/// the feed started watching. Handed to [`LockStore::watch_releases`](super::LockStore::watch_releases).
///
/// A feed that is free to run may ignore it; one that costs something should watch only
/// while [`wanted`](Self::wanted) and call [`watching`](Self::watching) each time it
/// (re)starts, because releases while it was not watching were not reported.
///
/// ```
/// use mongolock::store::ReleaseDemand;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let demand = ReleaseDemand::always();
/// demand.wanted().await; // at once: someone is always waiting
/// demand.watching();
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ReleaseDemand {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Lock actors of this manager waiting for another process to release.
    waiting: watch::Sender<usize>,
    /// How many times the feed (re)started watching.
    feed_starts: watch::Sender<u64>,
    /// Whether the feed is watching now: its waiters may then wait quietly for a release
    /// (or their lease's end) rather than poll.
    live: watch::Sender<bool>,
    /// The manager whose waiters the feed serves: a release that wakes only the manager
    /// that waited longest is reported to that manager's feed alone. `None`: every release.
    holder: Option<HolderId>,
}

impl Shared {
    fn with_waiting(waiting: usize, holder: Option<HolderId>) -> Self {
        Self {
            waiting: watch::Sender::new(waiting),
            feed_starts: watch::Sender::new(0),
            live: watch::Sender::new(false),
            holder,
        }
    }
}

impl ReleaseDemand {
    /// A demand with one waiter forever, for running a store's feed outside a manager.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// mongolock::store::ReleaseDemand::always().wanted().await;
    /// # }
    /// ```
    pub fn always() -> Self {
        Self {
            shared: Arc::new(Shared::with_waiting(1, None)),
        }
    }

    /// A demand with one waiter forever, for the releases meant for `holder`'s waiters:
    /// those that wake every manager, and those that wake `holder` in particular (a
    /// mutex's release wakes the manager that has waited longest).
    ///
    /// ```
    /// use mongolock::{HolderId, store::ReleaseDemand};
    /// let holder = HolderId::generate();
    /// assert_eq!(ReleaseDemand::for_holder(holder.clone()).holder(), Some(&holder));
    /// assert_eq!(ReleaseDemand::always().holder(), None);
    /// ```
    pub fn for_holder(holder: HolderId) -> Self {
        Self {
            shared: Arc::new(Shared::with_waiting(1, Some(holder))),
        }
    }

    /// The manager the feed serves (`None`: it reports every release). A store whose
    /// releases name whom they wake reports to this feed only the releases naming this
    /// holder, beside those that wake everyone.
    ///
    /// ```
    /// assert!(mongolock::store::ReleaseDemand::always().holder().is_none());
    /// ```
    pub fn holder(&self) -> Option<&HolderId> {
        self.shared.holder.as_ref()
    }

    /// Resolves once at least one waiter wants to hear of releases (at once if one does).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes a count.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// mongolock::store::ReleaseDemand::always().wanted().await;
    /// # }
    /// ```
    pub async fn wanted(&self) {
        let mut waiting = self.shared.waiting.subscribe();
        // The sender lives in `shared`, which `self` keeps alive: this cannot fail.
        let _ = waiting.wait_for(|waiting| *waiting > 0).await;
    }

    /// Resolves once nobody has wanted releases for `linger` in a row.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes a count.
    ///
    /// ```
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let demand = mongolock::store::ReleaseDemand::always();
    /// let never = tokio::time::timeout(Duration::from_secs(60), demand.unwanted_for(Duration::from_secs(1)));
    /// assert!(never.await.is_err(), "someone always waits");
    /// # }
    /// ```
    pub async fn unwanted_for(&self, linger: Duration) {
        let mut waiting = self.shared.waiting.subscribe();
        loop {
            let _ = waiting.wait_for(|waiting| *waiting == 0).await;
            tokio::select! {
                biased;
                _ = waiting.changed() => {}
                () = tokio::time::sleep(linger) => return,
            }
        }
    }

    /// Says the feed (re)started watching, or may have missed releases (everything was
    /// freed at once, as when the lock collection is dropped): every waiter tries once more.
    ///
    /// ```
    /// mongolock::store::ReleaseDemand::always().watching();
    /// ```
    pub fn watching(&self) {
        self.shared.live.send_replace(true);
        self.shared.feed_starts.send_modify(|starts| *starts += 1);
    }

    /// Says the feed stopped watching (its stream broke or closed, or cannot be opened):
    /// until it says [`watching`](Self::watching) again, waiters poll, and those that
    /// were waiting quietly for it ask again at once.
    ///
    /// ```
    /// mongolock::store::ReleaseDemand::always().not_watching();
    /// ```
    pub fn not_watching(&self) {
        self.shared
            .live
            .send_if_modified(|live| std::mem::replace(live, false));
    }
}

/// The runtime's end: counts waiters and hears when the feed starts watching.
#[derive(Debug, Clone)]
pub(crate) struct ReleaseWaiters {
    shared: Arc<Shared>,
}

impl ReleaseWaiters {
    /// A linked pair with nobody waiting, for `holder`'s waiters.
    pub(crate) fn new(holder: HolderId) -> (Self, ReleaseDemand) {
        let shared = Arc::new(Shared::with_waiting(0, Some(holder)));
        (
            Self {
                shared: shared.clone(),
            },
            ReleaseDemand { shared },
        )
    }

    /// Counts one more waiter until the returned value is dropped.
    pub(crate) fn waiting(&self) -> WaitingForRelease {
        self.shared.waiting.send_modify(|waiting| *waiting += 1);
        WaitingForRelease {
            shared: self.shared.clone(),
        }
    }

    /// Changes each time the feed (re)starts watching.
    pub(crate) fn feed_starts(&self) -> watch::Receiver<u64> {
        self.shared.feed_starts.subscribe()
    }

    /// Whether the feed is watching now (see [`ReleaseDemand::not_watching`]).
    pub(crate) fn feed_live(&self) -> watch::Receiver<bool> {
        self.shared.live.subscribe()
    }

    /// Whether the feed is watching at this moment.
    pub(crate) fn is_feed_live(&self) -> bool {
        *self.shared.live.borrow()
    }
}

/// One waiter counted by [`ReleaseWaiters::waiting`], for as long as it lives.
#[derive(Debug)]
pub(crate) struct WaitingForRelease {
    shared: Arc<Shared>,
}

impl Drop for WaitingForRelease {
    fn drop(&mut self) {
        self.shared
            .waiting
            .send_modify(|waiting| *waiting = waiting.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn demand_follows_the_waiters_and_lingers() {
        let (waiters, demand) = ReleaseWaiters::new(HolderId::generate());
        let linger = Duration::from_secs(5);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), demand.wanted())
                .await
                .is_err(),
            "nobody waits yet"
        );
        let first = waiters.waiting();
        let second = waiters.waiting();
        demand.wanted().await;
        drop(first);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), demand.unwanted_for(linger))
                .await
                .is_err(),
            "one waiter is left"
        );
        drop(second);
        let started = tokio::time::Instant::now();
        demand.unwanted_for(linger).await;
        assert_eq!(started.elapsed(), linger);

        let starts = waiters.feed_starts();
        assert!(!waiters.is_feed_live());
        demand.watching();
        assert!(starts.has_changed().unwrap());
        assert!(waiters.is_feed_live());
        let mut live = waiters.feed_live();
        demand.not_watching();
        assert!(live.has_changed().unwrap() && !waiters.is_feed_live());
        live.mark_unchanged();
        demand.not_watching();
        assert!(!live.has_changed().unwrap(), "told once");
    }
}
