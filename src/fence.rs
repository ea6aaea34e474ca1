//! [`FencedCollection`]: MongoDB writes that a stale lock holder cannot apply.
//!
//! A lease alone cannot stop a holder that was paused (a GC pause, `SIGSTOP`, a frozen VM)
//! past its lease: it wakes up still believing it holds the lock and writes. The protected
//! resource has to check. Each protected document records the largest fencing token that
//! wrote it; a write carries the writer's token and is applied only if that token is at
//! least the recorded one — the check, the write and the recording of the new token in one
//! atomic single-document update, one round trip.

use std::borrow::Borrow;
use std::future::{Future, IntoFuture};
use std::pin::Pin;

use mongodb::Collection;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::UpdateModifications;
use mongodb::results::UpdateResult;

use crate::error::{LockError, StoreError};
use crate::store::mongo::errors;

/// How many times a fenced upsert is tried when it races another writer creating the same
/// document (the loser's insert fails with a duplicate key and is retried as an update).
const UPSERT_ATTEMPTS: usize = 3;

/// A MongoDB collection whose writes are *fenced*: each write carries the writer's fencing
/// token ([`LockGuard::token`](crate::LockGuard::token)) and is applied only if that token is at least
/// the largest one already recorded on the document, which it then records.
///
/// The check is part of the write's filter, so check, write and recording are one atomic
/// single-document update, one round trip. A holder whose lease expired while it was paused
/// and that a newer holder has since superseded gets [`LockError::Fenced`] and nothing is
/// written, whether or not it has been told of its loss yet.
///
/// The token is kept in the field [`token_field`](Self::token_field) (default
/// `"fencingToken"`, an Int64) of each protected document. A document without the field (or
/// with `null`) has never been fenced and takes any token; one whose field holds anything but
/// a number refuses every fenced write (see [`FencedUpdate`]'s errors). Tokens of different locks are
/// unrelated; protect each document by one lock, or give each lock its own field with
/// [`with_token_field`](Self::with_token_field) (for example `"fence.orders"`).
///
/// What it guarantees: once a write carrying token `t` has been applied to a document, no
/// write carrying a smaller token is applied to it. A new holder should therefore write (or
/// [`claim`](Self::claim)) each document it protects before relying on it: until the new
/// token is recorded, the document cannot know that the previous holder is stale.
///
/// Writes use the wrapped collection's write concern; keep it `majority` on a replica set
/// so that a recorded token survives a failover.
///
/// ```no_run
/// use mongodb::bson::{Document, doc};
/// use mongolock::fence::FencedCollection;
/// use mongolock::{LockError, LockManager, LockOptions, MongoStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?;
/// let db = client.database("app");
/// let manager = LockManager::start(MongoStore::new(db.clone()), LockOptions::default()).await?;
/// let accounts = FencedCollection::new(db.collection::<Document>("accounts"));
///
/// let guard = manager.lock("account-42")?.acquire().await?;
/// match accounts
///     .update_one(guard.token(), doc! { "_id": 42 }, doc! { "$inc": { "balance": 10 } })
///     .await
/// {
///     Ok(result) => println!("applied to {} document(s)", result.matched_count),
///     // A newer holder has written: this process lost the lock (maybe while paused).
///     Err(LockError::Fenced { token, recorded }) => eprintln!("stale: {token} < {recorded}"),
///     Err(other) => return Err(other.into()),
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FencedCollection<T: Send + Sync> {
    collection: Collection<T>,
    raw: Collection<Document>,
    token_field: String,
}

impl<T: Send + Sync> FencedCollection<T> {
    /// The field holding the token unless [`with_token_field`](Self::with_token_field) names
    /// another.
    ///
    /// ```
    /// # use mongodb::bson::Document;
    /// assert_eq!(mongolock::fence::FencedCollection::<Document>::DEFAULT_TOKEN_FIELD, "fencingToken");
    /// ```
    pub const DEFAULT_TOKEN_FIELD: &str = "fencingToken";

    /// Fences writes to `collection`, recording tokens in `"fencingToken"`. Does no I/O.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let orders = mongolock::fence::FencedCollection::new(db.collection::<mongodb::bson::Document>("orders"));
    /// assert_eq!(orders.token_field(), "fencingToken");
    /// # Ok(()) }
    /// ```
    pub fn new(collection: Collection<T>) -> Self {
        let raw = collection.clone_with_type::<Document>();
        Self {
            collection,
            raw,
            token_field: Self::DEFAULT_TOKEN_FIELD.to_owned(),
        }
    }

