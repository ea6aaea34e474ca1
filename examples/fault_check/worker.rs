//! A worker process: one `LockManager` on the test server, `tasks` tasks taking random locks,
//! semaphore permits or reader/writer sides (or one election candidate per election), each
//! critical section recorded and (but for permits) doing fenced writes to the protected
//! document of its lock, until the run's deadline.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mongodb::bson::{Document, doc};
use mongodb::options::{Acknowledgment, CollectionOptions, WriteConcern};
use mongolock::HolderId;
use mongolock::fence::FencedCollection;
use mongolock::{
    ElectionEvent, ElectionOptions, Fairness, LockError, LockGuard, LockManager, LockOptions,
    MongoStore,
};
use rand::Rng;
use tokio::time::{sleep, timeout};

use crate::clock::{self, MS};
use crate::events::{Access, Event, EventLog, WriteOutcome};
use crate::settings::{Mode, WorkerArgs};

/// How much longer than its own limit a bounded call may take before it counts as a hang.
const HANG_SLACK: Duration = Duration::from_secs(5);

/// Entries of a protected document's write log kept on the server (bounds its size).
const LOG_KEPT: i32 = 1000;

struct Worker {
    args: WorkerArgs,
    log: EventLog,
    manager: LockManager,
    protected: FencedCollection<Document>,
    writes: AtomicU64,
}

/// The shared clock in log lines, so that the library's events line up with the worker's.
struct SharedClock;

impl tracing_subscriber::fmt::time::FormatTime for SharedClock {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:.1}", clock::ms(clock::now()))
    }
}

pub(crate) async fn run(args: WorkerArgs) -> ExitCode {
    // The library's warnings (a grant answered too late to use, a failed release) go to each
    // worker's stderr file, for reading a violation's story; `RUST_LOG=mongolock=debug` adds
    // the rest.
    {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("mongolock=warn"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_timer(SharedClock)
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .init();
    }
    // In arrival order, the library's metrics are kept and summed up on stderr at the end
    // (store call latencies and errors against the places' life, for reading an overtake's
    // story).
    let snapshotter = args.arrival_order.then(|| {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let _ = recorder.install();
        snapshotter
    });
    let (log, writer) = match EventLog::create(&args.log) {
        Ok(log) => log,
        Err(error) => {
            eprintln!(
                "worker {}: cannot create {:?}: {error}",
                args.index, args.log
            );
            return ExitCode::FAILURE;
        }
    };
    let client = match mongodb::Client::with_uri_str(&args.uri).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("worker {}: bad URI: {error}", args.index);
            return ExitCode::FAILURE;
        }
    };
    // The protected writes get their own client without retryable writes: the checker
    // compares the document's count of applied writes with what the writers were told, so a
    // write cut off by a server crash must come back as "outcome unknown", not be retried —
    // SecantusDB applies a retried write a second time after a restart (MongoDB records
    // the retry with the write and does not).
    let protected_client = match mongodb::options::ClientOptions::parse(&args.uri).await {
        Ok(mut options) => {
            options.retry_writes = Some(false);
            mongodb::Client::with_options(options)
        }
        Err(error) => Err(error),
    };
    let protected_client = match protected_client {
        Ok(client) => client,
        Err(error) => {
            eprintln!("worker {}: bad URI: {error}", args.index);
            return ExitCode::FAILURE;
        }
    };
    let database = client.database(&args.database);
    let store = match MongoStore::builder(database.clone())
        .with_collection(&args.locks_collection)
        .build()
    {
        Ok(store) => store,
        Err(error) => {
            eprintln!("worker {}: {error}", args.index);
            return ExitCode::FAILURE;
        }
    };
    let holder = format!("w{}-pid{}", args.index, std::process::id());
    let options = lock_options(&args);
    // The server may be down (a fault) when a replacement worker starts: keep trying.
    let manager = loop {
        let started = LockManager::builder(store.clone())
            .with_default_lock_options(options.clone())
            .with_holder_id(HolderId::from_string(holder.clone()))
            .start()
            .await;
        match started {
            Ok(manager) => break manager,
            Err(error) if args.running() => {
                eprintln!("worker {}: start failed, retrying: {error}", args.index);
                sleep(Duration::from_millis(200)).await;
            }
            Err(error) => {
                eprintln!(
                    "worker {}: could not start before the deadline: {error}",
                    args.index
                );
                log.record(&Event::Done { at: clock::now() });
                writer.finish();
                return ExitCode::SUCCESS;
            }
        }
    };
    log.record(&Event::Hello {
        pid: std::process::id(),
        holder,
    });
    let worker = Arc::new(Worker {
        // Majority and journaled, as the fence's own documentation asks: a recorded token
        // must survive a server crash.
        protected: FencedCollection::new(
            protected_client
                .database(&args.database)
                .collection_with_options(
                    &args.protected_collection,
                    CollectionOptions::builder()
                        .write_concern(
                            WriteConcern::builder()
                                .w(Acknowledgment::Majority)
                                .journal(true)
                                .build(),
                        )
                        .build(),
                ),
        ),
        args,
        log,
        manager,
        writes: AtomicU64::new(0),
    });
    let mut tasks = Vec::new();
    match worker.args.mode {
        Mode::Lock | Mode::Semaphore | Mode::ReadWrite => {
            for task in 0..worker.args.tasks {
                tasks.push(tokio::spawn(lock_task(worker.clone(), task)));
            }
        }
        Mode::Election => {
            for election in 0..worker.args.locks {
                tasks.push(tokio::spawn(election_task(worker.clone(), election)));
            }
        }
    }
    for task in tasks {
        if let Err(error) = task.await {
            eprintln!("worker {}: a task failed: {error}", worker.args.index);
        }
    }
    let limit = worker.args.lease_duration() * 2;
    let asked = clock::now();
    if timeout(limit + HANG_SLACK, worker.manager.shutdown())
        .await
        .is_err()
    {
        worker.log.record(&Event::Hang {
            at: clock::now(),
            waited_ms: (clock::now() - asked) / MS,
            what: "LockManager::shutdown".into(),
        });
    }
    if let Some(snapshotter) = snapshotter {
        eprintln!(
            "{}",
            metrics_summary(&snapshotter, worker.args.backoff_max_ms)
        );
    }
    worker.log.record(&Event::Done { at: clock::now() });
    writer.finish();
    ExitCode::SUCCESS
}

