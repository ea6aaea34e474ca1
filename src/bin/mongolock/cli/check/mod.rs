//! `mongolock check`: verifies locks on the user's own deployment. Worker processes
//! ([`worker`]) of this binary contend with several tasks each for a few scratch locks for a
//! while, write to a protected record per lock with their fencing token (and once with an
//! older one), and report every critical section; then [`verdict`] checks what the
//! project's fault checker checks — no overlap among holders not told of a loss, tokens
//! increasing in entry order, every stale write refused, the records matching the applied
//! writes — and the run's throughput, hand-over latency and commands per acquisition are
//! printed. The scratch locks and the protected records are deleted at the end.

mod clock;
mod record;
mod verdict;
pub(crate) mod worker;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::connect::Connection;
use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CheckArgs, CliError, ConnectionArgs, duration};
use record::{Record, Section};
use verdict::{Check, FinalRecord};

/// Time the workers get to connect and start their managers before the contention starts.
const START_ALLOWANCE: Duration = Duration::from_secs(2);
/// How long after the run's end the workers may take to release and report.
const FINISH_ALLOWANCE: Duration = Duration::from_secs(60);

/// The name of scratch lock `index` of run `run`.
pub(crate) fn lock_name(run: &str, index: u32) -> String {
    format!("mongolock-check-{run}-{index}")
}

/// The collection of run `run`'s protected records.
pub(crate) fn protected_collection(run: &str) -> String {
    format!("mongolock_check_{run}")
}

/// What the workers reported.
#[derive(Default)]
struct Reports {
    sections: Vec<Section>,
    commands: BTreeMap<String, u64>,
    errors: Vec<String>,
}

/// Runs `mongolock check`: exit 0 when every check passed, 1 when one failed.
pub(super) async fn check(
    args: CheckArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let connection = super::connect(at, signals, progress).await?;
    let run = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let nanos = |duration: Duration| u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let from = clock::now() + nanos(START_ALLOWANCE);
    let until = from.saturating_add(nanos(args.duration));
    progress.say(format_args!(
        "check {run}: {} processes × {} tasks on {} locks for {}",
        args.processes,
        args.tasks,
        args.locks,
        duration::show(args.duration)
    ));
    let outcome = tokio::select! {
        reports = run_workers(&args, at, &connection, &run, (from, until)) => reports,
        signal = signals.recv() => Err(interrupted(signal)),
    };
    let records = final_records(&connection, &run).await;
    clean_up(&connection, &run, args.locks, progress).await;
    let reports = outcome?;
    let records = records.map_err(|error| CliError::Unavailable {
        uri: connection.endpoint.shown_uri.clone(),
        reason: format!("could not read the protected records: {error}"),
    })?;
    if !reports.errors.is_empty() {
        return Err(CliError::Unavailable {
            uri: connection.endpoint.shown_uri.clone(),
            reason: format!("the check could not run: {}", reports.errors.join("; ")),
        });
    }
    let outcome = Outcome {
        checks: verdict::checks(&reports.sections, &records),
        figures: verdict::figures(&reports.sections),
        span: span_of(&reports.sections),
        args: &args,
        connection: &connection,
        reports: &reports,
    };
    let text = if args.json {
        format!("{}\n", outcome.json())
    } else {
        outcome.table()
    };
    print!("{text}");
    let passed = outcome
        .checks
        .iter()
        .all(|check| check.violations.is_empty());
    Ok(if passed { 0 } else { 1 })
}

