//! [`MongoStore`]: the MongoDB backend (feature `mongodb`, on by default).
//!
//! One document per lock name in one collection (default `distributed_locks`):
//!
//! ```text
//! {
//!   _id:          "orders",                     // the lock name (a string value, never a key)
//!   leaseId:      UUID("…"),                    // the current grant's lease id; null once released
//!   holder:       "host:4242:1a2b3c4d",         // the holder's manager identity; null once released
//!   expiresAt:    ISODate("…"),                 // end of the lease by the server's clock
//!   acquiredAt:   ISODate("…"),                 // start of the current grant, server clock
//!   grantedToken: NumberLong(1718000000000001), // fencing token of the current/last grant
//!   token:        NumberLong(1718000000000016), // last token of that grant's reserved block
//!   contendedAt:  ISODate("…") | null,          // since when other managers wait for this grant
//!   lastContendedMs: NumberLong(…) | null,      // how long they had waited at the last release
//!   forcedRelease: {at, holder, expiresAt}      // only after an operator's force-release
//! }
//! ```
//!
//! Waiting managers learn that a lock became free from one change stream per manager (see
//! `release_feed.rs`), watches what happens to their locks from one per watch
//! (`record_feed.rs`); without change streams both poll.
//!
//! Every operation is one round trip and reads time only from the server (`$$NOW`):
//! acquire is one `findAndModify` (upsert, pipeline update), a renewal or a batch of them one
//! `update` (plus one `aggregate` when a lease in it was not modified: lost, or renewed in the
//! server millisecond of its last write), release and a hand-over to a local waiter one
//! `findAndModify` each, inspect one `aggregate`.
//!
//! **Recommended client setting:** `heartbeatFrequencyMS=500` in the connection string.
//! After a primary steps down (errors 91, 10107, 11600…) the driver keeps the server
//! unselectable until its next heartbeat, 10 s by default; with 500 ms the first
//! acquisition after such an error succeeded within about 0.55 s on the test server.

mod builder;
mod document;
pub(crate) mod errors;
mod pipeline;
mod record_feed;
mod release_feed;
mod server_version;
mod shard_key;
mod ttl_index;

use async_trait::async_trait;
use mongodb::bson::Document;
use mongodb::options::{ReadConcern, ReadConcernLevel, ReturnDocument, WriteConcern};
use mongodb::{Collection, Database};

pub use builder::MongoStoreBuilder;

use super::outcome::LockRecord;
use super::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, LeaseKey,
    LockStore, RELEASE_FEED_CAPACITY, ReleaseDemand, ReleaseOutcome, TOKENS_PER_GRANT,
    check_lease_length,
};
use crate::error::StoreError;
use crate::name::LockName;

/// The most leases one batched renewal (`update` by `_id` and lease id) carries: the
/// server serves each from the `_id` index, and one command stays far below the 16 MiB
/// message limit.
const MAX_EXTEND_BATCH: usize = 10_000;

