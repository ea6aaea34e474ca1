//! The orchestrator: for each scenario, start worker processes on a fresh namespace, watch
//! the lock collection, inject the scenario's faults, stop the workers, gather everything
//! and run the checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};
use mongolock::{LockRecord, MongoStore, store::LockStore};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};
use tokio::process::{Child, Command};
use tokio::time::{sleep, timeout};

use crate::checker::{
    self, ArrivalReport, FaultRecord, Limits, LineSample, ProcessRecord, ProtectedDoc, Report,
    RunData, Sample, SharedReport,
};
use crate::clock::{self, MS, SEC, ms};
use crate::events::{read_given_back, read_log, read_slowest_attempt};
use crate::server::Server;
use crate::settings::{Mode, WorkerArgs};

const DATABASE: &str = "mongolock_fault_check";
const WORKER_APP: &str = "fault-check-worker";
/// The application name of the worker that only takes its own uncontended lock: stalled
/// acquisitions aimed at it find the lock free when the server finally applies them.
const SOLO_APP: &str = "fault-check-solo";
const LOCK_PREFIX: &str = "lock";
const ELECTION_PREFIX: &str = "elect";
const SEMAPHORE_PREFIX: &str = "sem";
const RW_PREFIX: &str = "rw";
/// The arrival-order scenario's faults: a worker with tasks in a lock's line, holding
/// nothing, `SIGSTOP`ped beyond a place's life, or `SIGKILL`ed.
pub(crate) const WAITER_STOP: &str = "waiter-stop";
pub(crate) const WAITER_KILL: &str = "waiter-kill";

/// The fault scenarios; each runs on its own namespace with fresh workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Kind {
    /// A lock holder `SIGSTOP`ped for longer than the lease, then `SIGCONT`.
    HolderStop,
    /// A lock holder `SIGKILL`ed (a replacement worker starts).
    HolderKill,
    /// The server `SIGSTOP`ped for longer than the lease, then `SIGCONT`.
    ServerStop,
    /// The server `SIGKILL`ed and restarted on the same data and port.
    ServerKill,
    /// `failCommand` `blockConnection` on acquire/extend/release longer than the renew deadline.
    Block,
    /// `failCommand` `closeConnection`.
    Close,
    /// `failCommand` state-change errors 91, 11600, 10107.
    StateChange,
    /// Short acquire timeouts racing single stalled `findAndModify` commands.
    AcquireTimeout,
    /// The elected leader `SIGSTOP`ped beyond the lease.
    LeaderStop,
    /// The elected leader `SIGKILL`ed.
    LeaderKill,
    /// Random faults of every kind, one after another, on locks and elections at once.
    Mixed,
    /// Semaphore permits instead of locks, under every fault kind in turn (leaders are
    /// election candidates running beside them).
    Semaphore,
    /// Reader/writer locks instead of locks, under every fault kind in turn.
    RwLock,
    /// Semaphores and reader/writer locks side by side (half the lock workers each) under
    /// every fault kind in turn; a holder fault strikes a holder of each. The short
    /// configuration's one pass over the shared kinds: what the semaphore and rw-lock
    /// scenarios check, in half their time.
    Shared,
    /// Plain locks in arrival order (`Fairness::ArrivalOrder`): waiters (not holders)
    /// `SIGSTOP`ped beyond a place's life and `SIGKILL`ed, `repeats` times each; checked for
    /// first-come-first-served entries and for a dead or paused waiter's place holding the
    /// line back no longer than its life.
    ArrivalOrder,
    /// A fleet: many processes (`fleet_processes`, one task each) on one plain lock in the
    /// default mode, where a release wakes only the manager listed longest: that manager,
    /// holding nothing, `SIGSTOP`ped beyond its listing's life and `SIGKILL`ed, `repeats`
    /// times each; checked for the turn it was given passing on within a lease.
    Fleet,
    /// The fleet in arrival order: the head of the line `SIGSTOP`ped and `SIGKILL`ed;
    /// checked as [`Kind::ArrivalOrder`] is.
    FleetArrivalOrder,
}

impl Kind {
    /// The fault kinds proper (the last three scenarios combine them).
    pub(crate) const FAULTS: [Kind; 10] = [
        Kind::HolderStop,
        Kind::HolderKill,
        Kind::ServerStop,
        Kind::ServerKill,
        Kind::Block,
        Kind::Close,
        Kind::StateChange,
        Kind::AcquireTimeout,
        Kind::LeaderStop,
        Kind::LeaderKill,
    ];

    /// Every scenario but [`Kind::Shared`], which the long configuration runs as its two
    /// halves, each with all the lock workers.
    pub(crate) const ALL: [Kind; 16] = [
        Kind::HolderStop,
        Kind::HolderKill,
        Kind::ServerStop,
        Kind::ServerKill,
        Kind::Block,
        Kind::Close,
        Kind::StateChange,
        Kind::AcquireTimeout,
        Kind::LeaderStop,
        Kind::LeaderKill,
        Kind::Mixed,
        Kind::Semaphore,
        Kind::RwLock,
        Kind::ArrivalOrder,
        Kind::Fleet,
        Kind::FleetArrivalOrder,
    ];

    /// The short configuration's scenarios: [`Kind::ALL`] with the shared kinds in one pass
    /// ([`Kind::Shared`]).
    pub(crate) fn short() -> Vec<Kind> {
        Kind::ALL
            .into_iter()
            .filter_map(|kind| match kind {
                Kind::Semaphore => Some(Kind::Shared),
                Kind::RwLock => None,
                kind => Some(kind),
            })
            .collect()
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::HolderStop => "holder-stop",
            Kind::HolderKill => "holder-kill",
            Kind::ServerStop => "server-stop",
            Kind::ServerKill => "server-kill",
            Kind::Block => "block",
            Kind::Close => "close",
            Kind::StateChange => "state-change",
            Kind::AcquireTimeout => "acquire-timeout",
            Kind::LeaderStop => "leader-stop",
            Kind::LeaderKill => "leader-kill",
            Kind::Mixed => "mixed",
            Kind::Semaphore => "semaphore",
            Kind::RwLock => "rw-lock",
            Kind::Shared => "shared",
            Kind::ArrivalOrder => "arrival-order",
            Kind::Fleet => "fleet",
            Kind::FleetArrivalOrder => "fleet-arrival-order",
        }
    }

    /// Whether the scenario's plain locks grant in arrival order.
    fn in_arrival_order(self) -> bool {
        matches!(self, Kind::ArrivalOrder | Kind::FleetArrivalOrder)
    }

    /// Scenarios of many processes on one lock, whose faults strike the waiter the next
    /// release goes to.
    fn fleet(self) -> bool {
        matches!(self, Kind::Fleet | Kind::FleetArrivalOrder)
    }

    /// Scenarios whose faults strike waiters, not holders, checked by the arrival-order
    /// checker's line-blocking rule.
    fn waiter_faults(self) -> bool {
        self.in_arrival_order() || self.fleet()
    }

    /// What this scenario's lock workers take (the workers are shared out over them in
    /// turn).
    fn lock_modes(self) -> &'static [Mode] {
        match self {
            Kind::Semaphore => &[Mode::Semaphore],
            Kind::RwLock => &[Mode::ReadWrite],
            Kind::Shared => &[Mode::Semaphore, Mode::ReadWrite],
            _ => &[Mode::Lock],
        }
    }

    /// Scenarios of the shared kinds under every fault kind in turn.
    fn every_fault(self) -> bool {
        matches!(self, Kind::Semaphore | Kind::RwLock | Kind::Shared)
    }
}