    /// Records tokens in `field` instead (a dotted path such as `"fence.orders"` names an
    /// embedded field), for documents protected by more than one lock or whose schema already
    /// uses `fencingToken`.
    ///
    /// # Errors
    ///
    /// [`LockError::Store`] with [`StoreError::InvalidConfig`] if `field` is not a usable
    /// field path: empty, starting with `$`, containing NUL, or with an empty path component.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// use mongolock::fence::FencedCollection;
    /// let orders = FencedCollection::new(db.collection::<mongodb::bson::Document>("orders"))
    ///     .with_token_field("fence.billing")?;
    /// assert!(FencedCollection::new(db.collection::<mongodb::bson::Document>("orders"))
    ///     .with_token_field("$bad")
    ///     .is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_token_field(mut self, field: impl Into<String>) -> Result<Self, LockError> {
        let field = field.into();
        validate_field(&field)?;
        self.token_field = field;
        Ok(self)
    }

    /// The field each protected document records its largest token in.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// let orders = mongolock::fence::FencedCollection::new(db.collection::<mongodb::bson::Document>("orders"));
    /// println!("tokens live in {}", orders.token_field());
    /// # Ok(()) }
    /// ```
    pub fn token_field(&self) -> &str {
        &self.token_field
    }

    /// The wrapped collection, for reads (reads need no fence) and unfenced writes.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// use mongodb::bson::{Document, doc};
    /// let orders = mongolock::fence::FencedCollection::new(db.collection::<Document>("orders"));
    /// let order = orders.collection().find_one(doc! { "_id": 1 }).await?;
    /// # Ok(()) }
    /// ```
    pub fn collection(&self) -> &Collection<T> {
        &self.collection
    }

    /// Applies `update` (an update document of operators such as `$set`/`$inc`, or an
    /// aggregation pipeline) to the first document matching `filter`, if `token` is at least
    /// the token that document records; records `token` in the same write.
    ///
    /// Await the returned [`FencedUpdate`] (optionally after [`upsert`](FencedUpdate::upsert)).
    /// It resolves to the driver's [`UpdateResult`] when the write went through or no
    /// document matched `filter` (`matched_count == 0`, nothing written), and to
    /// [`LockError::Fenced`] when the document records a larger token.
    ///
    /// The update must not write the token field itself. A pipeline gets one more stage,
    /// `$set` of the token field, at its end.
    ///
    /// ```no_run
    /// # async fn run(guard: mongolock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// use mongodb::bson::{Document, doc};
    /// let stock = mongolock::fence::FencedCollection::new(db.collection::<Document>("stock"));
    /// stock
    ///     .update_one(guard.token(), doc! { "_id": "sku-1" }, doc! { "$inc": { "reserved": 1 } })
    ///     .upsert(true)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn update_one(
        &self,
        token: u64,
        filter: Document,
        update: impl Into<UpdateModifications>,
    ) -> FencedUpdate<'_> {
        FencedUpdate {
            collection: &self.raw,
            token_field: &self.token_field,
            token,
            filter,
            change: Change::Update(update.into()),
            upsert: false,
        }
    }

    /// Replaces the first document matching `filter` with `replacement`, if `token` is at
    /// least the token that document records. The stored replacement gets the token field
    /// set to `token` (overwriting any value `replacement` has there).
    ///
    /// Await the returned [`FencedUpdate`] (optionally after
    /// [`upsert`](FencedUpdate::upsert)); results as for [`update_one`](Self::update_one).
    ///
    /// ```no_run
    /// # async fn run(guard: mongolock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// use mongodb::bson::doc;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Report { _id: String, rows: u32 }
    ///
    /// let reports = mongolock::fence::FencedCollection::new(db.collection::<Report>("reports"));
    /// let report = Report { _id: "nightly".into(), rows: 120 };
    /// reports.replace_one(guard.token(), doc! { "_id": "nightly" }, &report).upsert(true).await?;
    /// # Ok(()) }
    /// ```
    pub fn replace_one(
        &self,
        token: u64,
        filter: Document,
        replacement: impl Borrow<T>,
    ) -> FencedUpdate<'_>
    where
        T: serde::Serialize,
    {
        let replacement = mongodb::bson::to_document(replacement.borrow()).map_err(|error| {
            LockError::Store(StoreError::backend_caused_by(
                "the fenced replacement cannot be serialized to a BSON document",
                error,
            ))
        });
        FencedUpdate {
            collection: &self.raw,
            token_field: &self.token_field,
            token,
            filter,
            change: Change::Replace(replacement),
            upsert: false,
        }
    }

    /// Records `token` on the document matching `filter` without changing anything else:
    /// the first thing a new holder does, so that from then on every write of an older holder
    /// is refused. With [`upsert`](FencedUpdate::upsert) it creates `{_id, <token field>}`
    /// when the document does not exist yet.
    ///
    /// ```no_run
    /// # async fn run(guard: mongolock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// use mongodb::bson::{Document, doc};
    /// let jobs = mongolock::fence::FencedCollection::new(db.collection::<Document>("jobs"));
    /// jobs.claim(guard.token(), doc! { "_id": "nightly" }).upsert(true).await?;
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, token: u64, filter: Document) -> FencedUpdate<'_> {
        FencedUpdate {
            collection: &self.raw,
            token_field: &self.token_field,
            token,
            filter,
            change: Change::Update(UpdateModifications::Document(Document::new())),
            upsert: false,
        }
    }
}

