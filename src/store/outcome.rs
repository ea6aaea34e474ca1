use std::time::Duration;

use super::request::HolderId;
use crate::kind::{Access, LockKind};

/// The answer to an acquisition attempt.
///
/// ```
/// use mongolock::store::AcquireOutcome;
/// let outcome = AcquireOutcome::acquired(7);
/// assert!(matches!(outcome, AcquireOutcome::Acquired { token: 7, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireOutcome {
    /// The attempt's lease now owns the lock, with this fencing token. Tokens for one name
    /// strictly increase across every grant the store ever makes.
    Acquired {
        /// The fencing token of this grant.
        token: u64,
        /// For a read granted in arrival order: the requesting manager's other readers
        /// that had waited longer than this when the request was sent arrived before every
        /// other manager's writer in line (by the store's clock, as the request's `waited`
        /// tells it), so they may share this grant without overtaking one.
        /// `Some(Duration::ZERO)`: no other manager's writer was in line. `None`: nobody
        /// may share it (any other grant, or a store that does not say).
        readers_waited_over: Option<Duration>,
    },
    /// Someone else holds an unexpired lease (not an error: try again later). The store
    /// records that the current grant is contended.
    Busy {
        /// The current holder, when the store knows it.
        holder: Option<HolderId>,
        /// How long the lease that refused the attempt had left, by the store's clock, when
        /// the store knows it: a mutex's; on a shared record, that of the unexpired holder
        /// whose lease ends first (the first place that may come free without a release),
        /// `None` when no holder is left (refused by the line). A waiter told of releases
        /// by the store's feed need not ask again before then.
        lease_left: Option<Duration>,
    },
}

impl AcquireOutcome {
    /// A refusal naming `holder` (if known), with no lease time known.
    ///
    /// ```
    /// use mongolock::store::AcquireOutcome;
    /// let outcome = AcquireOutcome::busy(None);
    /// assert_eq!(outcome, AcquireOutcome::Busy { holder: None, lease_left: None });
    /// ```
    pub fn busy(holder: Option<HolderId>) -> Self {
        Self::Busy {
            holder,
            lease_left: None,
        }
    }

    /// A grant with this fencing token, that no other reader may share.
    ///
    /// ```
    /// use mongolock::store::AcquireOutcome;
    /// let outcome = AcquireOutcome::acquired(3);
    /// assert_eq!(outcome, AcquireOutcome::Acquired { token: 3, readers_waited_over: None });
    /// ```
    pub fn acquired(token: u64) -> Self {
        Self::Acquired {
            token,
            readers_waited_over: None,
        }
    }
}

/// The answer to a hand-over from one lease of a manager to the next
/// ([`LockStore::hand_over`](super::LockStore::hand_over)).
///
/// ```
/// use mongolock::store::HandOverOutcome;
/// let outcome = HandOverOutcome::HandedOver { token: 8, contended_for: None };
/// assert!(matches!(outcome, HandOverOutcome::HandedOver { token: 8, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandOverOutcome {
    /// The new lease owns the lock, with this (larger) fencing token; the lock was never
    /// free in between.
    HandedOver {
        /// The fencing token of the new lease.
        token: u64,
        /// How long other managers have been trying to take the lock, if they have.
        contended_for: Option<Duration>,
    },
    /// The old lease was released but the new one did not get the lock: a backend that
    /// hands over in two steps lost the race in between, or on a shared record the grant
    /// rules refused the new lease (a lowered count, a writer waiting elsewhere).
    Released {
        /// How long other managers had been trying to take the lock, if they had.
        contended_for: Option<Duration>,
    },
    /// The record no longer carried the old lease (it expired and was taken over, or was
    /// deleted): nothing changed.
    NotOwner,
}

/// The answer to an owner-checked extension.
///
/// ```
/// use mongolock::store::ExtendOutcome;
/// assert_ne!(ExtendOutcome::Extended, ExtendOutcome::NotOwner);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtendOutcome {
    /// The lease still belonged to the caller and now lasts a full expiry from the store's "now".
    Extended,
    /// The record no longer carries the caller's lease (taken over, released or deleted).
    NotOwner,
    /// The record no longer carries the caller's lease because an operator force-released
    /// it (the record's trace of the forced release names the lease). A store that cannot
    /// tell answers [`NotOwner`](Self::NotOwner) instead; the holder loses the lock either
    /// way, this only names the reason ([`LossReason::ForceReleased`](crate::LossReason::ForceReleased)).
    ForceReleased,
}

