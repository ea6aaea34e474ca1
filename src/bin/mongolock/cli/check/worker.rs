//! A `mongolock check` worker process (the hidden `__check-worker` subcommand): one lock
//! manager, `tasks` tasks taking random scratch locks until the run's end, each critical
//! section making a fenced write with its token and one with an older token of its own,
//! reported as a JSON line on stdout when it ends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mongodb::bson::{Document, doc};
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongolock::fence::FencedCollection;
use mongolock::{LockError, LockGuard, LockManager, LockOptions};
use rand::Rng;

use super::clock;
use super::record::{Record, Section, StaleWrite, Write};
use crate::cli::connect::Connection;
use crate::cli::{CheckWorkerArgs, CliError, ConnectionArgs};

/// The longest a critical section lasts (uniformly random from zero).
const LONGEST_SECTION: Duration = Duration::from_millis(10);

/// Counts the lock commands the worker's client sends (not the fenced writes).
#[derive(Clone, Default)]
struct CommandCounts {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CommandCounts {
    fn handler(&self, skipped_collection: String) -> EventHandler<CommandEvent> {
        let counts = self.counts.clone();
        EventHandler::callback(move |event| {
            if let CommandEvent::Started(started) = event {
                // The first field of a command names its collection.
                let target = started
                    .command
                    .iter()
                    .next()
                    .and_then(|(_, value)| value.as_str());
                if target != Some(skipped_collection.as_str()) {
                    let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
                    *counts.entry(started.command_name).or_default() += 1;
                }
            }
        })
    }

    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Worker {
    args: CheckWorkerArgs,
    manager: LockManager,
    protected: FencedCollection<Document>,
}

fn emit(record: &Record) {
    if let Ok(line) = serde_json::to_string(record) {
        println!("{line}");
    }
}

/// Runs the worker; the parent reads its stdout.
pub(crate) async fn run(args: CheckWorkerArgs, at: &ConnectionArgs) -> Result<u8, CliError> {
    let counts = CommandCounts::default();
    let protected_name = super::protected_collection(&args.run);
    let connection =
        Connection::open_monitored(at, Some(counts.handler(protected_name.clone()))).await?;
    let protected = FencedCollection::new(
        connection
            .store
            .database()
            .collection::<Document>(&protected_name),
    );
    let options = LockOptions::default().with_lease_duration(args.lease);
    let endpoint = connection.endpoint.clone();
    let manager = connection.start(options).await?;
    emit(&Record::Hello {
        worker: args.worker,
        holder: manager.holder_id().to_string(),
    });
    let worker = Arc::new(Worker {
        args,
        manager,
        protected,
    });
    // Every worker starts contending at the same instant.
    let wait = Duration::from_nanos(worker.args.from.saturating_sub(clock::now()));
    tokio::time::sleep(wait).await;
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..worker.args.tasks {
        tasks.spawn(contend(worker.clone(), task));
    }
    let mut errors = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(())) => {}
            Ok(Err(error)) => errors.push(endpoint.lock_error(error).one_line()),
            Err(error) => errors.push(format!("a task failed: {error}")),
        }
    }
    worker.manager.shutdown().await;
    emit(&Record::Summary {
        worker: worker.args.worker,
        commands: counts.snapshot(),
        errors,
    });
    Ok(0)
}

/// One task: random locks until the run's end.
async fn contend(worker: Arc<Worker>, task: u32) -> Result<(), LockError> {
    let mut last_tokens: BTreeMap<u32, u64> = BTreeMap::new();
    loop {
        let now = clock::now();
        if now >= worker.args.until {
            return Ok(());
        }
        let index = rand::rng().random_range(0..worker.args.locks);
        let name = super::lock_name(&worker.args.run, index);
        let lock = worker.manager.lock(name.as_str())?;
        let remaining = Duration::from_nanos(worker.args.until - now);
        let guard = match lock.acquire_timeout(remaining).await {
            Ok(guard) => guard,
            Err(LockError::Timeout(_)) => return Ok(()),
            Err(error) => return Err(error),
        };
        let previous = last_tokens.insert(index, guard.token());
        let section = hold(&worker, task, name, now, guard, previous).await;
        emit(&Record::Section(section));
    }
}

/// One critical section: a fenced write with the holder's token, one with this task's
/// previous token on the lock (if any), a random pause, then release.
async fn hold(
    worker: &Worker,
    task: u32,
    lock: String,
    asked: u64,
    guard: LockGuard,
    previous: Option<u64>,
) -> Section {
    let entered = clock::now();
    let token = guard.token();
    let write = fenced_write(worker, &lock, token).await;
    let stale = match previous {
        Some(older) if older < token => Some(StaleWrite {
            token: older,
            write: fenced_write(worker, &lock, older).await,
        }),
        _ => None,
    };
    let pause = rand::rng().random_range(Duration::ZERO..=LONGEST_SECTION);
    // Whether (and when) the holder was told of a loss before leaving: at once if it is
    // told during the pause, else when it looks (a loss during the writes).
    let mut lost = tokio::select! {
        () = tokio::time::sleep(pause) => None,
        reason = guard.lost() => Some((clock::now(), reason.to_string())),
    };
    if lost.is_none() {
        lost = guard
            .loss()
            .map(|reason| (clock::now(), reason.to_string()));
    }
    let exited = clock::now();
    let release_error = guard.release().await.err().map(|error| error.to_string());
    Section {
        worker: worker.args.worker,
        task,
        lock,
        token,
        asked,
        entered,
        exited,
        write,
        stale,
        lost,
        release_error,
    }
}

async fn fenced_write(worker: &Worker, lock: &str, token: u64) -> Write {
    let written = worker
        .protected
        .update_one(
            token,
            doc! { "_id": lock },
            doc! { "$inc": { "writes": 1_i64 } },
        )
        .upsert(true)
        .await;
    match written {
        Ok(_) => Write::Applied,
        Err(LockError::Fenced { recorded, .. }) => Write::Fenced { recorded },
        Err(error) => Write::Failed {
            error: error.to_string(),
        },
    }
}