/// What a fenced write does to the matched document.
#[derive(Debug)]
enum Change {
    Update(UpdateModifications),
    Replace(Result<Document, LockError>),
}

/// A fenced write in preparation; `.await` it to send it (one round trip, plus one read only
/// when nothing matched, to tell "fenced off" from "no such document").
///
/// Built by [`FencedCollection::update_one`], [`replace_one`](FencedCollection::replace_one)
/// and [`claim`](FencedCollection::claim).
///
/// # Errors
///
/// - [`LockError::Fenced`]: the document records a larger token; nothing was written.
/// - [`LockError::Store`] with [`StoreError::InvalidConfig`] before any I/O: the update writes
///   the token field, is not made of update operators each with a document of fields, or an
///   upsert's filter has no `_id` as a plain value (an operator such as `{$gte: 42}` would let
///   a stale upsert insert a second document), or the token does not fit an Int64.
/// - [`LockError::Store`] with [`StoreError::Rejected`]: the document's token field holds
///   something other than a number (a string, a document, NaN). Such a document cannot tell
///   a stale writer from a current one, so no fenced write touches it until the field is
///   repaired; nothing was written.
/// - [`LockError::Store`] with [`StoreError::Backend`] (transient) or
///   [`StoreError::Rejected`] (permanent) when MongoDB fails; the driver's error is the
///   [`source`](std::error::Error::source). The write may or may not have been applied.
///
/// # Cancel safety
///
/// Dropping the future after it was first polled leaves the write's outcome unknown (applied
/// or not, as with any MongoDB write), but never lets a stale token through.
///
/// ```no_run
/// # async fn run(guard: mongolock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
/// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
/// use mongodb::bson::{Document, doc};
/// let jobs = mongolock::fence::FencedCollection::new(db.collection::<Document>("jobs"));
/// let write = jobs.update_one(guard.token(), doc! { "_id": "nightly" }, doc! { "$set": { "done": true } });
/// let result = write.upsert(true).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a fenced write does nothing until it is awaited"]
pub struct FencedUpdate<'a> {
    collection: &'a Collection<Document>,
    token_field: &'a str,
    token: u64,
    filter: Document,
    change: Change,
    upsert: bool,
}