/// The answer to an owner-checked release.
///
/// ```
/// use mongolock::store::ReleaseOutcome;
/// assert_ne!(ReleaseOutcome::Released { contended_for: None }, ReleaseOutcome::NotOwner);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// The caller's lease was removed; the lock is free.
    Released {
        /// How long other managers had been trying to take the lock when it was released
        /// (`None`: nobody tried during this grant). When others have waited longer than a
        /// backoff interval, the runtime lets them have a turn before its own waiters.
        contended_for: Option<Duration>,
    },
    /// The record did not carry the caller's lease: nothing was changed.
    NotOwner,
}

/// What a store knows about one lock, for inspection (dashboards, the CLI, "who holds this?").
///
/// One shape for every kind: [`holders`](Self::holders) lists each unexpired holding (the
/// one holder of a held mutex, a semaphore's permit holders, a reader/writer lock's readers
/// or its writer), and [`holder`](Self::holder), [`expires_in`](Self::expires_in),
/// [`is_held`](Self::is_held) and [`held_count`](Self::held_count) are derived from it.
///
/// ```
/// use mongolock::LockRecord;
/// let record = LockRecord::free(3);
/// assert!(!record.is_held());
/// assert_eq!((record.holder(), record.token, record.expires_in()), (None, 3, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockRecord {
    /// The fencing token of the last grant for this name (0 when the store no longer
    /// remembers it), held or not. Local holders the grant's lease passed to without a store
    /// call have the tokens after it (see
    /// [`LockStore::tokens_per_grant`](crate::store::LockStore::tokens_per_grant)).
    pub token: u64,
    /// How long other managers have been trying to take the held lock (since their first
    /// failed attempt during the current grant), `None` when free or uncontended.
    pub contended_for: Option<Duration>,
    /// What kind of lock the name is.
    pub kind: LockKind,
    /// Every unexpired holding, earliest grant first: empty when the lock is free.
    pub holders: Vec<Holding>,
    /// The processes waiting in line for it in arrival order
    /// ([`Fairness::ArrivalOrder`](crate::Fairness::ArrivalOrder)), earliest first: one
    /// entry per manager, for its longest-waiting task. Empty when nobody waits in line
    /// (waiters of the default mode are not listed).
    ///
    /// It is the line of *other* processes, not every waiting task: a manager that holds the
    /// lock keeps its own waiters in the process (it asks for them at each hand-over, with
    /// their own arrival) and has no place in the line while it holds, and a manager's
    /// later tasks wait behind its listed one. So the next grant may go to a task of the
    /// holder's own process that asked before the first one listed here; to count every
    /// waiting task, sum `mongolock_waiters` across processes.
    pub queue: Vec<QueuedWaiter>,
}

/// One manager waiting in line for a lock, as [`LockRecord::queue`] lists it.
///
/// ```
/// use mongolock::{Access, HolderId, QueuedWaiter};
/// use std::time::Duration;
/// let waiter = QueuedWaiter::new(HolderId::from_string("web-2".into()), Access::Exclusive, Duration::from_millis(40));
/// assert_eq!(waiter.waiting_for, Duration::from_millis(40));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// The manager instance whose task waits.
    pub holder: HolderId,
    /// What it waits for.
    pub access: Access,
    /// How long its longest-waiting task has waited, by the store's clock.
    pub waiting_for: Duration,
}

impl QueuedWaiter {
    /// `holder` waiting for `access` since `waiting_for` ago.
    ///
    /// ```
    /// use mongolock::{Access, HolderId, QueuedWaiter};
    /// use std::time::Duration;
    /// let waiter = QueuedWaiter::new(HolderId::from_string("a".into()), Access::Exclusive, Duration::ZERO);
    /// assert_eq!(waiter.holder.as_str(), "a");
    /// ```
    pub fn new(holder: HolderId, access: Access, waiting_for: Duration) -> Self {
        Self {
            holder,
            access,
            waiting_for,
        }
    }
}

/// One unexpired holding of a lock, as [`LockRecord::holders`] lists it.
///
/// ```
/// use mongolock::{Access, HolderId, Holding};
/// use std::time::Duration;
/// let holding = Holding::new(HolderId::from_string("web-1".into()), 41, Access::Read, Duration::from_secs(9));
/// assert_eq!(holding.access, Access::Read);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holding {
    /// The manager instance holding it.
    pub holder: HolderId,
    /// The fencing token of its grant.
    pub token: u64,
    /// What it holds.
    pub access: Access,
    /// Time left on its lease by the store's clock.
    pub expires_in: Duration,
}

impl Holding {
    /// A holding of `access` by `holder` under `token`, with `expires_in` left.
    ///
    /// ```
    /// use mongolock::{Access, HolderId, Holding};
    /// use std::time::Duration;
    /// let holding = Holding::new(HolderId::from_string("a".into()), 7, Access::Exclusive, Duration::from_secs(1));
    /// assert_eq!(holding.token, 7);
    /// ```
    pub fn new(holder: HolderId, token: u64, access: Access, expires_in: Duration) -> Self {
        Self {
            holder,
            token,
            access,
            expires_in,
        }
    }
}

