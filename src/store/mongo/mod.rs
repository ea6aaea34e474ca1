//! [`MongoStore`]: the MongoDB backend (feature `mongodb`, on by default).
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the type, its constructors and its `LockStore` impl, which calls the files below |
//! | `acquire.rs`, `extend.rs`, `release.rs`, `hand_over.rs`, `permits.rs` | one store call each: its round trips and how their answers are read |
//! | `read.rs` | the reads those calls share (a record with the server's `$$NOW`) |
//! | `operator.rs` | `list` and `force_release`, for tools, never the runtime |
//! | `pipeline/` | what each call sends: its filter and its update pipeline |
//! | `line.rs` | the arrival-order line kept on a document |
//! | `writers_marks.rs` | a reader/writer lock's writers' marks, earliest first |
//! | `withdrawal.rs` | a manager whose waiters gave up takes its place and mark off |
//! | `expression.rs` | helpers the pipelines are written with (`$literal`, times from `$$NOW`) |
//! | `fields.rs` | the document's field names, stored and temporary |
//! | `document.rs` | a returned document read back into an outcome |
//! | `release_feed.rs`, `record_feed.rs` | the change streams that wake waiters and feed watches |
//! | `builder.rs`, `errors.rs`, `server_version.rs`, `shard_key.rs`, `ttl_index.rs` | configuration, driver errors, and the checks and index `prepare` makes |
//!
//! One document per lock name in one collection (default `distributed_locks`):
//!
//! ```text
//! {
//!   _id:          "orders",                     // the lock name (a string value, never a key)
//!   leaseId:      UUID("…"),                    // the current grant's lease id; null once released
//!   holder:       "host:4242:1a2b3c4d",         // the holder's manager identity; null once released
//!   expiresAt:    ISODate("…"),                 // end of the lease by the server's clock (once
//!                                               // released in arrival order: of the line's last place, if later)
//!   acquiredAt:   ISODate("…"),                 // start of the current grant, server clock
//!   grantedToken: NumberLong(1718000000000000), // fencing token of the current/last grant
//!   token:        NumberLong(1718000000000015), // last token of that grant's reserved block
//!   contendedAt:  ISODate("…") | null,          // since when other managers wait for this grant
//!   lastContendedMs: NumberLong(…) | null,      // how long they had waited at the last release
//!   forcedRelease: {at, holder, leaseId, expiresAt}, // only after an operator's force-release
//!   line: [{holder, arrival, until}, …],        // managers waiting in arrival order (`line.rs`)
//!   withdrawnAt:  ISODate("…")                  // a manager's waiters last gave up (`withdrawal.rs`)
//! }
//! ```
//!
//! A semaphore or a reader/writer lock is one document per name too, listing its holders:
//!
//! ```text
//! {
//!   _id:          "imports",
//!   kind:         "semaphore" | "rwlock",       // a mutex's document has no kind
//!   permits:      NumberLong(3),                // a semaphore's count (set_permits changes it)
//!   recountedFrom: [NumberLong(1), …],          // its counts before set_permits changed it
//!   holders: [{                                 // earliest grant first
//!     lease: UUID("…"), holder: "host:4242:1a2b3c4d", token: NumberLong(…),
//!     access: "permit" | "read" | "write", acquiredAt: ISODate("…"), expiresAt: ISODate("…"),
//!   }, …],
//!   grantedToken: NumberLong(…),                // the last grant's token
//!   token:        NumberLong(…),                // the last token reserved (its block's last)
//!   grantedHolder: "host:…",                    // the last grant's holder (for change streams)
//!   expiresAt:    ISODate("…"),                 // the latest holder expiry or live mark, or
//!                                               // (arrival order) place in line (TTL)
//!   writerWaitingUntil, readersWaitingUntil, readersTurnUntil: ISODate("…") | null,
//!   writersMarkedBy: [{holder, until}, …],      // managers refused a write, earliest first (`writers_marks.rs`)
//!   readersTurnFrom: ISODate("…"),              // when the readers' turn began (a write's release)
//!   readersTurnServed: true | false,            // a reader got in during that turn
//!   contendedAt:  ISODate("…") | null,          // since when others were refused
//!   lastContendedMs: NumberLong(…) | null,      // at the last release: how long they had waited
//!   releasedAt:   ISODate("…"),                 // the last release of a holder
//!   withdrawnAt:  ISODate("…"),                 // a manager's waiters last gave up (`withdrawal.rs`)
//!   released:     {batch, leases},              // only after a release_many
//!   forcedRelease: {at, holders}                // only after an operator's force-release
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
//! `findAndModify` each, inspect one `aggregate` — for a shared record as for a mutex.
//!
//! **Recommended client setting:** `heartbeatFrequencyMS=500` in the connection string.
//! After a primary steps down (errors 91, 10107, 11600…) the driver keeps the server
//! unselectable until its next heartbeat, 10 s by default; with 500 ms the first
//! acquisition after such an error succeeded within about 0.55 s on the test server.