impl FencedUpdate<'_> {
    /// Inserts the document when none matches the filter (default: `false`). The filter
    /// must name `_id` as a plain value (not an operator), so that a stale writer's upsert
    /// cannot insert a second document beside the one a newer holder wrote.
    ///
    /// ```no_run
    /// # async fn run(guard: mongolock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = mongodb::Client::with_uri_str("mongodb://localhost:27017").await?.database("app");
    /// use mongodb::bson::{Document, doc};
    /// let jobs = mongolock::fence::FencedCollection::new(db.collection::<Document>("jobs"));
    /// jobs.update_one(guard.token(), doc! { "_id": 1 }, doc! { "$set": { "x": 1 } }).upsert(true).await?;
    /// # Ok(()) }
    /// ```
    pub fn upsert(mut self, upsert: bool) -> Self {
        self.upsert = upsert;
        self
    }

    async fn send(self) -> Result<UpdateResult, LockError> {
        let Self {
            collection,
            token_field: field,
            token,
            filter,
            change,
            upsert,
        } = self;
        let stored = token_value(token)?;
        if upsert && filter.get("_id").is_none_or(is_operator) {
            return Err(invalid(
                "a fenced upsert needs `_id` in its filter as a plain value (not an operator such as $gte), or a stale writer could insert a second document",
            ));
        }
        let change = match change {
            Change::Update(update) => Write::Update(with_token(update, field, stored)?),
            Change::Replace(replacement) => {
                let mut replacement = replacement?;
                set_path(&mut replacement, field, Bson::Int64(stored));
                if upsert && !replacement.contains_key("_id") {
                    // The server takes an upserted replacement's `_id` from the filter only
                    // when it is a plain equality; copy it so every server agrees.
                    if let Some(id) = filter.get("_id").filter(|id| !is_operator(id)) {
                        replacement.insert("_id", id.clone());
                    }
                }
                Write::Replace(replacement)
            }
        };
        let fenced = |recorded| LockError::Fenced { token, recorded };
        let guarded = fenced_filter(&filter, field, stored);
        for attempt in 1..=UPSERT_ATTEMPTS {
            let sent = match &change {
                Write::Update(update) => {
                    collection
                        .update_one(guarded.clone(), update.clone())
                        .upsert(upsert)
                        .await
                }
                Write::Replace(replacement) => {
                    collection
                        .replace_one(guarded.clone(), replacement)
                        .upsert(upsert)
                        .await
                }
            };
            match sent {
                Ok(result) if result.matched_count > 0 || result.upserted_id.is_some() => {
                    return Ok(result);
                }
                Ok(result) => {
                    // Nothing matched: either no such document, or a larger token (or a
                    // token field that is not a number).
                    return match recorded_above(collection, &filter, field, stored).await? {
                        Some(recorded) => Err(fenced(recorded)),
                        None => Ok(result),
                    };
                }
                Err(error) if upsert && errors::is_duplicate_key(&error) => {
                    // The document exists but did not match: a larger token, or another
                    // writer created it between our filter and our insert (retry as update).
                    if let Some(recorded) =
                        recorded_above(collection, &filter, field, stored).await?
                    {
                        return Err(fenced(recorded));
                    }
                    if attempt == UPSERT_ATTEMPTS {
                        return Err(errors::backend("fenced write (upsert)", error).into());
                    }
                }
                Err(error) => return Err(errors::backend("fenced write", error).into()),
            }
        }
        Err(invalid("a fenced upsert found no way to apply"))
    }
}

/// The token recorded on the document `filter` matches, if it is larger than `stored`.
///
/// # Errors
///
/// [`StoreError::Rejected`] when the document's token field holds something other than a
/// number (a string, a document, NaN…): such a document cannot say which holder is newer,
/// so no fenced write touches it until the field is repaired.
async fn recorded_above(
    collection: &Collection<Document>,
    filter: &Document,
    field: &str,
    stored: i64,
) -> Result<Option<u64>, LockError> {
    let found = collection
        .find_one(filter.clone())
        .projection(doc! { field: 1 })
        .await
        .map_err(|error| errors::backend("fenced write (reading the recorded token)", error))?;
    let Some(document) = found else {
        return Ok(None);
    };
    match recorded_token(&document, field) {
        Recorded::Nothing => Ok(None),
        Recorded::Token(recorded) => Ok((recorded > stored)
            .then(|| u64::try_from(recorded).ok())
            .flatten()),
        Recorded::NotANumber(found) => Err(LockError::Store(StoreError::Rejected {
            message: format!(
                "the document's fencing token field {field:?} holds {found}, not a number: no fenced write can tell whether it is stale, so nothing was written (repair or remove the field)"
            ),
            source: None,
        })),
    }
}