fn prefix(mode: Mode) -> &'static str {
    match mode {
        Mode::Lock => LOCK_PREFIX,
        Mode::Election => ELECTION_PREFIX,
        Mode::Semaphore => SEMAPHORE_PREFIX,
        Mode::ReadWrite => RW_PREFIX,
    }
}

/// Everything a run is configured with.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) server_binary: PathBuf,
    pub(crate) workdir: PathBuf,
    pub(crate) processes: u32,
    pub(crate) tasks: u32,
    pub(crate) locks: u32,
    /// Worker processes of the fleet scenarios (one task each, one lock).
    pub(crate) fleet_processes: u32,
    /// The fleet's holds (shorter, so that every process gets its turn among many), acquire
    /// timeout (longer than a round of the line, so that waiters seldom give up) and
    /// longest idle time between a section and the next ask.
    pub(crate) fleet_hold_max_ms: u64,
    pub(crate) fleet_acquire_timeout_ms: u64,
    pub(crate) fleet_idle_max_ms: u64,
    pub(crate) expiry_ms: u64,
    pub(crate) cadence_ms: u64,
    pub(crate) renew_deadline_ms: u64,
    pub(crate) backoff_min_ms: u64,
    pub(crate) backoff_max_ms: u64,
    pub(crate) acquire_timeout_ms: u64,
    pub(crate) short_acquire_timeout_ms: u64,
    pub(crate) hold_min_ms: u64,
    pub(crate) hold_max_ms: u64,
    pub(crate) write_every_ms: u64,
    pub(crate) warmup: Duration,
    /// Faults per single-kind scenario.
    pub(crate) repeats: u32,
    pub(crate) mixed: Duration,
    pub(crate) slack_ms: u64,
    pub(crate) orphan_bound_ms: u64,
    /// The semaphores' count in the semaphore scenario.
    pub(crate) permits: u32,
    /// Percent of acquisitions that write in the reader/writer scenario.
    pub(crate) write_percent: u32,
    /// Time without faults at the end of the semaphore and reader/writer scenarios, long
    /// enough for the starvation check to see more than the gaps between recoveries.
    pub(crate) quiet: Duration,
    pub(crate) scenarios: Vec<Kind>,
}

impl Config {
    fn lease_duration(&self) -> Duration {
        Duration::from_millis(self.expiry_ms)
    }

    /// Election retries wait retry period × up to 1.2; locks wait at most `backoff_max`.
    fn max_backoff_ms(&self) -> u64 {
        self.backoff_max_ms.max(self.cadence_ms * 6 / 5)
    }

    /// How long a waiting manager's place in a lock's line lasts after its last refused
    /// attempt: twice the longest retry backoff (the library's rule).
    fn place_life_ms(&self) -> u64 {
        // As the runtime sets it: twice the longest backoff, at least a second.
        (self.backoff_max_ms * 2).max(1000)
    }

    /// How long a refusal lists a default-mode waiter that waits quietly for the release
    /// feed: the longest quiet wait (5 s, the runtime's) plus a waiting mark (twice the
    /// longest backoff). Releases meanwhile wake it first, if it waited longest.
    fn listing_life_ms(&self) -> u64 {
        5000 + self.backoff_max_ms * 2
    }

    /// How long a waiter fault's victim may hold one turn back, by the scenario's mode: in
    /// arrival order its place's life; in the default mode a release wakes only the victim
    /// (listed longest), and the others, waiting quietly, ask again within the lease they
    /// were last told of, plus a backoff.
    fn held_back_ms(&self, kind: Kind) -> u64 {
        if kind.in_arrival_order() {
            self.place_life_ms()
        } else {
            self.expiry_ms
        }
    }

    /// Time after a fault for the checks to see recovery.
    fn recovery(&self) -> Duration {
        Duration::from_millis(self.expiry_ms + self.max_backoff_ms() + self.slack_ms + 1000)
    }
}

struct Proc {
    index: u32,
    child: Option<Child>,
    log: PathBuf,
    stops: Vec<(u64, u64)>,
    killed_at: Option<u64>,
    exited_cleanly: bool,
}

impl Proc {
    fn pid(&self) -> Option<Pid> {
        self.child
            .as_ref()
            .and_then(Child::id)
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw)
    }
}

/// One scenario in progress.
struct Run<'a> {
    config: &'a Config,
    kind: Kind,
    server: Arc<Mutex<Server>>,
    admin: Client,
    dir: PathBuf,
    locks_collection: String,
    protected_collection: String,
    stop_file: PathBuf,
    procs: Vec<Proc>,
    faults: Vec<FaultRecord>,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// Every non-empty line of waiting managers the monitor saw.
    lines: Arc<Mutex<Vec<LineSample>>>,
}

/// Totals over all scenarios.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) acquisitions: usize,
    pub(crate) acquire_timeouts: usize,
    pub(crate) writes: usize,
    pub(crate) fenced: usize,
    pub(crate) superseded_rejected: usize,
    pub(crate) paused_overlaps: usize,
    pub(crate) handovers_after_loss: usize,
    pub(crate) faults: BTreeMap<String, usize>,
    pub(crate) violations: Vec<String>,
    pub(crate) min_loss_gap: Option<i64>,
    pub(crate) recovery: BTreeMap<String, u64>,
    pub(crate) max_unowned: Option<(u64, String)>,
    pub(crate) killed_lease_seen: Option<u64>,
    pub(crate) shared: SharedReport,
    pub(crate) arrival: Option<ArrivalReport>,
    /// What the checks saw of each fleet scenario.
    pub(crate) fleets: Vec<(Kind, ArrivalReport)>,
}

impl Totals {
    fn add(&mut self, kind: Kind, report: Report, faults: &[FaultRecord]) {
        self.acquisitions += report.acquisitions;
        self.acquire_timeouts += report.acquire_timeouts;
        self.writes += report.writes;
        self.fenced += report.fenced_writes;
        self.superseded_rejected += report.superseded_writes_rejected;
        self.paused_overlaps += report.paused_overlaps;
        self.handovers_after_loss += report.handovers_after_loss;
        for fault in faults {
            *self.faults.entry(fault.kind.clone()).or_default() += 1;
        }
        self.violations.extend(
            report
                .violations
                .into_iter()
                .map(|v| format!("[{}] {v}", kind.label())),
        );
        if let Some(gap) = report.min_loss_gap {
            self.min_loss_gap = Some(self.min_loss_gap.map_or(gap, |g| g.min(gap)));
        }
        for (fault, took) in report.recovery {
            let entry = self.recovery.entry(fault).or_default();
            *entry = (*entry).max(took);
        }
        if let Some((span, what)) = report.max_unowned
            && self.max_unowned.as_ref().is_none_or(|(max, _)| span > *max)
        {
            self.max_unowned = Some((span, format!("[{}] {what}", kind.label())));
        }
        if let Some(seen) = report.killed_lease_seen {
            self.killed_lease_seen = Some(self.killed_lease_seen.map_or(seen, |s| s.max(seen)));
        }
        self.shared.add(&report.shared);
        match &report.arrival {
            Some(fleet) if kind.fleet() => self.fleets.push((kind, fleet.clone())),
            Some(arrival) => self.arrival.get_or_insert_default().add(arrival),
            None => {}
        }
    }
}

