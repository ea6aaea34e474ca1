//! The line of managers waiting for one name in arrival order: one place per manager, for
//! its longest-waiting task and that task's access, each live until its end (rules 15 to 22
//! of [`LockStore`](crate::store::LockStore)).

use tokio::time::Instant;

use super::shared::Admits;
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
    /// Arrival order's place; a default-mode waiter's orders nobody and is only whom a
    /// release wakes.
    ordered: bool,
}

/// The places in line for one name, in no particular order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct WaitingLine {
    places: Vec<Place>,
    /// The manager the name's last wake went to (`None`: everyone, or no wake yet), so a
    /// wake passed on by a refusal reaches a manager once, as MongoDB's unchanged `wake`
    /// field is not reported again.
    pub(super) last_woken: Option<HolderId>,
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
        self.earliest_elsewhere(holder, access, now)
            .is_some_and(|earliest| earliest < arrival)
    }

    /// The earliest arrival of a live place of a manager other than `holder`, for an
    /// access `access` waits behind.
    pub(super) fn earliest_elsewhere(
        &self,
        holder: &HolderId,
        access: Access,
        now: Instant,
    ) -> Option<Instant> {
        // Rule 15: a live place of another manager that `access` waits behind; a listed one
        // (rule 21) orders nobody.
        self.earliest_arrival_elsewhere(holder, now, |place| {
            place.ordered && access.waits_behind(place.access)
        })
    }

    /// The earliest arrival of a live place, listed or in line, of a manager other than
    /// `holder`: since when others wait for a grant to `holder` (rule 3).
    pub(super) fn earliest_waiting_elsewhere(
        &self,
        holder: &HolderId,
        now: Instant,
    ) -> Option<Instant> {
        self.earliest_arrival_elsewhere(holder, now, |_| true)
    }

    /// The earliest arrival of a live place of a manager other than `holder` for which
    /// `counts` holds.
    fn earliest_arrival_elsewhere(
        &self,
        holder: &HolderId,
        now: Instant,
        counts: impl Fn(&Place) -> bool,
    ) -> Option<Instant> {
        self.places
            .iter()
            .filter(|place| place.until > now && place.holder != *holder && counts(place))
            .map(|place| place.arrival)
            .min()
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
        self.put(holder, access, (arrival, until), now, true);
    }

    /// Lists `holder`'s default-mode waiter as arriving at `arrival`, until `until`: a
    /// place that holds nobody back, for a release to wake.
    pub(super) fn list(
        &mut self,
        holder: &HolderId,
        (arrival, until): (Instant, Instant),
        now: Instant,
    ) {
        self.put(holder, Access::Exclusive, (arrival, until), now, false);
    }

    fn put(
        &mut self,
        holder: &HolderId,
        access: Access,
        (arrival, until): (Instant, Instant),
        now: Instant,
        ordered: bool,
    ) {
        // Rule 15: one place per manager.
        self.remove(holder, now);
        self.places.push(Place {
            holder: holder.clone(),
            access,
            arrival,
            until,
            ordered,
        });
    }

    /// The manager of the earliest-arrived live place of either sort: whom a release wakes.
    pub(super) fn earliest(&self, now: Instant) -> Option<&HolderId> {
        self.places
            .iter()
            // Rule 22: places of either sort.
            .filter(|place| place.until > now)
            .min_by_key(|place| place.arrival)
            .map(|place| &place.holder)
    }

    /// The managers of the live places a shared record that `admits` lets in next (rule
    /// 22), or `None` when no place is live (every manager may go). A place waits only
    /// behind places that arrived strictly before it, as rule 16 judges it.
    pub(super) fn let_in_next(&self, admits: Admits, now: Instant) -> Option<Vec<&HolderId>> {
        // Rule 22.
        let live: Vec<&Place> = self
            .places
            .iter()
            .filter(|place| place.until > now)
            .collect();
        if live.is_empty() {
            return None;
        }
        let before = |place: &Place, also: fn(&Place) -> bool| {
            live.iter()
                .filter(|earlier| earlier.arrival < place.arrival && also(earlier))
                .count()
        };
        let admitted = |place: &Place| match (admits, place.access) {
            (Admits::Permits(room), _) => before(place, |_| true) < room,
            (Admits::Access { read, .. }, Access::Read) => {
                read && before(place, |earlier| earlier.access == Access::Write) == 0
            }
            (Admits::Access { write, .. }, _) => write && before(place, |_| true) == 0,
        };
        Some(
            live.iter()
                .filter(|place| admitted(place))
                .map(|place| &place.holder)
                .collect(),
        )
    }

    /// Whether `holder` has a place here, live or ended but not dropped yet (then its
    /// withdrawal wakes the release feed). An ended place counts as MongoDB's withdrawal
    /// counts it (its filter matches any place of the manager on the document): a
    /// manager's actor may believe it is out of line while the store kept its place (a
    /// refusal answered after a grant that took the place out), and the store cannot tell.
    pub(super) fn has_place_of(&self, holder: &HolderId) -> bool {
        self.places.iter().any(|place| place.holder == *holder)
    }

    /// Takes `holder`'s place out (and the places that ended); returns whether the line is
    /// empty now. (A place ending exactly `now` is dead to every reader, so whether it is
    /// dropped here too cannot be seen: the `>=` mutant of the prune survives.)
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
            // Rule 20: arrival order's live places; a listing (rule 21) is not shown.
            .filter(|place| place.ordered && place.until > now)
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn holder(name: &str) -> HolderId {
        HolderId::from_string(name.to_owned())
    }

    /// A place is live until its end, exclusive; an earlier arrival of another manager
    /// holds a request back, an equal one does not; readers pass readers.
    #[test]
    fn a_place_counts_before_its_end_and_only_if_strictly_earlier() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let mut line = WaitingLine::default();
        line.place(&holder("a"), Access::Write, (now, now + ms(10)), now);
        let b = holder("b");
        assert!(line.earlier_elsewhere(&b, (Access::Write, now + ms(1)), now));
        assert!(
            !line.earlier_elsewhere(&b, (Access::Write, now), now),
            "a tie is not earlier"
        );
        assert!(!line.earlier_elsewhere(&holder("a"), (Access::Write, now + ms(1)), now));
        assert!(
            !line.earlier_elsewhere(&b, (Access::Write, now + ms(1)), now + ms(10)),
            "ended"
        );
        assert_eq!(line.queue(now + ms(9)).len(), 1);
        assert!(
            line.queue(now + ms(10)).is_empty(),
            "a place is gone at its end"
        );
        assert!(!line.has_ended(now + ms(9)));
        assert!(line.has_ended(now + ms(10)));

        let mut readers = WaitingLine::default();
        readers.place(&holder("r"), Access::Read, (now, now + ms(10)), now);
        assert!(!readers.earlier_elsewhere(&b, (Access::Read, now + ms(1)), now));
        assert!(readers.earlier_elsewhere(&b, (Access::Write, now + ms(1)), now));
    }
}
