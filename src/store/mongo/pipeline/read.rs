//! The aggregations that only read: inspection, listing, and the traces of forced releases.

use mongodb::bson::{Document, doc};

use super::filter::by_name;
use crate::name::LockName;
use crate::store::mongo::fields::{FORCED_RELEASE, ID, SERVER_NOW};

/// The aggregation that reads the traces of forced releases on the documents of `names`
/// (only those that have one).
pub(in crate::store::mongo) fn forced_releases(names: &[&str]) -> Vec<Document> {
    vec![
        doc! { "$match": { ID: { "$in": names }, FORCED_RELEASE: { "$exists": true } } },
        doc! { "$project": { FORCED_RELEASE: 1 } },
    ]
}

/// The aggregation of `inspect`: the document and the server's `$$NOW`, in one round trip.
pub(in crate::store::mongo) fn inspect(name: &LockName) -> Vec<Document> {
    vec![
        doc! { "$match": by_name(name) },
        doc! { "$addFields": { SERVER_NOW: "$$NOW" } },
    ]
}

/// The aggregation of `list`: every lock document with the server's `$$NOW`, by name.
pub(in crate::store::mongo) fn list() -> Vec<Document> {
    vec![
        doc! { "$addFields": { SERVER_NOW: "$$NOW" } },
        doc! { "$sort": { ID: 1 } },
    ]
}