mod acquire;
mod builder;
mod document;
pub(crate) mod errors;
mod expression;
mod extend;
mod fields;
mod hand_over;
mod line;
mod operator;
mod permits;
mod pipeline;
mod read;
mod record_feed;
mod release;
mod release_feed;
mod server_version;
mod shard_key;
mod ttl_index;
mod withdrawal;
mod writers_marks;

use async_trait::async_trait;
use mongodb::bson::{Document, doc};
use mongodb::options::{ReadConcern, ReadConcernLevel, WriteConcern};
use mongodb::{Client, Collection, Database};

pub use builder::MongoStoreBuilder;

use super::outcome::LockRecord;
use super::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, LeaseKey,
    LockStore, RELEASE_FEED_CAPACITY, ReleaseDemand, ReleaseOutcome, TOKENS_PER_GRANT,
};
use crate::error::StoreError;
use crate::name::LockName;
use crate::store::request::HolderId;

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
/// acquiredAt: <Date>, grantedToken: <Int64>, token: <Int64>, contendedAt, …}`; a
/// semaphore's or reader/writer lock's adds `kind` and lists its holders instead of one
/// lease: `{_id, kind, permits, holders: [{lease, holder, token, access, acquiredAt,
/// expiresAt}], expiresAt, …}`. Names are only ever stored and compared as string values,
/// so `"$gt"`, `"{\"$ne\": 1}"` or `"a.b"` are ordinary names.
///
/// # Operations (one round trip each, server time only)
///
/// - **acquire**: `findAndModify({_id: name}, <pipeline>, upsert, returnDocument: after)`,
///   served by the server's `_id` fast path with no query planning. The pipeline takes the
///   lock only if the document is a mutex's (no `kind`) with no lease or `expiresAt <=
///   $$NOW`, writing the new lease id, holder, `acquiredAt = $$NOW`, `expiresAt =
///   $dateAdd($$NOW, expiry)` and the next token. The lock is ours iff the returned `leaseId`
///   is the one we sent. A returned shared record was left exactly as it was and answers
///   [`StoreError::KindMismatch`]. A null reply means "busy, try again"; so does a
///   duplicate-key error (two first acquisitions racing).
/// - **acquire a permit, a read or the write** (a shared record):
///   `findAndModify({_id: name, kind, $or: [{permits}, {recountedFrom: permits}]}, <pipeline>,
///   upsert, returnDocument: after)` (a semaphore of the count asked, or one `set_permits`
///   changed from it: the record's count decides).
///   The pipeline prunes expired holders and applies the grant rule of the access (see
///   [`LockStore`]'s rules 8 to 10): a grant appends `{lease, holder, token, access,
///   acquiredAt, expiresAt}` with the next token block; a refusal marks the record contended
///   and, for a read or a write with `retry_within`, its side waiting until `$$NOW +
///   retry_within`. Granted iff the returned holders include our lease. A record of another
///   kind or count fails the upsert on `_id`, writing nothing, and one read names its kind
///   ([`StoreError::KindMismatch`]).
/// - **extend** (a batch of renewals): `update({_id: {$in: names}, leaseId: {$in: leases}},
///   [$set expiresAt: cond(expiresAt > $$NOW, $dateAdd($$NOW, expiry), expiresAt)],
///   multi)`. The filter uses only the `_id` index (no `$expr`); an expired lease matches but
///   is not modified. When fewer leases were modified than sent, one `aggregate` says which
///   still hold; the others were lost. A single renewal is the same `update` on one lease.
///   Shared places go in one more `update`, sent beside it: `{_id: {$in: names},
///   "holders.lease": {$in: leases}}` with a pipeline that `$map`s the holders, extending only
///   unexpired entries of the leases; a record is modified iff one of its entries was, so
///   when each name came once and every record was modified all were extended, and otherwise
///   one `aggregate` says which.
/// - **hand-over** to a local waiter: `findAndModify({_id, leaseId}, <pipeline>)`, applied
///   only while the lease is unexpired: new lease id and holder, the next token block, the
///   contention mark kept.
/// - **release**: `findAndModify({_id, leaseId}, [$set lastContendedMs, leaseId: null,
///   holder: null, expiresAt: $$NOW, contendedAt: null])`. The document is kept, so the
///   token sequence continues from it; a lease of arrival order sets `expiresAt` no earlier
///   than its line's last place ends, so the TTL index keeps the line while anyone waits.
///   A shared place: `findAndModify({_id, "holders.lease": lease}, <pipeline>)` removing
///   that entry, stamping `releasedAt`, and turning the readers' turn on when a write leaves
///   while readers wait.
/// - **release many**: one `update` for the mutex keys and one for the shared keys, side by
///   side (see [`release_many`](LockStore::release_many)), plus one `aggregate` only when the
///   modified counts leave some key's answer open.
/// - **set permits**: `findAndModify({_id, kind: "semaphore"}, [$set permits], upsert,
///   returnDocument: before)`: the old count, or none when it created the record.
/// - **inspect**: `aggregate([$match {_id}, $addFields {serverNow: $$NOW}])`.
/// - **list** (for tools, not the runtime; [`MongoStore::list`]):
///   `aggregate([$addFields {serverNow: $$NOW}, $sort {_id: 1}])`.
/// - **force release** (for operators, not the runtime; [`MongoStore::force_release`]):
///   `findAndModify({_id, leaseId: {$ne: null}, $expr: expiresAt > $$NOW},
///   [$set forcedRelease: {at: $$NOW, holder, leaseId, expiresAt}, <release>])`; when that finds no
///   held mutex, a second one clears every holder of a held shared record.
///
/// # Fencing tokens
///
/// Each grant reserves a block of 16 consecutive tokens (see
/// [`LockStore::tokens_per_grant`]): its own, in `grantedToken`, and the 15 after it, which
/// the holder's process hands to its own waiters without a store call. `token` records the
/// block's last one. A grant's token is `max(token + 1, server time in ms × 1000)`, and its
/// block ends 15 later, so every grant continues past the whole previous block. The clock's
/// term wins unless the previous grant was in the same server millisecond, so tokens read
/// like the server's clock (`1718000000000000` for a grant at `1718000000000` ms); the
/// `+ 1` keeps grants within one millisecond apart while the document exists. After it is
/// deleted (by the TTL monitor or an operator) only the clock's term is left: the next token
/// is at least the server's current millisecond × 1000, which is larger than every token
/// issued before as long as
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
/// and, on a sharded cluster, the lock collection's shard key (it must be unsharded or sharded
/// on `_id`, ranged or hashed: a collection sharded on another key is refused with
/// [`StoreError::Unsupported`]), and starts creating the TTL index `expiresAt_ttl`
/// (`{expiresAt: 1}`, `expireAfterSeconds: 0`) in the background, once per deployment, database
/// and collection per process. Without permission to create it a warning is logged and locks
/// still work: correctness never depends on the index.
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
    /// The collection used unless [`MongoStoreBuilder::with_collection`] names another (the
    /// name the C# DistributedLock.MongoDB library uses, so both can be pointed at one
    /// another's data for inspection).
    ///
    /// ```
    /// assert_eq!(mongolock::MongoStore::DEFAULT_COLLECTION, "distributed_locks");
    /// ```
    pub const DEFAULT_COLLECTION: &str = "distributed_locks";

    /// The database [`from_client`](Self::from_client) and the `mongolock` tool use when the
    /// connection string names none.
    ///
    /// ```
    /// assert_eq!(mongolock::MongoStore::DEFAULT_DATABASE, "mongolock");
    /// ```
    pub const DEFAULT_DATABASE: &str = "mongolock";

    /// A store where the `mongolock` tool looks by default: the database the client's
    /// connection string names (`mongodb://host/DB`), else
    /// [`DEFAULT_DATABASE`](Self::DEFAULT_DATABASE), collection `distributed_locks`, write
    /// concern `majority`. So the tool given the application's connection string (`mongolock
    /// --uri URI status`) sees the application's locks. Does no I/O, like [`new`](Self::new).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::mongodb::error::Error> {
    /// use mongolock::{MongoStore, mongodb::Client};
    /// let named = Client::with_uri_str("mongodb://localhost:27017/orders").await?;
    /// assert_eq!(MongoStore::from_client(&named).database().name(), "orders");
    /// let unnamed = Client::with_uri_str("mongodb://localhost:27017").await?;
    /// assert_eq!(MongoStore::from_client(&unnamed).database().name(), "mongolock");
    /// # Ok(()) }
    /// ```
    pub fn from_client(client: &Client) -> Self {
        let database = client
            .default_database()
            .unwrap_or_else(|| client.database(Self::DEFAULT_DATABASE));
        Self::new(database)
    }

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
        self.acquire(request).await
    }

    /// A mutex lease: one `updateOne` (plus one `aggregate` when it was matched but not
    /// modified); a shared place: one `updateOne` `$map`ping the record's holders (plus one
    /// `aggregate` likewise). A lease found gone costs one more `aggregate`, for the trace
    /// of a forced release.
    async fn extend(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        let outcome = self.extend_one(request).await;
        self.name_forced_releases(&[request], vec![outcome])
            .await
            .pop()
            .unwrap_or(Ok(ExtendOutcome::NotOwner))
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

    /// One `update` for the batch's mutex leases (by names and lease ids, served by the `_id`
    /// index) and one for its shared places (`$map` over the holders of their records), sent
    /// side by side; when not every lease of one of them was extended, one `aggregate` says
    /// which still hold, and when some lease is lost one more reads the traces of forced
    /// releases. Leases of different lengths are extended one by one.
    async fn extend_many(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        self.extend_leases(requests).await
    }

    /// One `findAndModify` (the document after it says how long others had waited): on a
    /// mutex's document owner-checked by `leaseId`; on a shared record by a holder entry's
    /// lease, removing that entry (and turning the readers' turn on if it was a write and
    /// readers wait).
    async fn release(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        self.release_lease(key).await
    }

    /// A single key is [`release`](LockStore::release). Otherwise one `update` for the mutex
    /// keys (owner-checked by `_id` and `leaseId`) and one for the shared keys (removing
    /// their holder entries), sent side by side; each writes the batch's id and the leases
    /// it released on the documents it changed. When a modified count equals its keys (and,
    /// for shared keys, each name came once), every key of that update was released;
    /// otherwise one `aggregate` reads the batch's traces to tell `Released` from
    /// `NotOwner`. A batch does not report how long others waited: its answers carry
    /// `contended_for: None`.
    ///
    /// The trace is overwritten by the next `release_many` that releases the same document,
    /// so a key whose document was re-acquired and released by another batch between the
    /// two round trips would be answered `NotOwner` although it was released (it is not
    /// held either way).
    async fn release_many(&self, keys: &[LeaseKey]) -> Vec<Result<ReleaseOutcome, StoreError>> {
        self.release_leases(keys).await
    }

    /// One `findAndModify` (upsert) on `{_id, kind: "semaphore"}` returning the document as
    /// it was (so its old count, or none when it creates the record); a record of another
    /// kind fails its upsert on the unique `_id`, writing nothing, and one read names the
    /// kind in the [`StoreError::KindMismatch`].
    async fn set_permits(&self, name: &LockName, permits: u32) -> Result<Option<u32>, StoreError> {
        self.set_count(name, permits).await
    }

    async fn hand_over(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        self.hand_over_lease(from, to).await
    }

    fn keeps_arrival_order(&self) -> bool {
        true
    }

    /// One `updateOne`, matching only a document with `holder`'s place in its line or its
    /// writers' mark (see `withdrawal.rs`).
    async fn withdraw(&self, name: &LockName, holder: &HolderId) -> Result<(), StoreError> {
        self.collection
            .update_one(
                withdrawal::filter(name.as_str(), holder),
                withdrawal::update(holder),
            )
            .await
            .map_err(|error| errors::backend("withdraw (updateOne)", error))?;
        Ok(())
    }

    async fn inspect(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        match self.read_record(name).await? {
            Some(found) => document::lock_record(&found).map(Some),
            None => Ok(None),
        }
    }
}