/// One line on the library's metrics: acquisition attempts by result, store errors by
/// operation, and per store operation its calls, median, 99th percentile, slowest, and how
/// many took longer than the longest backoff (`slow_ms`).
fn metrics_summary(snapshotter: &metrics_util::debugging::Snapshotter, slow_ms: u64) -> String {
    use metrics_util::debugging::DebugValue;
    let mut parts = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let name = key.name();
        let labels = key
            .labels()
            .filter(|l| matches!(l.key(), "op" | "result"))
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect::<Vec<_>>()
            .join(",");
        match value {
            DebugValue::Counter(n)
                if name == "mongolock_acquire_attempts_total"
                    || name == "mongolock_store_errors_total" =>
            {
                parts.push(format!("{name}{{{labels}}} {n}"));
            }
            DebugValue::Histogram(mut values) if name == "mongolock_store_operation_seconds" => {
                values.sort_unstable();
                let at = |percent: usize| {
                    values
                        .get(values.len().saturating_sub(1) * percent / 100)
                        .map_or(0.0, |v| v.into_inner() * 1000.0)
                };
                let slow_s = Duration::from_millis(slow_ms).as_secs_f64();
                let slow = values.iter().filter(|v| v.into_inner() > slow_s).count();
                parts.push(format!(
                    "{name}{{{labels}}} n={} p50={:.1}ms p99={:.1}ms max={:.1}ms over{slow_ms}ms={slow}",
                    values.len(),
                    at(50),
                    at(99),
                    at(100)
                ));
            }
            _ => {}
        }
    }
    parts.sort();
    format!("metrics\t{}", parts.join("\t"))
}

fn lock_options(args: &WorkerArgs) -> LockOptions {
    let options = LockOptions::default()
        .with_lease_duration(args.lease_duration())
        .with_renew_interval(Duration::from_millis(args.cadence_ms))
        .with_renew_deadline(Duration::from_millis(args.renew_deadline_ms))
        .with_retry_backoff(
            Duration::from_millis(args.backoff_min_ms),
            Duration::from_millis(args.backoff_max_ms),
        );
    if args.arrival_order {
        options.with_fairness(Fairness::ArrivalOrder)
    } else {
        options
    }
}

fn election_options(args: &WorkerArgs) -> ElectionOptions {
    ElectionOptions::default()
        .with_lease_duration(args.lease_duration())
        .with_renew_deadline(Duration::from_millis(args.renew_deadline_ms))
        .with_retry_period(Duration::from_millis(args.cadence_ms))
}

fn random_ms(min: u64, max: u64) -> Duration {
    Duration::from_millis(rand::rng().random_range(min..=max.max(min)))
}

/// What one acquisition of a lock task asks for, by the worker's mode.
fn pick_access(args: &WorkerArgs) -> Access {
    match args.mode {
        Mode::Lock | Mode::Election => Access::Exclusive,
        Mode::Semaphore => Access::Permit(args.permits),
        Mode::ReadWrite if rand::rng().random_range(0..100) < args.write_percent => Access::Write,
        Mode::ReadWrite => Access::Read,
    }
}

