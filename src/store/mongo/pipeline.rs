//! The queries and update pipelines, one per store operation. Every time value comes from the
//! server's `$$NOW`; every caller-supplied string inside an aggregation expression is wrapped
//! in `$literal`, and query filters only compare values, so no lock name or holder id can be
//! read as a field path or an operator.
//!
//! A mutex's document has no `kind`; a shared record's (a semaphore's or a reader/writer
//! lock's) has one. A mutex attempt finds its document by the `_id` equality alone, which the
//! server answers by its fast `_id` path (`IDHACK`, no query planning): naming `kind:
//! {$exists: false}` in the filter cost about 6 % more server CPU per uncontended cycle on the
//! test server. Its pipeline tests the kind instead and leaves a shared record exactly as it
//! was, so the answer is that record and tells the mismatch in the same round trip. Every
//! shared operation's filter names the kind (and a semaphore's count): a request of another
//! kind matches nothing, its upsert fails on the unique `_id` (writing nothing) and the store
//! reads the record to report the mismatch. (Moving that test into the shared pipeline too
//! was measured: guarding each of its fields cost what the fast path saved.)

use std::collections::HashMap;
use std::time::Duration;

use mongodb::bson::{Bson, DateTime, Document, doc};

use super::document::kind_value;
use super::expression::{expires_from_now, field, literal, live, now_plus, waiting_since};
use super::fields::{
    ACCESS, ACQUIRED_AT, CONTENDED_AT, CONTENDERS, EXPIRES_AT, FORCED_AT, FORCED_EXPIRES_AT,
    FORCED_RELEASE, GRANTED_HOLDER, GRANTED_TOKEN, HOLDER, HOLDERS, ID, KIND, LAST_CONTENDED_MS,
    LEASE, LEASE_ID, PERMITS, READERS_TURN_FROM, READERS_TURN_SERVED, READERS_TURN_UNTIL,
    READERS_WAITING_UNTIL, RECOUNTED_FROM, RELEASED, RELEASED_AT, RELEASED_BATCH, RELEASED_LEASES,
    SEMAPHORE, SERVER_NOW, TOKEN, WAKE, WRITE, WRITER_WAITING_UNTIL, WRITERS_MARKED_BY,
};
use super::line;
use super::writers_marks;
use crate::kind::{Access, MAX_PERMITS};
use crate::name::LockName;
use crate::store::TOKENS_PER_GRANT;
use crate::store::request::mark_length;
use crate::store::request::{AcquireRequest, LeaseKey};

/// Temporary field of the acquire pipeline: whether the lock was free when the update ran.
const FREE: &str = "_mongolockFree";
/// Temporary field of the arrival-order pipelines: the other managers' live places in line.
const OTHERS_IN_LINE: &str = "_mongolockOthersInLine";
/// Temporary field of the shared acquire pipeline: the token a grant would take.
const NEXT_TOKEN: &str = "_mongolockToken";
/// Temporary field of the shared release pipelines: the holder entries being released.
const GONE: &str = "_mongolockGone";
/// Temporary field of the shared release pipelines: whether the release begins a readers'
/// turn. Computed once for the three fields it decides, not written out in each: every
/// copy of an expression costs the server on every shared release (measured in
/// `benches/HISTORY.md#p1-shared-cycle-parts`).
const TURN_BEGINS: &str = "_mongolockTurnBegins";
/// Temporary field of the shared extend pipeline: how many entries it extends.
const EXTENDED: &str = "_mongolockExtended";
/// Temporary field of the pipelines over a [`LeasesByRecord`]: the record's own leases.
const OWN_LEASES: &str = "_mongolockOwnLeases";
/// The variable a holder entry is bound to inside `$filter` and `$map`.
const ENTRY: &str = "entry";

/// How many fencing tokens fit in one millisecond of server time before tokens run ahead of
/// the clock (see the module documentation of [`super`]).
pub(super) const TOKENS_PER_MS: i64 = 1000;

/// `{_id: name}`: a plain equality on a string value.
pub(super) fn by_name(name: &LockName) -> Document {
    doc! { ID: name.as_str() }
}

/// `{_id: name, kind, $or: [{permits}, {recountedFrom: permits}]}` (a semaphore of that
/// count, or one `set_permits` changed from it) or `{_id: name, kind}` (a reader/writer
/// lock): the shared acquisition's filter. The upsert of a first grant starts from its
/// equalities (`_id`, `kind`); [`shared_acquire`] writes a new semaphore's count.
pub(super) fn shared_by_kind(name: &LockName, access: Access) -> Document {
    let mut filter = doc! { ID: name.as_str() };
    if let Some(kind) = kind_value(access.kind()) {
        filter.insert(KIND, kind);
    }
    if let Access::Permit { permits } = access {
        let counts = vec![
            doc! { PERMITS: i64::from(permits) },
            doc! { RECOUNTED_FROM: i64::from(permits) },
        ];
        filter.insert("$or", counts);
    }
    filter
}

/// `{_id: name, kind: "semaphore"}`: `set_permits`' filter, for a semaphore of any count.
pub(super) fn semaphore_by_name(name: &LockName) -> Document {
    doc! { ID: name.as_str(), KIND: SEMAPHORE }
}

/// `{_id: name, "holders.lease": lease}`: a shared record's owner check.
pub(super) fn by_holder(name: &LockName, lease: &Bson) -> Document {
    doc! { ID: name.as_str(), format!("{HOLDERS}.{LEASE}"): lease.clone() }
}

/// The shared records of `names` with a holder entry of one of `leases` (served by the
/// `_id` index; no `$expr`).
pub(super) fn by_holders(names: &[&str], leases: &[Bson]) -> Document {
    doc! { ID: { "$in": names }, format!("{HOLDERS}.{LEASE}"): { "$in": leases } }
}

/// The documents of `names` a `release_many` call `batch` released leases from.
pub(super) fn released_by(names: &[&str], batch: &Bson) -> Document {
    doc! { ID: { "$in": names }, format!("{RELEASED}.{RELEASED_BATCH}"): batch.clone() }
}