impl<'a> IntoFuture for FencedUpdate<'a> {
    type Output = Result<UpdateResult, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

/// The write actually sent, with the token added.
enum Write {
    Update(UpdateModifications),
    Replace(Document),
}

fn invalid(message: &str) -> LockError {
    LockError::Store(StoreError::InvalidConfig(message.to_owned()))
}

/// Tokens are stored as Int64; every token a [`LockStore`](crate::store::LockStore) issues
/// fits, but a caller may pass any `u64`.
fn token_value(token: u64) -> Result<i64, LockError> {
    i64::try_from(token).map_err(|_| {
        LockError::Store(StoreError::InvalidConfig(format!(
            "fencing token {token} does not fit in MongoDB's Int64"
        )))
    })
}

fn validate_field(field: &str) -> Result<(), LockError> {
    let reason = if field.is_empty() {
        Some("it is empty")
    } else if field.starts_with('$') {
        Some("it starts with '$'")
    } else if field.contains('\0') {
        Some("it contains a NUL character")
    } else if field.split('.').any(str::is_empty) {
        Some("a path component is empty")
    } else {
        None
    };
    match reason {
        Some(reason) => {
            let shown: String = field.chars().take(64).collect();
            Err(LockError::Store(StoreError::InvalidConfig(format!(
                "invalid fencing token field {shown:?}: {reason}"
            ))))
        }
        None => Ok(()),
    }
}

/// `filter` and "the recorded token is a number not larger than ours" (a missing or null
/// token matches: the document was never fenced). Anything else recorded — a larger token,
/// a string, NaN — matches nothing.
fn fenced_filter(filter: &Document, field: &str, stored: i64) -> Document {
    let guard = doc! { "$or": [
        { field: Bson::Null },
        { field: { "$gte": i64::MIN, "$lte": stored } },
    ] };
    doc! { "$and": [filter.clone(), guard] }
}

/// Whether one path is the other or contains it (`a` and `a.b` overlap, `a` and `ab` do not).
fn paths_overlap(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long == short
        || long
            .strip_prefix(short)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// `update` plus the recording of the token.
fn with_token(
    update: UpdateModifications,
    field: &str,
    stored: i64,
) -> Result<UpdateModifications, LockError> {
    match update {
        UpdateModifications::Document(mut operators) => {
            for (operator, argument) in &operators {
                if !operator.starts_with('$') {
                    return Err(invalid(
                        "a fenced update must consist of update operators such as $set or $inc (use replace_one to replace a document)",
                    ));
                }
                let Bson::Document(fields) = argument else {
                    // Refused as the server would refuse it, never rewritten into a write
                    // the caller did not ask for.
                    return Err(LockError::Store(StoreError::InvalidConfig(format!(
                        "the argument of {operator} in a fenced update must be a document of fields, not {argument}"
                    ))));
                };
                let touched = fields
                    .iter()
                    .flat_map(|(path, value)| {
                        // `$rename` writes its values' paths too.
                        let renamed = match value {
                            Bson::String(to) if operator == "$rename" => Some(to.as_str()),
                            _ => None,
                        };
                        std::iter::once(path.as_str()).chain(renamed)
                    })
                    .any(|path| paths_overlap(path, field));
                if touched {
                    return Err(LockError::Store(StoreError::InvalidConfig(format!(
                        "a fenced update must not write the token field {field:?} ({operator} does)"
                    ))));
                }
            }
            match operators.get_mut("$set") {
                Some(Bson::Document(set)) => {
                    set.insert(field, stored);
                }
                _ => {
                    operators.insert("$set", doc! { field: stored });
                }
            }
            Ok(UpdateModifications::Document(operators))
        }
        UpdateModifications::Pipeline(mut stages) => {
            stages.push(doc! { "$set": { field: { "$literal": stored } } });
            Ok(UpdateModifications::Pipeline(stages))
        }
        _ => Err(invalid("this form of update cannot be fenced")),
    }
}

/// Sets a (dotted) path in `document`, creating or replacing embedded documents on the way.
fn set_path(document: &mut Document, path: &str, value: Bson) {
    match path.split_once('.') {
        None => {
            document.insert(path, value);
        }
        Some((first, rest)) => {
            if !matches!(document.get(first), Some(Bson::Document(_))) {
                document.insert(first, Document::new());
            }
            if let Some(Bson::Document(inner)) = document.get_mut(first) {
                set_path(inner, rest, value);
            }
        }
    }
}

/// What a document records at the token's (dotted) path.
#[derive(Debug, PartialEq, Eq)]
enum Recorded {
    /// No token (the field, or a document on its path, is missing or null).
    Nothing,
    Token(i64),
    /// Something no token can be compared with; the text says what.
    NotANumber(String),
}

fn recorded_token(document: &Document, path: &str) -> Recorded {
    let (first, rest) = match path.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (path, None),
    };
    match (document.get(first), rest) {
        (None | Some(Bson::Null), _) => Recorded::Nothing,
        (Some(Bson::Document(inner)), Some(rest)) => recorded_token(inner, rest),
        (Some(Bson::Int64(value)), None) => Recorded::Token(*value),
        (Some(Bson::Int32(value)), None) => Recorded::Token(i64::from(*value)),
        // Rounded up: a fractional token larger than ours must still fence us off.
        #[allow(clippy::cast_possible_truncation)]
        (Some(Bson::Double(value)), None) if value.is_finite() => {
            Recorded::Token(value.ceil() as i64)
        }
        (Some(other), _) => Recorded::NotANumber(format!("{:?} {other}", other.element_type())),
    }
}

/// Whether a filter value is an operator expression (`{$gte: 42}`), not a plain value.
fn is_operator(value: &Bson) -> bool {
    match value {
        Bson::Document(inner) => inner.keys().any(|key| key.starts_with('$')),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compares_the_token_as_a_number() {
        let filter = fenced_filter(&doc! { "_id": "$gt" }, "fencingToken", 7);
        assert_eq!(
            filter,
            doc! { "$and": [
                { "_id": "$gt" },
                { "$or": [
                    { "fencingToken": Bson::Null },
                    { "fencingToken": { "$gte": i64::MIN, "$lte": 7_i64 } },
                ] },
            ] }
        );
    }

    #[test]
    fn malformed_operators_are_refused_not_rewritten() {
        for bad in [
            doc! { "$set": 5, "$inc": { "n": 1 } },
            doc! { "$inc": "n" },
            doc! { "$unset": ["a"] },
        ] {
            assert!(
                matches!(
                    with_token(bad.clone().into(), "fence", 5),
                    Err(LockError::Store(StoreError::InvalidConfig(_)))
                ),
                "{bad}"
            );
        }
        assert!(is_operator(&Bson::Document(doc! { "$gte": 42 })));
        assert!(is_operator(&Bson::Document(doc! { "a": 1, "$eq": 1 })));
        assert!(!is_operator(&Bson::Document(doc! { "a": 1 })));
        assert!(!is_operator(&Bson::String("$gt".into())));
    }

    #[test]
    fn updates_record_the_token_and_may_not_write_it() {
        let update = with_token(doc! { "$inc": { "n": 1 } }.into(), "fence", 5).unwrap();
        let UpdateModifications::Document(update) = update else {
            panic!("a document")
        };
        assert_eq!(
            update,
            doc! { "$inc": { "n": 1 }, "$set": { "fence": 5_i64 } }
        );
        let merged = with_token(doc! { "$set": { "a": 1 } }.into(), "fence", 5).unwrap();
        let UpdateModifications::Document(merged) = merged else {
            panic!("a document")
        };
        assert_eq!(merged, doc! { "$set": { "a": 1, "fence": 5_i64 } });
        for bad in [
            doc! { "$set": { "fence": 1 } },
            doc! { "$inc": { "fence.x": 1 } },
            doc! { "$unset": { "fence": "" } },
            doc! { "$rename": { "a": "fence" } },
            doc! { "plain": 1 },
        ] {
            assert!(
                matches!(
                    with_token(bad.clone().into(), "fence", 5),
                    Err(LockError::Store(StoreError::InvalidConfig(_)))
                ),
                "{bad}"
            );
        }
        assert!(with_token(doc! { "$set": { "fenceX": 1 } }.into(), "fence", 5).is_ok());
        let pipeline = with_token(vec![doc! { "$set": { "a": 1 } }].into(), "f", 5).unwrap();
        let UpdateModifications::Pipeline(stages) = pipeline else {
            panic!("a pipeline")
        };
        assert_eq!(stages.len(), 2);
    }

    #[test]
    fn field_paths_are_validated_and_nested() {
        for bad in ["", "$x", "a..b", ".a", "a.", "a\0b"] {
            assert!(validate_field(bad).is_err(), "{bad:?}");
        }
        assert!(validate_field("fence.orders").is_ok());
        let mut document = doc! { "fence": 1 };
        set_path(&mut document, "fence.orders", Bson::Int64(9));
        assert_eq!(
            recorded_token(&document, "fence.orders"),
            Recorded::Token(9)
        );
        assert_eq!(recorded_token(&doc! { "f": 2.5 }, "f"), Recorded::Token(3));
        assert_eq!(recorded_token(&doc! { "g": 1 }, "f"), Recorded::Nothing);
        assert_eq!(
            recorded_token(&doc! { "f": Bson::Null }, "f"),
            Recorded::Nothing
        );
        for odd in [
            doc! { "f": "x" },
            doc! { "f": f64::NAN },
            doc! { "f": { "g": 1 } },
        ] {
            assert!(
                matches!(recorded_token(&odd, "f"), Recorded::NotANumber(_)),
                "{odd}"
            );
        }
        assert!(token_value(u64::MAX).is_err());
        assert!(paths_overlap("a", "a.b") && !paths_overlap("a", "ab"));
    }
}