impl LockRecord {
    /// A free lock whose last token was `token`.
    ///
    /// ```
    /// let record = mongolock::LockRecord::free(3);
    /// assert_eq!((record.holder(), record.token, record.expires_in()), (None, 3, None));
    /// ```
    pub fn free(token: u64) -> Self {
        Self {
            token,
            contended_for: None,
            kind: LockKind::Mutex,
            holders: Vec::new(),
            queue: Vec::new(),
        }
    }

    /// A mutex held by `holder` under `token`, with `expires_in` left on the lease.
    ///
    /// ```
    /// use mongolock::HolderId;
    /// use mongolock::LockRecord;
    /// use std::time::Duration;
    /// let record = LockRecord::held(HolderId::from_string("web1".into()), 7, Duration::from_secs(3))
    ///     .with_contended_for(Duration::from_secs(1));
    /// assert!(record.is_held());
    /// assert_eq!(record.holder().map(|h| h.as_str()), Some("web1"));
    /// assert_eq!(record.contended_for, Some(Duration::from_secs(1)));
    /// ```
    pub fn held(holder: HolderId, token: u64, expires_in: Duration) -> Self {
        Self {
            holders: vec![Holding::new(holder, token, Access::Exclusive, expires_in)],
            token,
            contended_for: None,
            kind: LockKind::Mutex,
            queue: Vec::new(),
        }
    }

    /// The record of a shared lock of `kind` (a semaphore or a reader/writer lock) whose last
    /// grant had `token`, held by `holders` (unexpired, earliest grant first).
    ///
    /// ```
    /// use mongolock::{Access, HolderId, Holding, LockKind, LockRecord};
    /// use std::time::Duration;
    /// let reader = |id: &str, token, secs| {
    ///     Holding::new(HolderId::from_string(id.into()), token, Access::Read, Duration::from_secs(secs))
    /// };
    /// let record = LockRecord::shared(LockKind::ReadWrite, 12, vec![reader("a", 9, 3), reader("b", 12, 7)]);
    /// assert_eq!(record.holder().map(|h| h.as_str()), Some("a"));
    /// assert_eq!(record.expires_in(), Some(Duration::from_secs(7)));
    /// assert!(!LockRecord::shared(LockKind::ReadWrite, 12, vec![]).is_held());
    /// ```
    pub fn shared(kind: LockKind, token: u64, holders: Vec<Holding>) -> Self {
        Self {
            token,
            contended_for: None,
            kind,
            holders,
            queue: Vec::new(),
        }
    }

    /// The manager instance of the earliest unexpired holding (a mutex's one holder), `None`
    /// when the lock is free.
    pub fn holder(&self) -> Option<&HolderId> {
        self.holders.first().map(|holding| &holding.holder)
    }

    /// The longest time left on any holding's lease by the store's clock (when the last of
    /// them runs out if nobody renews), `None` when free.
    pub fn expires_in(&self) -> Option<Duration> {
        self.holders.iter().map(|holding| holding.expires_in).max()
    }

    /// How many permits (or, for a reader/writer lock, read or write holdings) are held.
    ///
    /// ```
    /// assert_eq!(mongolock::LockRecord::free(1).held_count(), 0);
    /// ```
    pub fn held_count(&self) -> usize {
        self.holders.len()
    }

    /// Sets how long other managers have been trying to take the held lock.
    ///
    /// ```
    /// use mongolock::LockRecord;
    /// use std::time::Duration;
    /// let record = LockRecord::free(1).with_contended_for(Duration::from_secs(1));
    /// assert_eq!(record.contended_for, Some(Duration::from_secs(1)));
    /// ```
    pub fn with_contended_for(mut self, waited: Duration) -> Self {
        self.contended_for = Some(waited);
        self
    }

    /// Sets the line of managers waiting in arrival order (earliest first).
    ///
    /// ```
    /// use mongolock::{Access, HolderId, LockRecord, QueuedWaiter};
    /// use std::time::Duration;
    /// let waiter = QueuedWaiter::new(HolderId::from_string("b".into()), Access::Exclusive, Duration::from_secs(2));
    /// let record = LockRecord::free(4).with_queue(vec![waiter]);
    /// assert_eq!(record.queue.len(), 1);
    /// ```
    pub fn with_queue(mut self, queue: Vec<QueuedWaiter>) -> Self {
        self.queue = queue;
        self
    }

    /// Whether an unexpired lease holds the lock.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}
