//! Issue 56's fleets: P processes of this binary (`--child fleet-worker`, each its own client
//! and manager, see `fleet_worker.rs`), started together and told over stdin when to go and
//! when the window starts and ends, so every process measures the same window.
//!
//! - S7: one lock, P processes of 2 tasks, 1 ms critical sections; default fairness,
//!   `Fairness::ArrivalOrder`, and (at P = 32) DistributedLock's algorithm.
//! - S8: P/2 names, each shared by two such processes: what a manager reads of the releases
//!   of names it does not wait for.
//! - S9: one process holds a lock (renewing) while P − 1 processes of one task wait for it:
//!   what waiting costs when nothing changes, how soon a release reaches the next waiter,
//!   and (at P = 32) how soon a killed holder's lease is taken over.
//!
//! Server CPU is read from `/proc` (`MONGOLOCK_BENCH_SERVER_PID`, set by `scripts/bench.sh`)
//! at the window's ends; commands are counted by every worker's own client and summed.

use std::collections::{BTreeMap, VecDeque};
use std::process::Stdio;
use std::time::Duration;

use mongodb::bson::{DateTime, Document, doc};
use mongolock::MongoStore;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::child::{Args, Side, emit, scratch_name};
use crate::fleet_worker::wall_nanos;
use crate::job::{Job, Mode, args, job};
use crate::support::probe;
use crate::support::stats::{millis, quantile};

/// The fleet sizes of a full run; every figure is reported at each.
pub(crate) const FLEET_SIZES: [usize; 4] = [2, 8, 32, 64];
/// The fleet size the targets are set at (and the baselines are measured at).
pub(crate) const TARGET_SIZE: usize = 32;
/// The fairness modes of S7 and S9: the default (`Fairness::Bounded`) and arrival order.
pub(crate) const FLEET_MODES: [&str; 2] = ["default", "arrival"];
/// Tasks per process in S7 and S8.
pub(crate) const TASKS_PER_PROCESS: usize = 2;

/// How long the workers may take to start (processes, clients, managers) on a busy machine.
const READY_WITHIN: Duration = Duration::from_secs(90);

/// The windows of one mode, in milliseconds.
struct Windows {
    sizes: &'static [usize],
    warmup: u64,
    s7: u64,
    s8: u64,
    s9_settle: u64,
    s9: u64,
    /// Releases measured after S9's window (at most P − 1).
    rounds: usize,
    /// The lease of the crashed-holder takeover, and the fleet size it runs at.
    crash_lease: u64,
    crash_size: usize,
    /// Whether DistributedLock's algorithm runs beside S7 at the target size.
    baseline: bool,
}

fn windows(mode: Mode) -> Windows {
    match mode {
        Mode::Smoke => Windows {
            sizes: &[2, 4],
            warmup: 200,
            s7: 500,
            s8: 500,
            s9_settle: 300,
            s9: 500,
            rounds: 1,
            crash_lease: 1_000,
            crash_size: 4,
            baseline: false,
        },
        Mode::Quick => Windows {
            sizes: &[2, 8, 32],
            warmup: 500,
            s7: 3_000,
            s8: 2_000,
            s9_settle: 1_000,
            s9: 3_000,
            rounds: 2,
            crash_lease: 2_000,
            crash_size: TARGET_SIZE,
            baseline: true,
        },
        Mode::Full => Windows {
            sizes: &FLEET_SIZES,
            warmup: 1_000,
            s7: 10_000,
            s8: 5_000,
            s9_settle: 2_000,
            s9: 10_000,
            rounds: 3,
            crash_lease: 3_000,
            crash_size: TARGET_SIZE,
            baseline: true,
        },
    }
}

/// The time cap of a fleet job measuring for `millis`: starting and stopping up to 64
/// processes on two cores, with room to spare.
fn cap(millis: u64) -> u64 {
    millis / 1000 + 150
}

