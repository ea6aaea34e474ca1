//! Configuration of a [`MongoStore`]: collection name (validated before any I/O) and write
//! concern.

use mongodb::bson::Document;
use mongodb::options::{
    CollectionOptions, ReadConcern, ReadPreference, SelectionCriteria, WriteConcern,
};
use mongodb::{Collection, Database};

use super::MongoStore;
use crate::error::StoreError;

/// The longest `database.collection` namespace accepted, in bytes. MongoDB before 4.4 limits
/// namespaces to 120 bytes; newer servers allow 255. The lower bound works everywhere.
pub(super) const MAX_NAMESPACE_BYTES: usize = 120;

/// Builds a [`MongoStore`] with a non-default collection, write concern or read concern.
///
/// Defaults: collection `"distributed_locks"`, write concern `majority`, read concern
/// `majority` for the reads that decide or report holders, and every call sent to the
/// primary whatever the database's read preference.
///
/// ```no_run
/// use mongodb::options::WriteConcern;
/// use mongolock::MongoStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?;
/// let store = MongoStore::builder(client.database("app"))
///     .with_collection("my_locks")
///     .with_write_concern(WriteConcern::majority())
///     .build()?;
/// assert_eq!(store.collection_name(), "my_locks");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
#[cfg_attr(docsrs, doc(cfg(feature = "mongodb")))]
pub struct MongoStoreBuilder {
    database: Database,
    collection: String,
    write_concern: WriteConcern,
    read_concern: ReadConcern,
}

impl MongoStoreBuilder {
    pub(super) fn new(database: Database) -> Self {
        Self {
            database,
            collection: MongoStore::DEFAULT_COLLECTION.to_owned(),
            write_concern: WriteConcern::majority(),
            read_concern: ReadConcern::majority(),
        }
    }

    /// The collection holding one document per lock name (default `"distributed_locks"`).
    /// Checked by [`build`](Self::build).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::builder(db).with_collection("job_locks").build()?;
    /// # Ok(()) }
    /// ```
    pub fn with_collection(mut self, name: impl Into<String>) -> Self {
        self.collection = name.into();
        self
    }

    /// The write concern of every write (default `majority`, so a granted lease survives a
    /// primary failover). Weaker concerns are faster but a failover can then forget a grant
    /// and hand the lock out twice.
    ///
    /// ```no_run
    /// use mongodb::options::{Acknowledgment, WriteConcern};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let concern = WriteConcern::builder().w(Acknowledgment::Nodes(1)).build();
    /// let store = mongolock::MongoStore::builder(db).with_write_concern(concern).build()?;
    /// # Ok(()) }
    /// ```
    pub fn with_write_concern(mut self, concern: WriteConcern) -> Self {
        self.write_concern = concern;
        self
    }

    /// The read concern of the reads that decide or report who holds a lock:
    /// [`LockStore::inspect`](crate::store::LockStore::inspect) (and so `Lock::inspect`,
    /// `is_held_by_*`, `Election::leader`), [`MongoStore::list`] (`mongolock status`) and the
    /// check after a batched renewal of which leases still hold (default `majority`).
    ///
    /// A primary cut off from the majority keeps answering reads until it steps down; with
    /// `majority` it answers only what a majority has acknowledged, so it cannot report a
    /// holder the majority has already replaced. `linearizable` goes further for the reads
    /// of one document (`inspect`): the answer reflects every write acknowledged before the
    /// read began, at the cost of a round trip to a majority; reads of many documents then
    /// use `majority`, as MongoDB allows `linearizable` only for one. `local` is the fastest
    /// and may report a holder that a newer primary has replaced.
    ///
    /// ```no_run
    /// use mongodb::options::ReadConcern;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let store = mongolock::MongoStore::builder(db)
    ///     .with_read_concern(ReadConcern::linearizable())
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn with_read_concern(mut self, concern: ReadConcern) -> Self {
        self.read_concern = concern;
        self
    }

    /// Validates the configuration (no I/O) and creates the store.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidConfig`] for a database name MongoDB refuses (empty, longer than
    /// 63 bytes, or containing one of `/\. "$*<>:|?` or NUL), or a collection name it
    /// refuses (empty, containing `$` or NUL, starting with `.` or `system.`, ending with
    /// `.`, containing `..`), or a `database.collection` longer than 120 bytes.
    ///
    /// ```no_run
    /// use mongolock::{MongoStore, StoreError};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let rejected = MongoStore::builder(db).with_collection("system.locks").build();
    /// assert!(matches!(rejected, Err(StoreError::InvalidConfig(_))));
    /// # Ok(()) }
    /// ```
    pub fn build(self) -> Result<MongoStore, StoreError> {
        validate_database_name(self.database.name())?;
        validate_collection_name(self.database.name(), &self.collection)?;
        let collection = lock_collection(&self.database, &self.collection, self.write_concern);
        Ok(MongoStore::from_parts(
            self.database,
            collection,
            self.read_concern,
        ))
    }
}

