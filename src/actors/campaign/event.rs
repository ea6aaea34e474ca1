//! How a campaign's moments become a handle's public event type.

use crate::store::LockRecord;
use crate::LossReason;

/// Implemented by the public event enums ([`LockEvent`](crate::LockEvent),
/// [`ElectionEvent`](crate::ElectionEvent)) so one campaign actor serves both.
pub(crate) trait CampaignEvent: Clone + Send + Sync + 'static {
    fn acquired(token: u64) -> Self;
    fn lost(token: u64, reason: LossReason) -> Self;
    fn released(token: u64) -> Self;
    /// The observed holder changed (only campaigns that observe call this).
    fn holder_changed(record: Option<&LockRecord>) -> Option<Self>;

    /// For elections: the value of the leader gauge after this event (1 leading, 0 not).
    fn leader_status(&self) -> Option<f64> {
        None
    }
}
