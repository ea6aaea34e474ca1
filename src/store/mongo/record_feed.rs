//! The record feed of [`LockStore::watch_records`](crate::store::LockStore::watch_records):
//! one change stream on the lock collection per watch, filtered to the watched names, each
//! event turned into a [`RecordEvent`] from the fields the write changed (no read back, so
//! two quick writes are never seen as one): a new `leaseId` is a grant (with its
//! `grantedToken`, `holder` if it changed, and `expiresAt`), a null one a release (forced
//! when `forcedRelease` changed too), a new `expiresAt` alone a renewal. Lease lengths are
//! `expiresAt` minus the event's `wallTime`, both the server's clock.
//!
//! A shared record (a semaphore's or a reader/writer lock's) says less in its changed
//! fields, so its events are as close as they can be told: a new `grantedToken` is a grant
//! (its holder from `grantedHolder` when that changed, its lease up to the record's
//! `expiresAt` when that changed, else zero, which makes a watcher read the record), a new
//! `releasedAt` a release of some holder (forced with `forcedRelease`), and a new
//! `expiresAt` alone a renewal — also when a refused attempt's waiting mark or the pruning
//! of expired holders moved it, which a watcher checks against the record when it ends.
//!
//! When the stream breaks it is reopened after a pause (doubling up to 30 s) and the watcher
//! is told to read the records again ([`RecordEvent::Resync`]); a server without change
//! streams ends the feed, and the watcher polls.

use std::time::Duration;

use futures::StreamExt;
use mongodb::Collection;
use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::change_stream::ChangeStream;
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType};
use tokio::sync::mpsc;

use super::errors;
use super::fields::{
    EXPIRES_AT, FORCED_RELEASE, GRANTED_HOLDER, GRANTED_TOKEN, HOLDER, ID, LEASE_ID, RELEASED_AT,
    TOKEN,
};
use crate::name::LockName;
use crate::store::RecordEvent;
use crate::store::request::HolderId;

const FIRST_PAUSE: Duration = Duration::from_millis(200);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

type Stream = ChangeStream<ChangeStreamEvent<Document>>;

/// Opens the stream (so that nothing written after this returns is missed) and spawns its
/// reader; `None` when the server has no change streams.
pub(super) async fn start(
    collection: Collection<Document>,
    names: Vec<LockName>,
) -> Option<mpsc::Receiver<RecordEvent>> {
    let (feed, events) = mpsc::channel(crate::store::RECORD_FEED_CAPACITY);
    let stream = match open(&collection, &names).await {
        Ok(stream) => Some(stream),
        Err(error) if errors::is_permanent(&error) => {
            tracing::info!(%error, "change streams are unavailable; watches poll the records");
            return None;
        }
        Err(error) => {
            tracing::debug!(%error, "could not open the record change stream; retrying");
            None
        }
    };
    tokio::spawn(run(collection, names, stream, feed));
    Some(events)
}

async fn open(
    collection: &Collection<Document>,
    names: &[LockName],
) -> mongodb::error::Result<Stream> {
    let ids: Vec<&str> = names.iter().map(LockName::as_str).collect();
    let pipeline = vec![doc! { "$match": { "$or": [
        { format!("documentKey.{ID}"): { "$in": ids } },
        { "operationType": { "$in": ["drop", "rename", "dropDatabase", "invalidate"] } },
    ] } }];
    collection.watch().pipeline(pipeline).await
}

/// Reads `stream` (or opens one) until the watcher goes away, reopening it when it breaks.
async fn run(
    collection: Collection<Document>,
    names: Vec<LockName>,
    mut stream: Option<Stream>,
    feed: mpsc::Sender<RecordEvent>,
) {
    let mut pause = FIRST_PAUSE;
    loop {
        if let Some(mut open) = stream.take() {
            let delivered = follow(&mut open, &names, &feed).await;
            if feed.is_closed() {
                return;
            }
            if delivered {
                pause = FIRST_PAUSE;
            }
        }
        tokio::select! {
            () = feed.closed() => return,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
        match open(&collection, &names).await {
            Ok(reopened) => {
                // Writes while no stream was open were not seen.
                if feed.send(RecordEvent::Resync).await.is_err() {
                    return;
                }
                stream = Some(reopened);
            }
            Err(error) if errors::is_permanent(&error) => {
                tracing::info!(%error, "change streams are unavailable; watches poll the records");
                return;
            }
            Err(error) => tracing::debug!(%error, "could not reopen the record change stream"),
        }
    }
}

/// Forwards the stream's events until it ends or breaks, or the watcher goes away; returns
/// whether it delivered any.
async fn follow(stream: &mut Stream, names: &[LockName], feed: &mpsc::Sender<RecordEvent>) -> bool {
    let mut delivered = false;
    loop {
        let event = tokio::select! {
            () = feed.closed() => return delivered,
            event = stream.next() => event,
        };
        match event {
            Some(Ok(event)) => {
                delivered = true;
                for record_event in record_events(&event, names) {
                    if feed.send(record_event).await.is_err() {
                        return delivered;
                    }
                }
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "the record change stream broke; reopening it");
                return delivered;
            }
            None => return delivered,
        }
    }
}