/// A shared record of `name` with an unexpired holder: what a forced release clears. An
/// operator's call, not the runtime's, so the `$expr` is acceptable here.
pub(super) fn shared_held(name: &LockName) -> Document {
    doc! {
        ID: name.as_str(),
        KIND: { "$exists": true },
        "$expr": { "$gt": [{ "$size": unexpired_holders() }, 0] },
    }
}

/// `{_id: name, leaseId: lease}`: the owner check.
pub(super) fn by_owner(name: &LockName, lease: &Bson) -> Document {
    doc! { ID: name.as_str(), LEASE_ID: lease.clone() }
}

/// `{_id: name}` held by someone: a lease id, unexpired by the server's clock.
pub(super) fn held(name: &LockName) -> Document {
    doc! {
        ID: name.as_str(),
        LEASE_ID: { "$ne": Bson::Null },
        "$expr": { "$gt": [format!("${EXPIRES_AT}"), "$$NOW"] },
    }
}

/// The owner check plus "not yet expired by the server's clock".
pub(super) fn by_unexpired_owner(name: &LockName, lease: &Bson) -> Document {
    let mut filter = by_owner(name, lease);
    filter.insert("$expr", doc! { "$gt": [format!("${EXPIRES_AT}"), "$$NOW"] });
    filter
}

/// The records of `names` that carry one of `leases` (lease ids are unique across names;
/// the names let the `_id` index find them). Expiry is checked by [`extend`]'s pipeline and
/// [`unexpired`], not here: an `$expr` in a filter is evaluated against every document on
/// some servers.
pub(super) fn by_leases(names: &[&str], leases: &[Bson]) -> Document {
    doc! { ID: { "$in": names }, LEASE_ID: { "$in": leases } }
}

/// Keeps the records whose lease has not expired by the server's clock.
pub(super) fn unexpired() -> Document {
    doc! { "$match": { "$expr": { "$gt": [format!("${EXPIRES_AT}"), "$$NOW"] } } }
}

