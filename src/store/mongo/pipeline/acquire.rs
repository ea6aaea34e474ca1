//! The update pipelines of an attempt: a mutex's (`acquire`, with the line of waiting
//! managers) and a shared record's (`shared_acquire`, deciding by the grant rule of the access).

use std::time::Duration;

use mongodb::bson::{Bson, DateTime, Document, doc};

use super::holders::{count_with_access, record_expiry, unexpired_holders};
use super::release::wake_next;
use super::token::{next_reserved_until, next_token};
use crate::kind::{Access, MAX_PERMITS};
use crate::store::TOKENS_PER_GRANT;
use crate::store::mongo::expression::{
    expires_from_now, field, literal, live, now_plus, waiting_since,
};
use crate::store::mongo::fields::{
    ACCESS, ACQUIRED_AT, CONTENDED_AT, CONTENDERS, EXPIRES_AT, FREE, GRANTED_HOLDER, GRANTED_TOKEN,
    HOLDER, HOLDERS, KIND, LEASE, LEASE_ID, NEXT_TOKEN, OTHERS_IN_LINE, PASSES_WAKE, PERMITS,
    READERS_TURN_FROM, READERS_TURN_SERVED, READERS_TURN_UNTIL, READERS_WAITING_UNTIL, TOKEN, WAKE,
    WRITE, WRITER_WAITING_UNTIL, WRITERS_MARKED_BY,
};
use crate::store::mongo::line;
use crate::store::mongo::writers_marks;
use crate::store::request::{AcquireRequest, mark_length};

/// The update pipeline of `try_acquire`, run by `findAndModify` with `upsert` on
/// [`by_name`](super::filter::by_name). When the lock is free (no lease, or expired by `$$NOW`)
/// it writes the new lease and the next fencing token; otherwise it only marks the grant as
/// contended since the earliest `$$NOW − waited` any requester reported (a failed attempt that
/// reports no longer wait changes nothing, so it writes nothing). A shared record (one with a
/// `kind`) is never free to a mutex and its contention mark is not a mutex's: it is left
/// exactly as it was.
///
/// In arrival order (`in_line`: the request's `retry_within`), the lock is free only if no
/// other manager's live place in the line arrived earlier; a grant takes the requester's
/// place out, a refusal puts it in (see `line.rs`), and a refusal by the line alone (the
/// lease had ended) names the earliest place's manager in `wake`, for its release feed.
/// Without it the line is neither read nor written, so the plain cycle's pipeline stays as
/// it was.
pub(in crate::store::mongo) fn acquire(
    lease: &Bson,
    holder: &str,
    expiry: Duration,
    (waited, waits): (Duration, Waits),
) -> Vec<Document> {
    let when_free = |then: Bson, otherwise: Bson| -> Bson {
        Bson::Document(doc! { "$cond": [format!("${FREE}"), then, otherwise] })
    };
    let is_mutex = is_mutex_record();
    // When this requester started waiting, by the server's clock.
    let waiting_since = waiting_since(waited);
    // Rule 1: free if the record is a mutex's with no lease, or one expired by the server's clock.
    let lease_ended = doc! { "$or": [
        { "$lte": [{ "$ifNull": [field(EXPIRES_AT), DateTime::from_millis(0)] }, "$$NOW"] },
        { "$eq": [{ "$ifNull": [field(LEASE_ID), Bson::Null] }, Bson::Null] },
    ] };
    let mut free = vec![Bson::Document(is_mutex.clone()), lease_ended.clone().into()];
    let mut stages = Vec::with_capacity(4);
    let mut decided = doc! {};
    if let Waits::InLine(_) = waits {
        // Rule 16: an earlier place of another manager holds the request back.
        stages.push(doc! { "$set": { OTHERS_IN_LINE: line::others_in_line(holder) } });
        let earlier = line::earlier_in(field(OTHERS_IN_LINE), Access::Exclusive, &waiting_since);
        free.push(doc! { "$not": [&earlier] }.into());
        // Rule 22: refused only by the line, the request passes the wake on.
        decided.insert(
            PASSES_WAKE,
            doc! { "$and": [&is_mutex, lease_ended, earlier] },
        );
    }
    decided.insert(FREE, doc! { "$and": free });
    stages.push(doc! { "$set": decided });
    let mut fields = doc! {
        LEASE_ID: when_free(literal(lease.clone()), field(LEASE_ID).into()),
        HOLDER: when_free(literal(holder.into()), field(HOLDER).into()),
        ACQUIRED_AT: when_free("$$NOW".into(), field(ACQUIRED_AT).into()),
        EXPIRES_AT: when_free(expires_from_now(expiry).into(), field(EXPIRES_AT).into()),
        // Rules 1 and 6.
        GRANTED_TOKEN: when_free(next_token().into(), field(GRANTED_TOKEN).into()),
        TOKEN: when_free(next_reserved_until().into(), field(TOKEN).into()),
        // Rule 3.
        CONTENDED_AT: when_free(
            contended_at_grant(holder, waits),
            doc! { "$cond": [
                &is_mutex,
                { "$min": [field(CONTENDED_AT), &waiting_since] },
                field(CONTENDED_AT),
            ] }.into(),
        ),
    };
    match waits {
        Waits::Unlisted => {}
        // Rules 16 and 18: a grant takes its place out, a refusal puts it in.
        Waits::InLine(retry_within) => {
            let others = field(OTHERS_IN_LINE);
            let place = (holder, Access::Exclusive);
            let placed = line::with_place(others.clone(), place, &waiting_since, retry_within);
            fields.insert(
                line::LINE,
                doc! { "$cond": [&is_mutex, when_free(others.clone().into(), placed.into()), field(line::LINE)] },
            );
            // The value changes only when the earliest place does, so a manager already
            // woken is not woken again by every refusal while it comes.
            fields.insert(
                WAKE,
                doc! { "$cond": [field(PASSES_WAKE), wake_next(others), field(WAKE)] },
            );
        }
        Waits::Listed(retry_within) => {
            // Rule 21.
            // No stage of its own, and `$cond` evaluates only the branch it takes: the
            // uncontended grant only checks that there is no line to leave.
            let others = line::others_in_line(holder);
            let placed =
                line::with_unordered_place(others.clone(), holder, &waiting_since, retry_within);
            let left = doc! { "$cond": [{ "$isArray": field(line::LINE) }, others, "$$REMOVE"] };
            fields.insert(
                line::LINE,
                doc! { "$cond": [&is_mutex, when_free(left.into(), placed.into()), field(line::LINE)] },
            );
        }
    }
    stages.push(doc! { "$set": fields });
    if let Waits::InLine(_) = waits {
        stages.push(released_mutex_outlasts_its_line());
        stages.push(doc! { "$unset": [FREE, OTHERS_IN_LINE, PASSES_WAKE] });
    } else {
        stages.push(doc! { "$unset": FREE });
    }
    stages
}

