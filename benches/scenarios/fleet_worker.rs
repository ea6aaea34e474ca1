//! One process of a fleet (S7–S9): its own client and lock manager (or DistributedLock's
//! algorithm) on one lock name, driven by its coordinator (`fleet.rs`) over stdin so that
//! every process of the fleet starts and measures over the same window.
//!
//! The coordinator writes one command a line:
//!
//! - `go`: start the tasks — in `behaviour=cycle` each acquires, holds for the critical
//!   section, releases, and again; in `behaviour=hold` each acquires once and holds (the
//!   lease renewing) until `release`;
//! - `mark`: the window's start, then its end: command counts are taken at each;
//! - `release`: the holding task releases (announcing `releasing` and `released`);
//! - `stop`: waits end, holders release, the figures of the window are reported, `done`.
//!
//! and reads `RESULT key=value` lines: `ready`, `granted`/`releasing`/`released` (wall-clock
//! nanoseconds since the Unix epoch, comparable across processes of one machine), the window's
//! figures and `done`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongolock::{Fairness, LockOptions};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::child::{Args, Side, emit};
use crate::latency::DL_COLLECTION;
use crate::support::commands::{CommandCounts, CommandLog};
use crate::support::contender::Contender;
use crate::support::dlock::{DlLock, DlOptions};
use crate::support::server;
use crate::support::stats::millis;

/// Every command a manager's release feed sends: `aggregate` opens a change stream,
/// `getMore` reads the next batch of it.
pub(crate) const FEED_COMMANDS: [&str; 2] = ["aggregate", "getMore"];

/// The lock options of a fleet run: `fairness=arrival` for `Fairness::ArrivalOrder`,
/// `fairness_bound_ms` for a bound other than the default, and `lease_ms` for a lease other
/// than the default (the crashed-holder takeover uses a short one, so it is measured in
/// seconds).
pub(crate) fn options(args: &Args) -> LockOptions {
    let mut options = LockOptions::default();
    if args.text("fairness", "default") == "arrival" {
        options = options.with_fairness(Fairness::ArrivalOrder);
    }
    if let bound @ 1.. = args.get("fairness_bound_ms", 0_u64) {
        options = options.with_fairness_bound(Duration::from_millis(bound));
    }
    match args.get("lease_ms", 0_u64) {
        0 => options,
        lease => options.with_lease_duration(Duration::from_millis(lease)),
    }
}

/// Nanoseconds since the Unix epoch by the wall clock: one clock for every process of the
/// fleet (they run on one machine), where `Instant`s cannot cross a process boundary.
pub(crate) fn wall_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// The worker process (`--child fleet-worker …`).
pub(crate) async fn worker(args: &Args) -> Result<(), String> {
    let name = args.text("name", "fleet");
    let (side, feed) = connect(
        &args.text("app", "fleet-worker"),
        &args.text("database", "bench_fleet"),
    )
    .await?;
    let behaviour = Behaviour {
        tasks: args.get("tasks", 2_usize),
        critical: args.millis("critical_ms", 1),
        hold: args.text("behaviour", "cycle") == "hold",
    };
    match args.text("system", "mongolock").as_str() {
        "mongolock" => {
            let manager = side.manager(options(args)).await?;
            let lock = Arc::new(manager.lock(&name).map_err(|e| e.to_string())?);
            let outcome = serve(&side, &feed, lock, &behaviour).await;
            let _ = tokio::time::timeout(Duration::from_secs(10), manager.shutdown()).await;
            outcome
        }
        "dl" => {
            let lock = Arc::new(DlLock::new(
                &side.database,
                DL_COLLECTION,
                &name,
                DlOptions::default(),
            ));
            lock.ensure_ttl_index().await?;
            serve(&side, &feed, lock, &behaviour).await
        }
        other => Err(format!("unknown fleet system {other:?}")),
    }
}

/// The change events this process's release feed received: the documents of the batches
/// its change streams' `aggregate` (first batch) and `getMore` (next batch) answered. Unlike
/// the number of `getMore`s, which falls as a busy server batches more events into each
/// answer, it counts every release the process read. With them, each event's delay: from
/// the write's time on the server (the event's `wallTime`) to the batch's arrival here, in
/// milliseconds, by this machine's clock, which is the server's (one machine).
#[derive(Debug, Clone, Default)]
struct FeedEvents {
    received: Arc<AtomicU64>,
    delays_ms: Arc<Mutex<Vec<i64>>>,
}

