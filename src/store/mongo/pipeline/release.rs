//! The update pipelines of a release: a mutex's (`release`, `release_traced`,
//! `force_release`) and a shared record's (`shared_release`, `force_release_shared`), with
//! the readers' turn a write's release may begin and whom a mutex's release wakes.

use mongodb::bson::{Bson, Document, doc};

use super::holders::{ENTRY, entry_field, listed_holders_where, record_expiry, unexpired_holders};
use crate::kind::{Access, MAX_PERMITS};
use crate::store::mongo::expression::{field, literal, live};
use crate::store::mongo::fields::{
    ACCESS, CONTENDED_AT, CONTENDERS, EXPIRES_AT, FORCED_AT, FORCED_EXPIRES_AT, FORCED_RELEASE,
    GONE, GRANTED_TOKEN, HOLDER, HOLDERS, KIND, LAST_CONTENDED_MS, LEASE, LEASE_ID, PERMITS,
    READERS_TURN_FROM, READERS_TURN_SERVED, READERS_TURN_UNTIL, READERS_WAITING_UNTIL, RELEASED,
    RELEASED_AT, RELEASED_BATCH, RELEASED_LEASES, SEMAPHORE, TOKEN, TURN_BEGINS, WAKE, WRITE,
};
use crate::store::mongo::line;
use crate::store::request::LeaseKey;

/// The update pipeline of `release`: records how long others had been waiting, clears the
/// owner and the contention mark and expires the lease now, keeping the document (and its
/// token) so the next grant continues from it; `keep_line` (a lease of arrival order) keeps
/// it while a place in its line lasts.
pub(in crate::store::mongo) fn release(keep_line: bool) -> Vec<Document> {
    vec![
        // Rule 3.
        doc! { "$set": { LAST_CONTENDED_MS: contended_ms() } },
        doc! { "$set": released_fields(keep_line) },
    ]
}

/// The update pipeline of `release_many` on mutex documents: records the batch and the
/// lease it releases (`released: {batch, leases: [leaseId]}`), then releases exactly as
/// [`release`] does.
pub(in crate::store::mongo) fn release_traced(batch: &Bson, keep_line: bool) -> Vec<Document> {
    let mut stages = vec![doc! { "$set": { RELEASED: {
        RELEASED_BATCH: literal(batch.clone()),
        RELEASED_LEASES: [field(LEASE_ID)],
    } } }];
    stages.extend(release(keep_line));
    stages
}