/// A [`LockStore`] on a MongoDB collection, through the official `mongodb` driver.
///
/// Needs **MongoDB 5.0 or newer** (`$dateAdd`); [`LockManager::start`](crate::LockManager::start)
/// checks the server's wire version and fails with [`StoreError::Unsupported`] on older ones.
///
/// # Document
///
/// One document per lock name (shown in full in the module docs):
/// `{_id: <name>, leaseId: <UUID | null>, holder: <string | null>, expiresAt: <Date>,
/// acquiredAt: <Date>, grantedToken: <Int64>, token: <Int64>, contendedAt, …}`. Names are
/// only ever stored and compared as string values, so `"$gt"`, `"{\"$ne\": 1}"` or `"a.b"`
/// are ordinary names.
///
/// # Operations (one round trip each, server time only)
///
/// - **acquire**: `findAndModify({_id: name}, <pipeline>, upsert, returnDocument: after)`.
///   The pipeline takes the lock only if it has no lease or `expiresAt <= $$NOW`, writing the
///   new lease id, holder, `acquiredAt = $$NOW`, `expiresAt = $dateAdd($$NOW, expiry)` and
///   the next token. The lock is ours iff the returned `leaseId` is the one we sent. A null
///   reply or a duplicate-key error (two first acquisitions racing) means "busy, try again".
/// - **extend** (a batch of renewals): `update({_id: {$in: names}, leaseId: {$in: leases}},
///   [$set expiresAt: cond(expiresAt > $$NOW, $dateAdd($$NOW, expiry), expiresAt)],
///   multi)`. The filter uses only the `_id` index (no `$expr`); an expired lease matches but
///   is not modified. When fewer leases were modified than sent, one `aggregate` says which
///   still hold; the others were lost. A single renewal is the same `update` on one lease.
/// - **hand-over** to a local waiter: `findAndModify({_id, leaseId}, <pipeline>)`, applied
///   only while the lease is unexpired: new lease id and holder, the next token block, the
///   contention mark kept.
/// - **release**: `findAndModify({_id, leaseId}, [$set lastContendedMs, leaseId: null,
///   holder: null, expiresAt: $$NOW, contendedAt: null])`. The document is kept, so the
///   token sequence continues from it.
/// - **inspect**: `aggregate([$match {_id}, $addFields {serverNow: $$NOW}])`.
/// - **list** (for tools, not the runtime; [`MongoStore::list`]):
///   `aggregate([$addFields {serverNow: $$NOW}, $sort {_id: 1}])`.
/// - **force release** (for operators, not the runtime; [`MongoStore::force_release`]):
///   `findAndModify({_id, leaseId: {$ne: null}, $expr: expiresAt > $$NOW},
///   [$set forcedRelease: {at: $$NOW, holder, expiresAt}, <release>])`.
///
/// # Fencing tokens
///
/// Each grant reserves a block of 16 consecutive tokens (see
/// [`LockStore::tokens_per_grant`]): its own, in `grantedToken`, and the 15 after it, which
/// the holder's process hands to its own waiters without a store call. `token` records the
/// block's last one. A grant's token is `max(token + 1, server time in ms × 1000)`, and its
/// block ends 15 later, so every grant continues past the whole previous block. While the
/// document exists, tokens increase by the `+ 1`; after it is deleted (by the TTL monitor or
/// an operator) the next token is at least the server's current millisecond × 1000, which is
/// larger than every token issued before as long as
/// - the server's clock does not go backwards across the deletion (on a replica set: the
///   clocks of successive primaries agree to within the time between the deletion and the
///   next grant), and
/// - the next grant falls in a later server millisecond than the last grant the deleted
///   document recorded, and no name uses more than 1000 tokens per millisecond on average
///   (62 grants of 16 tokens; otherwise tokens run ahead of the clock, which is still safe
///   while the document exists).
///
/// The TTL monitor only deletes documents whose lease ended, and never within the
/// millisecond of their last grant, so only a hand-made deletion can break the second
/// condition.
///
/// # Housekeeping
///
/// [`prepare`](LockStore::prepare) (called by `LockManager::start`) checks the server version
/// and, on a sharded cluster, the lock collection's shard key (it must be unsharded or
/// sharded on `_id`, ranged or hashed: a collection sharded on another key is refused with
/// [`StoreError::Unsupported`]), and starts creating the TTL index `expiresAt_ttl` (`{expiresAt: 1}`,
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
#[cfg_attr(docsrs, doc(cfg(feature = "mongodb")))]
pub struct MongoStore {
    database: Database,
    collection: Collection<Document>,
    /// The read concern of the reads that decide or report who holds a lock.
    read_concern: ReadConcern,
}

impl MongoStore {
    /// Which of `leases` (of `names`) hold an unexpired lock now, by the server's clock.
    async fn held_leases(
        &self,
        names: &[&str],
        leases: &[mongodb::bson::Bson],
    ) -> Result<std::collections::HashSet<crate::store::LeaseId>, StoreError> {
        let failed = |error| errors::backend("extend (aggregate held leases)", error);
        let mut cursor = self
            .collection
            .aggregate([
                mongodb::bson::doc! { "$match": pipeline::by_leases(names, leases) },
                pipeline::unexpired(),
                mongodb::bson::doc! { "$project": { document::LEASE_ID: 1 } },
            ])
            .read_concern(self.multi_document_read_concern())
            .await
            .map_err(failed)?;
        let mut held = std::collections::HashSet::new();
        while cursor.advance().await.map_err(failed)? {
            let found: Document = cursor.deserialize_current().map_err(failed)?;
            if let Some(lease) = document::lease_of(&found) {
                held.insert(lease);
            }
        }
        Ok(held)
    }

    /// The collection used unless [`MongoStoreBuilder::with_collection`] names another (the
    /// name the C# DistributedLock.MongoDB library uses, so both can be pointed at one
    /// another's data for inspection).
    ///
    /// ```
    /// assert_eq!(mongolock::MongoStore::DEFAULT_COLLECTION, "distributed_locks");
    /// ```
    pub const DEFAULT_COLLECTION: &str = "distributed_locks";