fn uri(port: u16, app: &str) -> String {
    format!(
        "mongodb://127.0.0.1:{port}/?directConnection=true&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=5000&appName={app}"
    )
}

/// Runs every configured scenario against one server; returns the totals.
pub(crate) async fn run_all(config: &Config) -> Result<Totals, String> {
    std::fs::create_dir_all(&config.workdir).map_err(|e| format!("{:?}: {e}", config.workdir))?;
    let server = Server::start(&config.server_binary, &config.workdir)?;
    let port = server.port();
    println!(
        "fault_check: secantusd-rs on 127.0.0.1:{port}, data in {:?}",
        config.workdir.join("db")
    );
    let server = Arc::new(Mutex::new(server));
    let admin = Client::with_uri_str(uri(port, "fault-check-orchestrator"))
        .await
        .map_err(|e| e.to_string())?;
    let mut totals = Totals::default();
    for kind in &config.scenarios {
        let started = clock::now();
        let (report, faults) = Run::new(config, *kind, server.clone(), admin.clone())
            .execute()
            .await?;
        print_scenario(*kind, &report, &faults, clock::now() - started);
        totals.add(*kind, report, &faults);
    }
    let stopped = {
        let server = server.clone();
        tokio::task::spawn_blocking(move || match server.lock() {
            Ok(mut server) => server.shutdown(),
            Err(poisoned) => poisoned.into_inner().shutdown(),
        })
    };
    let _ = stopped.await;
    Ok(totals)
}

fn print_scenario(kind: Kind, report: &Report, faults: &[FaultRecord], took: u64) {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for fault in faults {
        *by_kind.entry(fault.kind.as_str()).or_default() += 1;
    }
    println!(
        "scenario {:<15} {:>5} acquisitions, {:>4} timeouts, faults {:?}, {:>4} stale writes refused ({} after a newer ack), \
         min loss->entry gap {}, recovery {}, {} violations ({:.0} s)",
        kind.label(),
        report.acquisitions,
        report.acquire_timeouts,
        by_kind,
        report.fenced_writes,
        report.superseded_writes_rejected,
        report
            .min_loss_gap
            .map_or("-".into(), |gap| format!("{:.0} ms", gap as f64 / 1e6)),
        if report.recovery.is_empty() {
            "-".to_owned()
        } else {
            report
                .recovery
                .iter()
                .map(|(k, v)| format!("{k} {:.0} ms", ms(*v)))
                .collect::<Vec<_>>()
                .join(", ")
        },
        report.violations.len(),
        took as f64 / 1e9,
    );
    let shared = &report.shared;
    if shared.permits + shared.reads + shared.writes > 0 {
        println!("    {}", describe_shared(shared));
    }
    match &report.arrival {
        Some(fleet) if kind.fleet() => println!("    {}", describe_fleet(kind, fleet)),
        Some(arrival) => println!("    {}", describe_arrival(arrival)),
        None => {}
    }
    for violation in report.violations.iter().take(20) {
        println!("    VIOLATION {violation}");
    }
}

/// A longest stretch and what it was, or `-`.
fn describe_gap(gap: &Option<(u64, String)>) -> String {
    gap.as_ref().map_or("-".to_owned(), |(span, what)| {
        format!("{:.0} ms ({what})", ms(*span))
    })
}

/// One line on what the arrival-order checks saw.
pub(crate) fn describe_arrival(arrival: &ArrivalReport) -> String {
    format!(
        "arrival order: {} entries checked for first-come-first-served ({} with a later ask elsewhere still waiting, {} not judged: own process paused or killed while waiting), {} earlier asks excused (their process paused or killed), {} overtakes ({} by a task handed a grant won for an earlier task of its process that had just given up, {} of a manager seen in line just before and after the entry), {} overtaken places recorded late by their attempt's latency (latest {:.0} ms); waiter faults: {} SIGSTOP, {} SIGKILL ({} victims then seen holding a lock, not judged there); longest lock-free-while-waiting after a waiter fault (bound {:.0} ms, over {} stretches): {}; longest of the whole run: {}",
        arrival.entries_checked,
        arrival.contended_entries,
        arrival.entries_exempt,
        arrival.excused,
        arrival.overtakes,
        arrival.overtakes_handed_on_locally,
        arrival.overtakes_past_a_seen_place,
        arrival.recorded_late,
        ms(arrival.latest_record),
        arrival.waiter_stops,
        arrival.waiter_kills,
        arrival.victims_granted,
        ms(arrival.gap_bound),
        arrival.gaps_after_faults,
        describe_gap(&arrival.max_gap_after_fault),
        describe_gap(&arrival.max_gap_overall),
    )
}

/// One line on what the checks of a fleet scenario saw.
pub(crate) fn describe_fleet(kind: Kind, fleet: &ArrivalReport) -> String {
    let order = if kind.in_arrival_order() {
        format!(
            "{} entries checked for first-come-first-served ({} not judged), {} overtakes, {} overtaken places recorded late by their attempt's latency (latest {:.0} ms); ",
            fleet.entries_checked,
            fleet.entries_exempt,
            fleet.overtakes,
            fleet.recorded_late,
            ms(fleet.latest_record)
        )
    } else {
        String::new()
    };
    format!(
        "{}: {order}waiter faults on the next to go: {} SIGSTOP, {} SIGKILL ({} victims then seen holding); longest lock-free-while-waiting after a waiter fault (bound {:.0} ms, over {} stretches): {}; longest of the whole run: {}",
        kind.label(),
        fleet.waiter_stops,
        fleet.waiter_kills,
        fleet.victims_granted,
        ms(fleet.gap_bound),
        fleet.gaps_after_faults,
        describe_gap(&fleet.max_gap_after_fault),
        describe_gap(&fleet.max_gap_overall),
    )
}

