//! The uncontended mutex cycle as mongolock sent it before shared kinds existed: the baseline
//! S1's server-CPU row compares today's cycle with. Acquire is `findAndModify({_id}, …,
//! upsert, returnDocument: after)` with the pipeline of that time (free when no lease or
//! expired by `$$NOW`; the next token past every reserved one and past `$$NOW` × 1000, a
//! block of 16; the contention stamp), release `findAndModify({_id, leaseId}, …)` keeping
//! the document. Written out here, not captured, because the code that sent it is gone.

use std::time::Duration;

use mongodb::bson::{Bson, DateTime, Document, Uuid, doc};
use mongodb::options::{CollectionOptions, IndexOptions, ReturnDocument, WriteConcern};
use mongodb::{Collection, Database, IndexModel};

use super::contender::Contender;

/// The collection the baseline writes to (the lock collection's shape, its own documents).
const COLLECTION: &str = "s1_before_shared";

/// Tokens per server millisecond and per grant, as mongolock reserved them then and now.
const TOKENS_PER_MS: i64 = 1000;
const TOKENS_PER_GRANT: i64 = 16;

/// One lock name cycled with the commands of that time, under `majority` (the store's
/// default write concern).
pub(crate) struct BeforeShared {
    collection: Collection<Document>,
    name: String,
}

impl BeforeShared {
    /// On its own collection of `database`, with the TTL index on `expiresAt` that
    /// mongolock's collection has (every acquire and release moves `expiresAt`, so the index
    /// is part of what a cycle costs the server).
    ///
    /// # Errors
    ///
    /// When the index cannot be created.
    pub(crate) async fn new(database: &Database, name: &str) -> Result<Self, String> {
        let options = CollectionOptions::builder()
            .write_concern(WriteConcern::majority())
            .build();
        let collection = database.collection_with_options(COLLECTION, options);
        let ttl = IndexModel::builder()
            .keys(doc! { "expiresAt": 1 })
            .options(
                IndexOptions::builder()
                    .name("expiresAt_ttl".to_owned())
                    .expire_after(Duration::ZERO)
                    .build(),
            )
            .build();
        collection
            .create_index(ttl)
            .await
            .map_err(|e| format!("before-shared TTL index: {e}"))?;
        Ok(Self {
            collection,
            name: name.to_owned(),
        })
    }
}

fn next_token() -> Document {
    doc! { "$max": [
        { "$add": [{ "$toLong": { "$ifNull": ["$token", 0_i64] } }, 1_i64] },
        { "$multiply": [{ "$toLong": "$$NOW" }, TOKENS_PER_MS] },
    ] }
}

fn acquire(lease: &Bson, holder: &str) -> Vec<Document> {
    let when_free = |then: Bson, otherwise: Bson| -> Bson {
        doc! { "$cond": ["$_mongolockFree", then, otherwise] }.into()
    };
    // An uncontended attempt reports no wait: `$$NOW − 0`.
    let since =
        doc! { "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": 0_i64 } };
    let expires = doc! {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": 30_000_i64 }
    };
    let stamp = doc! { "$min": [{ "$ifNull": ["$contendedAt", &since] }, &since] };
    vec![
        doc! { "$set": { "_mongolockFree": { "$or": [
            { "$lte": [{ "$ifNull": ["$expiresAt", DateTime::from_millis(0)] }, "$$NOW"] },
            { "$eq": [{ "$ifNull": ["$leaseId", Bson::Null] }, Bson::Null] },
        ] } } },
        doc! { "$set": {
            "leaseId": when_free(doc! { "$literal": lease.clone() }.into(), "$leaseId".into()),
            "holder": when_free(doc! { "$literal": holder }.into(), "$holder".into()),
            "acquiredAt": when_free("$$NOW".into(), "$acquiredAt".into()),
            "expiresAt": when_free(expires.into(), "$expiresAt".into()),
            "grantedToken": when_free(next_token().into(), "$grantedToken".into()),
            "token": when_free(
                doc! { "$add": [next_token(), TOKENS_PER_GRANT - 1] }.into(),
                "$token".into(),
            ),
            "contendedAt": when_free(Bson::Null, stamp.into()),
        } },
        doc! { "$unset": "_mongolockFree" },
    ]
}

fn release() -> Vec<Document> {
    let contended_ms = doc! { "$cond": [
        { "$eq": [{ "$ifNull": ["$contendedAt", Bson::Null] }, Bson::Null] },
        Bson::Null,
        { "$subtract": [{ "$toLong": "$$NOW" }, { "$toLong": "$contendedAt" }] },
    ] };
    vec![
        doc! { "$set": { "lastContendedMs": contended_ms } },
        doc! { "$set": {
            "leaseId": Bson::Null, "holder": Bson::Null, "expiresAt": "$$NOW", "contendedAt": Bson::Null,
        } },
    ]
}

impl Contender for BeforeShared {
    type Held = Bson;

    async fn acquire(&self) -> Result<Bson, String> {
        let lease = Bson::from(Uuid::new());
        let after = self
            .collection
            .find_one_and_update(doc! { "_id": &self.name }, acquire(&lease, "bench:1:s1"))
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await
            .map_err(|e| format!("before-shared acquire: {e}"))?;
        match after {
            Some(document) if document.get("leaseId") == Some(&lease) => Ok(lease),
            other => Err(format!("before-shared acquire: not granted ({other:?})")),
        }
    }

    async fn release(&self, lease: Bson) -> Result<(), String> {
        self.collection
            .find_one_and_update(doc! { "_id": &self.name, "leaseId": lease }, release())
            .return_document(ReturnDocument::After)
            .await
            .map_err(|e| format!("before-shared release: {e}"))?
            .map(drop)
            .ok_or_else(|| "before-shared release: not the owner".to_owned())
    }
}
