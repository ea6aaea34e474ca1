//! [`MongoStore`]: the MongoDB backend (feature `mongodb`, on by default).
//!
//! One document per lock name in one collection (default `distributed_locks`):
//!
//! ```text
//! {
//!   _id:        "orders",                       // the lock name (a string value, never a key)
//!   leaseId:    UUID("…"),                      // the current grant's lease id; null once released
//!   holder:     "host:4242:1a2b3c4d",           // the holder's manager identity; null once released
//!   expiresAt:  ISODate("…"),                   // end of the lease by the server's clock
//!   acquiredAt: ISODate("…"),                   // start of the current grant, server clock
//!   token:      NumberLong(1718000000000001)    // fencing token of the current/last grant
//! }
//! ```
//!
//! Every operation is one round trip and reads time only from the server (`$$NOW`):
//! acquire is one `findAndModify` (upsert, pipeline update), extend one `update`, release one
//! `findAndModify` (its answer says how long others waited), inspect one `aggregate`.

mod builder;
mod document;
mod errors;
mod fence;
mod pipeline;
mod server_version;
mod ttl_index;

use async_trait::async_trait;
use mongodb::bson::Document;
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};

pub use builder::MongoStoreBuilder;
pub use fence::{FencedCollection, FencedUpdate};

use super::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseKey, LockRecord, LockStore,
    ReleaseOutcome, StoreError,
};
use crate::name::LockName;

/// A [`LockStore`] on a MongoDB collection, through the official `mongodb` driver.
///
/// Needs **MongoDB 5.0 or newer** (`$dateAdd`); [`LockManager::start`](crate::LockManager::start)
/// checks the server's wire version and fails with [`StoreError::Unsupported`] on older ones.
///
/// # Document
///
/// One document per lock name:
/// `{_id: <name>, leaseId: <UUID | null>, holder: <string | null>, expiresAt: <Date>,
/// acquiredAt: <Date>, token: <Int64>}`. Names are only ever stored and compared as string
/// values, so `"$gt"`, `"{\"$ne\": 1}"` or `"a.b"` are ordinary names.
///
/// # Operations (one round trip each, server time only)
///
/// - **acquire**: `findAndModify({_id: name}, <pipeline>, upsert, returnDocument: after)`.
///   The pipeline takes the lock only if it has no lease or `expiresAt <= $$NOW`, writing the
///   new lease id, holder, `acquiredAt = $$NOW`, `expiresAt = $dateAdd($$NOW, expiry)` and
///   the next token. The lock is ours iff the returned `leaseId` is the one we sent. A null
///   reply or a duplicate-key error (two first acquisitions racing) means "busy, try again".
/// - **extend**: `update({_id, leaseId, $expr: expiresAt > $$NOW}, [$set expiresAt])`;
///   matching nothing means the lock was lost.
/// - **release**: `update({_id, leaseId}, [$set leaseId: null, holder: null,
///   expiresAt: $$NOW])`. The document is kept, so the token sequence continues from it.
/// - **inspect**: `aggregate([$match {_id}, $addFields {serverNow: $$NOW}])`.
/// - **list** (for tools, not the runtime; [`MongoStore::list`]):
///   `aggregate([$addFields {serverNow: $$NOW}, $sort {_id: 1}])`.
///
/// # Fencing tokens
///
/// A grant's token is `max(previous token + 1, server time in ms × 1000)`. While the
/// document exists, tokens increase by the `+ 1`; after it is deleted (by the TTL monitor or
/// an operator) the next token is at least the server's current millisecond × 1000, which is
/// larger than every token issued before as long as
/// - the server's clock does not go backwards across the deletion (on a replica set: the
///   clocks of successive primaries agree to within the time between the deletion and the
///   next grant), and
/// - the next grant falls in a later server millisecond than the last grant the deleted
///   document recorded, and no name is granted more than 1000 times per millisecond on
///   average (otherwise tokens run ahead of the clock, which is still safe while the
///   document exists).
///
/// The TTL monitor only deletes documents whose lease ended, and never within the
/// millisecond of their last grant, so only a hand-made deletion can break the second
/// condition.
///
/// # Housekeeping
///
/// [`prepare`](LockStore::prepare) (called by `LockManager::start`) checks the server version
/// and starts creating the TTL index `expiresAt_ttl` (`{expiresAt: 1}`,
/// `expireAfterSeconds: 0`) in the background, once per deployment, database and collection
/// per process. Without permission to create it a warning is logged and locks still work:
/// correctness never depends on the index.
///
/// Writes use write concern `majority` unless configured otherwise with
/// [`MongoStore::builder`]. `MongoStore` is cheap to clone (it shares the driver's
/// connection pool); one manager holds one store.
///
/// ```no_run
/// use mongolock::{LockManager, LockOptions, MongoStore};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?;
/// let store = MongoStore::new(client.database("app"));
/// let manager = LockManager::start(store, LockOptions::default()).await?;
/// let guard = manager.lock("orders")?.acquire().await?;
/// println!("token {}", guard.token());
/// guard.release().await?;
/// manager.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MongoStore {
    database: Database,
    collection: Collection<Document>,
}

impl MongoStore {
    /// The collection used unless [`MongoStoreBuilder::collection`] names another (the
    /// name the C# DistributedLock.MongoDB library uses, so both can be pointed at one
    /// another's data for inspection).
    ///
    /// ```
    /// assert_eq!(mongolock::MongoStore::DEFAULT_COLLECTION, "distributed_locks");
    /// ```
    pub const DEFAULT_COLLECTION: &str = "distributed_locks";