/// What one change-stream event means for the watched `names`.
fn record_events(event: &ChangeStreamEvent<Document>, names: &[LockName]) -> Vec<RecordEvent> {
    let name = || match event.document_key.as_ref().and_then(|key| key.get(ID)) {
        Some(Bson::String(id)) => LockName::new(id).ok(),
        _ => None,
    };
    // `wallTime` is MongoDB 6.0's; before it, the cluster time's seconds.
    let written_at = event.wall_time.or_else(|| {
        event
            .cluster_time
            .map(|time| DateTime::from_millis(i64::from(time.time) * 1000))
    });
    let lease_left = |fields: &Document| lease_left(fields, written_at);
    match event.operation_type {
        OperationType::Insert | OperationType::Replace => {
            let (Some(name), Some(document)) = (name(), event.full_document.as_ref()) else {
                return Vec::new();
            };
            granted(name, document, lease_left(document))
                .into_iter()
                .collect()
        }
        OperationType::Update => {
            let (Some(name), Some(update)) = (name(), event.update_description.as_ref()) else {
                return Vec::new();
            };
            let fields = &update.updated_fields;
            match fields.get(LEASE_ID) {
                Some(Bson::Null) => vec![RecordEvent::Released {
                    name,
                    forced: fields.contains_key(FORCED_RELEASE),
                }],
                Some(_) => granted(name, fields, lease_left(fields))
                    .into_iter()
                    .collect(),
                // A shared record: a grant, a release of holders, or a renewal.
                None if fields.contains_key(GRANTED_TOKEN) => {
                    granted(name, fields, lease_left(fields))
                        .into_iter()
                        .collect()
                }
                None if fields.contains_key(RELEASED_AT) => vec![RecordEvent::Released {
                    name,
                    forced: fields.contains_key(FORCED_RELEASE),
                }],
                None => match lease_left(fields) {
                    Some(lease_left) => vec![RecordEvent::Renewed { name, lease_left }],
                    None => Vec::new(),
                },
            }
        }
        OperationType::Delete => name()
            .map(|name| RecordEvent::Deleted { name })
            .into_iter()
            .collect(),
        // The collection (or its database) is gone, and every record with it.
        OperationType::Drop | OperationType::Rename | OperationType::DropDatabase => names
            .iter()
            .map(|name| RecordEvent::Deleted { name: name.clone() })
            .collect(),
        _ => Vec::new(),
    }
}

/// A grant from the fields a write set (or a whole inserted document; a shared record
/// created by `set_permits` has no `grantedToken` and is no grant).
fn granted(name: LockName, fields: &Document, lease_left: Option<Duration>) -> Option<RecordEvent> {
    let token = [GRANTED_TOKEN, TOKEN]
        .iter()
        .find_map(|field| match fields.get(*field) {
            Some(Bson::Int64(token)) => u64::try_from(*token).ok(),
            Some(Bson::Int32(token)) => u64::try_from(*token).ok(),
            _ => None,
        })?;
    // A mutex's holder, or the holder of a shared record's last grant.
    let holder = fields
        .get_str(HOLDER)
        .or_else(|_| fields.get_str(GRANTED_HOLDER))
        .ok()
        .map(|holder| HolderId::from_string(holder.to_owned()));
    Some(RecordEvent::Granted {
        name,
        holder,
        token,
        lease_left: lease_left.unwrap_or_default(),
    })
}

/// `expiresAt` minus the time of the write, both by the server's clock.
fn lease_left(fields: &Document, written_at: Option<DateTime>) -> Option<Duration> {
    let expires_at = fields.get_datetime(EXPIRES_AT).ok()?;
    let written_at = written_at?;
    let millis = expires_at.timestamp_millis() - written_at.timestamp_millis();
    Some(Duration::from_millis(u64::try_from(millis).unwrap_or(0)))
}
