//! Leader election, end to end — the project's main job.
//!
//! Several workers elect a leader; only the leader runs a `Scheduler` actor (lifecycle
//! binding). The leader then crashes (its store stops answering; it never releases) and a
//! follower takes over after the lease; later the new leader resigns and hands over at
//! once. Timings are printed as they happen, Prometheus metrics are served on a local port
//! while it runs, and a summary closes the run. Exits 0 by itself in about 11 seconds.
//!
//! ```text
//! cargo run --example leader_election --features prometheus,testing
//! cargo run --example leader_election --features prometheus,testing -- --mongodb-uri mongodb://127.0.0.1:27017
//! cargo run --example leader_election --features prometheus,testing -- --mongodb-uri URI --join --duration 60   # more processes
//! ```

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use mongolock::HolderId;
use mongolock::testing::FaultyStore;
use mongolock::{Election, ElectionEvent, ElectionOptions, LockManager, store::LockStore};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout};

use support::{Backend, at};

const ELECTION: &str = "scheduler";
const LEASE: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);

#[derive(Parser)]
#[command(about = "Workers electing a leader, with a crash and a resignation")]
struct Args {
    /// Use this MongoDB server instead of the embedded store.
    #[arg(long)]
    mongodb_uri: Option<String>,
    /// How many workers campaign in this process.
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// Serve Prometheus metrics on this port (0: any free port).
    #[arg(long, default_value_t = 0)]
    metrics_port: u16,
    /// Only campaign and report events (for extra processes joining a MongoDB election).
    #[arg(long, requires = "mongodb_uri")]
    join: bool,
    /// With --join: how long to stay, in seconds.
    #[arg(long, default_value_t = 60)]
    duration: u64,
}

/// The work only the leader does: "schedules" a batch every second under its token.
struct Scheduler;

/// A scheduler's worker, its term's token and whether the worker has crashed.
type SchedulerArgs = (String, u64, Arc<AtomicBool>);

impl Actor for Scheduler {
    type Msg = ();
    type State = (String, u64, Arc<AtomicBool>, u64);
    type Arguments = SchedulerArgs;

    async fn pre_start(
        &self,
        me: ActorRef<()>,
        (worker, token, crashed): SchedulerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        println!("           {worker}: scheduler actor started (token {token})");
        me.send_interval(Duration::from_secs(1), || ());
        Ok((worker, token, crashed, 0))
    }

    async fn handle(
        &self,
        _: ActorRef<()>,
        _: (),
        (worker, token, crashed, batches): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        *batches += 1;
        // A crashed leader keeps working until it is told: its store no longer answers, so it
        // learns of the loss only at its renew deadline — before the lease ends on the store,
        // so before anyone else can lead.
        let told = if crashed.load(Ordering::Relaxed) {
            " (crashed, not told yet: it leads until its renew deadline)"
        } else {
            ""
        };
        println!(
            "           {worker}: scheduling batch #{batches} fenced with token {token}{told}"
        );
        Ok(())
    }

    async fn post_stop(
        &self,
        _: ActorRef<()>,
        (worker, token, _, batches): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        println!(
            "           {worker}: scheduler actor stopped after {batches} batches (token {token})"
        );
        Ok(())
    }
}

struct Worker {
    name: String,
    manager: LockManager,
    election: Election,
    store: FaultyStore<Arc<dyn LockStore>>,
    /// Set when this worker crashes, so its scheduler's lines can say so.
    crashed: Arc<AtomicBool>,
}