/// The update pipeline of `try_acquire`, run by `findAndModify` with `upsert` on
/// [`by_name`]. When the lock is free (no lease, or expired by `$$NOW`) it writes the new
/// lease and the next fencing token; otherwise it only marks the grant as contended since the
/// earliest `$$NOW − waited` any requester reported (a failed attempt that reports no longer
/// wait changes nothing, so it writes nothing). A shared record (one with a `kind`) is never
/// free to a mutex and its contention mark is not a mutex's: it is left exactly as it was.
///
/// In arrival order (`in_line`: the request's `retry_within`), the lock is free only if no
/// other manager's live place in the line arrived earlier; a grant takes the requester's
/// place out, a refusal puts it in (see `line.rs`). Without it the line is neither read
/// nor written, so the plain cycle's pipeline stays as it was.
pub(super) fn acquire(
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
    let mut free = vec![
        Bson::Document(is_mutex.clone()),
        doc! { "$or": [
            { "$lte": [{ "$ifNull": [field(EXPIRES_AT), DateTime::from_millis(0)] }, "$$NOW"] },
            { "$eq": [{ "$ifNull": [field(LEASE_ID), Bson::Null] }, Bson::Null] },
        ] }
        .into(),
    ];
    let mut stages = Vec::with_capacity(4);
    if let Waits::InLine(_) = waits {
        stages.push(doc! { "$set": { OTHERS_IN_LINE: line::others_in_line(holder) } });
        let earlier = line::earlier_in(field(OTHERS_IN_LINE), Access::Exclusive, &waiting_since);
        free.push(doc! { "$not": [earlier] }.into());
    }
    stages.push(doc! { "$set": { FREE: { "$and": free } } });
    let mut fields = doc! {
        LEASE_ID: when_free(literal(lease.clone()), field(LEASE_ID).into()),
        HOLDER: when_free(literal(holder.into()), field(HOLDER).into()),
        ACQUIRED_AT: when_free("$$NOW".into(), field(ACQUIRED_AT).into()),
        EXPIRES_AT: when_free(expires_from_now(expiry).into(), field(EXPIRES_AT).into()),
        GRANTED_TOKEN: when_free(next_token().into(), field(GRANTED_TOKEN).into()),
        TOKEN: when_free(next_reserved_until().into(), field(TOKEN).into()),
        CONTENDED_AT: when_free(
            Bson::Null,
            doc! { "$cond": [
                &is_mutex,
                { "$min": [field(CONTENDED_AT), &waiting_since] },
                field(CONTENDED_AT),
            ] }.into(),
        ),
    };
    match waits {
        Waits::Unlisted => {}
        Waits::InLine(retry_within) => {
            let others = field(OTHERS_IN_LINE);
            let place = (holder, Access::Exclusive);
            let placed = line::with_place(others.clone(), place, &waiting_since, retry_within);
            fields.insert(
                line::LINE,
                doc! { "$cond": [&is_mutex, when_free(others.into(), placed.into()), field(line::LINE)] },
            );
        }
        Waits::Listed(retry_within) => {
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
        stages.push(doc! { "$unset": [FREE, OTHERS_IN_LINE] });
    } else {
        stages.push(doc! { "$unset": FREE });
    }
    stages
}

/// Where a refused mutex request puts its manager on the record's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waits {
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
    pub(super) fn of(request: &AcquireRequest) -> Self {
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
fn released_mutex_outlasts_its_line() -> Document {
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

/// The next grant's token: max(previous reserved + 1, server ms × 1000), so it is past every
/// token reserved before, also after the document is deleted. A new document has no token:
/// `$toLong` and `$add` of a missing value give null, which `$max` skips.
fn next_token() -> Document {
    doc! {
        "$max": [
            { "$add": [{ "$toLong": format!("${TOKEN}") }, 1_i64] },
            { "$multiply": [{ "$toLong": "$$NOW" }, TOKENS_PER_MS] },
        ]
    }
}

/// The last token of the next grant's block (see [`TOKENS_PER_GRANT`]).
fn next_reserved_until() -> Document {
    let after_first = i64::try_from(TOKENS_PER_GRANT - 1).unwrap_or(0);
    doc! { "$add": [next_token(), after_first] }
}

/// How long, in server milliseconds, other managers have been waiting: null if none, as
/// `$toLong` and `$subtract` of an unset mark give null.
fn contended_ms() -> Document {
    doc! { "$subtract": [{ "$toLong": "$$NOW" }, { "$toLong": field(CONTENDED_AT) }] }
}

/// Passes the lock to a new lease of the same manager: new lease, holder, start, expiry
/// and a larger token; the contention mark stays (others are still waiting) and how long
/// they have waited is reported.
///
/// In arrival order (`in_line`: the new lease's request's `waited` and `retry_within`),
/// only if no other manager's live place arrived before the request's `$$NOW − waited`;
/// otherwise the lock is released exactly as [`release`] does, and the new lease's
/// manager is put in line.
pub(super) fn hand_over(
    lease: &Bson,
    holder: &str,
    expiry: Duration,
    in_line: Option<(Duration, Duration)>,
) -> Vec<Document> {
    let handed_over = doc! {
        LEASE_ID: literal(lease.clone()),
        HOLDER: literal(holder.into()),
        ACQUIRED_AT: "$$NOW",
        EXPIRES_AT: expires_from_now(expiry),
        GRANTED_TOKEN: next_token(),
        TOKEN: next_reserved_until(),
    };
    let Some((waited, retry_within)) = in_line else {
        return vec![
            doc! { "$set": { LAST_CONTENDED_MS: contended_ms() } },
            doc! { "$set": handed_over },
        ];
    };
    let waiting_since = waiting_since(waited);
    let others = field(OTHERS_IN_LINE);
    let go = format!("${FREE}");
    // Refused, the record's expiry is raised over its new line (this manager's place
    // included) by a later stage.
    let released = released_fields(false);
    let mut fields = Document::new();
    for (key, then) in handed_over {
        let otherwise = released
            .get(&key)
            .cloned()
            .unwrap_or_else(|| field(&key).into());
        fields.insert(key, doc! { "$cond": [&go, then, otherwise] });
    }
    fields.insert(
        CONTENDED_AT,
        doc! { "$cond": [&go, field(CONTENDED_AT), Bson::Null] },
    );
    fields.insert(
        WAKE,
        doc! { "$cond": [&go, field(WAKE), wake_next(others.clone())] },
    );
    fields.insert(
        line::LINE,
        doc! { "$cond": [
            &go,
            &others,
            line::with_place(
                others.clone(),
                (holder, Access::Exclusive),
                &waiting_since,
                retry_within,
            ),
        ] },
    );
    vec![
        doc! { "$set": {
            LAST_CONTENDED_MS: contended_ms(),
            OTHERS_IN_LINE: line::others_in_line(holder),
        } },
        doc! { "$set": { FREE: {
            "$not": [line::earlier_in(others.clone(), Access::Exclusive, &waiting_since)]
        } } },
        doc! { "$set": fields },
        released_mutex_outlasts_its_line(),
        doc! { "$unset": [FREE, OTHERS_IN_LINE] },
    ]
}

/// What a release writes: no owner, the lease ended now (with `keep_line`, the record kept
/// while a place in its line lasts), no contention mark.
fn released_fields(keep_line: bool) -> Document {
    doc! {
        LEASE_ID: Bson::Null,
        HOLDER: Bson::Null,
        EXPIRES_AT: expiry_of_released(keep_line),
        CONTENDED_AT: Bson::Null,
        WAKE: wake_next(field(line::LINE)),
    }
}

/// What a mutex's release writes in [`WAKE`]: the released grant's token (so the value
/// changes with every release, and a change stream sees it as changed), a space, and the
/// holder of the earliest live place in `line`, whose release feed alone reports the
/// release — or `*` when nobody is listed, which every feed reports. A record with no line
/// (the uncontended cycle's) takes the short way, `$cond` evaluating only that branch.
fn wake_next(line: impl Into<Bson>) -> Document {
    let line = line.into();
    let token = doc! { "$toString": { "$ifNull": [field(GRANTED_TOKEN), field(TOKEN)] } };
    doc! { "$cond": [
        { "$isArray": line.clone() },
        { "$concat": [&token, " ", line::earliest_holder(line)] },
        { "$concat": [&token, " ", line::EVERYONE] },
    ] }
}

/// A released record's `expiresAt`: now, or (`keep_line`: a lease of arrival order) when
/// its line's last place ends if that is later. A lease granted in the default mode leaves
/// the line alone, so the plain cycle's release stays as small as it was.
fn expiry_of_released(keep_line: bool) -> Bson {
    if keep_line {
        line::now_or_last_place_end().into()
    } else {
        "$$NOW".into()
    }
}

/// Pushes the expiry of an unexpired lease to `$$NOW + expiry`; an expired one is left as it
/// is — not modified, which is how the caller learns it was lost.
pub(super) fn extend(expiry: Duration) -> Vec<Document> {
    let expires_at = format!("${EXPIRES_AT}");
    vec![doc! { "$set": { EXPIRES_AT: { "$cond": [
        { "$gt": [&expires_at, "$$NOW"] },
        expires_from_now(expiry),
        &expires_at,
    ] } } }]
}

/// The update pipeline of `release`: records how long others had been waiting, clears the
/// owner and the contention mark and expires the lease now, keeping the document (and its
/// token) so the next grant continues from it; `keep_line` (a lease of arrival order) keeps
/// it while a place in its line lasts.
pub(super) fn release(keep_line: bool) -> Vec<Document> {
    vec![
        doc! { "$set": { LAST_CONTENDED_MS: contended_ms() } },
        doc! { "$set": released_fields(keep_line) },
    ]
}

/// The update pipeline of `force_release`, run by `findAndModify` on [`held`]: records
/// whose grant was cleared (`forcedRelease: {at: $$NOW, holder, leaseId, expiresAt}`, also
/// the answer's only way to carry the old holder and the server's clock in one round trip;
/// the lease lets the holder's next renewal learn why it lost), then releases exactly as the
/// holder would have: the token stays, so the next grant's is larger.
pub(super) fn force_release() -> Vec<Document> {
    let mut stages = vec![doc! { "$set": { FORCED_RELEASE: {
        FORCED_AT: "$$NOW",
        HOLDER: format!("${HOLDER}"),
        LEASE_ID: format!("${LEASE_ID}"),
        FORCED_EXPIRES_AT: format!("${EXPIRES_AT}"),
    } } }];
    // The lease's mode is not known here: the line is kept in any case.
    stages.extend(release(true));
    stages
}

/// The aggregation that reads the traces of forced releases on the documents of `names`
/// (only those that have one).
pub(super) fn forced_releases(names: &[&str]) -> Vec<Document> {
    vec![
        doc! { "$match": { ID: { "$in": names }, FORCED_RELEASE: { "$exists": true } } },
        doc! { "$project": { FORCED_RELEASE: 1 } },
    ]
}

/// The aggregation of `inspect`: the document and the server's `$$NOW`, in one round trip.
pub(super) fn inspect(name: &LockName) -> Vec<Document> {
    vec![
        doc! { "$match": by_name(name) },
        doc! { "$addFields": { SERVER_NOW: "$$NOW" } },
    ]
}

/// The aggregation of `list`: every lock document with the server's `$$NOW`, by name.
pub(super) fn list() -> Vec<Document> {
    vec![
        doc! { "$addFields": { SERVER_NOW: "$$NOW" } },
        doc! { "$sort": { ID: 1 } },
    ]
}

/// `"$$entry.field"`: a field of the holder entry bound by `$filter` or `$map`.
fn entry_field(name: &str) -> String {
    format!("$${ENTRY}.{name}")
}

/// The record's holder entries, an empty list when it has none yet.
fn holders() -> Document {
    doc! { "$ifNull": [field(HOLDERS), []] }
}

/// The holder entries for which `keep` (an expression on `$$entry`) is true.
fn holders_where(keep: impl Into<Bson>) -> Document {
    doc! { "$filter": { "input": holders(), "as": ENTRY, "cond": keep.into() } }
}

/// The holder entries for which `keep` is true, on a record known to have a holder list
/// (an earlier stage set it, or the filter matched an entry): without `holders`' `$ifNull`,
/// which costs the server on every command it is in.
fn listed_holders_where(keep: impl Into<Bson>) -> Document {
    doc! { "$filter": { "input": field(HOLDERS), "as": ENTRY, "cond": keep.into() } }
}

/// The holder entries unexpired by the server's clock.
fn unexpired_holders() -> Document {
    holders_where(doc! { "$gt": [entry_field(EXPIRES_AT), "$$NOW"] })
}

/// A shared record's `expiresAt`: the latest of its holders' expiries, its live waiting
/// marks, the server's now and (`keep_line`: arrival order) the end of its line's last place,
/// so the TTL index deletes a record only once nobody holds it, nobody's mark is on and
/// nobody waits in its line (never the record of a lock in use).
fn record_expiry(keep_line: bool) -> Document {
    // Every stage before this one set the holders (an array), and `$max` skips a mark that
    // is null or missing; the holders' `$$NOW` keeps the result a date.
    let latest_holder = doc! { "$reduce": {
        "input": field(HOLDERS),
        "initialValue": "$$NOW",
        "in": { "$max": ["$$value", "$$this.expiresAt"] },
    } };
    let mut latest = vec![
        Bson::from(latest_holder),
        field(WRITER_WAITING_UNTIL).into(),
        field(READERS_WAITING_UNTIL).into(),
        field(READERS_TURN_UNTIL).into(),
    ];
    if keep_line {
        latest.push(line::now_or_last_place_end().into());
    }
    doc! { "$max": latest }
}

/// How many holder entries have `access`, once an earlier stage has set the holders.
fn count_with_access(access: &str) -> Document {
    doc! { "$size": listed_holders_where(doc! { "$eq": [entry_field(ACCESS), access] }) }
}

/// The grant rule of `access` (the contract's "Shared kinds"), on holders already pruned
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
        // The record's count (set by the stage before for a new record): a request of a
        // count it had before `set_permits` changed it is decided by the current one.
        Access::Permit { .. } => doc! { "$lt": [held, field(PERMITS)] }.into(),
        Access::Write => doc! { "$and": [
            { "$eq": [held, 0] },
            // `readersTurnServed` is true, false or unset: `$or` reads an unset one as false.
            { "$or": [{ "$not": [live(READERS_TURN_UNTIL)] }, field(READERS_TURN_SERVED)] },
            { "$not": [writers_marks::other_writer_first(holder)] },
        ] }
        .into(),
        Access::Read => {
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
/// [`shared_by_kind`]: prunes expired holders; if the grant rule admits `access`, appends
/// the new holder entry with the next token (reserving a block, as a mutex grant does),
/// clears the contention mark and, for a write, the writers' mark; otherwise marks the
/// record contended since `$$NOW − waited` (keeping the earliest) and, for a read or write
/// with a `retry_within`, marks its side waiting until `$$NOW + retry_within` (keeping the
/// later). Granted iff the returned holders include `lease`.
pub(super) fn shared_acquire(
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
        GRANTED_TOKEN: when_free(field(NEXT_TOKEN).into(), field(GRANTED_TOKEN).into()),
        TOKEN: when_free(
            doc! { "$add": [field(NEXT_TOKEN), after_first] }.into(),
            field(TOKEN).into(),
        ),
        GRANTED_HOLDER: when_free(literal(holder.into()), field(GRANTED_HOLDER).into()),
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
        let placed = line::with_place(
            others.clone(),
            (holder, access),
            &waiting_since,
            retry_within,
        );
        decided.insert(line::LINE, when_free(others.into(), placed.into()));
    }
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
        // The writer's wait is over, and so is any readers' turn it came after.
        Access::Write => {
            decided.insert(
                READERS_TURN_UNTIL,
                when_free(Bson::Null, field(READERS_TURN_UNTIL).into()),
            );
        }
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

/// Extends the places of `batch` in their shared records, all to `$$NOW + expiry`. Each
/// record's entries are tested against its own leases only (see [`LeasesByRecord`]).
///
/// `all_or_none`: a record is changed only if every one of its leases in the batch still
/// holds an unexpired place, so an `update` whose modified count equals the number of
/// records extended every lease, with no read-back. Otherwise each held place is extended
/// whatever happened to the others, and only a read-back can say which. A record none of
/// whose entries it extends is left exactly as it was: not modified.
pub(super) fn shared_extend(
    batch: &LeasesByRecord<'_>,
    expiry: Duration,
    all_or_none: bool,
) -> Vec<Document> {
    let held = Bson::Document(doc! { "$size": holders_where(own_held_entry()) });
    let extending = if all_or_none {
        Bson::Document(
            doc! { "$cond": [{ "$eq": [held.clone(), { "$size": field(OWN_LEASES) }] }, held, 0] },
        )
    } else {
        held
    };
    let extended =
        doc! { "$mergeObjects": [format!("$${ENTRY}"), { EXPIRES_AT: expires_from_now(expiry) }] };
    vec![
        own_leases_stage(batch),
        doc! { "$set": { EXTENDED: extending } },
        doc! { "$set": {
            HOLDERS: { "$map": {
                "input": holders(),
                "as": ENTRY,
                "in": { "$cond": [
                    { "$and": [{ "$gt": [field(EXTENDED), 0] }, own_held_entry()] },
                    extended,
                    format!("$${ENTRY}"),
                ] },
            } },
            EXPIRES_AT: { "$cond": [
                { "$gt": [field(EXTENDED), 0] },
                { "$max": [field(EXPIRES_AT), expires_from_now(expiry)] },
                field(EXPIRES_AT),
            ] },
        } },
        doc! { "$unset": [EXTENDED, OWN_LEASES] },
    ]
}

/// Removes the holder entries for which `gone` (an expression on `$$entry`) is true, as a
/// release does: records how long others had waited (`lastContendedMs`, the contention
/// mark itself stays until the next grant), turns the readers' turn on until the readers'
/// mark ends if a write was released while readers wait, stamps `releasedAt` (what the
/// change-stream feeds look for) and recomputes `expiresAt`. `trace`, if given, is a
/// `release_many` batch id, recorded with the released leases.
fn shared_release_where(
    gone: Document,
    trace: Option<&Bson>,
    keep_line: bool,
    released: Released,
) -> Vec<Document> {
    let mut stages = removal_stages(gone, trace, true, released);
    stages.push(doc! { "$set": { EXPIRES_AT: record_expiry(keep_line) } });
    stages.push(released.unset_temporaries());
    stages
}

/// What a shared release removes, as far as the readers' turn goes: only a write's release
/// can begin one, so a release of leases known to be reads or permits leaves the turn out
/// of its pipeline. The turn's expressions cost the server on every release they are in,
/// evaluated or not (measured in `benches/HISTORY.md#p1-release-without-turn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Released {
    /// A write may be among the leases (or their access is not known).
    MaybeAWrite,
    /// Reads or permits only.
    NoWrite,
}

impl Released {
    /// What a release of `keys` removes.
    pub(super) fn of<'a>(keys: impl IntoIterator<Item = &'a LeaseKey>) -> Self {
        let no_write = keys
            .into_iter()
            .all(|key| matches!(key.access, Some(Access::Read | Access::Permit { .. })));
        if no_write {
            Self::NoWrite
        } else {
            Self::MaybeAWrite
        }
    }

    /// The closing stage of a release: removes the temporary fields its stages set.
    fn unset_temporaries(self) -> Document {
        match self {
            Self::MaybeAWrite => doc! { "$unset": [GONE, TURN_BEGINS] },
            Self::NoWrite => doc! { "$unset": [GONE] },
        }
    }
}

/// The stages that remove the holder entries for which `gone` is true (see
/// [`shared_release_where`]); `stamp_released` sets `releasedAt` in the last.
fn removal_stages(
    gone: Document,
    trace: Option<&Bson>,
    stamp_released: bool,
    released_access: Released,
) -> Vec<Document> {
    let (turn_stage, turn_fields) = (released_access == Released::MaybeAWrite)
        .then(readers_turn)
        .unzip();
    // Every caller's filter matched a holder entry: the record has its list.
    let mut released = doc! { HOLDERS: listed_holders_where(doc! { "$not": [gone.clone()] }) };
    if let Some(fields) = turn_fields {
        released.extend(fields);
    }
    if stamp_released {
        released.insert(RELEASED_AT, "$$NOW");
    }
    if let Some(batch) = trace {
        released.insert(
            RELEASED,
            doc! {
                RELEASED_BATCH: literal(batch.clone()),
                RELEASED_LEASES: { "$map": { "input": field(GONE), "as": ENTRY, "in": entry_field(LEASE) } },
            },
        );
    }
    // Only another manager's wait counts: one whose only refusals since the last grant
    // were its own is served by its own releases.
    let gone_holders =
        doc! { "$map": { "input": field(GONE), "as": ENTRY, "in": entry_field(HOLDER) } };
    let others_wait = doc! { "$gt": [
        { "$size": { "$setDifference": [{ "$ifNull": [field(CONTENDERS), []] }, gone_holders] } },
        0,
    ] };
    released.insert(
        LAST_CONTENDED_MS,
        doc! { "$cond": [others_wait, contended_ms(), Bson::Null] },
    );
    let mut stages = vec![doc! { "$set": { GONE: listed_holders_where(gone) } }];
    stages.extend(turn_stage);
    stages.push(doc! { "$set": released });
    stages
}

/// The readers' turn at a release: the stage that decides whether the release begins one
/// (a write among the entries removed while readers wait), and the turn's fields, which
/// read that decision.
fn readers_turn() -> (Document, Document) {
    let wrote_released = doc! { "$gt": [
        { "$size": { "$filter": {
            "input": field(GONE),
            "as": ENTRY,
            "cond": { "$eq": [entry_field(ACCESS), WRITE] },
        } } },
        0,
    ] };
    let turn_begins = doc! { "$and": [wrote_released, live(READERS_WAITING_UNTIL)] };
    let on_turn = |begun: Bson, otherwise: &str| -> Document {
        doc! { "$cond": [field(TURN_BEGINS), begun, field(otherwise)] }
    };
    let fields = doc! {
        READERS_TURN_UNTIL: on_turn(field(READERS_WAITING_UNTIL).into(), READERS_TURN_UNTIL),
        READERS_TURN_FROM: on_turn("$$NOW".into(), READERS_TURN_FROM),
        READERS_TURN_SERVED: on_turn(false.into(), READERS_TURN_SERVED),
    };
    (doc! { "$set": { TURN_BEGINS: turn_begins } }, fields)
}

/// `{_id: name, kind…, "holders.lease": from}` with `from`'s entry unexpired by the
/// server's clock: a shared hand-over's filter (the kind and count of `access`, as
/// [`shared_by_kind`]; the owner check of [`by_holder`]).
pub(super) fn shared_hand_over_filter(name: &LockName, from: &Bson, access: Access) -> Document {
    let mut filter = shared_by_kind(name, access);
    filter.insert(format!("{HOLDERS}.{LEASE}"), from.clone());
    let unexpired = doc! { "$and": [
        { "$eq": [entry_field(LEASE), literal(from.clone())] },
        { "$gt": [entry_field(EXPIRES_AT), "$$NOW"] },
    ] };
    filter.insert(
        "$expr",
        doc! { "$gt": [{ "$size": holders_where(unexpired) }, 0] },
    );
    filter
}

/// The update pipeline of a shared record's hand-over from the lease `from` to the grant
/// `acquire` (the stages [`shared_acquire`] gives for the new lease `to`), run by
/// `findAndModify` on [`shared_hand_over_filter`]: removes `from`'s entry as a release
/// does, then decides `to` by the grant rules in the same write. `releasedAt` is stamped
/// only when `to` was refused, so the release feeds wake other processes' waiters only when
/// a place is free. Granted iff the returned holders include `to`.
pub(super) fn shared_hand_over(
    from: &Bson,
    released: Released,
    to: &Bson,
    acquire: Vec<Document>,
) -> Vec<Document> {
    let gone = doc! { "$eq": [entry_field(LEASE), literal(from.clone())] };
    let granted = doc! { "$in": [literal(to.clone()), { "$map": {
        "input": holders(),
        "as": ENTRY,
        "in": entry_field(LEASE),
    } }] };
    let mut stages = removal_stages(gone, None, false, released);
    stages.extend(acquire);
    stages.push(
        doc! { "$set": { RELEASED_AT: { "$cond": [granted, field(RELEASED_AT), "$$NOW"] } } },
    );
    stages.push(released.unset_temporaries());
    stages
}

/// The update pipeline of a shared record's release of `leases` (one for `release`, a
/// batch's for `release_many`, which passes its id as `trace`); `keep_line` (leases of
/// arrival order) keeps the record while a place in its line lasts.
pub(super) fn shared_release(
    leases: &[Bson],
    trace: Option<&Bson>,
    keep_line: bool,
    released: Released,
) -> Vec<Document> {
    shared_release_where(
        doc! { "$in": [entry_field(LEASE), literal(Bson::Array(leases.to_vec()))] },
        trace,
        keep_line,
        released,
    )
}

/// The update pipeline of `release_many` on mutex documents: records the batch and the
/// lease it releases (`released: {batch, leases: [leaseId]}`), then releases exactly as
/// [`release`] does.
pub(super) fn release_traced(batch: &Bson, keep_line: bool) -> Vec<Document> {
    let mut stages = vec![doc! { "$set": { RELEASED: {
        RELEASED_BATCH: literal(batch.clone()),
        RELEASED_LEASES: [field(LEASE_ID)],
    } } }];
    stages.extend(release(keep_line));
    stages
}

/// The update pipeline of a forced release of a shared record, run by `findAndModify` on
/// [`shared_held`]: records the holders it clears (`forcedRelease: {at: $$NOW, holders}`)
/// and releases every entry as their holders would have (the readers' turn included); the
/// tokens stay, so the next grant's is larger.
pub(super) fn force_release_shared() -> Vec<Document> {
    let mut stages = vec![doc! { "$set": { FORCED_RELEASE: {
        FORCED_AT: "$$NOW",
        HOLDERS: unexpired_holders(),
    } } }];
    stages.extend(shared_release_where(
        doc! { "$literal": true },
        None,
        true,
        Released::MaybeAWrite,
    ));
    stages
}

/// The update pipeline of `set_permits`, run by `findAndModify` with `upsert` on
/// [`semaphore_by_name`]: sets the count, and gives a record it creates an empty holder
/// list and an expiry of now (so an unused one is collected like a released lock).
pub(super) fn set_permits(permits: u32) -> Vec<Document> {
    let new = i64::from(permits);
    let before = doc! { "$ifNull": [field(RECOUNTED_FROM), []] };
    // The old count joins the counts the record had (once), the new one leaves them.
    let old = doc! { "$cond": [
        { "$or": [
            { "$eq": [{ "$ifNull": [field(PERMITS), Bson::Null] }, Bson::Null] },
            { "$in": [field(PERMITS), before.clone()] },
        ] },
        [],
        [field(PERMITS)],
    ] };
    let recounted_from = doc! { "$filter": {
        "input": { "$concatArrays": [before, old] },
        "as": "count",
        "cond": { "$ne": ["$$count", new] },
    } };
    vec![doc! { "$set": {
        RECOUNTED_FROM: recounted_from,
        PERMITS: new,
        HOLDERS: holders(),
        EXPIRES_AT: { "$ifNull": [field(EXPIRES_AT), "$$NOW"] },
    } }]
}

/// The aggregation that tells which leases of `batch` still hold an unexpired place in
/// their shared records: one document per record, with the held ones in `leases`.
pub(super) fn held_shared_leases(batch: &LeasesByRecord<'_>) -> Vec<Document> {
    vec![
        doc! { "$match": batch.filter() },
        own_leases_stage(batch),
        doc! { "$project": { RELEASED_LEASES: {
            "$map": {
                "input": holders_where(own_held_entry()),
                "as": ENTRY,
                "in": entry_field(LEASE),
            },
        } } },
    ]
}

/// The leases of a batch (a renewal, its read-back) grouped by the shared record that holds
/// them: `leases[i]` are the leases of `names[i]`, names distinct, in first-seen order.
///
/// A pipeline over the batch gives each record its own list, found by its `_id`, and tests
/// the record's entries against that list alone. Tested against the whole batch's leases
/// instead, each entry costs an `$in` over the batch (which servers scan element by
/// element), and the cost per lease grows with the batch: on the test server 26 µs per lease
/// at 100 leases, 119 µs at 2,000.
#[derive(Debug, Default)]
pub(super) struct LeasesByRecord<'a> {
    names: Vec<&'a str>,
    leases: Vec<Vec<Bson>>,
}

impl<'a> LeasesByRecord<'a> {
    /// Groups `(name, lease)` pairs by name.
    pub(super) fn group(pairs: impl IntoIterator<Item = (&'a str, Bson)>) -> Self {
        let mut batch = Self::default();
        let mut index = HashMap::new();
        for (name, lease) in pairs {
            let at = *index.entry(name).or_insert_with(|| {
                batch.names.push(name);
                batch.leases.push(Vec::new());
                batch.names.len() - 1
            });
            batch.leases[at].push(lease);
        }
        batch
    }

    /// How many records the batch names.
    pub(super) fn records(&self) -> usize {
        self.names.len()
    }

    /// `{_id: {$in: names}, kind: {$exists: true}}`: the shared records of the names (found
    /// by the `_id` index; a mutex of one of the names has no holders to extend); which of
    /// their entries are the batch's is the pipeline's to decide.
    pub(super) fn filter(&self) -> Document {
        doc! { ID: { "$in": &self.names }, KIND: { "$exists": true } }
    }
}

/// Sets the temporary `OWN_LEASES` field to the record's own leases in `batch`. The record's
/// `_id` is always among the batch's names (every pipeline over a batch matches by
/// [`LeasesByRecord::filter`]), so the index found is never -1.
fn own_leases_stage(batch: &LeasesByRecord<'_>) -> Document {
    let names: Vec<Bson> = batch.names.iter().map(|&name| name.into()).collect();
    let leases: Vec<Bson> = batch.leases.iter().cloned().map(Bson::Array).collect();
    doc! { "$set": { OWN_LEASES: { "$arrayElemAt": [
        literal(Bson::Array(leases)),
        { "$indexOfArray": [literal(Bson::Array(names)), field(ID)] },
    ] } } }
}

/// Whether the holder entry bound to `$$entry` is one of the record's own leases of the
/// batch and unexpired by the server's clock.
fn own_held_entry() -> Document {
    doc! { "$and": [
        { "$in": [entry_field(LEASE), field(OWN_LEASES)] },
        { "$gt": [entry_field(EXPIRES_AT), "$$NOW"] },
    ] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_only_values() {
        let name = LockName::new("$gt").unwrap();
        assert_eq!(by_name(&name), doc! { "_id": "$gt" });
        let pipeline = acquire(
            &Bson::Null,
            "$holder",
            Duration::from_secs(1),
            (Duration::ZERO, Waits::Unlisted),
        );
        let holder = pipeline[1]
            .get_document("$set")
            .and_then(|set| set.get_document(HOLDER))
            .and_then(|holder| holder.get_array("$cond"))
            .unwrap();
        assert_eq!(holder[1], Bson::Document(doc! { "$literal": "$holder" }));
    }

    #[test]
    fn shared_names_and_holders_are_only_values() {
        let name = LockName::new("$gt").unwrap();
        assert_eq!(
            shared_by_kind(&name, Access::Permit { permits: 3 }),
            doc! {
                "_id": "$gt",
                "kind": "semaphore",
                "$or": [{ "permits": 3_i64 }, { "recountedFrom": 3_i64 }],
            }
        );
        assert_eq!(
            shared_by_kind(&name, Access::Read),
            doc! { "_id": "$gt", "kind": "rwlock" }
        );
        assert_eq!(
            by_holder(&name, &Bson::Null),
            doc! { "_id": "$gt", "holders.lease": Bson::Null }
        );
        let pipeline = shared_acquire(
            Access::Write,
            &Bson::Null,
            "$holder",
            Duration::from_secs(1),
            (Duration::ZERO, Duration::ZERO, false),
        );
        let decided = pipeline[2].get_document("$set").unwrap();
        let granted = decided.get_document(GRANTED_HOLDER).unwrap();
        assert_eq!(
            granted.get_array("$cond").unwrap()[1],
            Bson::Document(doc! { "$literal": "$holder" })
        );
        let appended = decided
            .get_document(HOLDERS)
            .and_then(|holders| holders.get_array("$cond"))
            .unwrap()[1]
            .as_document()
            .and_then(|concat| concat.get_array("$concatArrays").ok())
            .and_then(|parts| parts[1].as_array())
            .and_then(|entries| entries[0].as_document())
            .cloned()
            .unwrap();
        assert_eq!(
            appended.get(HOLDER),
            Some(&Bson::Document(doc! { "$literal": "$holder" }))
        );
        assert_eq!(
            appended.get(ACCESS),
            Some(&Bson::Document(doc! { "$literal": "write" }))
        );
    }

    #[test]
    fn a_renewal_batch_groups_leases_by_record_and_names_stay_values() {
        let batch = LeasesByRecord::group([
            ("$gt", Bson::Int32(1)),
            ("b.c", Bson::Int32(2)),
            ("$gt", Bson::Int32(3)),
        ]);
        assert_eq!(batch.records(), 2);
        assert_eq!(
            batch.filter(),
            doc! { "_id": { "$in": ["$gt", "b.c"] }, "kind": { "$exists": true } }
        );
        let pipeline = shared_extend(&batch, Duration::from_secs(1), true);
        assert_eq!(
            pipeline[0],
            doc! { "$set": { OWN_LEASES: { "$arrayElemAt": [
                { "$literal": [[1, 3], [2]] },
                { "$indexOfArray": [{ "$literal": ["$gt", "b.c"] }, "$_id"] },
            ] } } }
        );
    }

    /// The plain cycle (a first attempt, a default-mode hand-over, shared kinds out of
    /// line) neither reads nor writes the line; a waiter of the default mode is listed in
    /// it, and a mutex's release reads it to name whom it wakes.
    #[test]
    fn the_plain_cycle_never_reads_or_writes_the_line() {
        let mentions_line = |stages: &[Document]| {
            let text = format!("{stages:?}");
            text.contains(line::LINE) || text.contains(OTHERS_IN_LINE)
        };
        let expiry = Duration::from_secs(1);
        let plain = acquire(&Bson::Null, "h", expiry, (Duration::ZERO, Waits::Unlisted));
        assert!(!mentions_line(&plain), "{plain:?}");
        assert_eq!(
            plain.len(),
            3,
            "the plain cycle's acquire keeps its three stages"
        );
        assert!(!mentions_line(&hand_over(&Bson::Null, "h", expiry, None)));
        let shared = shared_acquire(
            Access::Read,
            &Bson::Null,
            "h",
            expiry,
            (Duration::ZERO, Duration::ZERO, false),
        );
        assert!(!mentions_line(&shared));
        assert!(!mentions_line(&shared_release(
            &[Bson::Null],
            None,
            false,
            Released::MaybeAWrite
        )));
        let in_line = acquire(
            &Bson::Null,
            "h",
            expiry,
            (Duration::ZERO, Waits::InLine(expiry)),
        );
        assert!(mentions_line(&in_line));
        let listed = acquire(
            &Bson::Null,
            "h",
            expiry,
            (Duration::ZERO, Waits::Listed(expiry)),
        );
        assert!(mentions_line(&listed));
        assert_eq!(listed.len(), 3, "listing a waiter adds no stage");
        assert!(
            format!("{listed:?}").contains("ordered"),
            "a default-mode waiter's place orders nobody"
        );
        assert!(
            !format!("{in_line:?}").contains("ordered: false"),
            "{in_line:?}"
        );
        assert!(
            mentions_line(&release(false)),
            "a release wakes the earliest listed"
        );
        // A lease of arrival order keeps its released record while its line lasts.
        assert!(mentions_line(&release(true)));
        assert!(mentions_line(&shared_release(
            &[Bson::Null],
            None,
            true,
            Released::MaybeAWrite
        )));
    }

    /// Only a write's release can begin a readers' turn: a release of reads or permits
    /// known as such leaves the turn out; one that may free a write, or whose access is
    /// not known, keeps it.
    #[test]
    fn only_a_release_that_may_free_a_write_carries_the_readers_turn() {
        let key = |access: Option<Access>| {
            let key = LeaseKey::shared(LockName::new("n").unwrap(), crate::store::LeaseId::new());
            match access {
                Some(access) => key.with_access(access),
                None => key,
            }
        };
        let (read, permit) = (
            key(Some(Access::Read)),
            key(Some(Access::Permit { permits: 3 })),
        );
        let (write, unknown) = (key(Some(Access::Write)), key(None));
        assert_eq!(Released::of([&read, &permit]), Released::NoWrite);
        assert_eq!(Released::of([&read, &write]), Released::MaybeAWrite);
        assert_eq!(Released::of([&permit, &unknown]), Released::MaybeAWrite);
        let mentions_turn = |stages: &[Document]| {
            let text = format!("{stages:?}");
            text.contains(TURN_BEGINS) || text.contains(READERS_TURN_FROM)
        };
        for (released, turn) in [(Released::NoWrite, false), (Released::MaybeAWrite, true)] {
            let release = shared_release(&[Bson::Null], None, false, released);
            assert_eq!(mentions_turn(&release), turn, "{release:?}");
            let hand_over = shared_hand_over(&Bson::Null, released, &Bson::Null, Vec::new());
            assert_eq!(mentions_turn(&hand_over), turn, "{hand_over:?}");
        }
    }

    #[test]
    fn a_zero_retry_leaves_the_waiting_mark_as_it_is() {
        let pipeline = |retry| {
            shared_acquire(
                Access::Read,
                &Bson::Null,
                "h",
                Duration::from_secs(1),
                (Duration::ZERO, retry, false),
            )
        };
        let refused = |pipeline: &[Document]| {
            pipeline[2]
                .get_document("$set")
                .and_then(|set| set.get_document(READERS_WAITING_UNTIL))
                .and_then(|mark| mark.get_array("$cond"))
                .map(|branches| branches[2].clone())
                .unwrap()
        };
        assert_eq!(
            refused(&pipeline(Duration::ZERO)),
            Bson::from(format!("${READERS_WAITING_UNTIL}"))
        );
        assert!(
            refused(&pipeline(Duration::from_millis(300)))
                .as_document()
                .is_some_and(|mark| mark.contains_key("$max"))
        );
    }
}
