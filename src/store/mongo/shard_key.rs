//! The sharding check of `prepare`. On a sharded cluster every lock operation names one
//! document by `_id` alone: an upsert (the acquire) must carry the whole shard key, so the
//! lock collection must be unsharded or sharded on `_id` (ranged or hashed). A collection
//! sharded on anything else would refuse every first acquisition, so it is refused up front
//! with a typed error that says how to fix it.
//!
//! The shard key is read from `config.collections` (one `find` by `_id`). On a replica set
//! or standalone server that collection has no entry for the lock collection; a user
//! without the privilege to read it gets a logged warning and no check.

use mongodb::bson::{Bson, Document, doc};
use mongodb::{Client, Collection};

use crate::error::StoreError;

/// Reads the lock collection's sharding record and refuses a shard key other than `_id`.
pub(super) async fn check(client: &Client, namespace: &str) -> Result<(), StoreError> {
    let collections: Collection<Document> = client.database("config").collection("collections");
    match collections.find_one(doc! { "_id": namespace }).await {
        Ok(record) => inspect(namespace, record.as_ref()),
        Err(error) => {
            tracing::warn!(
                %error,
                namespace,
                "could not read config.collections to check the lock collection's shard key; \
                 on a sharded cluster it must be unsharded or sharded on _id"
            );
            Ok(())
        }
    }
}

/// The pure part of [`check`], on the collection's `config.collections` record.
pub(super) fn inspect(namespace: &str, record: Option<&Document>) -> Result<(), StoreError> {
    let Some(record) = record else {
        return Ok(());
    };
    if record.get_bool("dropped") == Ok(true) {
        return Ok(());
    }
    let Ok(key) = record.get_document("key") else {
        return Ok(());
    };
    let on_id_only = key.len() == 1
        && matches!(
            key.get("_id"),
            Some(Bson::Int32(1) | Bson::Int64(1) | Bson::Double(1.0))
        )
        || key.len() == 1 && key.get_str("_id") == Ok("hashed");
    if on_id_only {
        return Ok(());
    }
    Err(StoreError::Unsupported(format!(
        "the lock collection {namespace} is sharded on {key}: every lock operation finds its \
         document by _id alone, so it must be unsharded or sharded on {{_id: 1}} or \
         {{_id: \"hashed\"}}; use another collection (MongoStoreBuilder::with_collection) or \
         reshard it (reshardCollection with key {{_id: \"hashed\"}})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_id_shard_key_is_accepted() {
        let ns = "app.locks";
        assert!(inspect(ns, None).is_ok(), "unsharded");
        for key in [
            doc! { "_id": 1 },
            doc! { "_id": 1_i64 },
            doc! { "_id": "hashed" },
        ] {
            let record = doc! { "_id": ns, "key": key.clone() };
            assert!(inspect(ns, Some(&record)).is_ok(), "{key}");
        }
        let dropped = doc! { "_id": ns, "key": { "tenant": 1 }, "dropped": true };
        assert!(
            inspect(ns, Some(&dropped)).is_ok(),
            "a dropped collection's record"
        );
        for key in [
            doc! { "tenant": 1 },
            doc! { "_id": 1, "tenant": 1 },
            doc! { "holder": "hashed" },
            doc! { "_id": -1 },
        ] {
            let record = doc! { "_id": ns, "key": key.clone() };
            match inspect(ns, Some(&record)) {
                Err(StoreError::Unsupported(message)) => {
                    assert!(message.contains("app.locks"), "{message}");
                    assert!(message.contains("reshardCollection"), "{message}");
                }
                other => panic!("{key}: {other:?}"),
            }
        }
    }
}
