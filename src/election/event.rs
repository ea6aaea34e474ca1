use std::fmt;
use std::time::Duration;

use crate::campaign::CampaignEvent;
use crate::error::LossReason;
use crate::store::outcome::LockRecord;
use crate::store::request::HolderId;

/// Who leads an election, as the store sees it.
///
/// ```
/// use mongolock::{HolderId, LeaderInfo};
/// use std::time::Duration;
/// let leader = LeaderInfo::new(HolderId::from_string("w1".into()), 3, Duration::from_secs(9));
/// assert_eq!(leader.holder.as_str(), "w1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The leading manager's identity (`host:pid:random` unless set explicitly).
    pub holder: HolderId,
    /// The leader's fencing token: it increases with every new term.
    pub token: u64,
    /// Time left on the leader's lease, by the store's clock.
    pub expires_in: Duration,
}

impl LeaderInfo {
    /// The leader `holder`, in the term with `token`, `expires_in` left on its lease (for
    /// tests of code that handles [`ElectionEvent::LeaderChanged`]).
    ///
    /// ```
    /// use mongolock::{HolderId, LeaderInfo};
    /// use std::time::Duration;
    /// let leader = LeaderInfo::new(HolderId::from_string("w1".into()), 3, Duration::from_secs(9));
    /// assert_eq!(leader.token, 3);
    /// ```
    pub fn new(holder: HolderId, token: u64, expires_in: Duration) -> Self {
        Self {
            holder,
            token,
            expires_in,
        }
    }

    pub(crate) fn from_record(record: &LockRecord) -> Option<Self> {
        Some(Self {
            holder: record.holder().cloned()?,
            token: record.token,
            expires_in: record.expires_in()?,
        })
    }
}

/// What a candidate or observer of an [`Election`](crate::Election) sees. Its `Display` is
/// a line for logs.
///
/// ```
/// use mongolock::ElectionEvent;
/// use std::time::Duration;
/// let event = ElectionEvent::Elected { token: 7 };
/// assert!(matches!(event, ElectionEvent::Elected { token: 7 }));
/// assert_eq!(event.to_string(), "elected (token 7)");
/// let risk = ElectionEvent::AtRisk { token: 7, time_left: Duration::from_micros(749_600) };
/// assert_eq!(risk.to_string(), "at risk (token 7): renewals failing, deposed in 749 ms unless one is confirmed");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElectionEvent {
    /// This candidate became leader with this fencing token.
    Elected {
        /// Fencing token of this term.
        token: u64,
    },
    /// This candidate leads, but its renewals are failing: unless one is confirmed within
    /// `time_left`, it is deposed then (a warning; see [`AtRisk`](crate::AtRisk)).
    AtRisk {
        /// Fencing token of this term.
        token: u64,
        /// How long until the loss deadline, when the warning was given.
        time_left: Duration,
    },
    /// This candidate's renewals were failing and one has been confirmed: it still leads.
    Recovered {
        /// Fencing token of this term.
        token: u64,
    },
    /// This candidate lost leadership without resigning; it keeps campaigning. Delivered
    /// before any other candidate can lead.
    Deposed {
        /// Fencing token of the term that ended.
        token: u64,
        /// Why.
        reason: LossReason,
    },
    /// This candidate stepped down (resign, or its bound actor ended).
    Resigned {
        /// Fencing token of the term that ended.
        token: u64,
    },
    /// The observed leader changed (`None`: nobody leads right now).
    LeaderChanged {
        /// The new leader.
        leader: Option<LeaderInfo>,
    },
}

impl fmt::Display for ElectionEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Elected { token } => write!(f, "elected (token {token})"),
            Self::AtRisk { token, time_left } => write!(
                f,
                "at risk (token {token}): renewals failing, deposed in {} ms unless \
                 one is confirmed",
                time_left.as_millis()
            ),
            Self::Recovered { token } => {
                write!(f, "recovered (token {token}): a renewal was confirmed")
            }
            Self::Deposed { token, reason } => write!(f, "deposed (token {token}): {reason}"),
            Self::Resigned { token } => write!(f, "resigned (token {token})"),
            Self::LeaderChanged {
                leader: Some(leader),
            } => write!(
                f,
                "leader is {} (token {}, {:.1?} left on its lease)",
                leader.holder, leader.token, leader.expires_in
            ),
            Self::LeaderChanged { leader: None } => f.write_str("no leader"),
        }
    }
}

impl CampaignEvent for ElectionEvent {
    fn acquired(token: u64) -> Self {
        Self::Elected { token }
    }
    fn at_risk(token: u64, time_left: Duration) -> Self {
        Self::AtRisk { token, time_left }
    }
    fn recovered(token: u64) -> Self {
        Self::Recovered { token }
    }
    fn lost(token: u64, reason: LossReason) -> Self {
        Self::Deposed { token, reason }
    }
    fn released(token: u64) -> Self {
        Self::Resigned { token }
    }
}