/// One line on what the semaphore and reader/writer checks saw.
pub(crate) fn describe_shared(shared: &SharedReport) -> String {
    let waits = shared
        .longest_quiet_wait
        .iter()
        .map(|(side, gap)| format!("{side} {:.0} ms", ms(*gap)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "permits {} (peak {} of {}), reads {} (peak {} readers, {} shared), writes {}; timeouts {:?}; killed permit holders {} (permit back within {}); longest wait without an entry, in time free of faults: {}",
        shared.permits,
        shared.peak_permits.map_or(0, |(peak, _)| peak),
        shared.peak_permits.map_or(0, |(_, permits)| permits),
        shared.reads,
        shared.peak_readers,
        shared.shared_reads,
        shared.writes,
        shared.timeouts,
        shared.permits_back,
        shared
            .slowest_permit_back
            .map_or("-".into(), |t| format!("{:.0} ms", ms(t))),
        if waits.is_empty() {
            "-".to_owned()
        } else {
            waits
        },
    )
}

impl<'a> Run<'a> {
    fn new(config: &'a Config, kind: Kind, server: Arc<Mutex<Server>>, admin: Client) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let label = kind.label().replace('-', "_");
        let dir = config
            .workdir
            .join(format!("{}-{}", kind.label(), &id[..8]));
        Self {
            config,
            kind,
            server,
            admin,
            stop_file: dir.join("stop"),
            dir,
            locks_collection: format!("locks_{label}_{}", &id[..8]),
            protected_collection: format!("protected_{label}_{}", &id[..8]),
            procs: Vec::new(),
            faults: Vec::new(),
            samples: Arc::new(Mutex::new(Vec::new())),
            lines: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn port(&self) -> u16 {
        match self.server.lock() {
            Ok(server) => server.port(),
            Err(poisoned) => poisoned.into_inner().port(),
        }
    }

    fn modes(&self) -> Vec<Mode> {
        let config = self.config;
        match self.kind {
            Kind::LeaderStop | Kind::LeaderKill => vec![Mode::Election; config.processes as usize],
            Kind::Fleet | Kind::FleetArrivalOrder => {
                vec![Mode::Lock; config.fleet_processes as usize]
            }
            Kind::Mixed | Kind::Semaphore | Kind::RwLock | Kind::Shared => {
                let lock_modes = self.kind.lock_modes();
                let mut modes: Vec<Mode> = (0..config.processes as usize)
                    .map(|index| lock_modes[index % lock_modes.len()])
                    .collect();
                modes.extend(vec![Mode::Election; config.processes.div_ceil(2) as usize]);
                modes
            }
            _ => vec![Mode::Lock; config.processes as usize],
        }
    }

    fn lock_names(&self) -> Vec<String> {
        let mut modes = Vec::new();
        for mode in self.modes() {
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        modes
            .into_iter()
            .map(prefix)
            .flat_map(|prefix| (0..self.locks()).map(move |i| format!("{prefix}-{i}")))
            .collect()
    }

    /// How many locks (of each primitive) the scenario's workers share: one for a fleet.
    fn locks(&self) -> u32 {
        if self.kind.fleet() {
            1
        } else {
            self.config.locks
        }
    }

    fn spawn(&mut self, mode: Mode) -> Result<(), String> {
        self.spawn_worker(mode, false)
    }

    /// The workers whose every acquisition goes to their own lock (see [`SOLO_APP`]), one
    /// per primitive of the scenario.
    fn spawn_solo(&mut self) -> Result<(), String> {
        for &mode in self.kind.lock_modes() {
            self.spawn_worker(mode, true)?;
        }
        Ok(())
    }

    fn spawn_worker(&mut self, mode: Mode, solo: bool) -> Result<(), String> {
        let config = self.config;
        let index = u32::try_from(self.procs.len()).unwrap_or(u32::MAX);
        let log = self.dir.join(format!("w{index}.log"));
        let acquire_timeout_ms = match self.kind {
            Kind::AcquireTimeout | Kind::Mixed => config.short_acquire_timeout_ms,
            // The acquire-timeout fault needs short timeouts only where it stalls commands;
            // the others wait as long as in the other scenarios, so that a starved side
            // shows as a gap, not as a stream of timeouts.
            _ if solo => config.short_acquire_timeout_ms,
            kind if kind.fleet() => config.fleet_acquire_timeout_ms,
            _ => config.acquire_timeout_ms,
        };
        // A fleet's worker has one task, idle a while after each section: every turn goes
        // from one process to another through the store, whose release wakes the manager
        // listed longest, not to a waiter of the releasing process or to its next ask.
        let (tasks, hold_max_ms, idle_max_ms) = match self.kind {
            kind if kind.fleet() => (1, config.fleet_hold_max_ms, config.fleet_idle_max_ms),
            _ => (config.tasks, config.hold_max_ms, 20),
        };
        let args = WorkerArgs {
            uri: uri(self.port(), if solo { SOLO_APP } else { WORKER_APP }),
            database: DATABASE.to_owned(),
            locks_collection: self.locks_collection.clone(),
            protected_collection: self.protected_collection.clone(),
            log: log.clone(),
            index,
            mode,
            prefix: prefix(mode).to_owned(),
            locks: self.locks(),
            // The solo worker: each task has a lock of its own and goes in and out at once,
            // idle in between, so that most of its store commands are acquisitions of a free
            // lock (several tasks, so that its commands do not all share one session).
            tasks,
            until: clock::now() + 3600 * SEC,
            stop_file: self.stop_file.clone(),
            expiry_ms: config.expiry_ms,
            cadence_ms: config.cadence_ms,
            renew_deadline_ms: config.renew_deadline_ms,
            backoff_min_ms: config.backoff_min_ms,
            backoff_max_ms: config.backoff_max_ms,
            acquire_timeout_ms,
            hold_min_ms: if solo { 0 } else { config.hold_min_ms },
            hold_max_ms: if solo { 0 } else { hold_max_ms },
            write_every_ms: config.write_every_ms,
            solo_percent: if solo { 100 } else { 0 },
            idle_max_ms: if solo { 300 } else { idle_max_ms },
            permits: config.permits,
            write_percent: config.write_percent,
            arrival_order: self.kind.in_arrival_order(),
        };
        let stderr = std::fs::File::create(self.dir.join(format!("w{index}.stderr")))
            .map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let child = Command::new(exe)
            .args(args.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        self.procs.push(Proc {
            index,
            child: Some(child),
            log,
            stops: Vec::new(),
            killed_at: None,
            exited_cleanly: false,
        });
        Ok(())
    }

    async fn execute(mut self) -> Result<(Report, Vec<FaultRecord>), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{:?}: {e}", self.dir))?;
        for mode in self.modes() {
            self.spawn(mode)?;
        }
        if matches!(self.kind, Kind::AcquireTimeout | Kind::Mixed) || self.kind.every_fault() {
            self.spawn_solo()?;
        }
        // Wait until every worker runs its manager.
        let started = clock::now();
        while self.procs.iter().any(|p| {
            !std::fs::read_to_string(&p.log)
                .unwrap_or_default()
                .starts_with("hello")
        }) {
            if clock::now() - started > 30 * SEC {
                return Err("workers did not start within 30 s".into());
            }
            sleep(Duration::from_millis(50)).await;
        }
        let monitoring = Arc::new(AtomicBool::new(true));
        let monitor = self.monitor(monitoring.clone());
        sleep(self.config.warmup).await;

        match self.kind {
            Kind::Mixed => {
                // Every kind once in a random order, then random kinds until the time is up.
                let until = clock::now() + u64::try_from(self.config.mixed.as_nanos()).unwrap_or(0);
                let mut kinds = Kind::FAULTS.to_vec();
                kinds.shuffle(&mut rand::rng());
                let mut next = kinds.into_iter();
                loop {
                    let kind = match next.next() {
                        Some(kind) => kind,
                        None if clock::now() < until => *Kind::FAULTS
                            .choose(&mut rand::rng())
                            .unwrap_or(&Kind::HolderStop),
                        None => break,
                    };
                    self.inject(kind).await?;
                    let pause = rand::rng().random_range(500..2500);
                    sleep(Duration::from_millis(pause)).await;
                }
            }
            kind if kind.every_fault() => {
                // Every fault kind `repeats` times, in random order, each followed by the
                // time to recover (so that every one is checked for progress), then a quiet
                // stretch for the starvation check.
                let mut kinds: Vec<Kind> = (0..self.config.repeats)
                    .flat_map(|_| Kind::FAULTS)
                    .collect();
                kinds.shuffle(&mut rand::rng());
                println!(
                    "    {} faults in this order: {}",
                    kind.label(),
                    kinds
                        .iter()
                        .map(|k| k.label())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                for fault in kinds {
                    self.inject(fault).await?;
                    sleep(self.config.recovery()).await;
                }
                sleep(self.config.quiet).await;
            }
            kind if kind.waiter_faults() => {
                // Each repeat: a waiter paused beyond its place's life, then one killed, each
                // followed by the time to recover (so that progress is checked after both).
                for _ in 0..self.config.repeats {
                    self.inject_waiter_fault(false).await?;
                    sleep(self.config.recovery()).await;
                    self.inject_waiter_fault(true).await?;
                    sleep(self.config.recovery()).await;
                }
            }
            kind => {
                for _ in 0..self.config.repeats {
                    self.inject(kind).await?;
                    sleep(self.config.recovery()).await;
                }
            }
        }
        sleep(self.config.recovery()).await;

        // Stop the workers and wait for them to finish by themselves.
        let stop_at = clock::now();
        std::fs::write(&self.stop_file, b"stop").map_err(|e| e.to_string())?;
        let deadline = self.config.lease_duration() * 2 + Duration::from_secs(20);
        for proc in &mut self.procs {
            if proc.killed_at.is_some() {
                continue;
            }
            let Some(child) = proc.child.as_mut() else {
                continue;
            };
            match timeout(deadline, child.wait()).await {
                Ok(Ok(status)) => {
                    proc.exited_cleanly = status.success()
                        && std::fs::read_to_string(&proc.log)
                            .unwrap_or_default()
                            .contains("\ndone\t");
                }
                _ => {
                    let _ = child.kill().await;
                }
            }
        }
        monitoring.store(false, Ordering::SeqCst);
        let _ = monitor.await;
        let final_held = self.read_locks().await.unwrap_or_default();
        let docs = self.read_protected().await?;

        let processes = self
            .procs
            .iter()
            .map(|p| ProcessRecord {
                index: p.index,
                events: read_log(&p.log),
                given_back: read_given_back(&self.dir.join(format!("w{}.stderr", p.index))),
                slowest_attempt: read_slowest_attempt(
                    &self.dir.join(format!("w{}.stderr", p.index)),
                ),
                stops: p.stops.clone(),
                killed_at: p.killed_at,
                exited_cleanly: p.exited_cleanly,
            })
            .collect();
        let samples = match self.samples.lock() {
            Ok(samples) => samples.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        // What the monitor saw, for reading a violation's story afterwards.
        let seen: String = samples
            .iter()
            .map(|s| {
                format!(
                    "{}\t{}\t{}\t{}\n",
                    s.at,
                    s.lock,
                    s.holder.as_deref().unwrap_or("-"),
                    s.token
                )
            })
            .collect();
        let _ = std::fs::write(self.dir.join("monitor.tsv"), seen);
        let lines = match self.lines.lock() {
            Ok(lines) => lines.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        // The lines the monitor saw: `at`, lock, holder, then `manager:waited_ms`, earliest
        // first.
        let text: String = lines
            .iter()
            .map(|line| {
                let places = line
                    .places
                    .iter()
                    .map(|(holder, waited)| format!("{holder}:{}", waited / MS))
                    .collect::<Vec<_>>()
                    .join(" ");
                format!(
                    "{}\t{}\t{}\t{places}\n",
                    line.at,
                    line.lock,
                    line.holder.as_deref().unwrap_or("-")
                )
            })
            .collect();
        if !text.is_empty() {
            let _ = std::fs::write(self.dir.join("lines.tsv"), text);
        }
        let faults: String = self
            .faults
            .iter()
            .map(|f| format!("{}\t{}\t{}\n", f.kind, f.start, f.end))
            .collect();
        let _ = std::fs::write(self.dir.join("faults.tsv"), faults);
        let data = RunData {
            limits: Limits {
                expiry: self.config.expiry_ms * MS,
                margin: self
                    .config
                    .expiry_ms
                    .saturating_sub(self.config.renew_deadline_ms)
                    * MS,
                max_backoff: self.config.max_backoff_ms() * MS,
                slack: self.config.slack_ms * MS,
                orphan_bound: self.config.orphan_bound_ms * MS,
                tokens_per_grant: self.lock_store().tokens_per_grant(),
                until: stop_at,
            },
            locks: self.lock_names(),
            processes,
            faults: self.faults.clone(),
            samples,
            docs,
            final_held,
            arrival: self.kind.waiter_faults().then(|| checker::ArrivalBounds {
                place_life: if self.kind.in_arrival_order() {
                    self.config.place_life_ms()
                } else {
                    self.config.listing_life_ms()
                } * MS,
                held_back: self.config.held_back_ms(self.kind) * MS,
                in_order: self.kind.in_arrival_order(),
                backoff_max: self.config.backoff_max_ms * MS,
                lines,
            }),
        };
        Ok((checker::check(&data), self.faults))
    }

    /// Polls the lock collection every 100 ms, recording every lock's holder and token.
    fn monitor(&self, running: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
        let store = self.lock_store();
        let samples = self.samples.clone();
        let lines = self.lines.clone();
        tokio::spawn(async move {
            while running.load(Ordering::SeqCst) {
                if let Ok(Ok(locks)) = timeout(Duration::from_secs(1), store.list()).await {
                    let at = clock::now();
                    {
                        let mut lines = match lines.lock() {
                            Ok(lines) => lines,
                            Err(poisoned) => poisoned.into_inner(),
                        };
                        lines.extend(
                            locks
                                .iter()
                                .filter(|(_, record)| !record.queue.is_empty())
                                .map(|(lock, record)| line_sample(at, lock, record)),
                        );
                    }
                    let mut samples = match samples.lock() {
                        Ok(samples) => samples,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    for (lock, record) in locks {
                        samples.extend(samples_of(at, lock, record));
                    }
                }
                sleep(Duration::from_millis(100)).await;
            }
        })
    }

    fn lock_store(&self) -> MongoStore {
        // The collection name is built above from a label and hex digits: always valid.
        MongoStore::builder(self.admin.database(DATABASE))
            .with_collection(&self.locks_collection)
            .build()
            .unwrap_or_else(|_| MongoStore::new(self.admin.database(DATABASE)))
    }

    async fn read_locks(&self) -> Result<Vec<Sample>, String> {
        let at = clock::now();
        let locks = self.lock_store().list().await.map_err(|e| e.to_string())?;
        Ok(locks
            .into_iter()
            .flat_map(|(lock, record)| samples_of(at, lock, record))
            .filter(|sample| sample.holder.is_some())
            .collect())
    }

    async fn read_protected(&self) -> Result<Vec<ProtectedDoc>, String> {
        let collection = self
            .admin
            .database(DATABASE)
            .collection::<Document>(&self.protected_collection);
        let mut cursor = collection.find(doc! {}).await.map_err(|e| e.to_string())?;
        let mut docs = Vec::new();
        while cursor.advance().await.map_err(|e| e.to_string())? {
            let document: Document = cursor.deserialize_current().map_err(|e| e.to_string())?;
            let number = |value: Option<&Bson>| -> u64 {
                match value {
                    Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
                    Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
                    _ => 0,
                }
            };
            let log = match document.get("log") {
                Some(Bson::Array(entries)) => entries
                    .iter()
                    .filter_map(|entry| match entry {
                        Bson::Document(entry) => Some((
                            number(entry.get("t")),
                            u32::try_from(number(entry.get("p"))).unwrap_or(u32::MAX),
                            number(entry.get("s")),
                        )),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            docs.push(ProtectedDoc {
                lock: document.get_str("_id").unwrap_or_default().to_owned(),
                applied: number(document.get("n")),
                log,
            });
        }
        Ok(docs)
    }

    fn record(&mut self, kind: &str, start: u64, end: u64, holder_fault: bool, server_down: bool) {
        self.faults.push(FaultRecord {
            kind: kind.to_owned(),
            start,
            end,
            holder_fault,
            server_down,
        });
    }

    async fn inject(&mut self, kind: Kind) -> Result<(), String> {
        let expiry = self.config.lease_duration();
        let beyond_lease = expiry + Duration::from_millis(1000);
        match kind {
            Kind::HolderStop | Kind::LeaderStop => {
                // A holder of each of the scenario's primitives, paused together.
                let modes = match kind {
                    Kind::HolderStop => self.kind.lock_modes(),
                    _ => &[Mode::Election],
                };
                let mut stopped = Vec::new();
                for &mode in modes {
                    let prefix = prefix(mode);
                    match self.stop_a_holder(prefix).await? {
                        Some(victim) => stopped.push(victim),
                        None => println!("    (no {prefix} holder to stop)"),
                    }
                }
                if stopped.is_empty() {
                    return Ok(());
                }
                sleep(beyond_lease).await;
                for (victim, start) in stopped {
                    if let Some(pid) = self.procs[victim].pid() {
                        let _ = kill(pid, Signal::SIGCONT);
                    }
                    let end = clock::now();
                    self.procs[victim].stops.push((start, end));
                    self.record(kind.label(), start, end, true, false);
                }
            }
            Kind::HolderKill | Kind::LeaderKill => {
                let mut modes = match kind {
                    Kind::HolderKill => self.kind.lock_modes().to_vec(),
                    _ => vec![Mode::Election],
                };
                // A semaphore holder last: a fault soon after a kill excuses the killed
                // holder's permit from the check that it comes back.
                modes.sort_by_key(|&mode| mode == Mode::Semaphore);
                for mode in modes {
                    let prefix = prefix(mode);
                    let victim = match mode {
                        Mode::Semaphore => self.pick_holder_of_a_full_semaphore(prefix).await,
                        _ => self.pick_holder(prefix).await,
                    };
                    let Some((victim, _, _)) = victim else {
                        println!("    (no {prefix} holder to kill)");
                        continue;
                    };
                    let at = clock::now();
                    if let Some(child) = self.procs[victim].child.as_mut() {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                    }
                    self.procs[victim].killed_at = Some(at);
                    self.record(kind.label(), at, at, true, false);
                    self.spawn(mode)?;
                }
            }
            Kind::ServerStop => {
                let start = clock::now();
                self.with_server(|server| server.signal(Signal::SIGSTOP))
                    .await?;
                sleep(beyond_lease).await;
                self.with_server(|server| server.signal(Signal::SIGCONT))
                    .await?;
                self.record(kind.label(), start, clock::now(), false, true);
            }
            Kind::ServerKill => {
                let start = clock::now();
                self.with_server(Server::restart).await?;
                self.record(kind.label(), start, clock::now(), false, true);
            }
            Kind::Block => {
                let block_ms = self.config.renew_deadline_ms + 400;
                let start = clock::now();
                self.fail_point(
                    Bson::String("alwaysOn".into()),
                    doc! {
                        "failCommands": ["findAndModify", "update"],
                        "blockConnection": true,
                        "blockTimeMS": i64::try_from(block_ms).unwrap_or(i64::MAX),
                    },
                )
                .await?;
                sleep(Duration::from_millis(block_ms + 700)).await;
                self.fail_point_off().await?;
                self.record(kind.label(), start, clock::now(), false, false);
            }
            Kind::Close => {
                let start = clock::now();
                self.fail_point(
                    Bson::String("alwaysOn".into()),
                    doc! {
                        "failCommands": ["findAndModify", "update"],
                        "closeConnection": true,
                    },
                )
                .await?;
                sleep(Duration::from_millis(self.config.renew_deadline_ms + 600)).await;
                self.fail_point_off().await?;
                self.record(kind.label(), start, clock::now(), false, false);
            }
            Kind::StateChange => {
                for (i, code) in [91, 11600, 10107].into_iter().enumerate() {
                    if i > 0 {
                        sleep(self.config.recovery()).await;
                    }
                    let start = clock::now();
                    self.fail_point(
                        Bson::String("alwaysOn".into()),
                        doc! {
                            "failCommands": ["findAndModify", "update"],
                            "errorCode": code,
                        },
                    )
                    .await?;
                    sleep(Duration::from_millis(self.config.renew_deadline_ms + 200)).await;
                    self.fail_point_off().await?;
                    self.record(&format!("error-{code}"), start, clock::now(), false, false);
                }
            }
            Kind::AcquireTimeout => {
                // One stalled command at a time from the solo worker (whose lock is free),
                // longer than its acquire timeout: an acquisition gives up while the server
                // still has to apply it. Stalls alternate between outlasting only the
                // caller's timeout and outlasting the runtime's own call timeout (the renew
                // deadline) too.
                let start = clock::now();
                for round in 0..6 {
                    let stall = if round % 2 == 0 {
                        self.config.short_acquire_timeout_ms * 2
                    } else {
                        self.config.renew_deadline_ms + 400
                    };
                    self.fail_point_for(
                        SOLO_APP,
                        doc! { "times": 1 }.into(),
                        doc! {
                            "failCommands": ["findAndModify"],
                            "blockConnection": true,
                            "blockTimeMS": i64::try_from(stall).unwrap_or(i64::MAX),
                        },
                    )
                    .await?;
                    sleep(Duration::from_millis(stall + 100)).await;
                }
                // Then every command stalls for a while: acquisitions sent in the last
                // moments before the stall ends time out in the runtime, whose release is
                // not stalled any more and lands before the acquisition does.
                let stall = self.config.renew_deadline_ms + 400;
                let every_command_blocked = clock::now();
                self.fail_point_for(
                    SOLO_APP,
                    Bson::String("alwaysOn".into()),
                    doc! {
                        "failCommands": ["findAndModify"],
                        "blockConnection": true,
                        "blockTimeMS": i64::try_from(stall).unwrap_or(i64::MAX),
                    },
                )
                .await?;
                sleep(Duration::from_millis(stall)).await;
                self.fail_point_off().await?;
                // That phase blocks releases as well: a block fault of its own, so leases
                // its releases free late are judged like any block's.
                self.record(
                    Kind::Block.label(),
                    every_command_blocked,
                    clock::now(),
                    false,
                    false,
                );
                self.record(kind.label(), start, clock::now(), false, false);
            }
            Kind::Mixed
            | Kind::Semaphore
            | Kind::RwLock
            | Kind::Shared
            | Kind::ArrivalOrder
            | Kind::Fleet
            | Kind::FleetArrivalOrder => {}
        }
        Ok(())
    }

    async fn with_server(
        &self,
        action: impl FnOnce(&mut Server) -> Result<(), String> + Send + 'static,
    ) -> Result<(), String> {
        let server = self.server.clone();
        tokio::task::spawn_blocking(move || match server.lock() {
            Ok(mut server) => action(&mut server),
            Err(poisoned) => action(&mut poisoned.into_inner()),
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// The workers holding a lock (or leading an election) whose name starts with `prefix`
    /// right now, read fresh from the lock collection: (process, lock, token).
    async fn holders(&self, prefix: &str) -> Vec<(usize, String, u64)> {
        let Ok(held) = self.read_locks().await else {
            return Vec::new();
        };
        held.into_iter()
            .filter(|sample| sample.lock.starts_with(prefix))
            .filter_map(|sample| {
                let holder = sample.holder?;
                let process = self.procs.iter().position(|p| {
                    p.killed_at.is_none()
                        && p.child.is_some()
                        && holder.starts_with(&format!("w{}-", p.index))
                })?;
                Some((process, sample.lock, sample.token))
            })
            .collect()
    }

    /// A worker that holds a lock under `prefix`, picked at random; waits up to 5 s for one.
    async fn pick_holder(&self, prefix: &str) -> Option<(usize, String, u64)> {
        self.pick_holder_among(prefix, |_, _| true).await
    }

    /// A worker holding a permit of a semaphore under `prefix` whose every permit is
    /// held, so that the check that its permit comes back applies (it needs a full
    /// semaphore to see one come back); waits up to 5 s for one, then takes any holder.
    async fn pick_holder_of_a_full_semaphore(&self, prefix: &str) -> Option<(usize, String, u64)> {
        let full = self.config.permits as usize;
        let of_full = |holders: &[(usize, String, u64)], (_, lock, _): &(usize, String, u64)| {
            holders.iter().filter(|(_, l, _)| l == lock).count() >= full
        };
        match self.pick_holder_among(prefix, of_full).await {
            Some(victim) => Some(victim),
            None => self.pick_holder(prefix).await,
        }
    }

    /// A worker holding a lock under `prefix` that `eligible` accepts (given every holder
    /// seen at that moment), picked at random; waits up to 5 s for one.
    async fn pick_holder_among(
        &self,
        prefix: &str,
        eligible: impl Fn(&[(usize, String, u64)], &(usize, String, u64)) -> bool,
    ) -> Option<(usize, String, u64)> {
        let started = clock::now();
        while clock::now() - started < 5 * SEC {
            let holders = self.holders(prefix).await;
            let candidates: Vec<_> = holders.iter().filter(|h| eligible(&holders, h)).collect();
            if let Some(&victim) = candidates.choose(&mut rand::rng()) {
                return Some(victim.clone());
            }
            sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// `SIGSTOP`s a worker while it holds a lock under `prefix` (checked after the stop:
    /// holds are short, so a stop that missed is undone at once and tried again) and
    /// returns it and when it was stopped.
    async fn stop_a_holder(&mut self, prefix: &str) -> Result<Option<(usize, u64)>, String> {
        for _ in 0..50 {
            let Some((victim, lock, token)) = self.pick_holder(prefix).await else {
                return Ok(None);
            };
            let pid = self.procs[victim].pid().ok_or("no pid")?;
            let start = clock::now();
            kill(pid, Signal::SIGSTOP).map_err(|e| e.to_string())?;
            let still = self
                .holders(prefix)
                .await
                .iter()
                .any(|(p, l, t)| *p == victim && *l == lock && *t == token);
            if still {
                return Ok(Some((victim, start)));
            }
            let _ = kill(pid, Signal::SIGCONT);
            // A short stop all the same: the checks must know about it.
            self.procs[victim].stops.push((start, clock::now()));
            sleep(Duration::from_millis(30)).await;
        }
        Ok(None)
    }

    /// The live worker whose manager runs as `holder`.
    fn process_of(&self, holder: &str) -> Option<usize> {
        self.procs.iter().position(|p| {
            p.killed_at.is_none()
                && p.child.is_some()
                && holder.starts_with(&format!("w{}-", p.index))
        })
    }

    /// The plain locks' lines right now, read fresh: which workers hold a lock, and per
    /// lock its holder and its live places (worker, how long its oldest task has waited),
    /// earliest first. In a fleet, the default mode's listings too, read from the
    /// documents (a record's queue shows arrival order's places only): the earliest is
    /// whom the next release wakes.
    async fn line_view(&self) -> Result<LineView, String> {
        let locks = self.lock_store().list().await.map_err(|e| e.to_string())?;
        let mut listed = if self.kind.fleet() {
            self.listings().await?
        } else {
            BTreeMap::new()
        };
        let mut view = LineView::default();
        for (lock, record) in locks {
            if !lock.starts_with(LOCK_PREFIX) {
                continue;
            }
            let holder = record.holder().map(|h| h.as_str().to_owned());
            if let Some(process) = holder.as_deref().and_then(|h| self.process_of(h)) {
                view.holding.push(process);
            }
            let places = match listed.remove(&lock) {
                Some(places) => places
                    .into_iter()
                    .map(|(manager, waited)| (self.process_of(&manager), manager, waited))
                    .collect(),
                None => record
                    .queue
                    .iter()
                    .map(|place| {
                        (
                            self.process_of(place.holder.as_str()),
                            place.holder.as_str().to_owned(),
                            place.waiting_for,
                        )
                    })
                    .collect(),
            };
            view.lines.push((lock, holder, places));
        }
        Ok(view)
    }

    /// Per lock document, its live places of either sort (arrival order's, and the default
    /// mode's listings): (manager, how long it has waited), earliest arrival first. The
    /// server runs on this machine, so its clock is the one `DateTime::now` reads.
    async fn listings(&self) -> Result<BTreeMap<String, Vec<(String, Duration)>>, String> {
        let collection = self
            .admin
            .database(DATABASE)
            .collection::<Document>(&self.locks_collection);
        let mut cursor = collection.find(doc! {}).await.map_err(|e| e.to_string())?;
        let now = mongodb::bson::DateTime::now().timestamp_millis();
        let mut lines = BTreeMap::new();
        while cursor.advance().await.map_err(|e| e.to_string())? {
            let document: Document = cursor.deserialize_current().map_err(|e| e.to_string())?;
            let Ok(lock) = document.get_str("_id") else {
                continue;
            };
            let mut places: Vec<(i64, String)> = document
                .get_array("line")
                .into_iter()
                .flatten()
                .filter_map(Bson::as_document)
                .filter_map(|place| {
                    let until = place.get_datetime("until").ok()?.timestamp_millis();
                    let arrival = place.get_datetime("arrival").ok()?.timestamp_millis();
                    let holder = place.get_str("holder").ok()?;
                    (until > now).then(|| (arrival, holder.to_owned()))
                })
                .collect();
            places.sort();
            let waited = |arrival: i64| {
                Duration::from_millis(u64::try_from(now - arrival).unwrap_or_default())
            };
            lines.insert(
                lock.to_owned(),
                places
                    .into_iter()
                    .map(|(arrival, holder)| (holder, waited(arrival)))
                    .collect(),
            );
        }
        Ok(lines)
    }

    /// A worker in some lock's line that holds no lock, picked at random, preferring one at
    /// the head of a line with others behind it — the earliest place of a worker holding
    /// nothing: its place is what holds them back, and whom the next release goes to; waits
    /// up to 5 s for one. Returns it and a description of what it was seen waiting for.
    async fn pick_waiter(&self) -> Option<(usize, String)> {
        let started = clock::now();
        while clock::now() - started < 5 * SEC {
            if let Ok(view) = self.line_view().await {
                let mut candidates: Vec<(bool, usize, String)> = Vec::new();
                for (lock, holder, places) in &view.lines {
                    let mut ahead = 0;
                    for (position, (process, _, waited)) in places.iter().enumerate() {
                        // Places of killed workers and of workers holding a lock are not
                        // picked, and the next one is the head.
                        let Some(process) = process.filter(|p| !view.holding.contains(p)) else {
                            ahead += 1;
                            continue;
                        };
                        let head = position == ahead && (places.len() > 1 || holder.is_some());
                        candidates.push((
                            head,
                            process,
                            format!(
                                "place {} of {} in the line of {lock} (oldest task waiting {} ms), held by {}",
                                position + 1,
                                places.len(),
                                waited.as_millis(),
                                holder.as_deref().unwrap_or("nobody")
                            ),
                        ));
                    }
                }
                let best = candidates.iter().any(|(head, ..)| *head);
                candidates.retain(|(head, ..)| *head == best);
                if let Some((_, process, what)) = candidates.choose(&mut rand::rng()) {
                    return Some((*process, what.clone()));
                }
            }
            sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// The arrival-order scenario's fault: a worker waiting in a lock's line and holding
    /// nothing is `SIGSTOP`ped — checked 150 ms after the stop, undone and tried again if it
    /// turns out to hold a lock by then (an attempt sent just before the stop landed) — and then either left stopped beyond a place's
    /// life and `SIGCONT`ed, or `SIGKILL`ed while stopped (a replacement starts).
    async fn inject_waiter_fault(&mut self, kill_it: bool) -> Result<(), String> {
        let label = if kill_it { WAITER_KILL } else { WAITER_STOP };
        for _ in 0..50 {
            let Some((victim, what)) = self.pick_waiter().await else {
                println!("    (no waiter in line for {label})");
                return Ok(());
            };
            let pid = self.procs[victim].pid().ok_or("no pid")?;
            let start = clock::now();
            kill(pid, Signal::SIGSTOP).map_err(|e| e.to_string())?;
            // An attempt the worker sent just before the stop may still be on its way to
            // the server, or in its queue: give it time to land before looking.
            sleep(Duration::from_millis(150)).await;
            let after = self.line_view().await.unwrap_or_default();
            if after.holding.contains(&victim) {
                println!(
                    "    ({label}: w{} was granted a lock as it stopped; picking again)",
                    self.procs[victim].index
                );
                let _ = kill(pid, Signal::SIGCONT);
                // A short stop all the same: the checks must know about it.
                self.procs[victim].stops.push((start, clock::now()));
                sleep(Duration::from_millis(30)).await;
                continue;
            }
            let still = after
                .lines
                .iter()
                .filter(|(_, _, places)| places.iter().any(|(p, ..)| *p == Some(victim)))
                .map(|(lock, ..)| lock.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            println!(
                "    {label}: w{} ({what}; in line after the stop: {})",
                self.procs[victim].index,
                if still.is_empty() { "-" } else { &still }
            );
            if kill_it {
                if let Some(child) = self.procs[victim].child.as_mut() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                // Dead from the stop on: it sent nothing after it.
                self.procs[victim].killed_at = Some(start);
                self.record(label, start, start, true, false);
                self.spawn(Mode::Lock)?;
            } else {
                let stop_for = Duration::from_millis(self.waiter_stop_ms());
                sleep(stop_for).await;
                let _ = kill(pid, Signal::SIGCONT);
                let end = clock::now();
                self.procs[victim].stops.push((start, end));
                self.record(label, start, end, true, false);
            }
            return Ok(());
        }
        println!("    (every waiter picked for {label} held a lock by the time it stopped)");
        Ok(())
    }

    /// How long a waiter fault's victim stays stopped: beyond its place's life (five times,
    /// so that the line is seen going on without it), and in the default mode beyond its
    /// listing's, so that every release in between wakes the stopped manager first.
    fn waiter_stop_ms(&self) -> u64 {
        let place = (self.config.place_life_ms() * 5).max(1000);
        if self.kind.in_arrival_order() {
            place
        } else {
            place.max(self.config.listing_life_ms() + 1000)
        }
    }

    async fn fail_point(&self, mode: Bson, data: Document) -> Result<(), String> {
        self.fail_point_for(WORKER_APP, mode, data).await
    }

    async fn fail_point_for(
        &self,
        app: &str,
        mode: Bson,
        mut data: Document,
    ) -> Result<(), String> {
        data.insert("appName", app);
        self.admin
            .database("admin")
            .run_command(doc! { "configureFailPoint": "failCommand", "mode": mode, "data": data })
            .await
            .map(|_| ())
            .map_err(|e| format!("configureFailPoint failed: {e}"))
    }

    async fn fail_point_off(&self) -> Result<(), String> {
        self.admin
            .database("admin")
            .run_command(doc! { "configureFailPoint": "failCommand", "mode": "off" })
            .await
            .map(|_| ())
            .map_err(|e| format!("configureFailPoint off failed: {e}"))
    }
}

/// What [`Run::line_view`] read: the workers holding a plain lock, and per lock (name,
/// holder, places: worker, holder id, how long its oldest task has waited).
#[derive(Debug, Default)]
struct LineView {
    holding: Vec<usize>,
    lines: Vec<(String, Option<String>, Vec<Place>)>,
}

/// A place in a lock's line: the worker (if live), its holder id, how long its oldest task
/// has waited.
type Place = (Option<usize>, String, Duration);

/// A lock's line of waiting managers as the monitor read it at `at`.
fn line_sample(at: u64, lock: &str, record: &LockRecord) -> LineSample {
    LineSample {
        at,
        lock: lock.to_owned(),
        holder: record.holder().map(|h| h.as_str().to_owned()),
        places: record
            .queue
            .iter()
            .map(|place| {
                (
                    place.holder.as_str().to_owned(),
                    u64::try_from(place.waiting_for.as_nanos()).unwrap_or(u64::MAX),
                )
            })
            .collect(),
    }
}

/// What one lock record shows: one sample per holding (a semaphore's permits, a
/// reader/writer lock's readers), or the free lock and its last token.
fn samples_of(at: u64, lock: String, record: LockRecord) -> Vec<Sample> {
    if record.holders.is_empty() {
        return vec![Sample {
            at,
            lock,
            holder: record.holder().map(|h| h.as_str().to_owned()),
            token: record.token,
        }];
    }
    record
        .holders
        .into_iter()
        .map(|holding| Sample {
            at,
            lock: lock.clone(),
            holder: Some(holding.holder.as_str().to_owned()),
            token: holding.token,
        })
        .collect()
}

/// Where the test server binary lives unless `--server-binary` says otherwise.
pub(crate) fn default_server_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/secantus/bin/secantusd-rs")
}