/// S7, S8 and S9 of `mode`, one repetition each (a full run of all three takes about
/// 7 minutes on two cores).
pub(crate) fn jobs(mode: Mode) -> Vec<Job> {
    let w = windows(mode);
    let mut jobs = Vec::new();
    for &p in w.sizes {
        for fairness in FLEET_MODES {
            jobs.push(job(
                "s7",
                &format!("s7/{fairness}/{p}"),
                &args(&format!(
                    "s7 p={p} tasks={TASKS_PER_PROCESS} system=mongolock fairness={fairness} \
                     critical_ms=1 warmup_ms={} millis={}",
                    w.warmup, w.s7
                )),
                1,
                cap(w.warmup + w.s7),
            ));
        }
        if w.baseline && p == TARGET_SIZE {
            jobs.push(job(
                "s7",
                &format!("s7/dl/{p}"),
                &args(&format!(
                    "s7 p={p} tasks={TASKS_PER_PROCESS} system=dl critical_ms=1 \
                     warmup_ms={} millis={}",
                    w.warmup, w.s7
                )),
                1,
                cap(w.warmup + w.s7),
            ));
        }
    }
    for &p in w.sizes {
        jobs.push(job(
            "s8",
            &format!("s8/default/{p}"),
            &args(&format!(
                "s8 p={p} tasks={TASKS_PER_PROCESS} system=mongolock fairness=default \
                 critical_ms=1 warmup_ms={} millis={}",
                w.warmup, w.s8
            )),
            1,
            cap(w.warmup + w.s8),
        ));
    }
    for &p in w.sizes {
        for fairness in FLEET_MODES {
            jobs.push(job(
                "s9",
                &format!("s9/{fairness}/{p}"),
                &args(&format!(
                    "s9 p={p} fairness={fairness} settle_ms={} millis={} rounds={}",
                    w.s9_settle, w.s9, w.rounds
                )),
                1,
                cap(w.s9_settle + w.s9) + 30,
            ));
        }
    }
    let p = w.crash_size;
    for fairness in FLEET_MODES {
        jobs.push(job(
            "s9",
            &format!("s9/crash-{fairness}/{p}"),
            &args(&format!(
                "s9 p={p} fairness={fairness} crash=1 lease_ms={} settle_ms={}",
                w.crash_lease, w.s9_settle
            )),
            1,
            cap(w.s9_settle + w.crash_lease),
        ));
    }
    jobs
}

/// A line a worker wrote: `RESULT key=value`, or `eof` once its stdout closed.
#[derive(Debug, Clone)]
struct Event {
    worker: usize,
    key: String,
    value: String,
}

/// The worker processes of one run and what they have said.
struct Fleet {
    children: Vec<Child>,
    stdins: Vec<Option<ChildStdin>>,
    events: mpsc::UnboundedReceiver<Event>,
    /// Events not yet taken by [`Fleet::next`].
    unread: VecDeque<Event>,
    /// The last value of every key each worker reported.
    values: Vec<BTreeMap<String, String>>,
}

