//! `MongoStore` as a conformance-suite backend, on any server: stores on fresh collections,
//! peers with clients of their own, and raw access to the documents.
#![allow(dead_code)]

use async_trait::async_trait;
use mongodb::bson::{Document, doc};
use mongodb::{Client, Collection};
use mongolock::{LockName, MongoStore};

use crate::common::Backend;
use crate::support;

/// The database every test uses; each test works in its own collection.
pub(crate) const DATABASE: &str = "mongolock_tests";

pub(crate) fn unique_collection() -> String {
    format!("locks_{}", uuid::Uuid::new_v4().simple())
}

pub(crate) fn store_on(client: &Client, collection: &str) -> MongoStore {
    MongoStore::builder(client.database(DATABASE))
        .with_collection(collection)
        .build()
        .expect("valid collection name")
}

/// The documents behind `store`, bypassing it.
pub(crate) fn raw(store: &MongoStore) -> Collection<Document> {
    store.database().collection(store.collection_name())
}

/// The conformance suite's backend on the server at `uri()`, which has change streams
/// unless `standalone`.
pub(crate) struct MongoBackend {
    pub(crate) uri: fn() -> String,
    pub(crate) standalone: bool,
}

impl MongoBackend {
    /// A new client (a new connection pool, as a separate process would have).
    async fn client(&self) -> Client {
        support::client_for(&(self.uri)(), None, None).await
    }
}

#[async_trait]
impl Backend for MongoBackend {
    type Store = MongoStore;

    async fn fresh(&self) -> MongoStore {
        store_on(&self.client().await, &unique_collection())
    }

    async fn peer(&self, store: &MongoStore) -> MongoStore {
        store_on(&self.client().await, store.collection_name())
    }

    async fn delete_record(&self, store: &MongoStore, name: &LockName) {
        raw(store)
            .delete_one(doc! { "_id": name.as_str() })
            .await
            .expect("deleteOne");
    }

    fn watches_by_polling(&self) -> bool {
        self.standalone
    }
}