/// Starts the workers, gathers their reports, and waits for them to exit.
async fn run_workers(
    args: &CheckArgs,
    at: &ConnectionArgs,
    connection: &Connection,
    run: &str,
    (from, until): (u64, u64),
) -> Result<Reports, CliError> {
    let program = std::env::current_exe()
        .map_err(|error| CliError::Internal(format!("cannot find this program: {error}")))?;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..args.processes {
        let mut command = tokio::process::Command::new(&program);
        command
            .args(["-q", "__check-worker", "--run", run])
            .args(["--worker", &worker.to_string()])
            .args(["--tasks", &args.tasks.to_string()])
            .args(["--locks", &args.locks.to_string()])
            .args(["--from", &from.to_string()])
            .args(["--until", &until.to_string()])
            .args(["--lease", &format!("{}ms", args.lease.as_millis())])
            .args(["--database", connection.store.database().name()])
            .args(["--collection", connection.store.collection_name()])
            // The URI goes by the environment: `ps` would show a password in the arguments.
            .env("MONGODB_URI", at.uri.as_deref().unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|error| CliError::Internal(format!("cannot start a check worker: {error}")))?;
        workers.spawn(async move {
            let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
            else {
                return Err(format!("worker {worker}: no output pipes"));
            };
            let mut lines = BufReader::new(stdout).lines();
            let mut records = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<Record>(&line) {
                    Ok(record) => records.push(record),
                    Err(error) => return Err(format!("worker {worker}: {error}: {line}")),
                }
            }
            let mut errors = String::new();
            let _ = stderr.read_to_string(&mut errors).await;
            let status = child.wait().await.map_err(|error| error.to_string())?;
            if !status.success() {
                let last = errors.lines().last().unwrap_or("no message").to_owned();
                return Err(format!("worker {worker} exited with {status}: {last}"));
            }
            Ok(records)
        });
    }
    let allowance = Duration::from_nanos(until.saturating_sub(clock::now())) + FINISH_ALLOWANCE;
    let mut reports = Reports::default();
    let gathered = tokio::time::timeout(allowance, async {
        while let Some(joined) = workers.join_next().await {
            match joined {
                Ok(Ok(records)) => gather(&mut reports, records),
                Ok(Err(error)) => reports.errors.push(error),
                Err(error) => reports
                    .errors
                    .push(format!("a worker's reader failed: {error}")),
            }
        }
    })
    .await;
    if gathered.is_err() {
        reports.errors.push(format!(
            "the workers did not finish within {}",
            duration::show(allowance)
        ));
    }
    Ok(reports)
}

fn gather(reports: &mut Reports, records: Vec<Record>) {
    let mut summarised = false;
    for record in records {
        match record {
            Record::Hello { .. } => {}
            Record::Section(section) => reports.sections.push(section),
            Record::Summary {
                commands, errors, ..
            } => {
                summarised = true;
                for (name, count) in commands {
                    *reports.commands.entry(name).or_default() += count;
                }
                reports.errors.extend(errors);
            }
        }
    }
    if !summarised {
        reports
            .errors
            .push("a worker ended without its summary".to_owned());
    }
}

/// The protected records, by lock name.
async fn final_records(
    connection: &Connection,
    run: &str,
) -> Result<BTreeMap<String, FinalRecord>, String> {
    let collection = connection
        .store
        .database()
        .collection::<Document>(&protected_collection(run));
    let mut cursor = collection.find(doc! {}).await.map_err(|e| e.to_string())?;
    let mut records = BTreeMap::new();
    while cursor.advance().await.map_err(|e| e.to_string())? {
        let document: Document = cursor.deserialize_current().map_err(|e| e.to_string())?;
        let number = |field: &str| match document.get(field) {
            Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
            Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
            _ => 0,
        };
        if let Ok(name) = document.get_str("_id") {
            records.insert(
                name.to_owned(),
                FinalRecord {
                    token: number(
                        mongolock::fence::FencedCollection::<Document>::DEFAULT_TOKEN_FIELD,
                    ),
                    writes: number("writes"),
                },
            );
        }
    }
    Ok(records)
}

/// Deletes the scratch locks and the protected records; says so if it cannot.
async fn clean_up(connection: &Connection, run: &str, locks: u32, progress: Progress) {
    let database = connection.store.database();
    let names: Vec<String> = (0..locks).map(|index| lock_name(run, index)).collect();
    let deleted = database
        .collection::<Document>(connection.store.collection_name())
        .delete_many(doc! { "_id": { "$in": names } })
        .await;
    let dropped = database
        .collection::<Document>(&protected_collection(run))
        .drop()
        .await;
    for (what, result) in [
        ("scratch locks", deleted.map(drop)),
        ("protected records", dropped),
    ] {
        if let Err(error) = result {
            progress.say(format_args!(
                "could not delete the check's {what} (run {run}): {error}"
            ));
        }
    }
}

/// From the first entry to the last exit, in nanoseconds.
fn span_of(sections: &[Section]) -> u64 {
    let first = sections.iter().map(|s| s.entered).min().unwrap_or(0);
    let last = sections.iter().map(|s| s.exited).max().unwrap_or(0);
    last.saturating_sub(first)
}

fn per_second(count: usize, span: u64) -> f64 {
    if span == 0 {
        0.0
    } else {
        #[allow(clippy::cast_precision_loss)]
        let rate = count as f64 / (span as f64 / 1e9);
        rate
    }
}

fn per_acquisition(commands: &BTreeMap<String, u64>, acquisitions: usize) -> f64 {
    let total: u64 = commands.values().sum();
    #[allow(clippy::cast_precision_loss)]
    let ratio = total as f64 / acquisitions.max(1) as f64;
    ratio
}

/// What a run found, for the report.
struct Outcome<'a> {
    args: &'a CheckArgs,
    connection: &'a Connection,
    reports: &'a Reports,
    checks: Vec<Check>,
    figures: verdict::Figures,
    /// From the first entry to the last exit, in nanoseconds.
    span: u64,
}

