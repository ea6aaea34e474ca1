//! The TTL index `expiresAt_ttl`: lets MongoDB's TTL monitor delete documents of locks nobody
//! uses any more. It is housekeeping only: expiry is always decided by `$$NOW` in the
//! queries, and fencing tokens survive deletion (see [`super`]), so nothing depends on the
//! index existing or on when the monitor runs (every 60 s). Every other query finds its
//! documents by `_id`. A shared record's `expiresAt` is the latest of its holders' expiries
//! and its live waiting marks (rewritten by every write to it), so the monitor deletes it
//! only once nobody holds it and nobody's mark is on — and its kind with it, as the memory
//! store's sweeper does.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use mongodb::bson::{Document, doc};
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};

use super::errors;
use super::fields::EXPIRES_AT;

/// The index name.
pub(super) const NAME: &str = "expiresAt_ttl";

/// Server codes meaning "an index like this already exists with other options": left alone.
const INDEX_CONFLICTS: [i32; 2] = [85, 86];

/// The (deployment, database, collection) keys whose index creation was started by this
/// process: each is attempted once, not once per manager or per `prepare`.
fn started() -> MutexGuard<'static, HashSet<String>> {
    static STARTED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    STARTED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The index specification: ascending on `expiresAt`, documents removed as soon as
/// `expiresAt` has passed.
pub(super) fn model() -> IndexModel {
    IndexModel::builder()
        .keys(doc! { EXPIRES_AT: 1 })
        .options(
            IndexOptions::builder()
                .name(NAME.to_owned())
                .expire_after(Duration::ZERO)
                .build(),
        )
        .build()
}

/// Starts creating the index in a background task unless this process already did for
/// `deployment`. Missing permission is logged and accepted; other failures are logged and
/// the next `prepare` tries again.
pub(super) fn ensure_in_background(collection: Collection<Document>, deployment: &str) {
    let key = format!(
        "{deployment}|{}.{}",
        collection.namespace().db,
        collection.name()
    );
    if !started().insert(key.clone()) {
        return;
    }
    tokio::spawn(async move {
        match collection.create_index(model()).await {
            Ok(_) => {
                tracing::debug!(namespace = %key, "TTL index {NAME} is in place");
            }
            Err(error) if errors::is_unauthorized(&error) => tracing::warn!(
                namespace = %key,
                %error,
                "not allowed to create the TTL index {NAME}; locks work without it, but \
                 documents of unused lock names are never cleaned up"
            ),
            Err(error)
                if errors::server_code(&error).is_some_and(|c| INDEX_CONFLICTS.contains(&c)) =>
            {
                tracing::warn!(
                    namespace = %key,
                    %error,
                    "an index conflicting with the TTL index {NAME} exists; leaving it as it is"
                );
            }
            Err(error) => {
                tracing::warn!(
                    namespace = %key,
                    %error,
                    "creating the TTL index {NAME} failed; it will be retried by the next prepare"
                );
                started().remove(&key);
            }
        }
    });
}
