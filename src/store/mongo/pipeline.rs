//! The queries and update pipelines, one per store operation. Every time value comes from the
//! server's `$$NOW`; every caller-supplied string inside an aggregation expression is wrapped
//! in `$literal`, and query filters only compare values, so no lock name or holder id can be
//! read as a field path or an operator.
//!
//! SecantusDB (the test server) rejects `$add`/`$subtract` on dates, so dates are only built
//! with `$dateAdd` and turned into numbers with `$toLong` before any arithmetic.

use std::time::Duration;

use mongodb::bson::{Bson, DateTime, Document, doc};

use super::document::{
    ACQUIRED_AT, CONTENDED_AT, EXPIRES_AT, FORCED_AT, FORCED_EXPIRES_AT, FORCED_RELEASE,
    GRANTED_TOKEN, HOLDER, ID, LAST_CONTENDED_MS, LEASE_ID, SERVER_NOW, TOKEN,
};
use crate::name::LockName;
use crate::store::TOKENS_PER_GRANT;

/// Temporary field of the acquire pipeline: whether the lock was free when the update ran.
const FREE: &str = "_mongolockFree";

/// How many fencing tokens fit in one millisecond of server time before tokens run ahead of
/// the clock (see the module documentation of [`super`]).
pub(super) const TOKENS_PER_MS: i64 = 1000;

/// `{_id: name}`: a plain equality on a string value.
pub(super) fn by_name(name: &LockName) -> Document {
    doc! { ID: name.as_str() }
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

/// The lease length in whole milliseconds, rounded up so a sub-millisecond expiry still
/// lasts a moment.
fn expiry_ms(expiry: Duration) -> i64 {
    duration_ms(expiry).max(1)
}

/// A duration in whole milliseconds, rounded up.
fn duration_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX)
}

/// `$$NOW + expiry`.
fn expires_from_now(expiry: Duration) -> Document {
    doc! {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": expiry_ms(expiry) }
    }
}

/// The update pipeline of `try_acquire`, run by `findAndModify` with `upsert` on
/// [`by_name`]. When the lock is free (no lease, or expired by `$$NOW`) it writes the new
/// lease and the next fencing token; otherwise it only marks the grant as contended since the
/// earliest `$$NOW − waited` any requester reported (a failed attempt that reports no longer
/// wait changes nothing, so it writes nothing).
pub(super) fn acquire(
    lease: &Bson,
    holder: &str,
    expiry: Duration,
    waited: Duration,
) -> Vec<Document> {
    let field = |name: &str| format!("${name}");
    let when_free = |then: Bson, otherwise: Bson| -> Bson {
        Bson::Document(doc! { "$cond": [format!("${FREE}"), then, otherwise] })
    };
    let free = doc! {
        "$or": [
            { "$lte": [{ "$ifNull": [field(EXPIRES_AT), DateTime::from_millis(0)] }, "$$NOW"] },
            { "$eq": [{ "$ifNull": [field(LEASE_ID), Bson::Null] }, Bson::Null] },
        ]
    };
    // When this requester started waiting, by the server's clock.
    let waiting_since = doc! {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": -duration_ms(waited) }
    };
    vec![
        doc! { "$set": { FREE: free } },
        doc! { "$set": {
            LEASE_ID: when_free(literal(lease.clone()), field(LEASE_ID).into()),
            HOLDER: when_free(literal(holder.into()), field(HOLDER).into()),
            ACQUIRED_AT: when_free("$$NOW".into(), field(ACQUIRED_AT).into()),
            EXPIRES_AT: when_free(expires_from_now(expiry).into(), field(EXPIRES_AT).into()),
            GRANTED_TOKEN: when_free(next_token().into(), field(GRANTED_TOKEN).into()),
            TOKEN: when_free(next_reserved_until().into(), field(TOKEN).into()),
            CONTENDED_AT: when_free(
                Bson::Null,
                doc! { "$min": [
                    { "$ifNull": [field(CONTENDED_AT), &waiting_since] },
                    &waiting_since,
                ] }.into(),
            ),
        } },
        doc! { "$unset": FREE },
    ]
}

