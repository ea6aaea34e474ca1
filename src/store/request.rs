use std::fmt;
use std::time::Duration;

use uuid::Uuid;

use crate::error::StoreError;
use crate::kind::{Access, MAX_PERMITS};
use crate::name::LockName;
use crate::options::MAX_LEASE_DURATION;

/// Refuses a lease length no lease can have — zero, or beyond [`MAX_LEASE_DURATION`] — before a
/// store writes anything: the runtime never asks for one (its options are validated), but
/// the store API is public.
pub(crate) fn check_lease_length(expiry: Duration) -> Result<(), StoreError> {
    // Rule 5.
    if expiry.is_zero() || expiry > MAX_LEASE_DURATION {
        return Err(StoreError::Rejected {
            message: format!(
                "a lease of {expiry:?} cannot be granted: it must be longer than zero and at most {MAX_LEASE_DURATION:?}"
            ),
            source: None,
        });
    }
    Ok(())
}

/// Refuses a semaphore count no record can have — 0, or above [`MAX_PERMITS`] — before a
/// store writes anything.
pub(crate) fn check_permits(permits: u32) -> Result<(), StoreError> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(StoreError::Rejected {
            message: format!(
                "a semaphore of {permits} permits cannot be created: it must have 1 to {MAX_PERMITS}"
            ),
            source: None,
        });
    }
    Ok(())
}

/// How long a refused requester's waiting mark lasts: its `retry_within`, up to
/// [`MAX_LEASE_DURATION`]. Nothing in a record outlasts the longest lease, and a requester
/// that says it may be back only after that (up to `Duration::MAX`) still gets an answer
/// instead of an overflow of the store's clock.
pub(crate) fn mark_length(retry_within: Duration) -> Duration {
    // Rule 5.
    retry_within.min(MAX_LEASE_DURATION)
}

/// How long a requester is counted as having waited: its `waited`, up to
/// [`MAX_LEASE_DURATION`], so that "the store's now minus `waited`" is a time the store's
/// clock can express (`Duration::MAX` would overflow it) and both stores agree on it.
pub(crate) fn wait_length(waited: Duration) -> Duration {
    // Rule 5.
    waited.min(MAX_LEASE_DURATION)
}

/// Refuses a hand-over that could not be a grant of `from`'s lock, before a store writes
/// anything (the old lease keeps its place): `to` must name the same lock, ask for a hold
/// of the same sort (a mutex's lease for a mutex, a shared place for a shared place), with
/// a lease length and a semaphore count a grant could have.
pub(crate) fn check_hand_over(from: &LeaseKey, to: &AcquireRequest) -> Result<(), StoreError> {
    check_lease_length(to.lease_duration)?;
    if let Access::Permit { permits } = to.access {
        check_permits(permits)?;
    }
    let rejected = |message: String| StoreError::Rejected {
        message,
        source: None,
    };
    if to.name != from.name {
        return Err(rejected(format!(
            "a hand-over passes one lock: the lease of {} cannot be handed to {}",
            from.name, to.name
        )));
    }
    if from.shared != to.access.kind().is_shared() {
        let sort = |shared: bool| {
            if shared {
                "a shared place"
            } else {
                "a mutex's lease"
            }
        };
        return Err(rejected(format!(
            "a hand-over passes a hold as it is: {} of {} cannot be handed to a request for {}",
            sort(from.shared),
            from.name,
            sort(to.access.kind().is_shared())
        )));
    }
    Ok(())
}

/// Identifies one grant of a lock: a fresh random id is sent with every acquisition attempt,
/// and extend/release only act on a record that still carries it (the owner check).
///
/// ```
/// use mongolock::store::LeaseId;
/// assert_ne!(LeaseId::new(), LeaseId::new());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId(Uuid);

impl LeaseId {
    /// A new random (v4) lease id.
    pub fn new() -> Self {
        // From the thread's seeded generator rather than a getrandom system call per lease:
        // ids must be unique, not secret, and one is made per acquisition.
        Self(uuid::Builder::from_random_bytes(crate::random::bytes16()).into_uuid())
    }

    /// The id as a UUID, for stores that persist it.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }

    /// Rebuilds a lease id a store persisted.
    pub fn from_uuid(id: Uuid) -> Self {
        Self(id)
    }
}

impl Default for LeaseId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Who holds a lock: the identity of a [`LockManager`](crate::LockManager) instance
/// (`host:pid:random`), shown by inspection so operators can tell which process holds what.
///
/// ```
/// use mongolock::HolderId;
/// let id = HolderId::generate();
/// let host = hostname::get()?; // what `hostname` prints
/// let expected = format!("{}:{}:", host.to_string_lossy(), std::process::id());
/// assert!(id.as_str().starts_with(&expected));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HolderId(String);

impl HolderId {
    /// `host:pid:xxxxxxxx` for this process: the operating system's host name (what
    /// `hostname` prints, on Linux, macOS, Windows and the other Unixes alike;
    /// `unknown-host` if it cannot be read or is empty), the process id, and a random suffix
    /// so two managers in one process are distinct.
    pub fn generate() -> Self {
        let host = hostname::get().unwrap_or_default();
        let host = host.to_string_lossy();
        let host = match host.trim() {
            "" => "unknown-host",
            host => host,
        };
        let suffix = &Uuid::new_v4().simple().to_string()[..8];
        Self(format!("{host}:{}:{suffix}", std::process::id()))
    }

    /// Wraps an identity read back from a store.
    pub fn from_string(id: String) -> Self {
        Self(id)
    }

    /// The identity as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HolderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An identity given as text, as [`HolderId::from_string`] wraps it: for tests, and for
/// comparing a record's holder with a known one.
///
/// ```
/// use mongolock::HolderId;
/// let id = HolderId::from("web-2:4711:9a8b7c6d");
/// assert_eq!(id.as_str(), "web-2:4711:9a8b7c6d");
/// assert_eq!(id, HolderId::from(String::from("web-2:4711:9a8b7c6d")));
/// ```
impl From<&str> for HolderId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

/// The identity `id`, as [`HolderId::from_string`] wraps it.
impl From<String> for HolderId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

/// One acquisition attempt: take `name` for `lease_duration` (measured by the store's clock) if it is
/// free or expired, recording `lease` and `holder`.
///
/// ```
/// use mongolock::store::{AcquireRequest, LeaseId};
/// use mongolock::HolderId;
/// use mongolock::LockName;
/// use std::time::Duration;
///
/// let request = AcquireRequest::new(
///     LockName::new("orders")?,
///     LeaseId::new(),
///     HolderId::generate(),
///     Duration::from_secs(30),
/// );
/// assert_eq!(request.name.as_str(), "orders");
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AcquireRequest {
    /// The lock to take.
    pub name: LockName,
    /// The fresh lease id this attempt writes.
    pub lease: LeaseId,
    /// The manager instance making the attempt.
    pub holder: HolderId,
    /// How long the lease lasts from the store's "now".
    pub lease_duration: Duration,
    /// How long this manager has already been trying to get the lock (zero for a first
    /// attempt). A relative duration, never a client timestamp: a store that finds the lock
    /// held records the longest such wait of the current grant (as its "now" minus
    /// `waited`), so the holder can tell when others are starving.
    pub waited: Duration,
    /// What the attempt asks for: the whole of a mutex (the default), a semaphore's permit,
    /// or a reader/writer lock's read or write side.
    pub access: Access,
    /// How soon this requester tries again if refused (a relative duration). A refused
    /// reader or writer of a reader/writer lock marks the record as waited for by its side
    /// until the store's "now" plus this, which holds the other side back (see the
    /// contract); zero leaves no mark. In arrival order it is also how long the
    /// requester's place in line lasts after a refusal.
    pub retry_within: Duration,
    /// Whether the requester waits in line ([`Fairness::ArrivalOrder`](crate::Fairness)):
    /// granted only if no other manager's live place in line is earlier than its arrival
    /// (the store's now minus `waited`), and placed in line if refused (see
    /// [`LockStore`](crate::store::LockStore)). A store that does not
    /// [keep arrival order](crate::store::LockStore::keeps_arrival_order) ignores it.
    pub in_arrival_order: bool,
}

impl AcquireRequest {
    /// A first attempt (`waited` zero).
    ///
    /// ```
    /// use mongolock::store::{AcquireRequest, LeaseId};
    /// use mongolock::HolderId;
    /// use mongolock::LockName;
    /// use std::time::Duration;
    ///
    /// let request = AcquireRequest::new(LockName::new("jobs")?, LeaseId::new(), HolderId::generate(), Duration::from_secs(5));
    /// assert_eq!(request.waited, Duration::ZERO);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn new(name: LockName, lease: LeaseId, holder: HolderId, lease_duration: Duration) -> Self {
        Self {
            name,
            lease,
            holder,
            lease_duration,
            waited: Duration::ZERO,
            access: Access::Exclusive,
            retry_within: Duration::ZERO,
            in_arrival_order: false,
        }
    }