impl Fleet {
    /// Starts `count` workers, worker `i` with the arguments `args(i)`.
    fn spawn(count: usize, args: impl Fn(usize) -> Vec<String>) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let (sender, events) = mpsc::unbounded_channel();
        let mut fleet = Self {
            children: Vec::with_capacity(count),
            stdins: Vec::with_capacity(count),
            events,
            unread: VecDeque::new(),
            values: vec![BTreeMap::new(); count],
        };
        for worker in 0..count {
            let mut child = Command::new(&exe)
                .arg("--child")
                .arg("fleet-worker")
                .args(args(worker))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("spawn fleet worker {worker}: {e}"))?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| format!("fleet worker {worker} has no stdout"))?;
            fleet.stdins.push(child.stdin.take());
            fleet.children.push(child);
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some((key, value)) = line
                        .strip_prefix("RESULT ")
                        .and_then(|rest| rest.split_once('='))
                    {
                        let _ = sender.send(Event {
                            worker,
                            key: key.to_owned(),
                            value: value.to_owned(),
                        });
                    }
                }
                let _ = sender.send(Event {
                    worker,
                    key: "eof".to_owned(),
                    value: String::new(),
                });
            });
        }
        Ok(fleet)
    }

    fn len(&self) -> usize {
        self.children.len()
    }

    /// Writes `command` to worker `worker`; a worker that is gone is left out.
    async fn send(&mut self, worker: usize, command: &str) {
        if let Some(Some(stdin)) = self.stdins.get_mut(worker) {
            let line = format!("{command}\n");
            if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                self.stdins[worker] = None;
            }
        }
    }

    /// Writes `command` to every worker in `workers`, one after the other (microseconds
    /// apart: a pipe write each).
    async fn send_to(&mut self, workers: impl IntoIterator<Item = usize>, command: &str) {
        for worker in workers {
            self.send(worker, command).await;
        }
    }

    async fn send_all(&mut self, command: &str) {
        self.send_to(0..self.len(), command).await;
    }

    /// Receives one event (recording it), or `None` at `deadline`.
    async fn receive(&mut self, deadline: Instant) -> Option<Event> {
        let event = tokio::time::timeout_at(deadline, self.events.recv())
            .await
            .ok()??;
        self.values[event.worker].insert(event.key.clone(), event.value.clone());
        self.unread.push_back(event.clone());
        Some(event)
    }

    /// Waits until every worker in `workers` has reported `key`.
    async fn wait_for(
        &mut self,
        workers: impl IntoIterator<Item = usize> + Clone,
        key: &str,
        within: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let missing = workers
                .clone()
                .into_iter()
                .find(|&worker| !self.values[worker].contains_key(key));
            let Some(worker) = missing else {
                return Ok(());
            };
            if self.values[worker].contains_key("eof") {
                return Err(format!("fleet worker {worker} exited before {key}"));
            }
            if self.receive(deadline).await.is_none() {
                return Err(format!(
                    "fleet worker {worker} did not report {key} within {within:?}"
                ));
            }
        }
    }

    async fn wait_all(&mut self, key: &str, within: Duration) -> Result<(), String> {
        self.wait_for(0..self.len(), key, within).await
    }

    /// The first unread `key` event from a worker other than `except`, taking it; `None`
    /// when none comes within `within`.
    async fn next(&mut self, key: &str, except: usize, within: Duration) -> Option<Event> {
        let deadline = Instant::now() + within;
        let wanted = |event: &Event| event.key == key && event.worker != except;
        loop {
            if let Some(at) = self.unread.iter().position(wanted) {
                return self.unread.remove(at);
            }
            self.receive(deadline).await?;
        }
    }

    /// The unread `key` event of worker `worker`, taking it.
    async fn take(&mut self, worker: usize, key: &str, within: Duration) -> Option<Event> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(at) = self
                .unread
                .iter()
                .position(|event| event.key == key && event.worker == worker)
            {
                return self.unread.remove(at);
            }
            self.receive(deadline).await?;
        }
    }

    /// Worker `worker`'s figure `key`, a comma-separated list of numbers (empty when absent).
    fn list(&self, worker: usize, key: &str) -> Vec<f64> {
        self.values[worker].get(key).map_or_else(Vec::new, |list| {
            list.split(',')
                .filter_map(|value| value.parse().ok())
                .collect()
        })
    }

    /// Worker `worker`'s figure `key`, as a number (0 when absent).
    fn number(&self, worker: usize, key: &str) -> f64 {
        self.values[worker]
            .get(key)
            .and_then(|value| value.parse().ok())
            .unwrap_or(0.0)
    }

    /// The measurement window: every worker is told where it starts and, `window` later,
    /// where it ends; the server CPU spent in between, when the server is known.
    async fn window(&mut self, window: Duration) -> Option<Duration> {
        let before = probe::server_cpu();
        self.send_all("mark").await;
        tokio::time::sleep(window).await;
        self.send_all("mark").await;
        let after = probe::server_cpu()?;
        Some(after.saturating_sub(before?))
    }

    /// Kills worker `worker` (SIGKILL: a crash, no release).
    async fn kill(&mut self, worker: usize) {
        let _ = self.children[worker].kill().await;
        self.stdins[worker] = None;
    }

    /// Stops every worker and waits for its figures (`done`); kills whichever overstays.
    async fn stop(
        &mut self,
        workers: impl IntoIterator<Item = usize> + Clone,
    ) -> Result<(), String> {
        self.send_to(workers.clone(), "stop").await;
        let reported = self
            .wait_for(workers, "done", Duration::from_secs(60))
            .await;
        for child in &mut self.children {
            if tokio::time::timeout(Duration::from_secs(15), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        reported
    }

    /// The commands `workers` sent in the window, by name, summed: `findAndModify×12, …`.
    fn commands(&self, workers: impl IntoIterator<Item = usize>) -> (u64, String) {
        let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
        for worker in workers {
            for (key, value) in &self.values[worker] {
                if let (Some(name), Ok(count)) = (key.strip_prefix("cmd_"), value.parse::<u64>()) {
                    *by_name.entry(name).or_insert(0) += count;
                }
            }
        }
        let total = by_name.values().sum();
        let text: Vec<String> = by_name
            .iter()
            .map(|(name, count)| format!("{name}×{count}"))
            .collect();
        (total, text.join(","))
    }
}

/// The arguments every worker of a run shares.
fn worker_args(args: &Args, database: &str, label: &str) -> Vec<String> {
    let mut shared = vec![
        format!("database={database}"),
        format!("app={label}-worker"),
        format!("system={}", args.text("system", "mongolock")),
        format!("fairness={}", args.text("fairness", "default")),
        format!("critical_ms={}", args.get("critical_ms", 1_u64)),
    ];
    for key in ["lease_ms", "fairness_bound_ms"] {
        match args.get(key, 0_u64) {
            0 => {}
            value => shared.push(format!("{key}={value}")),
        }
    }
    shared
}

/// S7: one lock for the whole fleet.
pub(crate) async fn s7(args: &Args) -> Result<(), String> {
    cycling_fleet(args, "s7", |_| "s7".to_owned()).await
}

/// S8: a name per pair of processes.
pub(crate) async fn s8(args: &Args) -> Result<(), String> {
    cycling_fleet(args, "s8", |worker| format!("s8-{}", worker / 2)).await
}

/// P processes of `tasks` cycling tasks, worker `i` on the name `name(i)`: the window's
/// acquisitions, commands, server CPU, waits and shares.
async fn cycling_fleet(
    args: &Args,
    label: &str,
    name: impl Fn(usize) -> String,
) -> Result<(), String> {
    let p = args.get("p", 2_usize);
    let tasks = args.get("tasks", TASKS_PER_PROCESS);
    let warmup = args.millis("warmup_ms", 1000);
    let window = args.millis("millis", 10_000);
    let database = scratch_name(label);
    let side = Side::connect(&format!("{label}-coordinator"), &database).await?;
    let shared = worker_args(args, &database, label);
    let mut fleet = Fleet::spawn(p, |worker| {
        let mut own = shared.clone();
        own.push(format!("name={}", name(worker)));
        own.push(format!("tasks={tasks}"));
        own.push("behaviour=cycle".to_owned());
        own
    })?;
    let outcome = async {
        fleet.wait_all("ready", READY_WITHIN).await?;
        fleet.send_all("go").await;
        tokio::time::sleep(warmup).await;
        let cpu = fleet.window(window).await;
        fleet.stop(0..p).await?;
        Ok::<_, String>(cpu)
    }
    .await;
    let cpu = match outcome {
        Ok(cpu) => cpu,
        Err(e) => {
            side.drop_database().await;
            return Err(e);
        }
    };
    report_cycling(&fleet, p * tasks, window, cpu);
    side.drop_database().await;
    Ok(())
}

/// The figures of a cycling fleet's window.
#[allow(clippy::cast_precision_loss)]
fn report_cycling(fleet: &Fleet, tasks: usize, window: Duration, cpu: Option<Duration>) {
    let p = fleet.len();
    let per_worker: Vec<f64> = (0..p).map(|worker| fleet.number(worker, "acq")).collect();
    let acquisitions: f64 = per_worker.iter().sum();
    let sum = |key: &str| (0..p).map(|worker| fleet.number(worker, key)).sum::<f64>();
    let seconds = window.as_secs_f64();
    let per_acq = |value: f64| value / acquisitions.max(1.0);
    emit("p", p);
    emit("tasks", tasks);
    emit("acq_per_s", format!("{:.1}", acquisitions / seconds));
    let critical_ms = sum("critical_sum_ms") / acquisitions.max(1.0);
    if acquisitions > 0.0 {
        emit("critical_ms", format!("{critical_ms:.3}"));
        // S3's ceiling: back-to-back critical sections with no gap at all.
        emit(
            "of_ceiling_pct",
            format!(
                "{:.1}",
                100.0 * acquisitions / seconds * critical_ms / 1000.0
            ),
        );
    }
    let (commands, by_name) = fleet.commands(0..p);
    emit("cmds_per_acq", format!("{:.2}", per_acq(commands as f64)));
    emit("feed_per_acq", format!("{:.3}", per_acq(sum("feed"))));
    emit(
        "feed_events_per_acq",
        format!("{:.3}", per_acq(sum("feed_events"))),
    );
    emit("commands", by_name);
    if let Some(cpu) = cpu {
        emit("cpu_ms", format!("{:.1}", millis(cpu)));
        emit("cpu_ms_per_acq", format!("{:.3}", per_acq(millis(cpu))));
    }
    let (least, most) = per_worker
        .iter()
        .fold((f64::INFINITY, 0.0_f64), |(least, most), &n| {
            (least.min(n), most.max(n))
        });
    if most > 0.0 {
        emit("least_most", format!("{:.2}", least / most));
    }
    let waits: Vec<f64> = (0..p)
        .flat_map(|worker| fleet.list(worker, "waits_ms"))
        .collect();
    // How late the release feed's events came: the fairness bound assumes a woken process
    // hears of a release within the releasing process's step back.
    let delays: Vec<f64> = (0..p)
        .flat_map(|worker| fleet.list(worker, "feed_delays_ms"))
        .collect();
    for (figure, q) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
        if let Some(delay) = quantile(&delays, q) {
            emit(&format!("feed_delay_{figure}_ms"), format!("{delay:.0}"));
        }
    }
    let max = waits.iter().copied().fold(0.0_f64, f64::max);
    if let (Some(p50), Some(p99)) = (quantile(&waits, 0.5), quantile(&waits, 0.99)) {
        emit("wait_p50_ms", format!("{p50:.1}"));
        emit("wait_p99_ms", format!("{p99:.1}"));
        emit("wait_max_ms", format!("{max:.1}"));
        if acquisitions > 0.0 {
            // The wait if the lock went round every task in strict order at the measured rate.
            let fair_share_ms = (tasks.saturating_sub(1)) as f64 * millis(window) / acquisitions;
            emit("fair_share_ms", format!("{fair_share_ms:.1}"));
            emit("wait_p99_fair", format!("{:.2}", p99 / fair_share_ms));
            emit("wait_max_fair", format!("{:.2}", max / fair_share_ms));
        }
    }
}

