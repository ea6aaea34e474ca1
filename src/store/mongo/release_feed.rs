//! The release feed: one change stream on the lock collection per manager, reporting the
//! names of locks that became free (a release sets `leaseId` to null; an operator or the TTL
//! monitor deletes the document), so waiting managers try again at once instead of at their
//! next poll. Hints only: when the stream is unavailable (a standalone server) or breaks,
//! waiters keep polling with backoff and the stream is reopened with growing pauses.
//!
//! An open stream costs a `getMore` per release of any lock, so it is open only while this
//! manager has waiters for another process's release (and [`LINGER`] after the last one
//! left); each time it opens the waiters retry once, for releases nothing watched.

use std::time::Duration;

use futures::StreamExt;
use mongodb::Collection;
use mongodb::bson::{Bson, Document, doc};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType};
use tokio::sync::mpsc;

use super::document::{ID, LEASE_ID};
use super::errors;
use crate::name::LockName;
use crate::store::ReleaseDemand;

const FIRST_PAUSE: Duration = Duration::from_millis(200);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);
/// How long the stream stays open after the last waiter left: contention tends to come back.
const LINGER: Duration = Duration::from_secs(10);

/// Feeds `feed` while `demand` wants it, until the receiver is dropped.
pub(super) async fn run(
    collection: Collection<Document>,
    feed: mpsc::Sender<LockName>,
    demand: ReleaseDemand,
) {
    let mut pause = FIRST_PAUSE;
    loop {
        tokio::select! {
            () = feed.closed() => return,
            () = demand.wanted() => {}
        }
        match collection.watch().pipeline(releases()).await {
            Ok(mut stream) => {
                pause = FIRST_PAUSE;
                demand.watching();
                loop {
                    let event = tokio::select! {
                        () = feed.closed() => return,
                        () = demand.unwanted_for(LINGER) => break,
                        event = stream.next() => event,
                    };
                    match event {
                        Some(Ok(event)) => {
                            if let Some(name) = released_name(&event)
                                && let Err(mpsc::error::TrySendError::Closed(_)) =
                                    feed.try_send(name)
                            {
                                return;
                            }
                        }
                        Some(Err(error)) => {
                            tracing::debug!(%error, "the release change stream broke; reopening it");
                            break;
                        }
                        None => break,
                    }
                }
                continue;
            }
            Err(error) if errors::is_permanent(&error) => {
                tracing::info!(%error, "change streams are unavailable; waiters poll for released locks");
                return;
            }
            Err(error) => {
                tracing::debug!(%error, "could not open the release change stream; retrying");
            }
        }
        tokio::select! {
            () = feed.closed() => return,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// Deletions, and updates that set the lease id to null (releases).
fn releases() -> Vec<Document> {
    vec![
        doc! { "$match": { "$or": [
            { "operationType": "delete" },
            {
                "operationType": "update",
                format!("updateDescription.updatedFields.{LEASE_ID}"): { "$type": "null" },
            },
        ] } },
        doc! { "$project": { "operationType": 1, "documentKey": 1 } },
    ]
}

fn released_name(event: &ChangeStreamEvent<Document>) -> Option<LockName> {
    if !matches!(
        event.operation_type,
        OperationType::Delete | OperationType::Update
    ) {
        return None;
    }
    match event.document_key.as_ref()?.get(ID)? {
        Bson::String(name) => LockName::new(name).ok(),
        _ => None,
    }
}