    /// A store on the collection `distributed_locks` of `database`, write concern `majority`.
    /// Does no I/O and checks nothing: a database name MongoDB refuses is reported by
    /// [`LockManager::start`](crate::LockManager::start) (which calls `prepare`) with
    /// [`StoreError::InvalidConfig`], before any command is sent. To have it checked here,
    /// use [`MongoStore::builder`]`(database).build()`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?;
    /// let store = mongolock::MongoStore::new(client.database("app"));
    /// assert_eq!(store.collection_name(), "distributed_locks");
    /// # Ok(()) }
    /// ```
    pub fn new(database: Database) -> Self {
        let collection = builder::lock_collection(
            &database,
            Self::DEFAULT_COLLECTION,
            WriteConcern::majority(),
        );
        Self::from_parts(database, collection, ReadConcern::majority())
    }

    /// Configures a store (collection name, write concern); see [`MongoStoreBuilder`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::builder(db).with_collection("my_locks").build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(database: Database) -> MongoStoreBuilder {
        MongoStoreBuilder::new(database)
    }

    fn from_parts(
        database: Database,
        collection: Collection<Document>,
        read_concern: ReadConcern,
    ) -> Self {
        Self {
            database,
            collection,
            read_concern,
        }
    }

    /// The read concern of a read that may see several documents: the configured one, but
    /// `majority` in place of `linearizable`, which MongoDB allows only for reads of one
    /// document.
    fn multi_document_read_concern(&self) -> ReadConcern {
        match self.read_concern.level {
            ReadConcernLevel::Linearizable => ReadConcern::majority(),
            _ => self.read_concern.clone(),
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

    /// The write concern of the store's writes ([`MongoStoreBuilder::with_write_concern`];
    /// `majority` unless configured otherwise).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::new(db);
    /// assert_eq!(store.write_concern(), Some(&mongodb::options::WriteConcern::majority()));
    /// # Ok(()) }
    /// ```
    pub fn write_concern(&self) -> Option<&WriteConcern> {
        self.collection.write_concern()
    }

    /// The read concern of the reads that decide or report holders
    /// ([`MongoStoreBuilder::with_read_concern`]; `majority` unless configured otherwise).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::new(db);
    /// assert_eq!(store.read_concern(), &mongodb::options::ReadConcern::majority());
    /// # Ok(()) }
    /// ```
    pub fn read_concern(&self) -> &ReadConcern {
        &self.read_concern
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
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
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
            .read_concern(self.multi_document_read_concern())
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

    /// Frees `name` whoever holds it, for an operator whose holder is wedged
    /// (`mongolock release --force`); the runtime never calls it. One `findAndModify`, server
    /// time only: if an unexpired lease holds the lock, its lease id and holder are cleared
    /// and it expires now, exactly as the holder's own release would do. The fencing token is
    /// kept, so the next grant's token is larger.
    ///
    /// The holder is not asked: its next renewal (within one extension cadence) finds the
    /// lease gone and reports the loss ([`LossReason::Superseded`](crate::LossReason::Superseded)).
    /// Until then it may still act as the holder, and another process can take the lock at
    /// once, so only fenced writes stay safe; use this for holders that are stuck, not as a
    /// way to hand work over.
    ///
    /// Returns the grant that was cleared (holder, token, the time it had left and how long
    /// others had waited, by the server's clock), or `None` when nothing held the lock
    /// (free, expired, or never used), in which case nothing was written. The document
    /// keeps a trace: `forcedRelease: {at, holder, expiresAt}`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] or [`StoreError::Rejected`] if the server fails;
    /// [`StoreError::Backend`] for a malformed answer.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have released the lock; call it again to find out
    /// (`None` once it is free).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::new(db);
    /// let name = mongolock::LockName::new("nightly-report")?;
    /// match store.force_release(&name).await? {
    ///     Some(cleared) => println!("freed; it was held by {:?} (token {})", cleared.holder, cleared.token),
    ///     None => println!("nothing held it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        let after = self
            .collection
            .find_one_and_update(pipeline::held(name), pipeline::force_release())
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("force release (findAndModify)", error))?;
        document::forced_release_record(after)
    }
}

#[async_trait]
impl LockStore for MongoStore {
    async fn prepare(&self) -> Result<(), StoreError> {
        // `new` checks nothing, so a name it let through is refused here, before any I/O.
        builder::validate_database_name(self.database.name())?;
        builder::validate_collection_name(self.database.name(), self.collection.name())?;
        let server = server_version::check(&self.database).await?;
        let namespace = format!("{}.{}", self.database.name(), self.collection.name());
        shard_key::check(self.database.client(), &namespace).await?;
        ttl_index::ensure_in_background(self.collection.clone(), &server.deployment);
        Ok(())
    }