/// One line of the closing summary.
struct Term {
    leader: String,
    token: u64,
    began: Duration,
    ended: Option<(Duration, String)>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("leader_election: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let backend = Backend::new(args.mongodb_uri.clone());
    let port = support::serve_metrics(args.metrics_port)?;
    println!(
        "Leader election among {} workers on {}",
        args.workers,
        backend.describe()
    );
    println!(
        "lease {LEASE:?}, renew deadline {RENEW_DEADLINE:?}, retry {RETRY:?}; metrics on http://127.0.0.1:{port}/metrics\n"
    );

    let start = Instant::now();
    let (events_tx, mut events) = mpsc::unbounded_channel::<(String, ElectionEvent)>();
    let workers = start_workers(&backend, args.workers, events_tx).await?;

    if args.join {
        let until = start + Duration::from_secs(args.duration);
        while let Ok(Some((worker, event))) = timeout(until - Instant::now(), events.recv()).await {
            println!("{} {worker}: {}", at(start), describe(&event));
        }
        return shut_down(workers).await;
    }

    let mut terms: Vec<Term> = Vec::new();
    let mut log = |worker: &str, event: &ElectionEvent, terms: &mut Vec<Term>| {
        println!("{} {worker}: {}", at(start), describe(event));
        match event {
            ElectionEvent::Elected { token } => terms.push(Term {
                leader: worker.to_owned(),
                token: *token,
                began: start.elapsed(),
                ended: None,
            }),
            ElectionEvent::Deposed { token, reason } => {
                end_term(terms, *token, start, reason.to_string());
            }
            ElectionEvent::Resigned { token } => {
                end_term(terms, *token, start, "resigned".to_owned());
            }
            ElectionEvent::LeaderChanged { .. } => {}
            _ => {}
        }
    };

    // 1. First election.
    let first = wait_for_election(&mut events, &mut terms, &mut log, None).await?;
    println!(
        "\n>>> {} leads after {:.3}s\n",
        first.0,
        start.elapsed().as_secs_f64()
    );
    pump(&mut events, &mut terms, &mut log, Duration::from_secs(3)).await;

    // 2. The leader crashes: its store calls hang and it never releases.
    let crashed = workers
        .iter()
        .find(|w| w.name == first.0)
        .ok_or("leader is not one of ours")?;
    println!(
        "\n>>> {} {} crashes now (store unreachable, no release); it is told at its renew deadline\n",
        at(start),
        crashed.name
    );
    let crash_at = Instant::now();
    crashed.crashed.store(true, Ordering::Relaxed);
    crashed.store.hang();
    let second = wait_for_election(&mut events, &mut terms, &mut log, Some(&first.0)).await?;
    let failover = crash_at.elapsed();
    println!(
        "\n>>> failover: {} leads {:.3}s after the crash (bound: lease {LEASE:?} + retry)\n",
        second.0,
        failover.as_secs_f64()
    );
    pump(&mut events, &mut terms, &mut log, Duration::from_secs(3)).await;

    // 3. The new leader resigns: hand-over within a retry period.
    let resigning = workers
        .iter()
        .find(|w| w.name == second.0)
        .ok_or("leader is not one of ours")?;
    println!("\n>>> {} {} resigns\n", at(start), resigning.name);
    let resign_at = Instant::now();
    resigning
        .election
        .resign()
        .await
        .map_err(|e| e.to_string())?;
    let third = wait_for_election(&mut events, &mut terms, &mut log, Some(&second.0)).await?;
    let handover = resign_at.elapsed();
    println!(
        "\n>>> hand-over: {} leads {:.3}s after the resignation\n",
        third.0,
        handover.as_secs_f64()
    );
    pump(&mut events, &mut terms, &mut log, Duration::from_secs(2)).await;

    let observer = workers
        .iter()
        .find(|w| w.name != first.0)
        .ok_or("no healthy worker")?;
    let leader = observer
        .election
        .leader()
        .await
        .map_err(|e| e.to_string())?;
    let metrics = support::scrape(port).await?;
    let tokens_per_grant = observer.store.tokens_per_grant();
    shut_down(workers).await?;
    pump(
        &mut events,
        &mut terms,
        &mut log,
        Duration::from_millis(200),
    )
    .await;

    println!("\n================ summary ================");
    println!(
        "{:<10} {:>20} {:>9} {:>9}  ended by",
        "leader", "token", "from", "to"
    );
    for term in &terms {
        let (to, why) = match &term.ended {
            Some((to, why)) => (format!("{:.3}s", to.as_secs_f64()), why.as_str()),
            None => ("-".to_owned(), "still leading"),
        };
        println!(
            "{:<10} {:>20} {:>8.3}s {:>9}  {why}",
            term.leader,
            term.token,
            term.began.as_secs_f64(),
            to
        );
    }
    println!(
        "failover after crash: {:.3}s (lease {LEASE:?}); hand-over after resign: {:.3}s",
        failover.as_secs_f64(),
        handover.as_secs_f64()
    );
    if let Some(leader) = leader {
        println!(
            "store's view before shutdown: {} leads with token {}",
            leader.holder, leader.token
        );
    }
    let tokens: Vec<u64> = terms.iter().map(|t| t.token).collect();
    let increasing = tokens.windows(2).all(|w| w[0] < w[1]);
    println!("fencing tokens strictly increasing across terms: {increasing}");
    println!(
        "(each grant reserves {tokens_per_grant} tokens for hand-overs inside its process, so the next term's token is at least {tokens_per_grant} higher)"
    );
    println!("\nmetrics served at http://127.0.0.1:{port}/metrics (excerpt):");
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("mongolock_leader") || l.starts_with("mongolock_losses_total"))
    {
        println!("  {line}");
    }
    if !increasing || terms.len() < 3 {
        return Err("the run did not show three increasing terms".to_owned());
    }
    Ok(())
}