/// `acquire_timeout(limit)` on `name` with `access`, through the primitive it belongs to.
async fn acquire(
    worker: &Worker,
    name: &str,
    access: Access,
    limit: Duration,
) -> Result<LockGuard, LockError> {
    let manager = &worker.manager;
    match access {
        Access::Exclusive => manager.lock(name)?.acquire_timeout(limit).await,
        Access::Permit(permits) => {
            manager
                .semaphore(name, permits)?
                .acquire_timeout(limit)
                .await
        }
        Access::Read => manager.rw_lock(name)?.read_timeout(limit).await,
        Access::Write => manager.rw_lock(name)?.write_timeout(limit).await,
    }
}

async fn lock_task(worker: Arc<Worker>, task: u32) {
    let args = &worker.args;
    let limit = Duration::from_millis(args.acquire_timeout_ms);
    while args.running() {
        let name = if rand::rng().random_range(0..100) < args.solo_percent {
            format!("solo-w{}-t{task}", args.index)
        } else {
            format!(
                "{}-{}",
                args.prefix,
                rand::rng().random_range(0..args.locks)
            )
        };
        let access = pick_access(args);
        let asked = clock::now();
        match timeout(limit + HANG_SLACK, acquire(&worker, &name, access, limit)).await {
            Err(_) => worker.log.record(&Event::Hang {
                at: clock::now(),
                waited_ms: (clock::now() - asked) / MS,
                what: format!("acquire_timeout({limit:?}) on {name}"),
            }),
            Ok(Err(LockError::Timeout(_))) => worker.log.record(&Event::Timeout {
                lock: name,
                task,
                asked,
                at: clock::now(),
                limit_ms: args.acquire_timeout_ms,
                access,
            }),
            Ok(Err(error)) => {
                worker.log.record(&Event::AcquireError {
                    lock: name,
                    task,
                    asked,
                    at: clock::now(),
                    message: error.to_string(),
                });
                sleep(Duration::from_millis(50)).await;
            }
            Ok(Ok(guard)) => hold(&worker, task, &name, guard, asked, access).await,
        }
        sleep(random_ms(0, args.idle_max_ms)).await;
    }
}

/// One critical section on a lock: enter, write (the first write claims the document),
/// stop on loss or after a random hold, release. A semaphore's permit holders share the
/// name, so fenced writes, which order holders one after the other, would only fence each
/// other off: they hold without writing. Readers do write: the fence then orders every
/// writer after the readers it excluded and refuses a reader paused past its lease once a
/// writer has written (readers fencing each other off is expected and harmless).
async fn hold(
    worker: &Worker,
    task: u32,
    name: &str,
    guard: LockGuard,
    asked: u64,
    access: Access,
) {
    let args = &worker.args;
    let token = guard.token();
    worker.log.record(&Event::Enter {
        lock: name.to_owned(),
        task,
        token,
        asked,
        at: clock::now(),
        access,
    });
    let signal = guard.loss_signal();
    let watcher = {
        let signal = signal.clone();
        let log = worker.log.clone();
        let lock = name.to_owned();
        tokio::spawn(async move {
            let reason = signal.lost().await;
            log.record(&Event::Lost {
                lock,
                task,
                token,
                at: clock::now(),
                reason: reason.to_string(),
            });
        })
    };
    let fenced = !matches!(access, Access::Permit(_));
    let hold_until = clock::now()
        + u64::try_from(random_ms(args.hold_min_ms, args.hold_max_ms).as_nanos()).unwrap_or(0);
    loop {
        if guard.loss().is_some() {
            break;
        }
        if fenced {
            write(worker, task, name, token).await;
        }
        if clock::now() >= hold_until {
            break;
        }
        sleep(Duration::from_millis(args.write_every_ms)).await;
    }
    leave(
        worker,
        task,
        name,
        token,
        "LockGuard::release",
        guard.release(),
    )
    .await;
    finish_watcher(watcher, signal.loss().is_some()).await;
}

/// Ends a critical section: it stops touching the resource now, then `release` (bounded:
/// taking longer is recorded as a hang) hands the lock back.
async fn leave(
    worker: &Worker,
    task: u32,
    name: &str,
    token: u64,
    what: &str,
    release: impl Future<Output = Result<(), LockError>>,
) {
    let at = clock::now();
    let limit = worker.args.lease_duration() * 2;
    let outcome = match timeout(limit + HANG_SLACK, release).await {
        Ok(Ok(())) => "ok".to_owned(),
        Ok(Err(error)) => error.to_string(),
        Err(_) => {
            worker.log.record(&Event::Hang {
                at: clock::now(),
                waited_ms: (clock::now() - at) / MS,
                what: format!("{what} on {name}"),
            });
            "hung".to_owned()
        }
    };
    worker.log.record(&Event::Exit {
        lock: name.to_owned(),
        task,
        token,
        at,
        released: clock::now(),
        outcome,
    });
}

