//! The algorithm of the C# library DistributedLock.MongoDB (Medallion.Threading), written
//! out faithfully as a baseline:
//!
//! - acquire: one `findOneAndUpdate({_id: name}, pipeline, upsert, returnDocument: after)`;
//!   the pipeline takes the lock only when `ifNull(expiresAt, epoch) <= $$NOW`, writing
//!   `lockId`, `expiresAt = $$NOW + expiry`, `acquiredAt = $$NOW` and
//!   `fencingToken = ifNull(fencingToken, 0) + 1`; acquired iff the returned `lockId` is ours.
//!   Otherwise sleep a uniformly random 10–800 ms and try again (a duplicate-key error of two
//!   racing first upserts, or a null answer, counts as busy);
//! - while held: a background task extends every `expiry / 3` with
//!   `updateOne({_id, lockId}, [$set expiresAt = $$NOW + expiry])`;
//! - release: stop the extension task, `deleteOne({_id, lockId})`;
//! - the TTL index `expiresAt_ttl` is created once per collection.

use std::time::Duration;

use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::options::{IndexOptions, ReturnDocument};
use mongodb::{Collection, Database, IndexModel};
use rand::Rng as _;
use tokio::task::JoinHandle;

use super::contender::Contender;

/// DistributedLock.MongoDB's defaults.
#[derive(Debug, Clone)]
pub(crate) struct DlOptions {
    pub(crate) expiry: Duration,
    pub(crate) busy_wait_min: Duration,
    pub(crate) busy_wait_max: Duration,
}

impl Default for DlOptions {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(30),
            busy_wait_min: Duration::from_millis(10),
            busy_wait_max: Duration::from_millis(800),
        }
    }
}

/// One named lock of the algorithm.
#[derive(Debug, Clone)]
pub(crate) struct DlLock {
    collection: Collection<Document>,
    name: String,
    options: DlOptions,
}

/// A held lock: its id and the extension task.
#[derive(Debug)]
pub(crate) struct DlHandle {
    lock_id: String,
    extender: JoinHandle<()>,
}

impl DlLock {
    /// The lock `name` in `collection` of `database`.
    pub(crate) fn new(
        database: &Database,
        collection: &str,
        name: &str,
        options: DlOptions,
    ) -> Self {
        Self {
            collection: database.collection(collection),
            name: name.to_owned(),
            options,
        }
    }

    /// Creates the TTL index the library creates once per collection.
    ///
    /// # Errors
    ///
    /// What the server answered.
    pub(crate) async fn ensure_ttl_index(&self) -> Result<(), String> {
        let index = IndexModel::builder()
            .keys(doc! { "expiresAt": 1 })
            .options(
                IndexOptions::builder()
                    .name("expiresAt_ttl".to_owned())
                    .expire_after(Duration::ZERO)
                    .build(),
            )
            .build();
        self.collection
            .create_index(index)
            .await
            .map(drop)
            .map_err(|e| format!("DistributedLock TTL index: {e}"))
    }

    fn expiry_ms(&self) -> i64 {
        i64::try_from(self.options.expiry.as_millis()).unwrap_or(i64::MAX)
    }

    /// One attempt.
    ///
    /// # Errors
    ///
    /// What the server answered, except a duplicate key (busy).
    pub(crate) async fn try_acquire(&self) -> Result<Option<DlHandle>, String> {
        let lock_id = uuid::Uuid::new_v4().to_string();
        let expired = doc! {
            "$lte": [{ "$ifNull": ["$expiresAt", DateTime::from_millis(0)] }, "$$NOW"]
        };
        let when_expired = |then: Bson, otherwise: &str| -> Bson {
            Bson::Document(doc! { "$cond": [&expired, then, otherwise] })
        };
        let pipeline = vec![doc! { "$set": {
            "lockId": when_expired(doc! { "$literal": &lock_id }.into(), "$lockId"),
            "expiresAt": when_expired(
                doc! { "$dateAdd": {
                    "startDate": "$$NOW", "unit": "millisecond", "amount": self.expiry_ms()
                } }.into(),
                "$expiresAt",
            ),
            "acquiredAt": when_expired("$$NOW".into(), "$acquiredAt"),
            "fencingToken": when_expired(
                doc! { "$add": [{ "$ifNull": ["$fencingToken", 0_i64] }, 1_i64] }.into(),
                "$fencingToken",
            ),
        } }];
        let returned = self
            .collection
            .find_one_and_update(doc! { "_id": &self.name }, pipeline)
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        let returned = match returned {
            Ok(returned) => returned,
            Err(error) if is_duplicate_key(&error) => return Ok(None),
            Err(error) => return Err(format!("DistributedLock acquire: {error}")),
        };
        let ours = returned
            .as_ref()
            .and_then(|document| document.get_str("lockId").ok())
            == Some(lock_id.as_str());
        if !ours {
            return Ok(None);
        }
        let extender = tokio::spawn(extend_every(
            self.collection.clone(),
            self.name.clone(),
            lock_id.clone(),
            self.options.expiry,
            self.expiry_ms(),
        ));
        Ok(Some(DlHandle { lock_id, extender }))
    }

    fn busy_wait(&self) -> Duration {
        let (min, max) = (self.options.busy_wait_min, self.options.busy_wait_max);
        if max <= min {
            return min;
        }
        rand::rng().random_range(min..=max)
    }
}

impl Contender for DlLock {
    type Held = DlHandle;

    async fn acquire(&self) -> Result<DlHandle, String> {
        loop {
            if let Some(handle) = self.try_acquire().await? {
                return Ok(handle);
            }
            tokio::time::sleep(self.busy_wait()).await;
        }
    }

    async fn release(&self, held: DlHandle) -> Result<(), String> {
        held.extender.abort();
        self.collection
            .delete_one(doc! { "_id": &self.name, "lockId": &held.lock_id })
            .await
            .map(drop)
            .map_err(|e| format!("DistributedLock release: {e}"))
    }
}

/// The extension loop of a held lock (cadence `expiry / 3`); ends when aborted or when an
/// extension matches nothing (the lock was lost).
async fn extend_every(
    collection: Collection<Document>,
    name: String,
    lock_id: String,
    expiry: Duration,
    expiry_ms: i64,
) {
    let cadence = expiry / 3;
    loop {
        tokio::time::sleep(cadence).await;
        let extended = collection
            .update_one(
                doc! { "_id": &name, "lockId": &lock_id },
                vec![doc! { "$set": { "expiresAt": { "$dateAdd": {
                    "startDate": "$$NOW", "unit": "millisecond", "amount": expiry_ms
                } } } }],
            )
            .await;
        if !matches!(extended, Ok(result) if result.matched_count == 1) {
            return;
        }
    }
}

fn is_duplicate_key(error: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match error.kind.as_ref() {
        ErrorKind::Command(command) => command.code == 11000,
        ErrorKind::Write(WriteFailure::WriteError(write)) => write.code == 11000,
        _ => false,
    }
}
