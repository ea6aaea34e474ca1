//! The writers' marks on a reader/writer lock's document (rules 9 and 11 of
//! [`LockStore`](crate::store::LockStore), in the default mode):
//!
//! ```text
//! writersMarkedBy: [{ holder: "host:4242:1a2b3c4d", until: ISODate("…") }, …]
//! writerWaitingUntil: ISODate("…")   // the latest `until`: new readers wait
//! ```
//!
//! One mark per manager whose writer was refused, in the order they were first refused;
//! `until` is the server's `$$NOW` plus the refusal's `retry_within` (the later of that and
//! the mark's end before), and a mark is live until then. A write is granted only to the
//! manager of the earliest live mark, or to anyone if none is live: a process that keeps
//! handing the lock from writer to writer does not keep another process's writer out. A
//! grant ends its manager's mark and leaves the others'.

use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};

use super::expression::{literal, now_plus};
use super::fields::{HOLDER, WRITERS_MARKED_BY};
use crate::store::request::mark_length;

/// The live marks, computed once per write attempt by its first stage (and unset by its
/// last).
pub(super) const LIVE_MARKS: &str = "liveWritersMarks";
/// When a mark ends unless its writer is refused again, by the server's clock.
const UNTIL: &str = "until";
/// The variable a mark is bound to inside `$filter` and `$map`.
const MARK: &str = "mark";

/// The document's live marks, earliest first (for [`LIVE_MARKS`]).
pub(super) fn live_marks() -> Document {
    doc! { "$filter": {
        "input": { "$ifNull": [format!("${WRITERS_MARKED_BY}"), []] },
        "as": MARK,
        "cond": { "$gt": [format!("$${MARK}.{UNTIL}"), "$$NOW"] },
    } }
}

/// Whether the earliest live mark is another manager's than `holder` (false with no live
/// mark): then that manager's writer goes first, and `holder`'s write is refused.
pub(super) fn other_writer_first(holder: &str) -> Document {
    // Rule 9.
    let first = doc! { "$arrayElemAt": [format!("${LIVE_MARKS}"), 0] };
    doc! { "$let": {
        "vars": { "first": first },
        // A missing first mark (no live one) reads as `holder`'s own.
        "in": { "$ne": [
            { "$ifNull": [format!("$$first.{HOLDER}"), literal(holder.into())] },
            literal(holder.into()),
        ] },
    } }
}

/// A write attempt's effect on the marks, for the stage that reads whether it was granted
/// (`granted`, an expression): granted, `holder`'s mark ends; refused with a
/// `retry_within`, `holder`'s mark lasts at least that long, in its place or, new, behind
/// every live one; refused with none, the marks stay as they were. Returns the marks' new
/// value and the writers' mark's (`writerWaitingUntil`) value on a grant: the latest end
/// of the marks left, none if none is.
pub(super) fn after_attempt(granted: &Bson, holder: &str, retry_within: Duration) -> (Bson, Bson) {
    // Rule 11.
    let others = others_than(format!("${LIVE_MARKS}").into(), holder);
    let mark_on_grant = latest_end(&others);
    let holder = literal(holder.into());
    let refused = if retry_within.is_zero() {
        Bson::from(format!("${WRITERS_MARKED_BY}"))
    } else {
        let until = now_plus(mark_length(retry_within));
        let kept = doc! { "$map": {
            "input": format!("${LIVE_MARKS}"),
            "as": MARK,
            "in": { "$cond": [
                { "$eq": [format!("$${MARK}.{HOLDER}"), &holder] },
                { HOLDER: &holder, UNTIL: { "$max": [format!("$${MARK}.{UNTIL}"), &until] } },
                format!("$${MARK}"),
            ] },
        } };
        let had_one = doc! { "$lt": [{ "$size": &others }, { "$size": format!("${LIVE_MARKS}") }] };
        let new_mark = doc! { "$cond": [had_one, [], [{ HOLDER: &holder, UNTIL: until }]] };
        doc! { "$concatArrays": [kept, new_mark] }.into()
    };
    let marks = doc! { "$cond": [granted, others, refused] };
    (marks.into(), mark_on_grant.into())
}

/// A withdrawal's effect on the marks (`holder`'s writers gave up): `holder`'s mark ends,
/// and so does every mark that ended; the others stay in their order. Returns the marks'
/// new value and the writers' waiting mark's: the latest end of the marks left, none if
/// none is.
pub(super) fn without(holder: &str) -> (Bson, Bson) {
    // Rule 11: a withdrawal ends the mark.
    let others = others_than(live_marks().into(), holder);
    let latest = latest_end(&others);
    (others.into(), latest.into())
}

/// The marks of `marks` (an expression for live ones) of managers other than `holder`.
fn others_than(marks: Bson, holder: &str) -> Document {
    doc! { "$filter": {
        "input": marks,
        "as": MARK,
        "cond": { "$ne": [format!("$${MARK}.{HOLDER}"), literal(holder.into())] },
    } }
}

/// The latest end among `marks` (an expression), null if there are none.
fn latest_end(marks: &Document) -> Document {
    doc! { "$max": { "$map": {
        "input": marks,
        "as": MARK,
        "in": format!("$${MARK}.{UNTIL}"),
    } } }
}