/// The update pipeline of `force_release`, run by `findAndModify` on
/// [`held`](super::filter::held): records whose grant was cleared (`forcedRelease: {at: $$NOW,
/// holder, leaseId, expiresAt}`, also the answer's only way to carry the old holder and the
/// server's clock in one round trip; the lease lets the holder's next renewal learn why it
/// lost), then releases exactly as the holder would have: the token stays, so the next grant's
/// is larger.
pub(in crate::store::mongo) fn force_release() -> Vec<Document> {
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

/// The update pipeline of a shared record's release of `leases` (one for `release`, a
/// batch's for `release_many`, which passes its id as `trace`); `keep_line` (leases of
/// arrival order) keeps the record while a place in its line lasts.
pub(in crate::store::mongo) fn shared_release(
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

/// The update pipeline of a forced release of a shared record, run by `findAndModify` on
/// [`shared_held`](super::filter::shared_held): records the holders it clears (`forcedRelease:
/// {at: $$NOW, holders}`) and releases every entry as their holders would have (the readers'
/// turn included); the tokens stay, so the next grant's is larger.
pub(in crate::store::mongo) fn force_release_shared() -> Vec<Document> {
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
    let mut after = doc! { EXPIRES_AT: record_expiry(keep_line) };
    if keep_line {
        // Rule 22: only a lease of arrival order reads the line; the plain cycle's release
        // wakes every feed by its `releasedAt`.
        after.insert(WAKE, shared_wake());
    }
    stages.push(doc! { "$set": after });
    stages.push(released.unset_temporaries());
    stages
}

/// What a shared release removes, as far as the readers' turn goes: only a write's release
/// can begin one, so a release of leases known to be reads or permits leaves the turn out
/// of its pipeline. The turn's expressions cost the server on every release they are in,
/// evaluated or not (measured in `benches/HISTORY.md#p1-release-without-turn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store::mongo) enum Released {
    /// A write may be among the leases (or their access is not known).
    MaybeAWrite,
    /// Reads or permits only.
    NoWrite,
}

impl Released {
    /// What a release of `keys` removes.
    pub(in crate::store::mongo) fn of<'a>(keys: impl IntoIterator<Item = &'a LeaseKey>) -> Self {
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
    pub(super) fn unset_temporaries(self) -> Document {
        match self {
            Self::MaybeAWrite => doc! { "$unset": [GONE, TURN_BEGINS] },
            Self::NoWrite => doc! { "$unset": [GONE] },
        }
    }
}

/// The stages that remove the holder entries for which `gone` is true (see
/// [`shared_release_where`]); `stamp_released` sets `releasedAt` in the last.
pub(super) fn removal_stages(
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
    // Rule 3.
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
    // Rule 13: a write's release while readers wait begins their turn.
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

/// What a release writes: no owner, the lease ended now (with `keep_line`, the record kept
/// while a place in its line lasts), no contention mark.
pub(super) fn released_fields(keep_line: bool) -> Document {
    doc! {
        LEASE_ID: Bson::Null,
        HOLDER: Bson::Null,
        EXPIRES_AT: expiry_of_released(keep_line),
        CONTENDED_AT: Bson::Null,
        // Rule 22.
        WAKE: wake_next(field(line::LINE)),
    }
}

/// What a shared record's release of arrival order writes in [`WAKE`], in a stage after
/// the one that removed the released entries (it reads the holders left and the removed
/// ones): the first released entry's token (unique to that grant, so the value changes
/// with every release and a change stream sees it), then whom the release wakes (see
/// [`line::shared_woken`]).
pub(super) fn shared_wake() -> Document {
    // Rule 22, from the record as the release leaves it.
    let released_token = doc! { "$arrayElemAt": [
        { "$map": { "input": field(GONE), "as": ENTRY, "in": entry_field(TOKEN) } },
        0,
    ] };
    // Every caller's filter matched an entry, so one was removed; were none, the server's
    // clock still makes the value new.
    let token = doc! { "$toString": { "$ifNull": [released_token, { "$toLong": "$$NOW" }] } };
    let holding = "$$holding";
    let writes_held = doc! { "$size": { "$filter": {
        "input": holding,
        "as": ENTRY,
        "cond": { "$eq": [entry_field(ACCESS), WRITE] },
    } } };
    let woken = line::shared_woken(
        doc! { "$eq": [field(KIND), SEMAPHORE] },
        doc! { "$subtract": [field(PERMITS), { "$size": holding }] },
        doc! { "$eq": [{ "$size": holding }, 0] },
        doc! { "$and": [
            { "$eq": [writes_held, 0] },
            { "$lt": [{ "$size": holding }, i64::from(MAX_PERMITS)] },
        ] },
    );
    doc! { "$let": {
        "vars": { "holding": listed_holders_where(doc! { "$gt": [entry_field(EXPIRES_AT), "$$NOW"] }) },
        "in": { "$concat": [token, woken] },
    } }
}

/// What a mutex's release writes in [`WAKE`]: the released grant's token (so the value
/// changes with every release, and a change stream sees it as changed), a space, and the
/// holder of the earliest live place in `line`, whose release feed alone reports the
/// release — or `*` when nobody is listed, which every feed reports. A record with no line
/// (the uncontended cycle's) takes the short way, `$cond` evaluating only that branch.
pub(super) fn wake_next(line: impl Into<Bson>) -> Document {
    // Rule 22: the manager of the earliest live place, or every feed.
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
    // Rule 20: a released record outlives its line.
    if keep_line {
        line::now_or_last_place_end().into()
    } else {
        "$$NOW".into()
    }
}

/// How long, in server milliseconds, other managers have been waiting: null if none, as
/// `$toLong` and `$subtract` of an unset mark give null.
pub(super) fn contended_ms() -> Document {
    doc! { "$subtract": [{ "$toLong": "$$NOW" }, { "$toLong": field(CONTENDED_AT) }] }
}