/// A mutex grant's contention mark (rule 3): the earliest arrival of another manager's live
/// place in the line, listed or in line, or null. A grant made while others wait for it is
/// contended from the start: its holder, told at its first hand-over or release, lets them
/// have their turns then, rather than when one of them, waiting quietly, asks again. A
/// request that waits on nothing (an unlisted first attempt, a single try) leaves the mark
/// null, so the plain cycle's pipeline stays as it was.
fn contended_at_grant(holder: &str, waits: Waits) -> Bson {
    let others: Bson = match waits {
        Waits::Unlisted => return Bson::Null,
        // Already worked out by the stage before, for the line's own rule.
        Waits::InLine(_) => field(OTHERS_IN_LINE).into(),
        Waits::Listed(_) => line::others_in_line(holder).into(),
    };
    doc! { "$cond": [
        { "$isArray": field(line::LINE) },
        { "$min": { "$map": { "input": others, "in": line::arrival_of("$$this") } } },
        Bson::Null,
    ] }
    .into()
}

/// Where a refused mutex request puts its manager on the record's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store::mongo) enum Waits {
    /// Nowhere: a single try, which comes back only if its caller asks again.
    Unlisted,
    /// In line (arrival order), its place lasting the given `retry_within`.
    InLine(Duration),
    /// Listed for a release to wake (the default mode), for the given `retry_within`: it
    /// holds nobody back.
    Listed(Duration),
}

impl Waits {
    /// How `request` waits: in line in arrival order, listed if it waits in the default
    /// mode (it has a `retry_within`), otherwise not at all.
    pub(in crate::store::mongo) fn of(request: &AcquireRequest) -> Self {
        if request.in_arrival_order {
            Self::InLine(request.retry_within)
        } else if request.retry_within.is_zero() {
            Self::Unlisted
        } else {
            Self::Listed(request.retry_within)
        }
    }
}

/// Whether the document is a mutex's record: it has no `kind`.
fn is_mutex_record() -> Document {
    doc! { "$eq": [{ "$type": field(KIND) }, "missing"] }
}