    /// Sets whether the requester waits in line (see
    /// [`in_arrival_order`](Self::in_arrival_order)).
    ///
    /// ```
    /// use mongolock::store::{AcquireRequest, LeaseId};
    /// use mongolock::{HolderId, LockName};
    /// use std::time::Duration;
    ///
    /// let request = AcquireRequest::new(LockName::new("jobs")?, LeaseId::new(), HolderId::generate(), Duration::from_secs(5))
    ///     .with_arrival_order(true);
    /// assert!(request.in_arrival_order);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn with_arrival_order(mut self, in_arrival_order: bool) -> Self {
        self.in_arrival_order = in_arrival_order;
        self
    }

    /// Sets what the attempt asks for (see [`Access`]).
    ///
    /// ```
    /// use mongolock::store::{AcquireRequest, LeaseId};
    /// use mongolock::{Access, HolderId, LockName};
    /// use std::time::Duration;
    ///
    /// let request = AcquireRequest::new(LockName::new("imports")?, LeaseId::new(), HolderId::generate(), Duration::from_secs(5))
    ///     .with_access(Access::Permit { permits: 3 });
    /// assert_eq!(request.access, Access::Permit { permits: 3 });
    /// assert!(request.key().shared);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Sets how soon this requester tries again if refused.
    ///
    /// ```
    /// use mongolock::store::{AcquireRequest, LeaseId};
    /// use mongolock::{Access, HolderId, LockName};
    /// use std::time::Duration;
    ///
    /// let request = AcquireRequest::new(LockName::new("schema")?, LeaseId::new(), HolderId::generate(), Duration::from_secs(5))
    ///     .with_access(Access::Write)
    ///     .with_retry_within(Duration::from_secs(1));
    /// assert_eq!(request.retry_within, Duration::from_secs(1));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn with_retry_within(mut self, retry_within: Duration) -> Self {
        self.retry_within = retry_within;
        self
    }

    /// The key the lease this attempt writes will have once granted.
    ///
    /// ```
    /// use mongolock::store::{AcquireRequest, LeaseId};
    /// use mongolock::{HolderId, LockName};
    /// use std::time::Duration;
    ///
    /// let lease = LeaseId::new();
    /// let request = AcquireRequest::new(LockName::new("jobs")?, lease, HolderId::generate(), Duration::from_secs(5));
    /// assert_eq!(request.key().lease, lease);
    /// assert!(!request.key().shared);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn key(&self) -> LeaseKey {
        LeaseKey {
            name: self.name.clone(),
            lease: self.lease,
            shared: self.access.kind().is_shared(),
            in_arrival_order: self.in_arrival_order,
            access: Some(self.access),
        }
    }

    /// Sets how long this manager has already been trying.
    ///
    /// ```
    /// use mongolock::store::{AcquireRequest, LeaseId};
    /// use mongolock::HolderId;
    /// use mongolock::LockName;
    /// use std::time::Duration;
    ///
    /// let request = AcquireRequest::new(LockName::new("jobs")?, LeaseId::new(), HolderId::generate(), Duration::from_secs(5))
    ///     .with_waited(Duration::from_secs(2));
    /// assert_eq!(request.waited, Duration::from_secs(2));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn with_waited(mut self, waited: Duration) -> Self {
        self.waited = waited;
        self
    }
}

