//! The query filters: which document an operation may touch (by name, by owner, by kind).
//! They only compare values, so no name or lease is read as an operator.

use mongodb::bson::{Bson, Document, doc};

use super::holders::{entry_field, holders_where, unexpired_holders};
use crate::kind::Access;
use crate::name::LockName;
use crate::store::mongo::document::kind_value;
use crate::store::mongo::expression::literal;
use crate::store::mongo::fields::{
    EXPIRES_AT, HOLDERS, ID, KIND, LEASE, LEASE_ID, PERMITS, RECOUNTED_FROM, RELEASED,
    RELEASED_BATCH, SEMAPHORE,
};

/// `{_id: name}`: a plain equality on a string value.
pub(in crate::store::mongo) fn by_name(name: &LockName) -> Document {
    // Rule 4: the name is compared as a value.
    doc! { ID: name.as_str() }
}

/// `{_id: name, kind, $or: [{permits}, {recountedFrom: permits}]}` (a semaphore of that count,
/// or one `set_permits` changed from it) or `{_id: name, kind}` (a reader/writer lock): the
/// shared acquisition's filter. The upsert of a first grant starts from its equalities (`_id`,
/// `kind`); [`shared_acquire`](super::acquire::shared_acquire) writes a new semaphore's count.
pub(in crate::store::mongo) fn shared_by_kind(name: &LockName, access: Access) -> Document {
    // Rule 7: a record of another kind or count matches nothing.
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
pub(in crate::store::mongo) fn semaphore_by_name(name: &LockName) -> Document {
    doc! { ID: name.as_str(), KIND: SEMAPHORE }
}

/// `{_id: name, "holders.lease": lease}`: a shared record's owner check.
pub(in crate::store::mongo) fn by_holder(name: &LockName, lease: &Bson) -> Document {
    // Rule 2.
    doc! { ID: name.as_str(), format!("{HOLDERS}.{LEASE}"): lease.clone() }
}

/// The shared records of `names` with a holder entry of one of `leases` (served by the
/// `_id` index; no `$expr`).
pub(in crate::store::mongo) fn by_holders(names: &[&str], leases: &[Bson]) -> Document {
    doc! { ID: { "$in": names }, format!("{HOLDERS}.{LEASE}"): { "$in": leases } }
}

/// The documents of `names` a `release_many` call `batch` released leases from.
pub(in crate::store::mongo) fn released_by(names: &[&str], batch: &Bson) -> Document {
    doc! { ID: { "$in": names }, format!("{RELEASED}.{RELEASED_BATCH}"): batch.clone() }
}

/// A shared record of `name` with an unexpired holder: what a forced release clears. An
/// operator's call, not the runtime's, so the `$expr` is acceptable here.
pub(in crate::store::mongo) fn shared_held(name: &LockName) -> Document {
    doc! {
        ID: name.as_str(),
        KIND: { "$exists": true },
        "$expr": { "$gt": [{ "$size": unexpired_holders() }, 0] },
    }
}

/// `{_id: name, leaseId: lease}`: the owner check.
pub(in crate::store::mongo) fn by_owner(name: &LockName, lease: &Bson) -> Document {
    // Rule 2.
    doc! { ID: name.as_str(), LEASE_ID: lease.clone() }
}

/// `{_id: name}` held by someone: a lease id, unexpired by the server's clock.
pub(in crate::store::mongo) fn held(name: &LockName) -> Document {
    doc! {
        ID: name.as_str(),
        LEASE_ID: { "$ne": Bson::Null },
        "$expr": { "$gt": [format!("${EXPIRES_AT}"), "$$NOW"] },
    }
}

/// The owner check plus "not yet expired by the server's clock".
pub(in crate::store::mongo) fn by_unexpired_owner(name: &LockName, lease: &Bson) -> Document {
    // Rule 2.
    let mut filter = by_owner(name, lease);
    filter.insert("$expr", doc! { "$gt": [format!("${EXPIRES_AT}"), "$$NOW"] });
    filter
}

/// The records of `names` that carry one of `leases` (lease ids are unique across names; the
/// names let the `_id` index find them). Expiry is checked by
/// [`extend`](super::extend::extend)'s pipeline and [`unexpired`], not here: an `$expr` in a
/// filter is evaluated against every document on some servers.
pub(in crate::store::mongo) fn by_leases(names: &[&str], leases: &[Bson]) -> Document {
    doc! { ID: { "$in": names }, LEASE_ID: { "$in": leases } }
}

/// Keeps the records whose lease has not expired by the server's clock.
pub(in crate::store::mongo) fn unexpired() -> Document {
    doc! { "$match": { "$expr": { "$gt": [format!("${EXPIRES_AT}"), "$$NOW"] } } }
}

/// `{_id: name, kind…, "holders.lease": from}` with `from`'s entry unexpired by the
/// server's clock: a shared hand-over's filter (the kind and count of `access`, as
/// [`shared_by_kind`]; the owner check of [`by_holder`]).
pub(in crate::store::mongo) fn shared_hand_over_filter(
    name: &LockName,
    from: &Bson,
    access: Access,
) -> Document {
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