impl FeedEvents {
    /// The events received so far, and how many delays were recorded.
    fn get(&self) -> (u64, usize) {
        (self.received.load(Ordering::Relaxed), self.delays().len())
    }

    fn delays(&self) -> std::sync::MutexGuard<'_, Vec<i64>> {
        self.delays_ms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A counted client of its own, as `Side::connect` opens, whose replies to the release
/// feed's commands are also counted (their events).
async fn connect(app: &str, database: &str) -> Result<(Side, FeedEvents), String> {
    let log = CommandLog::new();
    let EventHandler::Callback(count) = log.handler() else {
        return Err("the command log's handler is not a callback".to_owned());
    };
    let feed = FeedEvents::default();
    let counted = feed.clone();
    let handler = EventHandler::callback(move |event: CommandEvent| {
        if let CommandEvent::Succeeded(succeeded) = &event
            && FEED_COMMANDS.contains(&succeeded.command_name.as_str())
            && let Some(batch) = succeeded
                .reply
                .get_document("cursor")
                .ok()
                .and_then(|cursor| {
                    cursor
                        .get_array("nextBatch")
                        .or_else(|_| cursor.get_array("firstBatch"))
                        .ok()
                })
        {
            counted
                .received
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let now_ms = i64::try_from(wall_nanos() / 1_000_000).unwrap_or(i64::MAX);
            let written_ms = batch.iter().filter_map(|event| {
                event
                    .as_document()
                    .and_then(|event| event.get_datetime("wallTime").ok())
                    .map(|written| written.timestamp_millis())
            });
            counted
                .delays()
                .extend(written_ms.map(|written| now_ms - written));
        }
        count(event);
    });
    let client = server::client_with_handler(&server::uri(), app, handler).await?;
    Ok((
        Side {
            log,
            database: client.database(database),
        },
        feed,
    ))
}

/// What the worker's tasks do once told to go.
#[derive(Debug)]
struct Behaviour {
    tasks: usize,
    critical: Duration,
    hold: bool,
}

/// One acquisition of a cycling task.
#[derive(Debug, Clone, Copy)]
struct Cycle {
    waited: Instant,
    acquired: Instant,
    releasing: Instant,
}

#[derive(Debug, Default)]
struct Timeline {
    cycles: Vec<Cycle>,
    /// Waits still unanswered when the worker was stopped: when each began.
    pending: Vec<Instant>,
}

/// Answers the coordinator's commands until `stop` (or its stdin closes), then reports.
async fn serve<C: Contender>(
    side: &Side,
    feed: &FeedEvents,
    lock: Arc<C>,
    behaviour: &Behaviour,
) -> Result<(), String> {
    let (stop, stopped) = watch::channel(false);
    let release = Arc::new(Notify::new());
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let mut tasks = JoinSet::new();
    let mut marks: Vec<(Instant, CommandCounts, (u64, usize))> = Vec::new();
    emit("ready", 1);
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| format!("fleet worker stdin: {e}"))?
    {
        match line.trim() {
            "go" if tasks.is_empty() => {
                for _ in 0..behaviour.tasks {
                    if behaviour.hold {
                        tasks.spawn(hold(
                            Arc::clone(&lock),
                            Arc::clone(&release),
                            stopped.clone(),
                        ));
                    } else {
                        tasks.spawn(cycle(
                            Arc::clone(&lock),
                            behaviour.critical,
                            Arc::clone(&timeline),
                            stopped.clone(),
                        ));
                    }
                }
            }
            "mark" => marks.push((Instant::now(), side.log.counts(), feed.get())),
            // Stored if the holding task is not waiting for it yet.
            "release" => release.notify_one(),
            "stop" => break,
            _ => {}
        }
    }
    let _ = stop.send(true);
    let finished = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| format!("fleet task: {e}"))??;
        }
        Ok::<(), String>(())
    })
    .await;
    match finished {
        Ok(outcome) => outcome?,
        Err(_) => return Err("fleet tasks did not finish within 30 s of stop".to_owned()),
    }
    if let [(from, at_from, events_from), (to, at_to, events_to), ..] = marks.as_slice() {
        let timeline = timeline.lock().unwrap_or_else(PoisonError::into_inner);
        report_window(&timeline, *from, *to);
        report_commands(&at_to.since(at_from));
        emit("feed_events", events_to.0.saturating_sub(events_from.0));
        let delays = feed.delays();
        let window = delays.get(events_from.1..events_to.1).unwrap_or_default();
        emit(
            "feed_delays_ms",
            window
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    emit("done", 1);
    Ok(())
}

/// A `behaviour=cycle` task: acquire, hold for `critical`, release, until stopped.
async fn cycle<C: Contender>(
    lock: Arc<C>,
    critical: Duration,
    timeline: Arc<Mutex<Timeline>>,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), String> {
    let record = |update: &dyn Fn(&mut Timeline)| {
        update(&mut timeline.lock().unwrap_or_else(PoisonError::into_inner));
    };
    loop {
        if *stopped.borrow() {
            return Ok(());
        }
        let waited = Instant::now();
        let held = tokio::select! {
            held = lock.acquire() => held?,
            _ = stopped.wait_for(|stop| *stop) => {
                record(&|timeline| timeline.pending.push(waited));
                return Ok(());
            }
        };
        let acquired = Instant::now();
        tokio::time::sleep(critical).await;
        let releasing = Instant::now();
        lock.release(held).await?;
        record(&|timeline| {
            timeline.cycles.push(Cycle {
                waited,
                acquired,
                releasing,
            });
        });
    }
}

/// A `behaviour=hold` task: acquire once, announce it, hold until told to release (or
/// stopped), release.
async fn hold<C: Contender>(
    lock: Arc<C>,
    release: Arc<Notify>,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), String> {
    let held = tokio::select! {
        held = lock.acquire() => held?,
        _ = stopped.wait_for(|stop| *stop) => return Ok(()),
    };
    emit("granted", wall_nanos());
    tokio::select! {
        () = release.notified() => {}
        _ = stopped.wait_for(|stop| *stop) => {}
    }
    emit("releasing", wall_nanos());
    lock.release(held).await?;
    emit("released", wall_nanos());
    Ok(())
}

/// The acquisitions granted in `[from, to]`, their critical sections and waits (acquire
/// called → returned; for a wait still going at `to`, its length so far), as in S3.
fn report_window(timeline: &Timeline, from: Instant, to: Instant) {
    let mut acquisitions = 0_usize;
    let mut critical_ms = 0.0;
    let mut waits_ms: Vec<f64> = Vec::new();
    for cycle in &timeline.cycles {
        if (from..=to).contains(&cycle.acquired) {
            acquisitions += 1;
            critical_ms += millis(cycle.releasing.saturating_duration_since(cycle.acquired));
            waits_ms.push(millis(
                cycle.acquired.saturating_duration_since(cycle.waited),
            ));
        } else if cycle.waited < to && cycle.acquired > to {
            waits_ms.push(millis(to.saturating_duration_since(cycle.waited)));
        }
    }
    for &waited in &timeline.pending {
        if waited < to {
            waits_ms.push(millis(to.saturating_duration_since(waited)));
        }
    }
    emit("acq", acquisitions);
    emit("critical_sum_ms", format!("{critical_ms:.3}"));
    let waits: Vec<String> = waits_ms.iter().map(|w| format!("{w:.1}")).collect();
    emit("waits_ms", waits.join(","));
}

/// The commands this process sent in the window: in all, the release feed's, and by name.
fn report_commands(commands: &CommandCounts) {
    emit("cmds", commands.total());
    emit(
        "feed",
        FEED_COMMANDS
            .iter()
            .map(|name| commands.named(name))
            .sum::<u64>(),
    );
    let mut names: Vec<&str> = commands.iter().map(|(key, _)| key.name.as_str()).collect();
    names.dedup();
    for name in names {
        emit(&format!("cmd_{name}"), commands.named(name));
    }
}