/// Names a granted lease for the owner-checked operations (extend, release).
///
/// ```
/// use mongolock::store::{LeaseId, LeaseKey};
/// use mongolock::LockName;
///
/// let key = LeaseKey::new(LockName::new("orders")?, LeaseId::new());
/// assert_eq!(key.name.as_str(), "orders");
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LeaseKey {
    /// The lock.
    pub name: LockName,
    /// The lease id the holder was granted.
    pub lease: LeaseId,
    /// Whether the lease is one holder of a shared record (a semaphore's or a reader/writer
    /// lock's) rather than a mutex's one lease.
    pub shared: bool,
    /// Whether the lease was granted in arrival order
    /// ([`AcquireRequest::in_arrival_order`]): its release keeps the record (and so the
    /// line of managers waiting in it) for as long as a place in the line lasts. A store
    /// whose records cannot disappear by themselves may ignore it.
    pub in_arrival_order: bool,
    /// The access the lease was granted for, when the caller knows it (`None`: any). It
    /// lets a store leave out of a release what only another access needs: a read's or a
    /// permit's release never begins a readers' turn. A store may ignore it; one that uses
    /// it trusts it, so it must be the lease's own.
    pub access: Option<Access>,
}

impl LeaseKey {
    /// The key of `lease` on `name`.
    ///
    /// ```
    /// use mongolock::store::{LeaseId, LeaseKey};
    /// let lease = LeaseId::new();
    /// assert_eq!(LeaseKey::new(mongolock::LockName::new("a")?, lease).lease, lease);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn new(name: LockName, lease: LeaseId) -> Self {
        Self {
            name,
            lease,
            shared: false,
            in_arrival_order: false,
            access: None,
        }
    }

    /// The key of `lease` among the holders of the shared record `name` (a semaphore or a
    /// reader/writer lock).
    ///
    /// ```
    /// use mongolock::store::{LeaseId, LeaseKey};
    /// let key = LeaseKey::shared(mongolock::LockName::new("imports")?, LeaseId::new());
    /// assert!(key.shared);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn shared(name: LockName, lease: LeaseId) -> Self {
        Self {
            name,
            lease,
            shared: true,
            in_arrival_order: false,
            access: None,
        }
    }

    /// Marks the lease as granted in arrival order (see
    /// [`in_arrival_order`](Self::in_arrival_order)).
    ///
    /// ```
    /// use mongolock::store::{LeaseId, LeaseKey};
    /// let key = LeaseKey::new(mongolock::LockName::new("a")?, LeaseId::new()).with_arrival_order(true);
    /// assert!(key.in_arrival_order);
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn with_arrival_order(mut self, in_arrival_order: bool) -> Self {
        self.in_arrival_order = in_arrival_order;
        self
    }

    /// Says which access the lease was granted for (see [`access`](Self::access)).
    ///
    /// ```
    /// use mongolock::store::{LeaseId, LeaseKey};
    /// use mongolock::Access;
    /// let key = LeaseKey::shared(mongolock::LockName::new("a")?, LeaseId::new()).with_access(Access::Read);
    /// assert_eq!(key.access, Some(Access::Read));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }
}

/// Push the expiry of a held lease to the store's "now" + `lease_duration`, only if `key` still owns it.
///
/// ```
/// use mongolock::store::{ExtendRequest, LeaseId, LeaseKey};
/// use mongolock::LockName;
/// use std::time::Duration;
///
/// let key = LeaseKey::new(LockName::new("orders")?, LeaseId::new());
/// let request = ExtendRequest::new(key, Duration::from_secs(30));
/// assert_eq!(request.lease_duration, Duration::from_secs(30));
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExtendRequest {
    /// The lease to extend.
    pub key: LeaseKey,
    /// The new lease length, from the store's "now".
    pub lease_duration: Duration,
}

impl ExtendRequest {
    /// Extend `key`'s lease to `lease_duration` from the store's "now".
    ///
    /// ```
    /// use mongolock::store::{ExtendRequest, LeaseId, LeaseKey};
    /// use std::time::Duration;
    /// let key = LeaseKey::new(mongolock::LockName::new("a")?, LeaseId::new());
    /// assert_eq!(ExtendRequest::new(key, Duration::from_secs(9)).lease_duration, Duration::from_secs(9));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn new(key: LeaseKey, lease_duration: Duration) -> Self {
        Self {
            key,
            lease_duration,
        }
    }
}
