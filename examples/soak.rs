//! Soak test: minutes of mixed load on two managers, reporting whether live lock actors,
//! Tokio tasks and resident memory stay flat.
//!
//! The load: blocking acquisitions, `try_acquire`, short timeouts and dropped (cancelled)
//! acquisitions on a few hot locks contended by both managers; a churn of short-lived names
//! (actors created and stopped when idle); elections campaigned and resigned; background
//! locks started and stopped; and, every 20 s, the second manager's store hanging for two
//! seconds so that its holders lose their locks. Every `--every` seconds a line reports live
//! actors (`LockManager::active_locks`), alive Tokio tasks and resident memory; at the end the
//! load stops and the figures must fall back (actors to 0, tasks to the baseline).
//!
//! ```text
//! scripts/soak.sh                     # 10 minutes against a throw-away test server
//! cargo run --example soak --features testing -- --minutes 1 --mongodb-uri mongodb://127.0.0.1:27017
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use mongolock::testing::FaultyStore;
use mongolock::{
    ElectionOptions, LockError, LockManager, LockOptions, MongoStore, store::LockStore,
};
use rand::Rng;
use tokio::time::sleep;

#[derive(Parser)]
#[command(about = "Minutes of mixed load; live actors, tasks and memory must stay flat")]
struct Args {
    /// The MongoDB server (without it: the embedded memory store).
    #[arg(long)]
    mongodb_uri: Option<String>,
    /// How long the load runs.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Seconds between two report lines.
    #[arg(long, default_value_t = 30)]
    every: u64,
    /// Worker tasks per manager.
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Only these operation kinds (0 acquire, 1 `try_acquire`, 2 short timeout, 3 cancelled
    /// acquire, 4 name churn, 5 background lock), to narrow down a leak; default all.
    #[arg(long = "only")]
    only: Vec<u32>,
    /// Elections per manager.
    #[arg(long, default_value_t = 3)]
    elections: usize,
    /// No store outages on the second manager.
    #[arg(long)]
    no_outages: bool,
}

#[derive(Default)]
struct Counters {
    acquired: AtomicU64,
    timeouts: AtomicU64,
    cancelled: AtomicU64,
    lost: AtomicU64,
    terms: AtomicU64,
    errors: AtomicU64,
}

fn options() -> LockOptions {
    LockOptions::default()
        .with_lease_duration(Duration::from_secs(3))
        .with_renew_interval(Duration::from_millis(500))
        .with_renew_deadline(Duration::from_millis(1800))
        .with_retry_backoff(Duration::from_millis(10), Duration::from_millis(200))
}

/// How long idle per-name actors linger: short, so the soak sees them come and go.
const IDLE_ACTOR_TIMEOUT: Duration = Duration::from_secs(2);

/// A manager with the soak's options.
async fn manager(store: impl LockStore) -> Result<LockManager, LockError> {
    LockManager::builder(store)
        .with_default_lock_options(options())
        .with_idle_actor_timeout(IDLE_ACTOR_TIMEOUT)
        .start()
        .await
}

/// Resident memory in KiB (Linux; 0 elsewhere).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix("VmRSS:")
                    .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

async fn store(uri: Option<&str>, collection: &str) -> Result<Arc<dyn LockStore>, String> {
    match uri {
        None => Ok(Arc::new(mongolock::MemoryStore::new())),
        Some(uri) => {
            let client = mongodb::Client::with_uri_str(uri)
                .await
                .map_err(|e| e.to_string())?;
            let store = MongoStore::builder(client.database("mongolock_soak"))
                .with_collection(collection)
                .build()
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
    }
}

/// One worker's loop: a random kind of operation at a time.
async fn worker(
    manager: LockManager,
    only: Arc<Vec<u32>>,
    counters: Arc<Counters>,
    running: Arc<AtomicBool>,
) {
    while running.load(Ordering::Relaxed) {
        // Drawn up front: the thread-local generator must not live across an await.
        let (kind, hot, churn, hold, wait) = {
            let mut rng = rand::rng();
            (
                if only.is_empty() {
                    rng.random_range(0..6_u32)
                } else {
                    only[rng.random_range(0..only.len())]
                },
                format!("hot-{}", rng.random_range(0..4)),
                format!("churn-{}", rng.random_range(0..5000)),
                Duration::from_millis(rng.random_range(1..50)),
                Duration::from_millis(rng.random_range(0..30)),
            )
        };
        let outcome = match kind {
            // Blocking acquisition of a hot lock, held briefly, watching for loss.
            0 => match manager.lock(&hot) {
                Ok(lock) => match lock.acquire_timeout(Duration::from_secs(5)).await {
                    Ok(guard) => {
                        counters.acquired.fetch_add(1, Ordering::Relaxed);
                        tokio::select! {
                            _ = guard.lost() => { counters.lost.fetch_add(1, Ordering::Relaxed); }
                            () = sleep(hold) => {}
                        }
                        guard.release().await
                    }
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            },
            // try_acquire of a hot lock.
            1 => match manager.lock(&hot) {
                Ok(lock) => match lock.try_acquire().await {
                    Ok(Some(guard)) => {
                        counters.acquired.fetch_add(1, Ordering::Relaxed);
                        guard.release().await
                    }
                    Ok(None) => Ok(()),
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            },
            // A timeout short enough to expire under contention.
            2 => match manager.lock(&hot) {
                Ok(lock) => match lock.acquire_timeout(Duration::from_millis(20)).await {
                    Ok(guard) => {
                        counters.acquired.fetch_add(1, Ordering::Relaxed);
                        guard.release().await
                    }
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            },
            // An acquisition dropped half-way (cancelled).
            3 => match manager.lock(&hot) {
                Ok(lock) => {
                    tokio::select! {
                        acquired = lock.acquire() => match acquired {
                            Ok(guard) => {
                                counters.acquired.fetch_add(1, Ordering::Relaxed);
                                guard.release().await
                            }
                            Err(error) => Err(error),
                        },
                        () = sleep(wait) => {
                            counters.cancelled.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        }
                    }
                }
                Err(error) => Err(error),
            },
            // A name used once in a while: its actor is created and later stopped idle.
            4 => match manager.lock(&churn) {
                Ok(lock) => match lock.acquire().await {
                    Ok(guard) => {
                        counters.acquired.fetch_add(1, Ordering::Relaxed);
                        guard.release().await
                    }
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            },
            // A background lock started, held for a moment, stopped.
            _ => match manager.lock(format!("background-{}", hold.as_millis() % 3)) {
                Ok(lock) => match lock.background() {
                    Ok(background) => {
                        let started = tokio::time::timeout(
                            Duration::from_millis(300),
                            background.wait_acquired(),
                        )
                        .await;
                        if matches!(started, Ok(Ok(_))) {
                            counters.acquired.fetch_add(1, Ordering::Relaxed);
                        }
                        background.stop().await.or(Ok(()))
                    }
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            },
        };
        match outcome {
            Ok(()) | Err(LockError::Lost(_)) => {}
            Err(LockError::Timeout(_)) => {
                counters.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%error, "soak operation failed");
                sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Campaigns and resigns an election again and again.
async fn candidate(
    manager: LockManager,
    name: String,
    counters: Arc<Counters>,
    running: Arc<AtomicBool>,
) {
    let options = ElectionOptions::default()
        .with_lease_duration(Duration::from_secs(3))
        .with_renew_deadline(Duration::from_secs(2))
        .with_retry_period(Duration::from_millis(500));
    let Ok(election) = manager.election(&name, options) else {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    while running.load(Ordering::Relaxed) {
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), election.campaign()).await {
            counters.terms.fetch_add(1, Ordering::Relaxed);
            let term = Duration::from_millis(rand::rng().random_range(100..1500));
            sleep(term).await;
        }
        let _ = election.resign().await;
        let pause = Duration::from_millis(rand::rng().random_range(0..300));
        sleep(pause).await;
    }
}

struct Sample {
    at: Duration,
    actors: (usize, usize),
    tasks: usize,
    rss: u64,
    acquired: u64,
}

fn print_sample(sample: &Sample) {
    println!(
        "{:>7.0} s  actors {:>4} + {:>4}  tasks {:>5}  rss {:>7.1} MiB  acquisitions {:>8}",
        sample.at.as_secs_f64(),
        sample.actors.0,
        sample.actors.1,
        sample.tasks,
        sample.rss as f64 / 1024.0,
        sample.acquired
    );
}

async fn run(args: Args) -> Result<bool, String> {
    let uri = args.mongodb_uri.as_deref();
    let collection = format!("soak_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let baseline_tasks = alive_tasks();
    let first = manager(store(uri, &collection).await?)
        .await
        .map_err(|e| e.to_string())?;
    let faulty = FaultyStore::new(store(uri, &collection).await?);
    let second = manager(faulty.clone()).await.map_err(|e| e.to_string())?;
    let idle_tasks = alive_tasks();
    println!(
        "soak: {:.1} min on {}, {} workers per manager; tasks before the managers {baseline_tasks}, with them idle {idle_tasks}",
        args.minutes,
        uri.unwrap_or("the memory store"),
        args.workers
    );

    let counters = Arc::new(Counters::default());
    let only = Arc::new(args.only.clone());
    let running = Arc::new(AtomicBool::new(true));
    let mut load = Vec::new();
    for manager in [&first, &second] {
        for _ in 0..args.workers {
            load.push(tokio::spawn(worker(
                manager.clone(),
                only.clone(),
                counters.clone(),
                running.clone(),
            )));
        }
        for election in 0..args.elections {
            load.push(tokio::spawn(candidate(
                manager.clone(),
                format!("election-{election}"),
                counters.clone(),
                running.clone(),
            )));
        }
    }
    let outages = {
        let running = running.clone();
        let enabled = !args.no_outages;
        let faulty = faulty.clone();
        tokio::spawn(async move {
            while enabled && running.load(Ordering::Relaxed) {
                sleep(Duration::from_secs(18)).await;
                faulty.hang();
                sleep(Duration::from_secs(2)).await;
                faulty.heal();
            }
        })
    };

    let started = Instant::now();
    let total = Duration::from_secs_f64(args.minutes * 60.0);
    let mut samples = Vec::new();
    while started.elapsed() < total {
        sleep(Duration::from_secs(args.every).min(total.saturating_sub(started.elapsed()))).await;
        let sample = Sample {
            at: started.elapsed(),
            actors: (first.active_locks().await, second.active_locks().await),
            tasks: alive_tasks(),
            rss: rss_kib(),
            acquired: counters.acquired.load(Ordering::Relaxed),
        };
        print_sample(&sample);
        samples.push(sample);
    }

    // Stop the load; once idle, actors go and tasks come back down.
    running.store(false, Ordering::Relaxed);
    faulty.heal();
    for task in load {
        let _ = task.await;
    }
    outages.abort();
    // Work with a purpose may outlive the load by a bounded time: idle actors stop after their
    // timeout, the release stream lingers 10 s, and a call the hung store never answered is
    // waited for up to its late-answer limit (60 s) so whatever it granted can be released.
    let stopped_at = Instant::now();
    let drained_within = Duration::from_secs(75);
    sleep(IDLE_ACTOR_TIMEOUT * 3).await;
    let quiet = loop {
        let quiet = Sample {
            at: started.elapsed(),
            actors: (first.active_locks().await, second.active_locks().await),
            tasks: alive_tasks(),
            rss: rss_kib(),
            acquired: counters.acquired.load(Ordering::Relaxed),
        };
        let drained = quiet.actors == (0, 0) && quiet.tasks <= idle_tasks + 2;
        if drained || stopped_at.elapsed() >= drained_within {
            break quiet;
        }
        sleep(Duration::from_secs(1)).await;
    };
    println!(
        "after the load stopped and {:.0?} idle (waiting at most {drained_within:?} to drain):",
        stopped_at.elapsed()
    );
    print_sample(&quiet);
    first.shutdown().await;
    second.shutdown().await;
    sleep(Duration::from_millis(200)).await;
    let after_shutdown = alive_tasks();

    let c = &counters;
    println!(
        "operations: {} acquisitions, {} timeouts, {} cancelled, {} losses, {} election terms, {} errors",
        c.acquired.load(Ordering::Relaxed),
        c.timeouts.load(Ordering::Relaxed),
        c.cancelled.load(Ordering::Relaxed),
        c.lost.load(Ordering::Relaxed),
        c.terms.load(Ordering::Relaxed),
        c.errors.load(Ordering::Relaxed)
    );
    // Flat: the second half's peaks are no higher than the first half's (after warm-up) by
    // more than a margin, and everything returns to the baseline once the load stops.
    let half = samples.len() / 2;
    let peak = |range: &[Sample], f: fn(&Sample) -> u64| range.iter().map(f).max().unwrap_or(0);
    let (early, late) = samples.split_at(half.max(1).min(samples.len()));
    let tasks_of = |s: &Sample| s.tasks as u64;
    let actors_of = |s: &Sample| (s.actors.0 + s.actors.1) as u64;
    let rss_of = |s: &Sample| s.rss;
    let mut flat = true;
    for (what, f, margin) in [
        ("tasks", tasks_of as fn(&Sample) -> u64, 1.5),
        ("actors", actors_of as fn(&Sample) -> u64, 1.5),
        ("resident memory", rss_of as fn(&Sample) -> u64, 1.25),
    ] {
        let (before, after) = (peak(early, f), peak(late, f));
        let grew = after as f64 > before as f64 * margin + 8.0;
        println!(
            "{what}: peak {before} in the first half, {after} in the second{}",
            if grew { "  <-- GREW" } else { "" }
        );
        flat &= !grew;
    }
    let drained = quiet.actors == (0, 0) && quiet.tasks <= idle_tasks + 2;
    println!(
        "after the load: {} + {} actors (want 0), {} tasks (idle managers had {idle_tasks}); after shutdown {after_shutdown} tasks (before the managers {baseline_tasks})",
        quiet.actors.0, quiet.actors.1, quiet.tasks
    );
    Ok(flat && drained)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("soak: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => {
            println!("soak: flat");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("soak: something grew or did not drain (see above)");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("soak: {error}");
            ExitCode::FAILURE
        }
    }
}