/// Raises a released mutex record's `expiresAt` (what the TTL index deletes it by) to when
/// the line it now carries ends, if later: a refused attempt or hand-over puts a place in
/// the line that may outlast the expiry its release set. Run after the line is written.
/// Only where no lease is set: an unreleased lease's `expiresAt` is its end, and raising it
/// would bring an expired lease back to life. A shared record keeps its own expiry.
pub(super) fn released_mutex_outlasts_its_line() -> Document {
    // Rule 20: a released record outlives its line.
    let released_mutex = doc! { "$and": [
        is_mutex_record(),
        { "$eq": [{ "$ifNull": [field(LEASE_ID), Bson::Null] }, Bson::Null] },
    ] };
    doc! { "$set": { EXPIRES_AT: { "$cond": [
        released_mutex,
        line::now_or_last_place_end(),
        field(EXPIRES_AT),
    ] } } }
}

/// The grant rule of `access` (the contract's rules 8 to 10), on holders already pruned
/// of expired entries: a permit while fewer than `permits` hold; the write while nobody
/// holds and the readers' turn is off or has let a reader in; a read while no writer
/// holds, fewer than `MAX_PERMITS` read, and no writer waits — unless it is the readers'
/// turn and this reader (waiting since `waiting_since`) waited since the turn began.
///
/// In arrival order (`in_line`) the line decides who goes first instead of the waiting
/// marks and the readers' turn: a permit while fewer hold than the count, the write while
/// nobody holds, a read while no writer holds and fewer than `MAX_PERMITS` read — each only
/// if no other manager's live place it waits behind arrived earlier.
fn grant_rule(access: Access, holder: &str, waiting_since: &Bson, in_line: bool) -> Bson {
    let held = doc! { "$size": field(HOLDERS) };
    if in_line {
        // Rule 16: the count alone, then the line.
        let fits = match access {
            Access::Permit { .. } => doc! { "$lt": [held, field(PERMITS)] },
            Access::Write => doc! { "$eq": [held, 0] },
            _ => doc! { "$and": [
                { "$eq": [count_with_access(WRITE), 0] },
                { "$lt": [held, i64::from(MAX_PERMITS)] },
            ] },
        };
        let earlier = line::earlier_in(field(OTHERS_IN_LINE), access, waiting_since);
        return doc! { "$and": [fits, { "$not": [earlier] }] }.into();
    }
    match access {
        // Rule 8 (and rule 7 for an older count).
        // The record's count (set by the stage before for a new record): a request of a
        // count it had before `set_permits` changed it is decided by the current one.
        Access::Permit { .. } => doc! { "$lt": [held, field(PERMITS)] }.into(),
        // Rule 9.
        Access::Write => doc! { "$and": [
            { "$eq": [held, 0] },
            // `readersTurnServed` is true, false or unset: `$or` reads an unset one as false.
            { "$or": [{ "$not": [live(READERS_TURN_UNTIL)] }, field(READERS_TURN_SERVED)] },
            { "$not": [writers_marks::other_writer_first(holder)] },
        ] }
        .into(),
        Access::Read => {
            // Rule 10, with rule 13's turn.
            let waited_for_the_turn = doc! { "$and": [
                live(READERS_TURN_UNTIL),
                // No turn's start (null) sorts below every date: false, as for a live turn
                // that began before this reader asked.
                { "$lte": [waiting_since, field(READERS_TURN_FROM)] },
                // Until a reader of the turn got in and all have left again: then the
                // waiting writer goes next. An unset flag reads as not served.
                { "$or": [{ "$not": [field(READERS_TURN_SERVED)] }, { "$gt": [&held, 0] }] },
            ] };
            doc! { "$and": [
                { "$eq": [count_with_access(WRITE), 0] },
                { "$lt": [held, i64::from(MAX_PERMITS)] },
                { "$or": [waited_for_the_turn, { "$not": [live(WRITER_WAITING_UNTIL)] }] },
            ] }
            .into()
        }
        // A mutex never reaches a shared record's pipeline.
        _ => false.into(),
    }
}