impl Outcome<'_> {
    fn table(&self) -> String {
        let Self {
            args,
            connection,
            reports,
            checks,
            figures,
            span,
        } = self;
        let (figures, span) = (figures, *span);
        let hand_overs = |latencies: &verdict::Latencies| match (
            latencies.percentile(50),
            latencies.percentile(99),
            latencies.percentile(100),
        ) {
            (Some(p50), Some(p99), Some(max)) => format!(
                "{}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                latencies.count(),
                verdict::ms(p50),
                verdict::ms(p99),
                verdict::ms(max)
            ),
            _ => "none".to_owned(),
        };
        let commands: Vec<String> = reports
            .commands
            .iter()
            .map(|(name, count)| format!("{name} {count}"))
            .collect();
        let mut out = format!(
            "mongolock check: {} processes × {} tasks on {} locks for {} · {} · locks in {} (lease {})\n\n",
            args.processes,
            args.tasks,
            args.locks,
            duration::show(args.duration),
            connection.endpoint.shown_uri,
            connection.namespace(),
            duration::show(args.lease)
        );
        out.push_str(&format!(
            "acquisitions    {} in {:.1} s ({:.1}/s)\n",
            figures.acquisitions,
            verdict::ms(span) / 1000.0,
            per_second(figures.acquisitions, span)
        ));
        out.push_str(&format!(
            "hand-overs      to a waiter in another process {}; in the same process {}\n",
            hand_overs(&figures.remote_hand_overs),
            hand_overs(&figures.local_hand_overs)
        ));
        out.push_str(&format!(
            "commands        {:.2} per acquisition ({})\n",
            per_acquisition(&reports.commands, figures.acquisitions),
            commands.join(", ")
        ));
        out.push_str(&format!("losses          {}\n", figures.losses));
        out.push_str(&format!(
            "fenced writes   {} applied, {} failed; {} stale writes refused\n\n",
            figures.writes_applied, figures.writes_failed, figures.stale_refused
        ));
        for check in checks {
            let status = if check.violations.is_empty() {
                "ok    "
            } else {
                "FAILED"
            };
            out.push_str(&format!(
                "{status}  {} ({} cases)\n",
                check.name, check.cases
            ));
            for violation in check.violations.iter().take(20) {
                out.push_str(&format!("        {violation}\n"));
            }
            if check.violations.len() > 20 {
                out.push_str(&format!("        … {} more\n", check.violations.len() - 20));
            }
        }
        let failed = checks
            .iter()
            .filter(|check| !check.violations.is_empty())
            .count();
        out.push_str(&match failed {
            0 => "\nverdict: passed\n".to_owned(),
            n => format!("\nverdict: FAILED ({n} check(s))\n"),
        });
        out
    }

    fn json(&self) -> serde_json::Value {
        let (args, connection, figures) = (self.args, self.connection, &self.figures);
        let commands = &self.reports.commands;
        let checks: Vec<serde_json::Value> = self
            .checks
            .iter()
            .map(|check| {
                json!({
                    "check": check.name,
                    "cases": check.cases,
                    "passed": check.violations.is_empty(),
                    "violations": check.violations,
                })
            })
            .collect();
        let passed = checks.iter().all(|check| check["passed"] == true);
        json!({
            "uri": connection.endpoint.shown_uri,
            "database": connection.store.database().name(),
            "collection": connection.store.collection_name(),
            "processes": args.processes,
            "tasks": args.tasks,
            "locks": args.locks,
            "duration_ms": u64::try_from(args.duration.as_millis()).unwrap_or(u64::MAX),
            "lease_ms": u64::try_from(args.lease.as_millis()).unwrap_or(u64::MAX),
            "acquisitions": figures.acquisitions,
            "acquisitions_per_second": per_second(figures.acquisitions, self.span),
            "remote_hand_overs": latencies_json(&figures.remote_hand_overs),
            "local_hand_overs": latencies_json(&figures.local_hand_overs),
            "commands": commands,
            "commands_per_acquisition": per_acquisition(commands, figures.acquisitions),
            "losses": figures.losses,
            "writes_applied": figures.writes_applied,
            "writes_failed": figures.writes_failed,
            "stale_writes_refused": figures.stale_refused,
            "checks": checks,
            "passed": passed,
        })
    }
}

fn latencies_json(latencies: &verdict::Latencies) -> serde_json::Value {
    json!({
        "count": latencies.count(),
        "p50_ms": latencies.percentile(50).map(verdict::ms),
        "p99_ms": latencies.percentile(99).map(verdict::ms),
        "max_ms": latencies.percentile(100).map(verdict::ms),
    })
}
