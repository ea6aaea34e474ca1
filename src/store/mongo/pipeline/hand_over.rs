//! The update pipelines of a hand-over to a waiter of the same manager: a mutex's
//! (`hand_over`) and a shared record's (`shared_hand_over`, a release and an attempt in one
//! write).

use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};

use super::acquire::released_mutex_outlasts_its_line;
use super::holders::{ENTRY, entry_field, holders};
use super::release::{
    Released, contended_ms, released_fields, removal_stages, shared_wake, wake_next,
};
use super::token::{next_reserved_until, next_token};
use crate::kind::Access;
use crate::store::mongo::expression::{expires_from_now, field, literal, waiting_since};
use crate::store::mongo::fields::{
    ACQUIRED_AT, CONTENDED_AT, EXPIRES_AT, FREE, GRANTED_TOKEN, HOLDER, LAST_CONTENDED_MS, LEASE,
    LEASE_ID, OTHERS_IN_LINE, RELEASED_AT, TOKEN, WAKE,
};
use crate::store::mongo::line;

/// Passes the lock to a new lease of the same manager: new lease, holder, start, expiry
/// and a larger token; the contention mark stays (others are still waiting) and how long
/// they have waited is reported.
///
/// In arrival order (`in_line`: the new lease's request's `waited` and `retry_within`), only if
/// no other manager's live place arrived before the request's `$$NOW − waited`; otherwise the
/// lock is released exactly as [`release`](super::release::release) does, and the new lease's
/// manager is put in line.
pub(in crate::store::mongo) fn hand_over(
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
        // Rules 1 and 6.
        GRANTED_TOKEN: next_token(),
        TOKEN: next_reserved_until(),
    };
    // Rule 19: in arrival order, an earlier place elsewhere turns the hand-over into a release.
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

/// The update pipeline of a shared record's hand-over from the lease `from` to the grant
/// `acquire` (the stages [`shared_acquire`](super::acquire::shared_acquire) gives for the new
/// lease `to`), run by `findAndModify` on
/// [`shared_hand_over_filter`](super::filter::shared_hand_over_filter): removes `from`'s entry
/// as a release does, then decides `to` by the grant rules in the same write. `releasedAt` is
/// stamped only when `to` was refused, so the release feeds wake other processes' waiters only
/// when a place is free; `in_line` (a lease of arrival order) then also names in `wake` whom
/// the release lets in next. Granted iff the returned holders include `to`.
pub(in crate::store::mongo) fn shared_hand_over(
    (from, released): (&Bson, Released),
    to: &Bson,
    acquire: Vec<Document>,
    in_line: bool,
) -> Vec<Document> {
    let gone = doc! { "$eq": [entry_field(LEASE), literal(from.clone())] };
    let granted = doc! { "$in": [literal(to.clone()), { "$map": {
        "input": holders(),
        "as": ENTRY,
        "in": entry_field(LEASE),
    } }] };
    let mut stages = removal_stages(gone, None, false, released);
    stages.extend(acquire);
    let mut stamps = doc! { RELEASED_AT: { "$cond": [&granted, field(RELEASED_AT), "$$NOW"] } };
    if in_line {
        // Rule 22: a hand-over that granted is no release, and wakes nobody.
        stamps.insert(
            WAKE,
            doc! { "$cond": [&granted, field(WAKE), shared_wake()] },
        );
    }
    stages.push(doc! { "$set": stamps });
    stages.push(released.unset_temporaries());
    stages
}
