//! [`MongoStore`]'s calls for tools and operators, never the runtime's: listing every lock
//! and freeing a wedged holder's.

use mongodb::bson::Document;
use mongodb::options::ReturnDocument;

use super::pipeline;
use super::{MongoStore, document, errors, fields};
use crate::error::StoreError;
use crate::name::LockName;
use crate::store::outcome::LockRecord;

impl MongoStore {
    /// Every lock in the collection, sorted by name, read in one `aggregate` with the
    /// server's `$$NOW`: a record's holder and time left are set only while its lease is
    /// unexpired by the server's clock; a semaphore's or reader/writer lock's record lists its
    /// unexpired holders in grant order ([`LockRecord::shared`]). For dashboards and
    /// `mongolock status`; the runtime never calls it.
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
    ///     match record.holder() {
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
            .aggregate(pipeline::read::list())
            .read_concern(self.multi_document_read_concern())
            .await
            .map_err(failed)?;
        let mut locks = Vec::new();
        while cursor.advance().await.map_err(failed)? {
            let found: Document = cursor.deserialize_current().map_err(failed)?;
            let name = match found.get(fields::ID) {
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
    /// lease gone, reads this trace, and reports the loss as
    /// [`LossReason::ForceReleased`](crate::LossReason::ForceReleased).
    /// Until then it may still act as the holder, and another process can take the lock at
    /// once, so only fenced writes stay safe; use this for holders that are stuck, not as a
    /// way to hand work over.
    ///
    /// Returns the grant that was cleared (holder, token, the time it had left and how long
    /// others had waited, by the server's clock), or `None` when nothing held the lock
    /// (free, expired, or never used), in which case nothing was written. The document
    /// keeps a trace: `forcedRelease: {at, holder, leaseId, expiresAt}`.
    ///
    /// A semaphore or reader/writer lock is freed whole: every unexpired holder is cleared at
    /// once (an operator cannot pick one holder out of a shared record from the command
    /// line, and a wedged process usually holds all it holds), as their own releases would
    /// do, readers' turn included. The answer is its record as it stood ([`LockRecord::shared`]
    /// with the cleared holdings), and the trace is `forcedRelease: {at, holders}`. When the
    /// name is no held mutex this costs a second `findAndModify`, for the shared record.
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
    ///     Some(cleared) => println!("freed; it was held by {:?} (token {})", cleared.holder(), cleared.token),
    ///     None => println!("nothing held it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self, name: &LockName) -> Result<Option<LockRecord>, StoreError> {
        let after = self
            .collection
            .find_one_and_update(
                pipeline::filter::held(name),
                pipeline::release::force_release(),
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("force release (findAndModify)", error))?;
        if let Some(cleared) = document::forced_release_record(after)? {
            return Ok(Some(cleared));
        }
        let after = self
            .collection
            .find_one_and_update(
                pipeline::filter::shared_held(name),
                pipeline::release::force_release_shared(),
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("force release (findAndModify shared)", error))?;
        document::forced_shared_release_record(after)
    }
}