    async fn try_acquire(&self, request: &AcquireRequest) -> Result<AcquireOutcome, StoreError> {
        check_lease_length(request.lease_duration)?;
        let lease = document::lease_value(request.lease);
        let returned = self
            .collection
            .find_one_and_update(
                pipeline::by_name(&request.name),
                pipeline::acquire(
                    &lease,
                    request.holder.as_str(),
                    request.lease_duration,
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
        check_lease_length(request.lease_duration)?;
        let lease = document::lease_value(request.key.lease);
        // An expired lease matches the owner check but is not modified (MongoDB counts only
        // documents an update changed). So is a lease renewed in the same server millisecond
        // as its last write ($$NOW + lease is the expiry it already has): only then is a
        // second round trip needed, to tell the two apart.
        let result = self
            .collection
            .update_one(
                pipeline::by_owner(&request.key.name, &lease),
                pipeline::extend(request.lease_duration),
            )
            .await
            .map_err(|error| errors::backend("extend (update)", error))?;
        if result.modified_count > 0 {
            return Ok(ExtendOutcome::Extended);
        }
        if result.matched_count == 0 {
            return Ok(ExtendOutcome::NotOwner);
        }
        let held = self
            .held_leases(&[request.key.name.as_str()], &[lease])
            .await?;
        Ok(if held.contains(&request.key.lease) {
            ExtendOutcome::Extended
        } else {
            ExtendOutcome::NotOwner
        })
    }

    /// Each grant records the last token of its block in `token` (and its own in
    /// `grantedToken`), and every grant continues from `token`.
    fn tokens_per_grant(&self) -> u64 {
        TOKENS_PER_GRANT
    }

    /// `extend_many` is one `update` by `_id` and lease id.
    fn max_extend_batch(&self) -> usize {
        MAX_EXTEND_BATCH
    }

    /// A change stream, open only while `demand` says this manager has waiters (and a
    /// little longer): an open stream costs a `getMore` per release of any lock.
    async fn watch_releases(
        &self,
        demand: ReleaseDemand,
    ) -> Option<tokio::sync::mpsc::Receiver<LockName>> {
        let (feed, released) = tokio::sync::mpsc::channel(RELEASE_FEED_CAPACITY);
        tokio::spawn(release_feed::run(self.collection.clone(), feed, demand));
        Some(released)
    }

    /// A change stream on the watched names (see `record_feed.rs`), open as soon as this
    /// returns; `None` on a server without change streams.
    async fn watch_records(
        &self,
        names: &[LockName],
    ) -> Option<tokio::sync::mpsc::Receiver<crate::store::RecordEvent>> {
        record_feed::start(self.collection.clone(), names.to_vec()).await
    }

    /// One `update` for the whole batch (by names and lease ids, served by the `_id` index);
    /// when not every lease was extended, one `aggregate` says which ones still hold.
    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let Some(first) = requests.first() else {
            return Vec::new();
        };
        if let Err(refused) = check_lease_length(first.lease_duration) {
            return vec![Err(refused); requests.len()];
        }
        let one_expiry = requests
            .iter()
            .all(|r| r.lease_duration == first.lease_duration);
        if requests.len() == 1 || !one_expiry {
            let mut results = Vec::with_capacity(requests.len());
            for request in requests {
                results.push(self.extend(request).await);
            }
            return results;
        }
        let names: Vec<&str> = requests.iter().map(|r| r.key.name.as_str()).collect();
        let leases: Vec<_> = requests
            .iter()
            .map(|r| document::lease_value(r.key.lease))
            .collect();
        let failed = |error| vec![Err(error); requests.len()];
        let updated = self
            .collection
            .update_many(
                pipeline::by_leases(&names, &leases),
                pipeline::extend(first.lease_duration),
            )
            .await;
        let extended = match updated {
            Ok(result) => result.modified_count,
            Err(error) => return failed(errors::backend("extend (update many)", error)),
        };
        if usize::try_from(extended).is_ok_and(|extended| extended == requests.len()) {
            return vec![Ok(ExtendOutcome::Extended); requests.len()];
        }
        match self.held_leases(&names, &leases).await {
            Ok(held) => requests
                .iter()
                .map(|r| {
                    Ok(if held.contains(&r.key.lease) {
                        ExtendOutcome::Extended
                    } else {
                        ExtendOutcome::NotOwner
                    })
                })
                .collect(),
            Err(error) => failed(error),
        }
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

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        check_lease_length(to.lease_duration)?;
        let old = document::lease_value(from.lease);
        let new = document::lease_value(to.lease);
        let after = self
            .collection
            .find_one_and_update(
                pipeline::by_unexpired_owner(&from.name, &old),
                pipeline::hand_over(&new, to.holder.as_str(), to.lease_duration),
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("hand over (findAndModify)", error))?;
        document::hand_over_outcome(after, to.lease)
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        let mut cursor = self
            .collection
            .aggregate(pipeline::inspect(name))
            .read_concern(self.read_concern.clone())
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