/// The next grant's token: max(previous reserved + 1, server ms × 1000), so it is past every
/// token reserved before, also after the document is deleted.
fn next_token() -> Document {
    doc! {
        "$max": [
            { "$add": [{ "$toLong": { "$ifNull": [format!("${TOKEN}"), 0_i64] } }, 1_i64] },
            { "$multiply": [{ "$toLong": "$$NOW" }, TOKENS_PER_MS] },
        ]
    }
}

/// The last token of the next grant's block (see [`TOKENS_PER_GRANT`]).
fn next_reserved_until() -> Document {
    let after_first = i64::try_from(TOKENS_PER_GRANT - 1).unwrap_or(0);
    doc! { "$add": [next_token(), after_first] }
}

/// How long, in server milliseconds, other managers have been waiting (null if none).
fn contended_ms() -> Document {
    let contended_at = format!("${CONTENDED_AT}");
    doc! {
        "$cond": [
            { "$eq": [{ "$ifNull": [&contended_at, Bson::Null] }, Bson::Null] },
            Bson::Null,
            { "$subtract": [{ "$toLong": "$$NOW" }, { "$toLong": &contended_at }] },
        ]
    }
}

/// Passes the lock to a new lease of the same manager: new lease, holder, start, expiry
/// and a larger token; the contention mark stays (others are still waiting) and how long
/// they have waited is reported.
pub(super) fn hand_over(lease: &Bson, holder: &str, expiry: Duration) -> Vec<Document> {
    vec![
        doc! { "$set": { LAST_CONTENDED_MS: contended_ms() } },
        doc! { "$set": {
            LEASE_ID: literal(lease.clone()),
            HOLDER: literal(holder.into()),
            ACQUIRED_AT: "$$NOW",
            EXPIRES_AT: expires_from_now(expiry),
            GRANTED_TOKEN: next_token(),
            TOKEN: next_reserved_until(),
        } },
    ]
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
/// token) so the next grant continues from it.
pub(super) fn release() -> Vec<Document> {
    vec![
        doc! { "$set": { LAST_CONTENDED_MS: contended_ms() } },
        doc! { "$set": {
            LEASE_ID: Bson::Null,
            HOLDER: Bson::Null,
            EXPIRES_AT: "$$NOW",
            CONTENDED_AT: Bson::Null,
        } },
    ]
}

/// The update pipeline of `force_release`, run by `findAndModify` on [`held`]: records
/// whose grant was cleared (`forcedRelease: {at: $$NOW, holder, expiresAt}`, also the
/// answer's only way to carry the old holder and the server's clock in one round trip), then
/// releases exactly as the holder would have: the token stays, so the next grant's is larger.
pub(super) fn force_release() -> Vec<Document> {
    let mut stages = vec![doc! { "$set": { FORCED_RELEASE: {
        FORCED_AT: "$$NOW",
        HOLDER: format!("${HOLDER}"),
        FORCED_EXPIRES_AT: format!("${EXPIRES_AT}"),
    } } }];
    stages.extend(release());
    stages
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

fn literal(value: Bson) -> Bson {
    Bson::Document(doc! { "$literal": value })
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
            Duration::ZERO,
        );
        let holder = pipeline[1]
            .get_document("$set")
            .and_then(|set| set.get_document(HOLDER))
            .and_then(|holder| holder.get_array("$cond"))
            .unwrap();
        assert_eq!(holder[1], Bson::Document(doc! { "$literal": "$holder" }));
    }

    #[test]
    fn expiry_rounds_up_to_a_millisecond() {
        assert_eq!(expiry_ms(Duration::from_micros(1)), 1);
        assert_eq!(expiry_ms(Duration::from_micros(1500)), 2);
        assert_eq!(expiry_ms(Duration::from_secs(30)), 30_000);
        assert_eq!(expiry_ms(Duration::MAX), i64::MAX);
    }
}