/// The lock collection `name` of `database` as every store call uses it: `concern` for
/// writes, and every call sent to the primary whatever the database's read preference.
pub(super) fn lock_collection(
    database: &Database,
    name: &str,
    concern: WriteConcern,
) -> Collection<Document> {
    let options = CollectionOptions::builder()
        .write_concern(concern)
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .build();
    database.collection_with_options::<Document>(name, options)
}

/// The characters MongoDB refuses in database names on some platform; refused everywhere so
/// a configuration that works on one server works on all.
const DATABASE_FORBIDDEN: &[char] = &[
    '/', '\\', '.', ' ', '"', '$', '*', '<', '>', ':', '|', '?', '\0',
];

/// The longest database name MongoDB accepts, in bytes.
const MAX_DATABASE_BYTES: usize = 63;

/// Checks a database name against MongoDB's naming rules, so a bad name fails at
/// configuration time with a clear message instead of at the first lock call.
pub(super) fn validate_database_name(name: &str) -> Result<(), StoreError> {
    let reason = if name.is_empty() {
        Some("it is empty".to_owned())
    } else if name.len() > MAX_DATABASE_BYTES {
        Some(format!(
            "it is {} bytes long; the limit is {MAX_DATABASE_BYTES}",
            name.len()
        ))
    } else {
        name.chars()
            .find(|c| DATABASE_FORBIDDEN.contains(c))
            .map(|c| format!("it contains {c:?}"))
    };
    match reason {
        Some(reason) => {
            let shown: String = name.chars().take(64).collect();
            Err(StoreError::InvalidConfig(format!(
                "invalid MongoDB database name {shown:?}: {reason}"
            )))
        }
        None => Ok(()),
    }
}

/// Checks a collection name (and the namespace it makes) against MongoDB's naming rules.
pub(super) fn validate_collection_name(database: &str, name: &str) -> Result<(), StoreError> {
    let reason = if name.is_empty() {
        Some("it is empty".to_owned())
    } else if name.contains('$') {
        Some("it contains '$'".to_owned())
    } else if name.contains('\0') {
        Some("it contains a NUL character".to_owned())
    } else if name.starts_with("system.") {
        Some("names starting with \"system.\" are reserved by MongoDB".to_owned())
    } else if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        Some("a namespace component would be empty (leading, trailing or doubled '.')".to_owned())
    } else if database.len() + 1 + name.len() > MAX_NAMESPACE_BYTES {
        Some(format!(
            "the namespace \"{database}.<collection>\" would be {} bytes; the limit is {MAX_NAMESPACE_BYTES}",
            database.len() + 1 + name.len()
        ))
    } else {
        None
    };
    match reason {
        Some(reason) => {
            let shown: String = name.chars().take(64).collect();
            Err(StoreError::InvalidConfig(format!(
                "invalid MongoDB collection name {shown:?}: {reason}"
            )))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_follow_mongodb_rules() {
        for good in ["distributed_locks", "locks.v2", "注文", "a"] {
            assert!(validate_collection_name("app", good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_NAMESPACE_BYTES);
        for bad in [
            "",
            "$cmd",
            "a$b",
            "a\0b",
            "system.locks",
            ".locks",
            "locks.",
            "a..b",
            long.as_str(),
        ] {
            match validate_collection_name("app", bad) {
                Err(StoreError::InvalidConfig(message)) => {
                    assert!(message.contains("collection name"), "{message}");
                    assert!(message.len() < 300, "message repeats a huge name");
                }
                other => panic!("{bad:?} accepted: {other:?}"),
            }
        }
        let fits = "x".repeat(MAX_NAMESPACE_BYTES - "app.".len());
        assert!(validate_collection_name("app", &fits).is_ok());
        assert!(validate_collection_name("app", &format!("{fits}x")).is_err());
    }

    #[test]
    fn database_names_follow_mongodb_rules() {
        for good in ["app", "mongolock", "a-b_c", "注文"] {
            assert!(validate_database_name(good).is_ok(), "{good}");
        }
        for bad in ["", "a$b", "a.b", "a b", "a/b", "a\0b", &"x".repeat(64)] {
            match validate_database_name(bad) {
                Err(StoreError::InvalidConfig(message)) => {
                    assert!(message.contains("database name"), "{message}");
                }
                other => panic!("{bad:?} accepted: {other:?}"),
            }
        }
    }
}