async fn start_workers(
    backend: &Backend,
    count: usize,
    events: mpsc::UnboundedSender<(String, ElectionEvent)>,
) -> Result<Vec<Worker>, String> {
    let options = ElectionOptions::default()
        .with_lease_duration(LEASE)
        .with_renew_deadline(RENEW_DEADLINE)
        .with_retry_period(RETRY);
    let mut workers = Vec::new();
    for i in 1..=count {
        let name = format!("worker-{i}");
        let store = FaultyStore::new(backend.connect().await?);
        let crashed = Arc::new(AtomicBool::new(false));
        let identity = HolderId::from_string(format!("{name}@{}", HolderId::generate()));
        let manager = LockManager::builder(store.clone())
            .with_holder_id(identity)
            .start()
            .await
            .map_err(|e| format!("{name} could not start: {e}"))?;
        let election = manager
            .election(ELECTION, options.clone())
            .map_err(|e| e.to_string())?;
        let mut stream = election.subscribe();
        let (tx, who) = (events.clone(), name.clone());
        tokio::spawn(async move {
            while let Ok(event) = stream.recv().await {
                let _ = tx.send((who.clone(), event));
            }
        });
        let (who, down) = (name.clone(), crashed.clone());
        election
            .run_while_leader(move |token, supervisor| {
                let (who, down) = (who.clone(), down.clone());
                async move {
                    let (actor, _) =
                        Actor::spawn_linked(None, Scheduler, (who, token, down), supervisor)
                            .await?;
                    Ok(actor.get_cell())
                }
            })
            .map_err(|e| e.to_string())?;
        workers.push(Worker {
            name,
            manager,
            election,
            store,
            crashed,
        });
    }
    Ok(workers)
}

type Log<'a> = dyn FnMut(&str, &ElectionEvent, &mut Vec<Term>) + 'a;

/// Waits (at most 15 s) for a worker other than `not` to be elected.
async fn wait_for_election(
    events: &mut mpsc::UnboundedReceiver<(String, ElectionEvent)>,
    terms: &mut Vec<Term>,
    log: &mut Log<'_>,
    not: Option<&str>,
) -> Result<(String, u64), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let Ok(Some((worker, event))) = timeout(deadline - Instant::now(), events.recv()).await
        else {
            return Err("no leader was elected within 15 s".to_owned());
        };
        log(&worker, &event, terms);
        if let ElectionEvent::Elected { token } = event
            && Some(worker.as_str()) != not
        {
            return Ok((worker, token));
        }
    }
}

/// Prints events for `period`.
async fn pump(
    events: &mut mpsc::UnboundedReceiver<(String, ElectionEvent)>,
    terms: &mut Vec<Term>,
    log: &mut Log<'_>,
    period: Duration,
) {
    let until = Instant::now() + period;
    while let Ok(Some((worker, event))) = timeout(
        until.saturating_duration_since(Instant::now()),
        events.recv(),
    )
    .await
    {
        log(&worker, &event, terms);
    }
}

fn end_term(terms: &mut [Term], token: u64, start: Instant, why: String) {
    if let Some(term) = terms.iter_mut().find(|t| t.token == token) {
        term.ended = Some((start.elapsed(), why));
    }
}

/// The event's own line (`Display`), the election standing out.
fn describe(event: &ElectionEvent) -> String {
    match event {
        ElectionEvent::Elected { token } => format!("ELECTED (token {token})"),
        other => other.to_string(),
    }
}

async fn shut_down(workers: Vec<Worker>) -> Result<(), String> {
    for worker in &workers {
        worker.store.heal();
        worker.manager.shutdown().await;
    }
    sleep(Duration::from_millis(50)).await;
    Ok(())
}
