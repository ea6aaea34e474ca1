//! How a campaign's moments become a face's public event type.

use crate::error::LossReason;

/// The events a [`Campaign`](super::Campaign) reports: implemented by
/// [`LockEvent`](crate::LockEvent) and [`ElectionEvent`](crate::ElectionEvent), and sealed —
/// the crate adds new faces, users pick one.
///
/// ```
/// use mongolock::campaign::CampaignEvent;
/// use mongolock::LockEvent;
///
/// fn describe<E: CampaignEvent + std::fmt::Debug>(event: &E) -> String {
///     format!("{event:?}")
/// }
/// assert_eq!(describe(&LockEvent::Acquired { token: 1 }), "Acquired { token: 1 }");
/// ```
pub trait CampaignEvent: Clone + std::fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// The lock was acquired with this token.
    #[doc(hidden)]
    fn acquired(token: u64) -> Self;
    /// The hold with this token was lost.
    #[doc(hidden)]
    fn lost(token: u64, reason: LossReason) -> Self;
    /// The hold with this token was released on purpose.
    #[doc(hidden)]
    fn released(token: u64) -> Self;
}

pub(crate) mod sealed {
    /// Only the crate's own event types are campaign events.
    pub trait Sealed {}
}
