//! The release feed: one change stream on the lock collection per manager, reporting the
//! names of locks that became free for it (a release names in `wake` the managers the
//! record lets in next — a mutex's the one that waited longest, a shared record's those
//! its kind admits in arrival order — and only those managers' streams report it; a shared
//! release that names nobody, of a lease granted without arrival order or written by an
//! older version, stamps `releasedAt`, which every stream reports; a withdrawal stamps `withdrawnAt` as
//! it takes off a place or writers' mark whose waiters gave up; `set_permits` changes a
//! semaphore's `permits`, which may make room; an operator or the TTL monitor deletes the
//! document), so
//! waiting managers try again at once instead of at their next poll. Hints only: waiters
//! keep polling with backoff whatever the stream does.
//!
//! An open stream costs a `getMore` per release of any lock, so it is open only while this
//! manager has waiters for another process's release (and [`LINGER`] after the last one
//! left); each time it opens the waiters retry once, for releases nothing watched.
//!
//! What the stream meets, and what each case costs:
//! - *No change streams* (a standalone server, or no privilege to open one): waiters wake by
//!   their backoff only; the feed tries again every [`LONGEST_PAUSE`] while there are waiters
//!   (one failed `aggregate`), so a server that becomes a replica set is picked up.
//! - *Invalidated* (the collection dropped or renamed, its database dropped): every lock in it
//!   is gone, so every waiter retries at once; the stream is reopened after a pause.
//! - *Broken* (`getMore` fails, the server restarts): the driver resumes the stream itself
//!   after errors it knows to be resumable; otherwise it is reopened after a pause that starts
//!   at [`FIRST_PAUSE`] and doubles, up to [`LONGEST_PAUSE`], while streams keep breaking
//!   before delivering anything, so a stream that cannot stay open is never a busy loop.

use std::time::Duration;

use futures::StreamExt;
use mongodb::Collection;
use mongodb::bson::{Bson, Document, doc};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::errors;
use super::fields::{ID, LEASE_ID, PERMITS, RELEASED_AT, WAKE, WITHDRAWN_AT};
use crate::name::LockName;
use crate::store::ReleaseDemand;
use crate::store::request::HolderId;

const FIRST_PAUSE: Duration = Duration::from_millis(200);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);
/// How long the stream stays open after the last waiter left: contention tends to come back.
const LINGER: Duration = Duration::from_secs(10);
/// How long the server holds a `getMore` that has nothing to report: a stream filtered to
/// the releases meant for one manager is quiet most of the time, and an idle stream should
/// cost next to nothing (the server answers at once when an event comes).
const QUIET_GET_MORE: Duration = Duration::from_secs(30);

