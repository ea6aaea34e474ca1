//! The messages a lock actor handles.
//!
//! This file and `guard.rs` name each other, as the types do: a guard holds the actor's
//! address to send its release, and these messages carry guards to their callers. Hiding
//! the actor's type from the guard behind ractor's derived actor reference would cost
//! `LockGuard` its unwind safety (a public trait); an untyped actor with a function that
//! sends the release would only hide the dependency, not remove it.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::guard::LockGuard;
use super::orphan::GrantClaim;
use crate::error::{LockError, StoreError};
use crate::kind::Access;
use crate::options::LockOptions;
use crate::store::{
    AcquireOutcome, ExtendOutcome, HandOverOutcome, LeaseId, LeaseKey, ReleaseOutcome,
};

/// Where the guard for a blocking acquisition goes.
pub(crate) type GuardReply = oneshot::Sender<Result<LockGuard, LockError>>;
/// Where the answer of a single-attempt acquisition goes.
pub(crate) type TryReply = oneshot::Sender<Result<Option<LockGuard>, LockError>>;
/// Where the answer of a release goes (`None` when a guard was dropped).
pub(crate) type ReleaseReply = Option<oneshot::Sender<Result<(), LockError>>>;
/// Where a detached lease's key goes (`Err`: the hold was lost, or is not this actor's).
pub(crate) type DetachReply = oneshot::Sender<Result<LeaseKey, LockError>>;

/// Messages of the per-name lock actor.
pub(crate) enum LockMsg {
    // --- requests from lock handles, directly or through the supervisor (counted on the
    // route, for idle shutdown) ---
    /// Wait until the lock is held (FIFO among this process' waiters).
    Acquire {
        access: Access,
        options: Arc<LockOptions>,
        requested_at: Instant,
        reply: GuardReply,
    },
    /// Exactly one store attempt, unless this process already holds or waits for the lock.
    TryAcquire {
        access: Access,
        options: Arc<LockOptions>,
        reply: TryReply,
    },
    /// Test hook: make the actor panic, to check the supervisor isolates the failure.
    #[cfg(feature = "testing")]
    InjectPanic,

    // --- from guards and the supervisor ---
    /// The guard holding `lease` under `token` released it (or was dropped). Local holders
    /// after one another share a lease; the token tells them apart.
    Release {
        lease: LeaseId,
        token: u64,
        reply: ReleaseReply,
    },
    /// A multi-lock releases its members in one store call: the hold of `lease` under
    /// `token` ends as if released, and its key goes to `reply` for that call, whose
    /// answer comes back as [`LockMsg::ReleaseDone`].
    Detach {
        lease: LeaseId,
        token: u64,
        reply: DetachReply,
    },
    /// Release what is held, fail waiters, stop.
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// The store says the lock became free (released or deleted, by any process): a
    /// waiter backing off because another process held it can try again now.
    Wake,
    /// A waiter in arrival order gave up (cancelled or timed out): if nobody else here
    /// waits, this manager's place in the name's line goes now, not at the next retry.
    WaiterLeft,

    // --- from the actor's own timers and store calls ---
    AttemptDone {
        lease: LeaseId,
        sent_at: Instant,
        result: Result<AcquireOutcome, StoreError>,
        /// Releases what the attempt may have granted unless the actor keeps it.
        claim: GrantClaim,
    },
    RetryDue {
        timer: u64,
    },
    /// The hold's timer: a renewal or the loss deadline is due.
    HoldDue {
        lease: LeaseId,
    },
    RenewDone {
        lease: LeaseId,
        /// The renewal's number (see `Renewal::number`).
        number: u64,
        sent_at: Instant,
        result: Result<ExtendOutcome, StoreError>,
    },
    ReleaseDone {
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ReleaseOutcome, StoreError>,
    },
    HandOverDone {
        to: LeaseId,
        sent_at: Instant,
        result: Result<HandOverOutcome, StoreError>,
        /// Releases what the hand-over may have granted unless the actor keeps it.
        claim: GrantClaim,
    },
    IdleDue {
        timer: u64,
    },
}

impl LockMsg {
    /// Whether this is a request its sender counted on the actor's route (see `route`).
    pub(crate) fn is_counted_request(&self) -> bool {
        match self {
            Self::Acquire { .. } | Self::TryAcquire { .. } => true,
            #[cfg(feature = "testing")]
            Self::InjectPanic => true,
            _ => false,
        }
    }
}
