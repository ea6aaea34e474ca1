//! The line of managers waiting for one name in arrival order: one place per manager, for
//! its longest-waiting task and that task's access, each live until its end (see the arrival-order rules of
//! [`LockStore`](crate::store::LockStore)).

use tokio::time::Instant;

use crate::kind::Access;
use crate::store::outcome::QueuedWaiter;
use crate::store::request::HolderId;

/// One manager's place in line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    holder: HolderId,
    access: Access,
    arrival: Instant,
    until: Instant,
}

/// The places in line for one name, in no particular order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct WaitingLine {
    places: Vec<Place>,
}

impl WaitingLine {
    /// Whether a live place of a manager other than `holder`, for an access `access` waits
    /// behind, arrived before `arrival`.
    pub(super) fn earlier_elsewhere(
        &self,
        holder: &HolderId,
        (access, arrival): (Access, Instant),
        now: Instant,
    ) -> bool {
        self.places.iter().any(|place| {
            place.until > now
                && place.holder != *holder
                && place.arrival < arrival
                && access.waits_behind(place.access)
        })
    }

    /// Puts `holder` in line as arriving at `arrival`, until `until` (replacing its place,
    /// and dropping places that ended).
    pub(super) fn place(
        &mut self,
        holder: &HolderId,
        access: Access,
        (arrival, until): (Instant, Instant),
        now: Instant,
    ) {
        self.remove(holder, now);
        self.places.push(Place {
            holder: holder.clone(),
            access,
            arrival,
            until,
        });
    }

    /// Takes `holder`'s place out (and the places that ended); returns whether the line is
    /// empty now.
    pub(super) fn remove(&mut self, holder: &HolderId, now: Instant) -> bool {
        self.places
            .retain(|place| place.until > now && place.holder != *holder);
        self.places.is_empty()
    }

    /// The live places, earliest arrival first.
    pub(super) fn queue(&self, now: Instant) -> Vec<QueuedWaiter> {
        let mut live: Vec<&Place> = self
            .places
            .iter()
            .filter(|place| place.until > now)
            .collect();
        live.sort_by_key(|place| place.arrival);
        live.into_iter()
            .map(|place| QueuedWaiter::new(place.holder.clone(), place.access, now - place.arrival))
            .collect()
    }

    /// Whether no place is live at `now`.
    pub(super) fn has_ended(&self, now: Instant) -> bool {
        self.places.iter().all(|place| place.until <= now)
    }
}
