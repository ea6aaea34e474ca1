//! The update pipeline of `set_permits`: a semaphore's count.

use mongodb::bson::{Bson, Document, doc};

use super::holders::holders;
use crate::store::mongo::expression::field;
use crate::store::mongo::fields::{EXPIRES_AT, HOLDERS, PERMITS, RECOUNTED_FROM};

/// The update pipeline of `set_permits`, run by `findAndModify` with `upsert` on
/// [`semaphore_by_name`](super::filter::semaphore_by_name): sets the count, and gives a record
/// it creates an empty holder list and an expiry of now (so an unused one is collected like a
/// released lock).
pub(in crate::store::mongo) fn set_permits(permits: u32) -> Vec<Document> {
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
