//! The performance scenarios S1–S6 of mongolock, each beside its baselines measured in the
//! same run, issue 17's rows P1–P4 on the semaphore, reader/writer lock and multi-lock
//! (each judged against the mutex measured in the same run), and issue 56's fleets S7–S9
//! (P processes on one lock, on a name per pair, waiting for one holder), printed as markdown
//! tables.
//!
//! ```text
//! scripts/bench.sh            # full run: starts the test server, criterion benches + this
//! scripts/bench.sh --quick    # one short repetition of everything (a few minutes)
//! cargo bench -p mongolock-benches --bench scenarios -- [--quick] [--only=s1,s3,p1] [--out=FILE]
//!     [--charts=DIR]                                                # MONGODB_URI set
//! ```
//!
//! Under `cargo test` (no `--bench` argument) it runs a tiny smoke version of every scenario,
//! so the bench cannot rot unnoticed.
//!
//! Every measurement runs in a fresh child process of this binary (see `child.rs`), capped in
//! time; a run that overstays its cap is reported as a timeout, which is a result.

mod chart;
mod child;
mod contention;
mod explain;
mod failover;
mod feeds;
mod fleet;
mod fleet_worker;
mod job;
mod latency;
mod many;
mod plan;
mod primitives;
mod report;
mod report_fleet;
mod report_primitives;
mod report_table;
mod runner;
mod shared_contention;
#[path = "../support/mod.rs"]
mod support;

use std::io::Write as _;
use std::process::ExitCode;

use child::Args;
use job::Mode;
use report_table::Results;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|arg| arg == "--child") {
        return run_child(&args[at + 1..]);
    }
    let mode = if args.iter().any(|arg| arg == "--quick") {
        Mode::Quick
    } else if args.iter().any(|arg| arg == "--bench" || arg == "--full") {
        Mode::Full
    } else {
        Mode::Smoke
    };
    let only: Option<Vec<String>> = args.iter().find_map(|arg| {
        arg.strip_prefix("--only=")
            .map(|list| list.split(',').map(str::to_owned).collect())
    });
    let out = args
        .iter()
        .find_map(|arg| arg.strip_prefix("--out=").map(str::to_owned));
    let charts = args
        .iter()
        .find_map(|arg| arg.strip_prefix("--charts=").map(str::to_owned));
    // Fail early, naming the fix, rather than once per child.
    let _ = support::server::uri();

    let jobs: Vec<job::Job> = plan::jobs(mode)
        .into_iter()
        .filter(|job| {
            only.as_ref()
                .is_none_or(|only| only.iter().any(|group| group == job.group))
        })
        .collect();
    eprintln!("scenarios: {mode:?} mode, {} measurements", jobs.len());
    let mut results = Results::new();
    // Repetitions interleave within a scenario group, so drift hits every system alike.
    let mut groups: Vec<&str> = jobs.iter().map(|job| job.group).collect();
    groups.dedup();
    let mut failed_setup = false;
    for group in groups {
        let group_jobs: Vec<&job::Job> = jobs.iter().filter(|job| job.group == group).collect();
        let reps = group_jobs.iter().map(|job| job.reps).max().unwrap_or(0);
        for rep in 0..reps {
            for job in &group_jobs {
                let earlier = results.entry(job.key.clone()).or_default();
                // A run that timed out (as a whole, or a phase of it) is not repeated: the
                // next would too, and time is capped.
                if rep >= job.reps || earlier.iter().any(runner::Run::timed_out) {
                    continue;
                }
                eprint!("scenarios: {} (run {}/{}) … ", job.key, rep + 1, job.reps);
                let _ = std::io::stderr().flush();
                let run = runner::run_child(&job.args, job.cap);
                match &run.failure {
                    None => eprintln!("{:.1} s", run.took.as_secs_f64()),
                    Some(failure) => {
                        eprintln!("{failure}");
                        failed_setup |= !failure.starts_with("timeout");
                    }
                }
                earlier.push(run);
            }
        }
    }
    let report = report::render(&results);
    println!("{report}");
    if let Some(path) = out
        && let Err(e) = std::fs::write(&path, &report)
    {
        eprintln!("scenarios: cannot write {path}: {e}");
        return ExitCode::FAILURE;
    }
    if let (Some(dir), Some(chart)) = (charts, report_fleet::chart(&results)) {
        let path = std::path::Path::new(&dir).join("fleet.svg");
        if let Err(e) = std::fs::write(&path, chart) {
            eprintln!("scenarios: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!(
            "scenarios: chart of the fleets written to {}",
            path.display()
        );
    }
    // A timeout is a figure; a measurement that errored is a broken bench.
    if failed_setup {
        eprintln!("scenarios: some measurements failed (see above)");
        return ExitCode::FAILURE;
    }
    if mode == Mode::Smoke {
        println!("scenarios smoke: {} passed, 0 failed", jobs.len());
    }
    ExitCode::SUCCESS
}

fn run_child(args: &[String]) -> ExitCode {
    let Some((name, rest)) = args.split_first() else {
        eprintln!("--child needs a scenario name");
        return ExitCode::FAILURE;
    };
    let args = Args::parse(rest);
    // `RUST_LOG=mongolock=debug` shows the library's events, for looking into a run.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = support::runtime();
    let outcome = match name.as_str() {
        "s1" => runtime.block_on(latency::s1(&args)),
        "leftovers" => runtime.block_on(latency::leftovers(&args)),
        // S2 compares with a current-thread runtime, as an actor round trip is cheapest there.
        "s2" => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(current) => current.block_on(latency::s2(&args)),
            Err(e) => Err(format!("runtime: {e}")),
        },
        "s3" => runtime.block_on(contention::s3(&args)),
        "s4" => runtime.block_on(latency::s4(&args)),
        "s5" => runtime.block_on(many::s5(&args)),
        "s6" => runtime.block_on(failover::s6(&args)),
        "s6-candidate" => runtime.block_on(failover::candidate(&args)),
        "p1" => runtime.block_on(primitives::p1(&args)),
        "p2" => runtime.block_on(shared_contention::p2(&args)),
        "p3" => runtime.block_on(shared_contention::p3(&args)),
        "p4" => runtime.block_on(primitives::p4(&args)),
        "explain" => runtime.block_on(explain::explain_scenario(&args)),
        "feeds" => runtime.block_on(feeds::feeds(&args)),
        "s7" => runtime.block_on(fleet::s7(&args)),
        "s8" => runtime.block_on(fleet::s8(&args)),
        "s9" => runtime.block_on(fleet::s9(&args)),
        "fleet-worker" => runtime.block_on(fleet_worker::worker(&args)),
        other => Err(format!("unknown scenario {other:?}")),
    };
    // Leave at once: a struggling runtime's leftover tasks must not hold the process.
    let code = match outcome {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{name}: {e}");
            1
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}
