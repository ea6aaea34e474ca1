//! The fault checker: P worker processes × T tasks on L locks (and elections) against a
//! SecantusDB server this program starts, stops, kills and restarts itself, with holders
//! paused and killed and `failCommand` fail points; afterwards it checks what every process
//! recorded (mutual exclusion, token order, fenced writes, progress, no orphaned leases, no
//! hang) and exits non-zero on any violation. The same faults run on semaphores (never
//! more holders than permits, a killed holder's permit back within a lease) and on
//! reader/writer locks (a writer alone, readers sharing, neither side starved, a writer's
//! token above the readers' it excluded): side by side in the short configuration, one
//! scenario each in the long one. A last one runs plain locks in
//! arrival order (`Fairness::ArrivalOrder`) while waiters, not holders, are paused and killed:
//! entries first come, first served across processes, and a dead or paused waiter's place
//! holding the line back no longer than its life. The last two are fleets, many processes on
//! one lock, in the default mode and in arrival order, whose faults strike the waiter the
//! next release goes to: the turn it was given passes on within a bound.
//!
//! ```text
//! cargo run --example fault_check --features history -- --short    # CI: about 6 minutes
//! scripts/fault-check.sh                                          # the long configuration
//! ```
//!
//! Unix only (signals, `CLOCK_MONOTONIC` shared by processes).

#[cfg(unix)]
mod checker;
#[cfg(unix)]
mod clock;
#[cfg(unix)]
mod events;
#[cfg(unix)]
mod scenario;
#[cfg(unix)]
mod server;
#[cfg(unix)]
mod settings;
#[cfg(unix)]
mod worker;

#[cfg(unix)]
mod cli {
    use std::path::PathBuf;
    use std::process::ExitCode;
    use std::time::Duration;

    use clap::{Parser, Subcommand};

    use crate::scenario::{self, Config, Kind};
    use crate::settings::WorkerArgs;

    #[derive(Parser, Debug)]
    #[command(about = "Multi-process fault checker for mongolock")]
    struct Cli {
        #[command(subcommand)]
        command: Option<Command>,
        /// The CI configuration (the default): every fault kind once on its own, then all of
        /// them once more in random order, mixed, then once on semaphores and reader/writer
        /// locks side by side, then a waiter stop and kill in arrival order, then the same
        /// on a fleet of 10 processes on one lock, in the default mode and in arrival order
        /// (about 6 minutes, 45 s of it the fleets).
        #[arg(long, conflicts_with = "long")]
        short: bool,
        /// The long configuration: 6 workers x 4 tasks on 3 locks, every fault kind 5 times on
        /// its own, then 10 minutes of mixed faults, then every kind 5 times each on
        /// semaphores and on reader/writer locks, then 5 waiter stops and kills in arrival
        /// order, then as many on fleets of 12 processes (about 39 minutes).
        #[arg(long)]
        long: bool,
        /// Worker processes (lock, semaphore or reader/writer mode; elections get as many,
        /// mixed, semaphore and rw-lock add half as many candidates).
        #[arg(long)]
        processes: Option<u32>,
        /// Tasks per lock worker.
        #[arg(long)]
        tasks: Option<u32>,
        /// Worker processes of the fleet scenarios (one task each, on one lock).
        #[arg(long)]
        fleet_processes: Option<u32>,
        /// Locks (and elections).
        #[arg(long)]
        locks: Option<u32>,
        /// Faults per single-kind scenario (and of each kind in semaphore and rw-lock; of
        /// waiter stops and of waiter kills in arrival-order).
        #[arg(long)]
        repeats: Option<u32>,
        /// Seconds of the mixed scenario (it injects every kind at least once however short).
        #[arg(long)]
        mixed_secs: Option<u64>,
        /// Only these scenarios (repeatable); default: every scenario of the configuration.
        #[arg(long = "scenario", value_enum)]
        scenarios: Vec<Kind>,
        /// Where the server's data and the workers' logs go (default: a new temp dir).
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// The secantusd-rs binary (default: .tools/secantus/bin/secantusd-rs).
        #[arg(long)]
        server_binary: Option<PathBuf>,
        /// Keep the work directory even when no violation was found.
        #[arg(long)]
        keep: bool,
    }

    #[derive(Subcommand, Debug)]
    enum Command {
        /// (internal) one worker process, started by the orchestrator.
        Worker(WorkerArgs),
    }

    pub(crate) fn main() -> ExitCode {
        let cli = Cli::parse();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("fault_check: cannot start a runtime: {error}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(Command::Worker(args)) = cli.command {
            return runtime.block_on(crate::worker::run(args));
        }
        let config = config(&cli);
        let keep = cli.keep;
        let started = std::time::Instant::now();
        match runtime.block_on(scenario::run_all(&config)) {
            Ok(totals) => {
                summary(&config, &totals, started.elapsed());
                if totals.violations.is_empty() {
                    if !keep {
                        let _ = std::fs::remove_dir_all(&config.workdir);
                    }
                    ExitCode::SUCCESS
                } else {
                    println!("logs kept in {:?}", config.workdir);
                    ExitCode::FAILURE
                }
            }
            Err(error) => {
                eprintln!(
                    "fault_check: the run failed: {error} (logs in {:?})",
                    config.workdir
                );
                ExitCode::FAILURE
            }
        }
    }