/// S9: one holder, P − 1 waiting processes of one task; or, with `crash=1`, the holder is
/// killed and the takeover timed.
pub(crate) async fn s9(args: &Args) -> Result<(), String> {
    let p = args.get("p", 2_usize).max(2);
    let settle = args.millis("settle_ms", 2000);
    let database = scratch_name("s9");
    let side = Side::connect("s9-coordinator", &database).await?;
    let shared = worker_args(args, &database, "s9");
    let mut fleet = Fleet::spawn(p, |_| {
        let mut own = shared.clone();
        own.extend([
            "name=s9".to_owned(),
            "tasks=1".to_owned(),
            "behaviour=hold".to_owned(),
        ]);
        own
    })?;
    let outcome = async {
        fleet.wait_all("ready", READY_WITHIN).await?;
        // The holder first, then everyone else waits for it.
        fleet.send(0, "go").await;
        fleet
            .take(0, "granted", Duration::from_secs(30))
            .await
            .ok_or_else(|| "S9: the holder was not granted the free lock within 30 s".to_owned())?;
        fleet.send_to(1..p, "go").await;
        tokio::time::sleep(settle).await;
        if args.get("crash", 0_u8) == 1 {
            crash(&mut fleet, &side, args).await
        } else {
            quiet_waiting(&mut fleet, args).await
        }
    }
    .await;
    side.drop_database().await;
    outcome
}

