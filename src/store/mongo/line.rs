//! The line of managers waiting for a lock in arrival order, kept on its document (rules 15
//! to 22 of [`LockStore`](crate::store::LockStore)):
//!
//! ```text
//! line: [{ holder: "host:4242:1a2b3c4d", access: "exclusive" | "permit" | "read" | "write",
//!           arrival: ISODate("…"), until: ISODate("…"), ordered?: false }, …]
//! ```
//!
//! A mutex's waiters of the default mode are listed too, marked `ordered: false`: they
//! never hold a request back (only arrival order's places do), but a release wakes the
//! manager of the earliest live place of either sort ([`earliest_holder`]), so the manager
//! that has waited longest hears of it first, and nobody else does.
//!
//! One place per manager, for its longest-waiting task and that task's access (a reader waits
//! only behind earlier writers, every other access behind every earlier place): `arrival` is
//! the server's `$$NOW` minus the request's `waited`, `until` its `$$NOW` plus `retry_within`;
//! a place is live until then. A release keeps the line, and keeps the document's `expiresAt`
//! (what the TTL index deletes it by) no earlier than the line's last place ends, and so does
//! every refused attempt or hand-over that adds a place to a released record's line, so the
//! document stays while anyone waits in it. A line lost another way (an operator's deletion; a
//! holder's lease left to expire, whose document the TTL index may delete before the next
//! grant) costs order, never safety.

use std::time::Duration;

use mongodb::bson::{Bson, DateTime, Document, doc};

use super::expression::{duration_ms, literal, now_plus};
use super::fields::{ACCESS, HOLDER, READ, SERVER_NOW, WRITE};
use crate::kind::{Access, LockKind};
use crate::store::outcome::QueuedWaiter;
use crate::store::request::{HolderId, mark_length};

/// The document's line of waiting managers.
pub(super) const LINE: &str = "line";
/// When a place's manager began to wait, by the server's clock.
const ARRIVAL: &str = "arrival";
/// When a place ends unless renewed, by the server's clock.
const UNTIL: &str = "until";
/// `false` on a place of the default mode, which orders nobody; missing on arrival order's.
const ORDERED: &str = "ordered";
/// The variable a place is bound to inside `$filter`.
const PLACE: &str = "place";

/// The live places of managers other than `holder`.
pub(super) fn others_in_line(holder: &str) -> Document {
    doc! { "$filter": {
        "input": { "$ifNull": [format!("${LINE}"), []] },
        "as": PLACE,
        "cond": { "$and": [
            { "$gt": [format!("$${PLACE}.{UNTIL}"), "$$NOW"] },
            { "$ne": [format!("$${PLACE}.{HOLDER}"), literal(holder.into())] },
        ] },
    } }
}

/// The arrival of `place` (an expression for one place of the line).
pub(super) fn arrival_of(place: &str) -> String {
    format!("{place}.{ARRIVAL}")
}

/// The server's now, or when the line's last place ends if that is later: a released
/// record's `expiresAt` is at least this, because `expiresAt` is what the TTL index deletes
/// a document by, and a record deleted with its line would let whoever asks next go ahead
/// of every manager waiting in it until each asks again.
pub(super) fn now_or_last_place_end() -> Document {
    // Rule 20.
    doc! { "$reduce": {
        "input": { "$ifNull": [format!("${LINE}"), []] },
        "initialValue": "$$NOW",
        "in": { "$max": ["$$value", format!("$$this.{UNTIL}")] },
    } }
}

/// Whether a place in `others` (an expression for the other managers' live places) that
/// `access` waits behind arrived before `arrival`.
pub(super) fn earlier_in(others: impl Into<Bson>, access: Access, arrival: &Bson) -> Document {
    // Rule 15: a live place of another manager that `access` waits behind; a listed one (rule 21)
    // orders nobody.
    let earlier = doc! { "$and": [
        { "$lt": [format!("$${PLACE}.{ARRIVAL}"), arrival] },
        { "$ne": [format!("$${PLACE}.{ORDERED}"), false] },
    ] };
    let cond = match access {
        // Consecutive readers go in together: a reader waits only behind other accesses.
        Access::Read => doc! { "$and": [
            earlier,
            { "$ne": [format!("$${PLACE}.{ACCESS}"), READ] },
        ] },
        _ => earlier,
    };
    doc! { "$gt": [
        { "$size": { "$filter": { "input": others.into(), "as": PLACE, "cond": cond } } },
        0,
    ] }
}

