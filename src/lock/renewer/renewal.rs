//! A renewal an actor wants sent, and how its answer goes back to the actor.

use tokio::time::Instant;

use ractor::ActorRef;

use crate::error::StoreError;
use crate::lock::message::LockMsg;
use crate::store::{ExtendOutcome, ExtendRequest};

/// A renewal an actor wants sent.
pub(crate) struct Renewal {
    pub(crate) request: ExtendRequest,
    /// The holder's loss deadline: a later answer is useless.
    pub(crate) deadline: Instant,
    pub(crate) actor: ActorRef<LockMsg>,
    /// The hold's count of renewals asked, this one included: answers to renewals asked
    /// before the hold's last confirmation came are out of date.
    pub(crate) number: u64,
    /// The hold is at risk: while an earlier renewal of its lease is in a command out
    /// (possibly stuck), this one must not wait behind it (see the module's
    /// documentation).
    pub(crate) again: bool,
}

pub(super) fn answer(
    renewal: &Renewal,
    sent_at: Instant,
    result: Result<ExtendOutcome, StoreError>,
) {
    // The actor may have stopped meanwhile (released, shut down): nobody needs the answer.
    let _ = renewal.actor.send_message(LockMsg::RenewDone {
        lease: renewal.request.key.lease,
        number: renewal.number,
        sent_at,
        result,
    });
}
