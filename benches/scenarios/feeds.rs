//! How soon does a change stream's event reach its watcher after the write that caused it,
//! and what does each write cost the server, as the number of open streams grows? Every wake
//! by a change stream (a release naming the manager that goes next) pays this between the
//! release's write and the woken manager's attempt, whatever the lock does around it: the
//! floor under S9's "release → next grant" and under each cross-process turn of S7.
//!
//! `streams` watchers, each on a client of its own (as separate managers are), watch one
//! document with a filter shaped as the release feed's: an update whose `wake` names the
//! watcher (` (\*|w<i>)( |$)`). One writer then updates that document `writes` times, each
//! write naming the next watcher in turn and waiting for its event before the next write.

use std::time::Duration;

use mongodb::Collection;
use mongodb::bson::{Document, doc};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::child::{Args, Side, emit, scratch_name};
use crate::support::commands::CommandLog;
use crate::support::probe;
use crate::support::server;
use crate::support::stats::{millis, quantile};

const COLLECTION: &str = "feed_locks";
const DOCUMENT: &str = "probe";

/// How long the server holds a `getMore` with nothing to report: the release feed's.
const QUIET_GET_MORE: Duration = Duration::from_secs(30);

/// The longest a write's event is waited for before it counts as lost.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The release feed's filter for the watcher `index`, its `wake` branch only: the branches
/// for deletions and other kinds' changes match nothing this probe writes.
fn wakes(index: usize) -> Vec<Document> {
    vec![
        doc! { "$match": {
            "operationType": "update",
            "updateDescription.updatedFields.wake": { "$regex": format!(" (\\*|w{index})( |$)") },
        } },
        doc! { "$project": { "operationType": 1, "documentKey": 1 } },
    ]
}

/// Opens `count` watchers, each on its own client; their events arrive on the returned
/// channel as (watcher, when received).
async fn watchers(
    database: &str,
    count: usize,
) -> Result<
    (
        Vec<tokio::task::JoinHandle<()>>,
        mpsc::UnboundedReceiver<(usize, Instant)>,
    ),
    String,
> {
    let (sender, events) = mpsc::unbounded_channel();
    let mut tasks = Vec::with_capacity(count);
    for index in 0..count {
        let client = server::client(&server::uri(), "feeds-watcher", &CommandLog::new()).await?;
        let collection: Collection<Document> = client.database(database).collection(COLLECTION);
        let mut stream = collection
            .watch()
            .pipeline(wakes(index))
            .max_await_time(QUIET_GET_MORE)
            .await
            .map_err(|e| format!("watch: {e}"))?;
        let sender = sender.clone();
        tasks.push(tokio::spawn(async move {
            // One getMore at a time; `None`: an empty batch.
            while let Ok(event) = stream.next_if_any().await {
                if event.is_some() && sender.send((index, Instant::now())).is_err() {
                    return;
                }
            }
        }));
    }
    Ok((tasks, events))
}

/// Per count of streams: the server's CPU per second while they are open and nothing is
/// written, the write's round trip, its sending and its acknowledgement → the named
/// watcher's event, and the server's CPU per write (both CPU figures when
/// `MONGOLOCK_BENCH_SERVER_PID` is set).
pub(crate) async fn feeds(args: &Args) -> Result<(), String> {
    let counts: Vec<usize> = args
        .text("streams", "1,8,32,64")
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect();
    let writes = args.get("writes", 300_usize);
    let idle = args.millis("idle_ms", 5000);
    let database = scratch_name("feeds");
    let side = Side::connect("feeds", &database).await?;
    let collection: Collection<Document> = side.database.collection(COLLECTION);
    collection
        .insert_one(doc! { "_id": DOCUMENT, "wake": "" })
        .await
        .map_err(|e| format!("insert: {e}"))?;
    for &count in &counts {
        let (tasks, mut events) = watchers(&database, count).await?;
        // The floor under any waiting: every stream open, every client connected, nothing
        // written (what S9's waiters cost the server before any of them asks).
        let idle_before = probe::server_cpu();
        tokio::time::sleep(idle).await;
        let idle_cpu = probe::server_cpu()
            .zip(idle_before)
            .map(|(after, before)| millis(after.saturating_sub(before)) / idle.as_secs_f64());
        let (mut round_trips, mut to_event, mut lost) = (Vec::new(), Vec::new(), 0_usize);
        let mut from_send = Vec::new();
        let cpu_before = probe::server_cpu();
        let started = Instant::now();
        for write in 0..writes {
            let target = write % count;
            let sent = Instant::now();
            collection
                .update_one(
                    doc! { "_id": DOCUMENT },
                    doc! { "$set": { "wake": format!("{write} w{target}") } },
                )
                .await
                .map_err(|e| format!("update: {e}"))?;
            let acknowledged = Instant::now();
            round_trips.push(millis(acknowledged - sent));
            let deadline = acknowledged + EVENT_TIMEOUT;
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Ok(Some((index, at))) if index == target => {
                        // The event may come before the client has read the write's answer.
                        to_event.push(millis(at.saturating_duration_since(acknowledged)));
                        from_send.push(millis(at.saturating_duration_since(sent)));
                        break;
                    }
                    // Another watcher's event: the filter let through a write not for it.
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        lost += 1;
                        break;
                    }
                }
            }
        }
        let elapsed = started.elapsed();
        let cpu = probe::server_cpu()
            .zip(cpu_before)
            .map(|(after, before)| millis(after.saturating_sub(before)) / writes as f64);
        for task in tasks {
            task.abort();
        }
        for (figure, values, q) in [
            ("write_p50", &round_trips, 0.5),
            ("send_to_event_p50", &from_send, 0.5),
            ("send_to_event_p99", &from_send, 0.99),
            ("ack_to_event_p50", &to_event, 0.5),
            ("ack_to_event_p99", &to_event, 0.99),
        ] {
            let value = quantile(values, q).map_or(-1.0, |v| v);
            emit(
                &format!("streams_{count}_{figure}_ms"),
                format!("{value:.3}"),
            );
        }
        emit(
            &format!("streams_{count}_server_cpu_per_write_ms"),
            // Unmeasured without the server's pid (a server given by MONGODB_URI alone).
            cpu.map_or_else(|| "unmeasured".to_owned(), |cpu| format!("{cpu:.3}")),
        );
        emit(
            &format!("streams_{count}_idle_server_cpu_ms_per_s"),
            idle_cpu.map_or_else(|| "unmeasured".to_owned(), |cpu| format!("{cpu:.2}")),
        );
        emit(
            &format!("streams_{count}_writes_per_s"),
            format!("{:.1}", writes as f64 / elapsed.as_secs_f64()),
        );
        emit(&format!("streams_{count}_lost"), lost);
    }
    side.drop_database().await;
    Ok(())
}