/// `others` with `holder`'s place (arrived at `arrival`, lasting `retry_within`) added.
pub(super) fn with_place(
    others: impl Into<Bson>,
    (holder, access): (&str, Access),
    arrival: &Bson,
    retry_within: Duration,
) -> Document {
    with_place_of(others, (holder, access), arrival, retry_within, true)
}

/// `others` with the place of `holder`'s default-mode waiter added: one that orders nobody
/// but is woken by a release like any other.
pub(super) fn with_unordered_place(
    others: impl Into<Bson>,
    holder: &str,
    arrival: &Bson,
    retry_within: Duration,
) -> Document {
    with_place_of(
        others,
        (holder, Access::Exclusive),
        arrival,
        retry_within,
        false,
    )
}

fn with_place_of(
    others: impl Into<Bson>,
    (holder, access): (&str, Access),
    arrival: &Bson,
    retry_within: Duration,
    ordered: bool,
) -> Document {
    // Rule 15: one place per manager, its arrival and its end.
    let mut place = doc! {
        HOLDER: literal(holder.into()),
        ACCESS: access.as_str(),
        ARRIVAL: arrival,
        UNTIL: now_plus(mark_length(retry_within)),
    };
    if !ordered {
        place.insert(ORDERED, false);
    }
    doc! { "$concatArrays": [others.into(), [place]] }
}

/// What a release's wake names when nobody is listed: every manager (a waiter refused only
/// once is not listed yet). Never a holder id, which has no `*`.
pub(super) const EVERYONE: &str = "*";

/// The holder of the earliest-arrived live place in `line` (an expression for an array of
/// places), or [`EVERYONE`] when none is live: whom a release wakes.
pub(super) fn earliest_holder(line: impl Into<Bson>) -> Document {
    // Rule 22: places of either sort.
    let live = doc! { "$filter": {
        "input": { "$ifNull": [line.into(), []] },
        "as": PLACE,
        "cond": { "$gt": [format!("$${PLACE}.{UNTIL}"), "$$NOW"] },
    } };
    let earliest = doc! { "$reduce": {
        "input": live,
        "initialValue": Bson::Null,
        "in": { "$cond": [
            { "$or": [
                { "$eq": ["$$value", Bson::Null] },
                { "$lt": [format!("$$this.{ARRIVAL}"), format!("$$value.{ARRIVAL}")] },
            ] },
            "$$this",
            "$$value",
        ] },
    } };
    doc! { "$let": {
        "vars": { "earliest": earliest },
        "in": { "$ifNull": [format!("$$earliest.{HOLDER}"), EVERYONE] },
    } }
}

/// Whom a shared record's release wakes, as the end of its [`WAKE`](super::fields::WAKE):
/// `" <holder>"` for each manager whose live place in the line the record lets in next
/// (places in stored order, each manager once), [`EVERYONE`] after a space when no place
/// is live, and nothing when places are live but none may go. `semaphore` says the
/// record's kind; `room` is how many more may hold a permit, `nobody_holds` whether a
/// write may go and `readers_may` whether reads may, all from the record as the release
/// leaves it (expressions).
pub(super) fn shared_woken(
    semaphore: impl Into<Bson>,
    room: impl Into<Bson>,
    nobody_holds: impl Into<Bson>,
    readers_may: impl Into<Bson>,
) -> Document {
    // Rule 22: the places the kind's rule lets in next, judged as rule 16 judges each one
    // (a place waits only behind places that arrived strictly before it).
    let live = doc! { "$filter": {
        "input": { "$ifNull": [format!("${LINE}"), []] },
        "as": PLACE,
        "cond": { "$gt": [format!("$${PLACE}.{UNTIL}"), "$$NOW"] },
    } };
    let before = |also: Option<Document>| {
        let earlier =
            doc! { "$lt": [format!("$$earlier.{ARRIVAL}"), format!("$${PLACE}.{ARRIVAL}")] };
        let cond = match also {
            Some(also) => doc! { "$and": [earlier, also] },
            None => earlier,
        };
        doc! { "$size": { "$filter": { "input": "$$live", "as": "earlier", "cond": cond } } }
    };
    let first = doc! { "$eq": [before(None), 0] };
    let admitted = doc! { "$cond": [
        semaphore.into(),
        { "$lt": [before(None), room.into()] },
        { "$cond": [
            { "$eq": [format!("$${PLACE}.{ACCESS}"), READ] },
            { "$and": [
                readers_may.into(),
                { "$eq": [before(Some(doc! { "$eq": [format!("$$earlier.{ACCESS}"), WRITE] })), 0] },
            ] },
            { "$and": [nobody_holds.into(), first] },
        ] },
    ] };
    let woken = doc! { "$reduce": {
        "input": { "$filter": { "input": "$$live", "as": PLACE, "cond": admitted } },
        "initialValue": "",
        "in": { "$concat": ["$$value", " ", format!("$$this.{HOLDER}")] },
    } };
    doc! { "$let": {
        "vars": { "live": live },
        "in": { "$cond": [
            { "$eq": [{ "$size": "$$live" }, 0] },
            format!(" {EVERYONE}"),
            woken,
        ] },
    } }
}