    /// A store on the collection `distributed_locks` of `database`, write concern `majority`.
    /// Does no I/O.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?;
    /// let store = mongolock::MongoStore::new(client.database("app"));
    /// assert_eq!(store.collection_name(), "distributed_locks");
    /// # Ok(()) }
    /// ```
    pub fn new(database: Database) -> Self {
        // The default collection name is valid for every database name the driver accepts
        // (MongoDB limits database names to 64 bytes); fall back to building without the
        // check if that ever changes, rather than panicking.
        match Self::builder(database.clone()).build() {
            Ok(store) => store,
            Err(_) => Self::from_parts(
                database.clone(),
                database.collection(Self::DEFAULT_COLLECTION),
            ),
        }
    }

    /// Configures a store (collection name, write concern); see [`MongoStoreBuilder`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::builder(db).collection("my_locks").build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(database: Database) -> MongoStoreBuilder {
        MongoStoreBuilder::new(database)
    }

    fn from_parts(database: Database, collection: Collection<Document>) -> Self {
        Self {
            database,
            collection,
        }
    }

    /// The name of the collection holding the lock documents.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::new(db);
    /// println!("locks live in {}", store.collection_name());
    /// # Ok(()) }
    /// ```
    pub fn collection_name(&self) -> &str {
        self.collection.name()
    }

    /// The database the store was created on.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::new(db);
    /// assert_eq!(store.database().name(), "app");
    /// # Ok(()) }
    /// ```
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Every lock in the collection, sorted by name, read in one `aggregate` with the
    /// server's `$$NOW`: a record's holder and time left are set only while its lease is
    /// unexpired by the server's clock. For dashboards and `mongolock status`; the
    /// runtime never calls it.
    ///
    /// Documents whose `_id` is not a string (not written by this crate) are listed under
    /// their `_id` rendered as extended JSON.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] or [`StoreError::Rejected`] if the server fails;
    /// [`StoreError::Backend`] for a malformed document.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::new(db);
    /// for (name, record) in store.list().await? {
    ///     match &record.holder {
    ///         Some(holder) => println!("{name}: held by {holder}, token {}", record.token),
    ///         None => println!("{name}: free"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self) -> Result<Vec<(String, LockRecord)>, StoreError> {
        let failed = |error: mongodb::error::Error| errors::backend("list (aggregate)", error);
        let mut cursor = self
            .collection
            .aggregate(pipeline::list())
            .await
            .map_err(failed)?;
        let mut locks = Vec::new();
        while cursor.advance().await.map_err(failed)? {
            let found: Document = cursor.deserialize_current().map_err(failed)?;
            let name = match found.get(document::ID) {
                Some(mongodb::bson::Bson::String(name)) => name.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            locks.push((name, document::lock_record(&found)?));
        }
        Ok(locks)
    }
}

#[async_trait]
impl LockStore for MongoStore {
    async fn prepare(&self) -> Result<(), StoreError> {
        // `new` cannot fail, so a name it let through is refused here, before any I/O.
        builder::validate_database_name(self.database.name())?;
        builder::validate_collection_name(self.database.name(), self.collection.name())?;
        let server = server_version::check(&self.database).await?;
        ttl_index::ensure_in_background(self.collection.clone(), &server.deployment);
        Ok(())
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        let lease = document::lease_value(request.lease);
        let returned = self
            .collection
            .find_one_and_update(
                pipeline::by_name(&request.name),
                pipeline::acquire(
                    &lease,
                    request.holder.as_str(),
                    request.expiry,
                    request.waited,
                ),
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        match returned {
            Ok(returned) => document::acquire_outcome(returned, request.lease),
            // Two first acquisitions raced to insert the document; the other one won.
            Err(error) if errors::is_duplicate_key(&error) => {
                Ok(AcquireOutcome::Busy { holder: None })
            }
            Err(error) => Err(errors::backend("acquire (findAndModify)", error)),
        }
    }

    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        let lease = document::lease_value(request.key.lease);
        let result = self
            .collection
            .update_one(
                pipeline::by_unexpired_owner(&request.key.name, &lease),
                pipeline::extend(request.expiry),
            )
            .await
            .map_err(|error| errors::backend("extend (update)", error))?;
        Ok(if result.matched_count == 0 {
            ExtendOutcome::NotOwner
        } else {
            ExtendOutcome::Extended
        })
    }

    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        let lease = document::lease_value(key.lease);
        // findAndModify rather than update: the released document says how long others had
        // waited, still in one round trip.
        let after = self
            .collection
            .find_one_and_update(pipeline::by_owner(&key.name, &lease), pipeline::release())
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("release (findAndModify)", error))?;
        Ok(document::release_outcome(after))
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        let mut cursor = self
            .collection
            .aggregate(pipeline::inspect(name))
            .await
            .map_err(|error| errors::backend("inspect (aggregate)", error))?;
        if !cursor
            .advance()
            .await
            .map_err(|error| errors::backend("inspect (aggregate)", error))?
        {
            return Ok(None);
        }
        let found: Document = cursor
            .deserialize_current()
            .map_err(|error| errors::backend("inspect (aggregate)", error))?;
        document::lock_record(&found).map(Some)
    }
}