/// The update pipeline of a shared `try_acquire`, run by `findAndModify` with `upsert` on
/// [`shared_by_kind`](super::filter::shared_by_kind): prunes expired holders; if the grant rule
/// admits `access`, appends the new holder entry with the next token (reserving a block, as a
/// mutex grant does), clears the contention mark and, for a write, the writers' mark; otherwise
/// marks the record contended since `$$NOW − waited` (keeping the earliest) and, for a read or
/// write with a `retry_within`, marks its side waiting until `$$NOW + retry_within` (keeping
/// the later). Granted iff the returned holders include `lease`.
pub(in crate::store::mongo) fn shared_acquire(
    access: Access,
    lease: &Bson,
    holder: &str,
    expiry: Duration,
    (waited, retry_within, in_line): (Duration, Duration, bool),
) -> Vec<Document> {
    let when_free = |then: Bson, otherwise: Bson| -> Bson {
        Bson::Document(doc! { "$cond": [field(FREE), then, otherwise] })
    };
    let waiting_since = waiting_since(waited);
    let entry = doc! {
        LEASE: literal(lease.clone()),
        HOLDER: literal(holder.into()),
        TOKEN: field(NEXT_TOKEN),
        ACCESS: literal(access.as_str().into()),
        ACQUIRED_AT: "$$NOW",
        EXPIRES_AT: expires_from_now(expiry),
    };
    let after_first = i64::try_from(TOKENS_PER_GRANT - 1).unwrap_or(0);
    let mut decided = doc! {
        HOLDERS: when_free(
            doc! { "$concatArrays": [field(HOLDERS), [entry]] }.into(),
            field(HOLDERS).into(),
        ),
        // Rule 14.
        GRANTED_TOKEN: when_free(field(NEXT_TOKEN).into(), field(GRANTED_TOKEN).into()),
        TOKEN: when_free(
            doc! { "$add": [field(NEXT_TOKEN), after_first] }.into(),
            field(TOKEN).into(),
        ),
        GRANTED_HOLDER: when_free(literal(holder.into()), field(GRANTED_HOLDER).into()),
        // Rule 3, and who was refused (a release reports only other managers' waits).
        CONTENDED_AT: when_free(
            Bson::Null,
            // `$min` skips an unset mark.
            doc! { "$min": [field(CONTENDED_AT), &waiting_since] }
            .into(),
        ),
        CONTENDERS: when_free(
            Bson::Null,
            doc! { "$setUnion": [
                { "$ifNull": [field(CONTENDERS), []] },
                [literal(holder.into())],
            ] }
            .into(),
        ),
    };
    let waiting_mark = match access {
        Access::Write => Some(WRITER_WAITING_UNTIL),
        Access::Read => Some(READERS_WAITING_UNTIL),
        _ => None,
    };
    if in_line {
        let others = field(OTHERS_IN_LINE);
        // Rules 16 and 18.
        let placed = line::with_place(
            others.clone(),
            (holder, access),
            &waiting_since,
            retry_within,
        );
        decided.insert(line::LINE, when_free(others.into(), placed.into()));
    }
    // Rules 11 and 12: a refused writer or reader marks its side waiting.
    if let Some(mark) = waiting_mark.filter(|_| !in_line) {
        let refused = if retry_within.is_zero() {
            Bson::from(field(mark))
        } else {
            // `$max` skips an unset mark.
            doc! { "$max": [field(mark), now_plus(mark_length(retry_within))] }.into()
        };
        let granted = if access == Access::Write {
            let (marks, granted) =
                writers_marks::after_attempt(&field(FREE).into(), holder, retry_within);
            decided.insert(WRITERS_MARKED_BY, marks);
            granted
        } else {
            field(mark).into()
        };
        decided.insert(mark, when_free(granted, refused));
    }
    match access {
        // Rules 11 and 13.
        // The writer's wait is over, and so is any readers' turn it came after.
        Access::Write => {
            decided.insert(
                READERS_TURN_UNTIL,
                when_free(Bson::Null, field(READERS_TURN_UNTIL).into()),
            );
        }
        // Rule 13: the turn has let a reader in.
        // Served once a reader gets in during a live turn, and so until the next turn
        // begins. One `$or` rather than a `$cond` on the grant: smaller, and so cheaper.
        Access::Read => {
            let served = doc! { "$or": [
                field(READERS_TURN_SERVED),
                { "$and": [field(FREE), live(READERS_TURN_UNTIL)] },
            ] };
            decided.insert(READERS_TURN_SERVED, served);
        }
        _ => {}
    }
    // Only unexpired holders count (rules 8 to 10).
    let mut first = doc! { HOLDERS: unexpired_holders(), NEXT_TOKEN: next_token() };
    let mut temporary = vec![FREE, NEXT_TOKEN];
    if in_line {
        first.insert(OTHERS_IN_LINE, line::others_in_line(holder));
        temporary.push(OTHERS_IN_LINE);
    } else if access == Access::Write {
        first.insert(writers_marks::LIVE_MARKS, writers_marks::live_marks());
        temporary.push(writers_marks::LIVE_MARKS);
    }
    if let Access::Permit { permits } = access {
        first.insert(
            PERMITS,
            doc! { "$ifNull": [field(PERMITS), i64::from(permits)] },
        );
    }
    vec![
        doc! { "$set": first },
        doc! { "$set": { FREE: grant_rule(access, holder, &waiting_since, in_line) } },
        doc! { "$set": decided },
        doc! { "$set": { EXPIRES_AT: record_expiry(in_line) } },
        doc! { "$unset": temporary },
    ]
}