/// For a read granted at `granted_at` (the server's `$$NOW`) to `holder`, from the
/// document after the grant: how long the earliest live place of another manager that a
/// reader waits behind (a writer's) had waited (zero if no such place is live). A reader
/// that waited longer would have been stamped strictly before that place: the pipelines
/// round a wait up to the millisecond, never down.
pub(super) fn readers_waited_over(
    document: &Document,
    holder: &str,
    granted_at: DateTime,
) -> Duration {
    // Rule 17.
    let now = granted_at.timestamp_millis();
    let earliest = live_places(document, now)
        .filter(|place| place.ordered && place.holder != holder && place.access != Some(READ))
        .map(|place| place.arrival)
        .min();
    earliest.map_or(Duration::ZERO, |arrival| waited(now, arrival))
}

/// One live place of a document's line, as stored.
struct LivePlace<'a> {
    holder: &'a str,
    access: Option<&'a str>,
    /// Whether it is arrival order's (a default-mode waiter's place orders nobody).
    ordered: bool,
    /// When its manager began to wait, in the server's milliseconds.
    arrival: i64,
}

/// The places of `document`'s line live at `now` (the server's milliseconds); a place
/// missing a field is skipped.
fn live_places(document: &Document, now: i64) -> impl Iterator<Item = LivePlace<'_>> {
    document
        .get_array(LINE)
        .into_iter()
        .flatten()
        .filter_map(Bson::as_document)
        .filter_map(move |place| {
            let until = place.get_datetime(UNTIL).ok()?.timestamp_millis();
            (until > now).then_some(())?;
            Some(LivePlace {
                holder: place.get_str(HOLDER).ok()?,
                access: place.get_str(ACCESS).ok(),
                ordered: place.get_bool(ORDERED).unwrap_or(true),
                arrival: place.get_datetime(ARRIVAL).ok()?.timestamp_millis(),
            })
        })
}

/// The server's `$$NOW` (its milliseconds) of the refused attempt that put `holder`'s place
/// in `document`'s line for `retry_within`: the place ends then plus that (as
/// [`with_place`] writes it), so an answer carries the server's clock without a field of
/// its own. `None` if the document has no such place.
pub(super) fn placed_at(document: &Document, holder: &str, retry_within: Duration) -> Option<i64> {
    let until = document
        .get_array(LINE)
        .ok()?
        .iter()
        .filter_map(Bson::as_document)
        .find(|place| place.get_str(HOLDER).ok() == Some(holder))?
        .get_datetime(UNTIL)
        .ok()?
        .timestamp_millis();
    Some(until - duration_ms(mark_length(retry_within)))
}

/// How long a place that arrived at `arrival` had waited at `now` (both the server's
/// milliseconds).
fn waited(now: i64, arrival: i64) -> Duration {
    Duration::from_millis(now.saturating_sub(arrival).max(0).unsigned_abs())
}

/// The live places of an inspected document of `kind` (read with its [`SERVER_NOW`]),
/// earliest arrival first.
pub(super) fn queue(document: &Document, kind: LockKind) -> Vec<QueuedWaiter> {
    // Rule 20: arrival order's live places, earliest first.
    let Ok(now) = document.get_datetime(SERVER_NOW) else {
        return Vec::new();
    };
    let now = now.timestamp_millis();
    let access_of = |access: Option<&str>| match (access, kind) {
        (Some(READ), _) => Access::Read,
        (Some(WRITE), _) => Access::Write,
        (_, LockKind::Semaphore { permits }) => Access::Permit { permits },
        _ => Access::Exclusive,
    };
    // The queue is arrival order's line: a default-mode waiter's place is only whom a
    // release wakes.
    let mut live: Vec<LivePlace<'_>> = live_places(document, now)
        .filter(|place| place.ordered)
        .collect();
    live.sort_by_key(|place| place.arrival);
    live.into_iter()
        .map(|place| {
            let holder = HolderId::from_string(place.holder.to_owned());
            QueuedWaiter::new(holder, access_of(place.access), waited(now, place.arrival))
        })
        .collect()
}
