//! Many workers contending for a few locks, with metrics served for Prometheus.
//!
//! Workers spread over several managers (processes, in effect) take short turns on a few
//! hot locks; one long job holds its own lock for seconds at a time and an "operator"
//! deletes that lock's record now and then, so losses show up too. A line per second
//! reports the traffic; the full picture is on `/metrics` for Prometheus and the Grafana
//! dashboard in `examples/grafana/`.
//!
//! ```text
//! cargo run --example contention --features prometheus -- --metrics-port 9464 --duration 120
//! cargo run --example contention --features prometheus -- --mongodb-uri mongodb://127.0.0.1:27017
//! ```

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use mongolock::{LockError, LockManager, LockName, LockOptions};
use rand::Rng;
use tokio::time::{Instant, sleep};

use support::{Backend, at};

/// The lock held for seconds at a time, and deleted by the "operator".
const LONG_JOB: &str = "long-job";

#[derive(Parser)]
#[command(about = "Workers contending for locks, with Prometheus metrics")]
struct Args {
    /// Use this MongoDB server instead of the embedded store.
    #[arg(long)]
    mongodb_uri: Option<String>,
    /// Managers (processes, in effect) the workers are spread over.
    #[arg(long, default_value_t = 3)]
    managers: usize,
    /// Workers taking short turns on the hot locks.
    #[arg(long, default_value_t = 24)]
    workers: usize,
    /// How many hot locks they contend for.
    #[arg(long, default_value_t = 4)]
    locks: usize,
    /// Run time in seconds.
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// Serve Prometheus metrics on this port (0: any free port).
    #[arg(long, default_value_t = 9464)]
    metrics_port: u16,
    /// Delete the long job's lock record every this many seconds (0: never).
    #[arg(long, default_value_t = 10)]
    inject_loss_every: u64,
}

#[derive(Default)]
struct Stats {
    acquired: AtomicU64,
    lost: AtomicU64,
    injected: AtomicU64,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("contention: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let backend = Backend::new(args.mongodb_uri.clone());
    let port = support::serve_metrics(args.metrics_port)?;
    println!(
        "{} workers over {} managers contend for {} locks on {} for {} s",
        args.workers,
        args.managers,
        args.locks,
        backend.describe(),
        args.duration
    );
    println!("metrics: http://127.0.0.1:{port}/metrics\n");

    // Names are few here, so every lock is labelled; a large service would use an allow-list.
    let options = LockOptions::default()
        .with_lease_duration(Duration::from_secs(3))
        .with_retry_backoff(Duration::from_millis(5), Duration::from_millis(200))
        .with_adaptive_backoff(true)
        .with_lock_name_label(true);
    let mut managers = Vec::new();
    for _ in 0..args.managers.max(1) {
        let store = backend.connect().await?;
        let manager = LockManager::start(store, options.clone())
            .await
            .map_err(|e| format!("cannot start a manager: {e}"))?;
        managers.push(manager);
    }

    let start = Instant::now();
    let until = start + Duration::from_secs(args.duration);
    let stats = Arc::new(Stats::default());
    let mut tasks = Vec::new();
    for worker in 0..args.workers {
        let manager = managers[worker % managers.len()].clone();
        let name = format!("orders-{}", worker % args.locks.max(1));
        tasks.push(tokio::spawn(short_turns(
            manager,
            name,
            until,
            stats.clone(),
        )));
    }
    for manager in &managers {
        tasks.push(tokio::spawn(long_job(
            manager.clone(),
            until,
            stats.clone(),
        )));
    }
    if args.inject_loss_every > 0 {
        tasks.push(tokio::spawn(operator(
            backend.clone(),
            Duration::from_secs(args.inject_loss_every),
            until,
            stats.clone(),
        )));
    }

    let mut last = 0;
    while Instant::now() < until {
        sleep(Duration::from_secs(1)).await;
        let acquired = stats.acquired.load(Ordering::Relaxed);
        println!(
            "{} {:>5} acquisitions/s, {:>7} total, {} losses seen by holders, {} records deleted",
            at(start),
            acquired - last,
            acquired,
            stats.lost.load(Ordering::Relaxed),
            stats.injected.load(Ordering::Relaxed),
        );
        last = acquired;
    }
    for task in tasks {
        let _ = task.await;
    }
    for manager in &managers {
        manager.shutdown().await;
    }
    println!(
        "\ndone: {} acquisitions, {} losses; metrics were served on port {port}",
        stats.acquired.load(Ordering::Relaxed),
        stats.lost.load(Ordering::Relaxed)
    );
    Ok(())
}

/// Takes short turns (5–40 ms) on a hot lock until `until`.
async fn short_turns(manager: LockManager, name: String, until: Instant, stats: Arc<Stats>) {
    let Ok(lock) = manager.lock(&name) else {
        return;
    };
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let guard = match lock.acquire_timeout(left).await {
            Ok(guard) => guard,
            Err(LockError::Timeout(_)) => return,
            Err(error) => {
                eprintln!("{name}: {error}");
                return;
            }
        };
        stats.acquired.fetch_add(1, Ordering::Relaxed);
        let (hold, think) = {
            let mut rng = rand::rng();
            (rng.random_range(5..40), rng.random_range(0..20))
        };
        let hold = Duration::from_millis(hold);
        tokio::select! {
            _ = sleep(hold) => {}
            _ = guard.lost() => { stats.lost.fetch_add(1, Ordering::Relaxed); }
        }
        if let Err(LockError::Lost(_)) = guard.release().await {
            stats.lost.fetch_add(1, Ordering::Relaxed);
        }
        sleep(Duration::from_millis(think)).await;
    }
}

/// Holds the long job's lock for 4 s at a time, stopping early if it is lost.
async fn long_job(manager: LockManager, until: Instant, stats: Arc<Stats>) {
    let Ok(lock) = manager.lock(LONG_JOB) else {
        return;
    };
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(guard) = lock.acquire_timeout(left).await else {
            return;
        };
        stats.acquired.fetch_add(1, Ordering::Relaxed);
        tokio::select! {
            _ = sleep(Duration::from_secs(4)) => { let _ = guard.release().await; }
            reason = guard.lost() => {
                stats.lost.fetch_add(1, Ordering::Relaxed);
                println!("           long job lost its lock (token {}): {reason}", guard.token());
            }
        }
    }
}

/// Deletes the long job's record periodically, as an operator or a TTL monitor might.
async fn operator(backend: Backend, every: Duration, until: Instant, stats: Arc<Stats>) {
    let Ok(name) = LockName::new(LONG_JOB) else {
        return;
    };
    while Instant::now() + every < until {
        sleep(every).await;
        match backend.delete_record(&name).await {
            Ok(()) => {
                stats.injected.fetch_add(1, Ordering::Relaxed);
                println!("           operator deleted the '{LONG_JOB}' record");
            }
            Err(error) => eprintln!("operator: {error}"),
        }
    }
}
