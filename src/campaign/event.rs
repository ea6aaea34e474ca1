//! How a campaign's moments become a face's public event type.

use std::time::Duration;

use crate::error::LossReason;

/// The events a [`Campaign`](super::handle::Campaign) reports: implemented by
/// [`LockEvent`](super::background::LockEvent) and
/// [`ElectionEvent`](crate::election::ElectionEvent).
pub(crate) trait CampaignEvent: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The lock was acquired with this token.
    fn acquired(token: u64) -> Self;
    /// The hold with this token is at risk: renewals failing, lost in `time_left`.
    fn at_risk(token: u64, time_left: Duration) -> Self;
    /// The hold with this token was at risk and a renewal was confirmed.
    fn recovered(token: u64) -> Self;
    /// The hold with this token was lost.
    fn lost(token: u64, reason: LossReason) -> Self;
    /// The hold with this token was released on purpose.
    fn released(token: u64) -> Self;
}