/// The window while P − 1 processes wait for a holder that keeps renewing, then `rounds`
/// releases, each timed to the next waiter's grant.
#[allow(clippy::cast_precision_loss)]
async fn quiet_waiting(fleet: &mut Fleet, args: &Args) -> Result<(), String> {
    let p = fleet.len();
    let window = args.millis("millis", 10_000);
    let rounds = args.get("rounds", 3_usize).clamp(1, p - 1);
    let cpu = fleet.window(window).await;
    let (mut handovers_ms, mut release_calls_ms, mut after_release_ms) =
        (Vec::new(), Vec::new(), Vec::new());
    let mut holder = 0;
    for round in 0..rounds {
        if round > 0 {
            // Let the new holder's line settle into waiting again.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        fleet.send(holder, "release").await;
        let releasing = fleet
            .take(holder, "releasing", Duration::from_secs(10))
            .await
            .ok_or_else(|| "S9: the holder did not release within 10 s".to_owned())?;
        let Some(granted) = fleet.next("granted", holder, Duration::from_secs(20)).await else {
            emit("timeout", "release→grant>20s");
            break;
        };
        let (from, to): (u128, u128) = (
            releasing.value.parse().unwrap_or(0),
            granted.value.parse().unwrap_or(0),
        );
        handovers_ms.push(to.saturating_sub(from) as f64 / 1e6);
        // Where the hand-over's time goes: the holder's release command, then the rest (the
        // release event reaching the woken process, its attempt, the runtime's hops).
        if let Some(released) = fleet
            .take(holder, "released", Duration::from_secs(10))
            .await
        {
            let at: u128 = released.value.parse().unwrap_or(0);
            release_calls_ms.push(at.saturating_sub(from) as f64 / 1e6);
            after_release_ms.push(to.saturating_sub(at) as f64 / 1e6);
        }
        holder = granted.worker;
    }
    fleet.stop(0..p).await?;
    let seconds = window.as_secs_f64();
    let waiting = (p - 1) as f64;
    let (waiters, by_name) = fleet.commands(1..p);
    let (holder_commands, _) = fleet.commands(0..1);
    let waiters_sum = |key: &str| (1..p).map(|worker| fleet.number(worker, key)).sum::<f64>();
    let (feed, feed_events) = (waiters_sum("feed"), waiters_sum("feed_events"));
    emit("p", p);
    emit(
        "waiter_cmds_per_s",
        format!("{:.3}", waiters as f64 / seconds / waiting),
    );
    emit(
        "waiter_feed_per_s",
        format!("{:.3}", feed / seconds / waiting),
    );
    emit(
        "waiter_feed_events_per_s",
        format!("{:.3}", feed_events / seconds / waiting),
    );
    emit(
        "holder_cmds_per_s",
        format!("{:.2}", holder_commands as f64 / seconds),
    );
    emit("commands", by_name);
    if let Some(cpu) = cpu {
        emit("cpu_ms_per_s", format!("{:.2}", millis(cpu) / seconds));
    }
    if let Some(first) = handovers_ms.first() {
        emit("handover_first_ms", format!("{first:.1}"));
    }
    if let (Some(p50), Some(max)) = (quantile(&handovers_ms, 0.5), quantile(&handovers_ms, 1.0)) {
        emit("handover_p50_ms", format!("{p50:.1}"));
        emit("handover_max_ms", format!("{max:.1}"));
        emit("rounds", handovers_ms.len());
    }
    for (key, times) in [
        ("handover_release_call_p50_ms", &release_calls_ms),
        ("handover_after_release_p50_ms", &after_release_ms),
    ] {
        if let Some(p50) = quantile(times, 0.5) {
            emit(key, format!("{p50:.1}"));
        }
    }
    Ok(())
}

/// Kills the holder; the time from its lease's end (the server's `expiresAt` after the kill)
/// to the next grant (the server's `acquiredAt` of it), and from the kill to the grant as
/// the new holder saw it.
#[allow(clippy::cast_precision_loss)]
async fn crash(fleet: &mut Fleet, side: &Side, args: &Args) -> Result<(), String> {
    let p = fleet.len();
    let lease = args.millis("lease_ms", 3000);
    let record = || async {
        side.database
            .collection::<Document>(MongoStore::DEFAULT_COLLECTION)
            .find_one(doc! { "_id": "s9" })
            .await
            .map_err(|e| format!("S9: reading the lock's record: {e}"))?
            .ok_or_else(|| "S9: the lock has no record".to_owned())
    };
    let killed = wall_nanos();
    fleet.kill(0).await;
    // A renewal the holder sent just before it died lands within milliseconds.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lease_end = record()
        .await?
        .get_datetime("expiresAt")
        .copied()
        .map_err(|e| format!("S9: the killed holder's expiresAt: {e}"))?;
    let within = lease + Duration::from_secs(30);
    emit("lease_ms", lease.as_millis());
    if let Some(granted) = fleet.next("granted", 0, within).await {
        let acquired: DateTime = record()
            .await?
            .get_datetime("acquiredAt")
            .copied()
            .map_err(|e| format!("S9: the new holder's acquiredAt: {e}"))?;
        let to: u128 = granted.value.parse().unwrap_or(0);
        emit(
            "takeover_ms",
            acquired.timestamp_millis() - lease_end.timestamp_millis(),
        );
        emit(
            "kill_to_grant_ms",
            format!("{:.0}", to.saturating_sub(killed) as f64 / 1e6),
        );
    } else {
        // Far past the target: a takeover this slow is a figure, not a broken bench.
        emit("timeout", format!("takeover>{}s", within.as_secs()));
    }
    emit("p", p);
    fleet.stop(1..p).await
}