/// Feeds `feed` while `demand` wants it, until the receiver is dropped.
pub(super) async fn run(
    collection: Collection<Document>,
    feed: mpsc::Sender<LockName>,
    demand: ReleaseDemand,
) {
    let mut pause = FIRST_PAUSE;
    let mut told_unavailable = false;
    loop {
        tokio::select! {
            () = feed.closed() => return,
            () = demand.wanted() => {}
        }
        let opened = collection
            .watch()
            .pipeline(releases(demand.holder()))
            .max_await_time(QUIET_GET_MORE)
            .await;
        match opened {
            Ok(mut stream) => {
                told_unavailable = false;
                demand.watching();
                let opened_at = Instant::now();
                let mut delivered = false;
                let mut unwanted = false;
                loop {
                    let event = tokio::select! {
                        () = feed.closed() => return,
                        () = demand.unwanted_for(LINGER) => {
                            unwanted = true;
                            break;
                        }
                        event = stream.next() => event,
                    };
                    match event {
                        Some(Ok(event)) => {
                            delivered = true;
                            match released(&event) {
                                Released::One(name) => {
                                    if let Err(mpsc::error::TrySendError::Closed(_)) =
                                        feed.try_send(name)
                                    {
                                        return;
                                    }
                                }
                                Released::All => {
                                    tracing::info!(
                                        operation = ?event.operation_type,
                                        "the lock collection was dropped or renamed; waiters retry"
                                    );
                                    demand.watching();
                                }
                                Released::Nothing => {}
                            }
                        }
                        Some(Err(error)) => {
                            tracing::debug!(%error, "the release change stream broke; reopening it");
                            break;
                        }
                        None => {
                            tracing::debug!("the release change stream ended; reopening it");
                            break;
                        }
                    }
                }
                // Waiters that waited quietly for this stream poll again until it is back.
                demand.not_watching();
                if unwanted {
                    // Closed for lack of waiters, not broken: open again as soon as needed.
                    pause = FIRST_PAUSE;
                    continue;
                }
                if delivered || opened_at.elapsed() >= pause {
                    pause = FIRST_PAUSE;
                }
            }
            Err(error) if errors::is_permanent(&error) => {
                if !told_unavailable {
                    tracing::info!(%error, "change streams are unavailable; waiters poll for released locks");
                    told_unavailable = true;
                }
                pause = LONGEST_PAUSE;
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

/// Deletions; releases that wake `holder` (their [`WAKE`] names it or `*`; every one when
/// no holder is given); a mutex's releases written by versions that did not name whom they
/// wake (the lease id set to null, no [`WAKE`]); updates that stamp `releasedAt` without a
/// [`WAKE`] (a shared record losing holders, by a lease of the default mode or a version
/// that did not name whom it wakes: mixed versions stay live) or stamp `withdrawnAt` (a
/// manager's waiters gave up) or change `permits` (a semaphore's count); replacements; and
/// the events that end a collection's stream (the collection or its database dropped, the
/// collection renamed).
///
/// The filter runs on the server, so a manager's stream carries only the releases meant
/// for it: with many processes waiting for one lock, a release wakes the one that waited
/// longest (or, on a shared record, those that can go) rather than all of them. [`WAKE`]
/// stays one string, not an array of holders: MongoDB may describe an array's change as
/// paths of its elements (`wake.1`) in `updatedFields`, which a filter on the whole field
/// would miss.
///
/// The store never replaces a document, but MongoDB logs a pipeline update whose change
/// description would be larger than the document as a whole-document replacement, which a
/// change stream reports as `replace`, without the changed fields: more likely for a shared
/// record, whose holder list a release rewrites. Such an event is taken as a release (a
/// spurious hint costs a waiter one attempt; a missed one a poll interval).
fn releases(holder: Option<&HolderId>) -> Vec<Document> {
    let changed = |field: &str| format!("updateDescription.updatedFields.{field}");
    // Rule 22: a release only for the managers it names, or for everyone.
    let wakes: Bson = match holder {
        Some(holder) => doc! { "$regex": wake_pattern(holder) }.into(),
        None => doc! { "$exists": true }.into(),
    };
    vec![
        doc! { "$match": { "$or": [
            { "operationType": { "$in": [
                "delete", "replace", "drop", "rename", "dropDatabase", "invalidate",
            ] } },
            { "operationType": "update", changed(WAKE): wakes },
            {
                "operationType": "update",
                changed(LEASE_ID): { "$type": "null" },
                changed(WAKE): { "$exists": false },
            },
            {
                "operationType": "update",
                changed(RELEASED_AT): { "$exists": true },
                changed(WAKE): { "$exists": false },
            },
            { "operationType": "update", changed(PERMITS): { "$exists": true } },
            { "operationType": "update", changed(WITHDRAWN_AT): { "$exists": true } },
        ] } },
        doc! { "$project": { "operationType": 1, "documentKey": 1, "wallTime": 1 } },
    ]
}

/// The regular expression that a [`WAKE`] meant for `holder` matches: after a space, the
/// holder — with every character that is not a letter or digit escaped (a holder id is a
/// value, never a pattern) — or `*` (nobody was listed: every waiting manager may go),
/// then a space or the end. A wake is the token (digits), then a space and a holder per
/// manager woken, so a holder named in it is always preceded by a space and followed by
/// one or the end: never missed, whatever its id. An id that contains a space can at worst
/// match inside another manager's (`a b` holds ` b`): a spurious wake, one extra attempt.
fn wake_pattern(holder: &HolderId) -> String {
    let mut pattern = String::from(" (\\*|");
    for character in holder.as_str().chars() {
        if !character.is_ascii_alphanumeric() {
            pattern.push('\\');
        }
        pattern.push(character);
    }
    pattern.push_str(")( |$)");
    pattern
}

/// What one change-stream event freed.
enum Released {
    One(LockName),
    /// Every lock in the collection (it is gone).
    All,
    Nothing,
}

fn released(event: &ChangeStreamEvent<Document>) -> Released {
    match event.operation_type {
        OperationType::Delete | OperationType::Update | OperationType::Replace => {
            let name = match event.document_key.as_ref().and_then(|key| key.get(ID)) {
                Some(Bson::String(name)) => LockName::new(name).ok(),
                _ => None,
            };
            name.map_or(Released::Nothing, Released::One)
        }
        OperationType::Drop
        | OperationType::Rename
        | OperationType::DropDatabase
        | OperationType::Invalidate => Released::All,
        _ => Released::Nothing,
    }
}