    fn config(cli: &Cli) -> Config {
        let long = cli.long;
        let workdir = cli.workdir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!(
                "mongolock-fault-check-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ))
        });
        Config {
            server_binary: cli
                .server_binary
                .clone()
                .unwrap_or_else(scenario::default_server_binary),
            workdir,
            processes: cli.processes.unwrap_or(if long { 6 } else { 4 }),
            tasks: cli.tasks.unwrap_or(if long { 4 } else { 3 }),
            locks: cli.locks.unwrap_or(if long { 3 } else { 2 }),
            fleet_processes: cli.fleet_processes.unwrap_or(if long { 12 } else { 10 }),
            fleet_hold_max_ms: 80,
            fleet_acquire_timeout_ms: 10_000,
            fleet_idle_max_ms: 300,
            expiry_ms: 1500,
            cadence_ms: 300,
            renew_deadline_ms: 900,
            backoff_min_ms: 10,
            backoff_max_ms: 100,
            acquire_timeout_ms: 2000,
            short_acquire_timeout_ms: 300,
            hold_min_ms: 50,
            hold_max_ms: 250,
            write_every_ms: 20,
            warmup: Duration::from_secs(2),
            repeats: cli.repeats.unwrap_or(if long { 5 } else { 1 }),
            mixed: Duration::from_secs(cli.mixed_secs.unwrap_or(if long { 600 } else { 30 })),
            // Store-call latency of debug builds on a busy machine, plus the driver's
            // 500 ms heartbeat after state-change errors.
            slack_ms: 1500,
            orphan_bound_ms: 1000,
            permits: 3,
            write_percent: 30,
            quiet: Duration::from_secs(6),
            scenarios: if !cli.scenarios.is_empty() {
                cli.scenarios.clone()
            } else if long {
                Kind::ALL.to_vec()
            } else {
                Kind::short()
            },
        }
    }

    fn summary(config: &Config, totals: &scenario::Totals, took: Duration) {
        println!();
        println!("fault_check summary ({:.0} s)", took.as_secs_f64());
        println!(
            "  configuration: {} lock workers x {} tasks on {} locks (+ election candidates), lease {} ms, renew deadline {} ms, cadence {} ms",
            config.processes,
            config.tasks,
            config.locks,
            config.expiry_ms,
            config.renew_deadline_ms,
            config.cadence_ms
        );
        println!("  acquisitions checked: {}", totals.acquisitions);
        println!("  acquire timeouts: {}", totals.acquire_timeouts);
        println!(
            "  faults by kind: {}",
            totals
                .faults
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  fenced writes: {} sent, {} refused as stale ({} of them sent after a newer holder's write was acknowledged)",
            totals.writes, totals.fenced, totals.superseded_rejected
        );
        println!(
            "  overlaps involving a SIGSTOPped holder (allowed, fenced): {}",
            totals.paused_overlaps
        );
        println!(
            "  smallest gap between a holder told of its loss and the next holder's entry: {} (over {} such hand-overs)",
            totals
                .min_loss_gap
                .map_or("-".into(), |gap| format!("{:.1} ms", gap as f64 / 1e6)),
            totals.handovers_after_loss
        );
        println!(
            "  slowest recovery by fault kind: {}",
            totals
                .recovery
                .iter()
                .map(|(kind, ns)| format!("{kind} {:.0} ms", *ns as f64 / 1e6))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some((span, what)) = &totals.max_unowned {
            println!(
                "  longest lease seen with no holder (bound {} ms): {:.0} ms — {what}",
                config.orphan_bound_ms,
                *span as f64 / 1e6
            );
        }
        if let Some(seen) = totals.killed_lease_seen {
            println!(
                "  latest a SIGKILLed holder's lease was still listed after the kill: {:.0} ms (lease {} ms)",
                seen as f64 / 1e6,
                config.expiry_ms
            );
        }
        let shared = &totals.shared;
        if shared.permits + shared.reads + shared.writes > 0 {
            println!(
                "  semaphores ({} permits) and reader/writer locks: {}",
                config.permits,
                scenario::describe_shared(shared)
            );
        }
        if let Some(arrival) = &totals.arrival {
            println!("  {}", scenario::describe_arrival(arrival));
        }
        for (kind, fleet) in &totals.fleets {
            println!("  {}", scenario::describe_fleet(*kind, fleet));
        }
        println!("  violations: {}", totals.violations.len());
        for violation in &totals.violations {
            println!("    {violation}");
        }
    }
}

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    cli::main()
}

#[cfg(not(unix))]
fn main() {
    eprintln!("fault_check needs a Unix system (signals and a shared monotonic clock)");
}