/// Lets a watcher that saw the loss finish recording it; stops one that never will.
async fn finish_watcher(watcher: tokio::task::JoinHandle<()>, lost: bool) {
    if lost {
        let _ = timeout(Duration::from_secs(1), watcher).await;
    } else {
        watcher.abort();
    }
}

/// One fenced write to the lock's protected document, recorded with its outcome.
async fn write(worker: &Worker, task: u32, name: &str, token: u64) {
    let seq = worker.writes.fetch_add(1, Ordering::Relaxed);
    let entry = doc! {
        "t": i64::try_from(token).unwrap_or(i64::MAX),
        "p": i64::from(worker.args.index),
        "s": i64::try_from(seq).unwrap_or(i64::MAX),
    };
    let update = doc! {
        "$push": { "log": { "$each": [entry], "$slice": -LOG_KEPT } },
        "$inc": { "n": 1 },
    };
    let sent = clock::now();
    let result = timeout(
        Duration::from_secs(3),
        worker
            .protected
            .update_one(token, doc! { "_id": name }, update)
            .upsert(true),
    )
    .await;
    let outcome = match result {
        Ok(Ok(result)) if result.matched_count > 0 || result.upserted_id.is_some() => {
            WriteOutcome::Applied
        }
        Ok(Ok(_)) => WriteOutcome::NoMatch,
        Ok(Err(LockError::Fenced { recorded, .. })) => WriteOutcome::Fenced(recorded),
        Ok(Err(error)) => WriteOutcome::Failed(error.to_string()),
        Err(_) => WriteOutcome::Failed("timed out after 3 s".into()),
    };
    worker.log.record(&Event::Write {
        lock: name.to_owned(),
        task,
        token,
        seq,
        sent,
        done: clock::now(),
        outcome,
    });
}

/// One candidate: campaign, lead (fenced writes) until deposed or a random term length has
/// passed, resign, campaign again.
async fn election_task(worker: Arc<Worker>, index: u32) {
    let args = &worker.args;
    let name = format!("{}-{index}", args.prefix);
    let election = match worker.manager.election(&name, election_options(args)) {
        Ok(election) => election,
        Err(error) => {
            worker.log.record(&Event::AcquireError {
                lock: name,
                task: index,
                asked: clock::now(),
                at: clock::now(),
                message: error.to_string(),
            });
            return;
        }
    };
    while args.running() {
        let mut events = election.subscribe();
        let asked = clock::now();
        // Campaigning is cancel safe: poll in slices so the run can end while waiting.
        let elected = loop {
            match timeout(Duration::from_millis(200), election.campaign()).await {
                Ok(result) => break Some(result),
                Err(_) if !args.running() => break None,
                Err(_) => {}
            }
        };
        let token = match elected {
            None => break,
            Some(Ok(token)) => token,
            Some(Err(error)) => {
                worker.log.record(&Event::AcquireError {
                    lock: name.clone(),
                    task: index,
                    asked,
                    at: clock::now(),
                    message: error.to_string(),
                });
                sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        worker.log.record(&Event::Enter {
            lock: name.clone(),
            task: index,
            token,
            asked,
            at: clock::now(),
            access: Access::Exclusive,
        });
        let deposed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let log = worker.log.clone();
            let lock = name.clone();
            let deposed = deposed.clone();
            tokio::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(ElectionEvent::Deposed { token: t, reason }) if t == token => {
                            deposed.store(true, Ordering::SeqCst);
                            log.record(&Event::Lost {
                                lock,
                                task: index,
                                token,
                                at: clock::now(),
                                reason: reason.to_string(),
                            });
                            return;
                        }
                        Ok(ElectionEvent::Resigned { token: t }) if t == token => return,
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            })
        };
        let term_until = clock::now()
            + u64::try_from(random_ms(args.hold_min_ms * 4, args.hold_max_ms * 4).as_nanos())
                .unwrap_or(0);
        while !deposed.load(Ordering::SeqCst) && clock::now() < term_until && args.running() {
            write(&worker, index, &name, token).await;
            sleep(Duration::from_millis(args.write_every_ms)).await;
        }
        leave(
            &worker,
            index,
            &name,
            token,
            "Election::resign",
            election.resign(),
        )
        .await;
        finish_watcher(watcher, deposed.load(Ordering::SeqCst)).await;
        sleep(random_ms(0, 100)).await;
    }
    // Stop campaigning (a term won after the last check is released by the shutdown).
    let _ = timeout(args.lease_duration() * 2, election.resign()).await;
}
