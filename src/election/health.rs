//! A liveness check for elections, like client-go's `HealthzAdaptor`: a leader whose
//! renewals have stopped succeeding for longer than a tolerance is unhealthy, so a liveness
//! probe can restart a process that keeps believing it leads while it cannot renew.

use std::time::Duration;

use super::handle::Election;
use crate::error::LockError;

/// What [`Election::health`] found.
///
/// ```
/// use mongolock::ElectionHealth;
/// assert!(ElectionHealth::NotLeading.is_healthy());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElectionHealth {
    /// This candidate does not lead: nothing to check.
    NotLeading,
    /// Leading, and renewals are confirmed on time.
    Leading {
        /// Fencing token of the term.
        token: u64,
        /// Time since the last confirmed renewal was sent.
        renewed_ago: Duration,
    },
    /// Leading, but renewals are failing: unless one is confirmed within `time_left` this
    /// candidate is deposed then. Still healthy (within the tolerance): a warning that the
    /// store is in trouble, not that this process is.
    AtRisk {
        /// Fencing token of the term.
        token: u64,
        /// Time since the last confirmed renewal was sent.
        renewed_ago: Duration,
        /// How long until the loss deadline.
        time_left: Duration,
    },
    /// Leading, but the last confirmed renewal was sent longer ago than one renewal period
    /// plus the tolerance: renewals are failing or stuck.
    Unhealthy {
        /// Fencing token of the term.
        token: u64,
        /// Time since the last confirmed renewal was sent.
        renewed_ago: Duration,
    },
}

impl ElectionHealth {
    /// `false` only for [`Unhealthy`](Self::Unhealthy) ([`AtRisk`](Self::AtRisk) is a
    /// warning).
    ///
    /// ```
    /// use mongolock::ElectionHealth;
    /// use std::time::Duration;
    /// let stuck = ElectionHealth::Unhealthy { token: 7, renewed_ago: Duration::from_secs(9) };
    /// assert!(!stuck.is_healthy());
    /// ```
    pub fn is_healthy(&self) -> bool {
        !matches!(self, Self::Unhealthy { .. })
    }
}

impl Election {
    /// Checks this candidate for a liveness probe: unhealthy while it leads but its last
    /// confirmed renewal was sent more than one retry period plus `tolerance` ago.
    ///
    /// The runtime tells a leader it lost leadership at the renew deadline anyway; this
    /// catches the process around it — a leader whose renewals fail for longer than the
    /// operator tolerates, or a runtime too starved to renew.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the election has stopped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// assert!(election.health(Duration::from_secs(5)).await?.is_healthy());
    /// election.campaign().await?;
    /// assert!(election.health(Duration::from_secs(5)).await?.is_healthy());
    /// # Ok(()) }
    /// ```
    pub async fn health(&self, tolerance: Duration) -> Result<ElectionHealth, LockError> {
        let Some(term) = self.engine().probe().await? else {
            return Ok(ElectionHealth::NotLeading);
        };
        let (token, renewed_ago) = (term.token, term.renewed_at.elapsed());
        let allowed = self
            .engine()
            .lock()
            .options()
            .renew_interval()
            .saturating_add(tolerance);
        Ok(match term.risk {
            _ if renewed_ago > allowed => ElectionHealth::Unhealthy { token, renewed_ago },
            Some(risk) => ElectionHealth::AtRisk {
                token,
                renewed_ago,
                time_left: risk.time_left(),
            },
            None => ElectionHealth::Leading { token, renewed_ago },
        })
    }
}
