//! S1 (uncontended acquire + release), its leftovers, S2 (memory store against channel round
//! trips) and S4 (distinct names at 1, 8, 64 tasks): the cost of the runtime on top of what
//! it must do.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use distributed_lock_mongo::MongoDistributedLock;
use mongolock::{Lock, LockManager, LockOptions, MemoryStore};

use crate::child::{Args, Side, emit, scratch_name};
use crate::support::before_shared::BeforeShared;
use crate::support::channels::Echo;
use crate::support::commands::CommandCounts;
use crate::support::contender::{Contender, cycle};
use crate::support::dlock::{DlLock, DlOptions};
use crate::support::floor::Floor;
use crate::support::probe;
use crate::support::stats::{Summary, micros, quantile};

/// The collection the DistributedLock algorithm uses in the benches.
pub(crate) const DL_COLLECTION: &str = "dl_locks";
/// The collection the peer crate uses in the benches.
pub(crate) const PEER_COLLECTION: &str = "peer_locks";

/// Times `cycles` acquire + release cycles one by one after `warmup` untimed ones.
async fn time_cycles<C: Contender>(
    contender: &C,
    warmup: usize,
    cycles: usize,
) -> Result<Vec<Duration>, String> {
    for _ in 0..warmup {
        cycle(contender).await?;
    }
    let mut times = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let started = Instant::now();
        cycle(contender).await?;
        times.push(started.elapsed());
    }
    Ok(times)
}

/// [`time_cycles`] on a MongoDB side, with the commands the timed cycles sent.
async fn counted_cycles<C: Contender>(
    side: &Side,
    contender: &C,
    warmup: usize,
    cycles: usize,
) -> Result<(Vec<Duration>, CommandCounts), String> {
    for _ in 0..warmup {
        cycle(contender).await?;
    }
    let before = side.log.counts();
    let times = time_cycles(contender, 0, cycles).await?;
    Ok((times, side.log.counts().since(&before)))
}

fn emit_latencies(times: &[Duration]) {
    let us: Vec<f64> = times.iter().copied().map(micros).collect();
    if let (Some(p50), Some(p99)) = (quantile(&us, 0.5), quantile(&us, 0.99)) {
        emit("p50_us", format!("{p50:.1}"));
        emit("p99_us", format!("{p99:.1}"));
    }
    #[allow(clippy::cast_precision_loss)]
    let mean = us.iter().sum::<f64>() / us.len().max(1) as f64;
    emit("mean_us", format!("{mean:.1}"));
}

/// S1 for one `system`: `mongolock`, `floor`, `dl`, `peer` (MongoDB) or `memory`.
pub(crate) async fn s1(args: &Args) -> Result<(), String> {
    let system = args.text("system", "mongolock");
    let cycles = args.get("cycles", 1000_usize);
    let warmup = args.get("warmup", 100_usize);
    if system == "memory" {
        let manager = LockManager::start(MemoryStore::new(), LockOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let lock = manager.lock("s1").map_err(|e| e.to_string())?;
        emit_latencies(&time_cycles(&lock, warmup, cycles).await?);
        manager.shutdown().await;
        return Ok(());
    }
    let side = Side::connect("s1", &scratch_name("s1")).await?;
    if system == "paired" {
        paired(&side, warmup, cycles).await?;
        side.drop_database().await;
        return Ok(());
    }
    if system == "acquire-vs-try" {
        acquire_against_try(&side, warmup, cycles).await?;
        side.drop_database().await;
        return Ok(());
    }
    if system == "server-cpu" {
        let floor_gap = Duration::from_micros(args.get("floor_gap_us", 0_u64));
        server_cpu(&side, warmup, cycles, floor_gap).await?;
        side.drop_database().await;
        return Ok(());
    }
    let (times, commands) = match system.as_str() {
        "mongolock" => {
            let manager = side.manager(LockOptions::default()).await?;
            let lock = manager.lock("s1").map_err(|e| e.to_string())?;
            let measured = counted_cycles(&side, &lock, warmup, cycles).await?;
            manager.shutdown().await;
            measured
        }
        "floor" => {
            let floor = Floor::of_default_manager(&side.database, &side.log)
                .await?
                .for_name("s1-floor");
            emit("floor_commands", floor.describe());
            counted_cycles(&side, &floor, warmup, cycles).await?
        }
        "dl" => {
            let lock = DlLock::new(&side.database, DL_COLLECTION, "s1", DlOptions::default());
            lock.ensure_ttl_index().await?;
            counted_cycles(&side, &lock, warmup, cycles).await?
        }
        "peer" => {
            let lock = MongoDistributedLock::new(
                "s1".to_owned(),
                side.database.clone(),
                Some(PEER_COLLECTION.to_owned()),
                None,
            );
            counted_cycles(&side, &lock, warmup, cycles).await?
        }
        other => return Err(format!("unknown S1 system {other:?}")),
    };
    #[allow(clippy::cast_precision_loss)]
    let per_cycle = commands.total() as f64 / times.len().max(1) as f64;
    emit("cmds_per_cycle", format!("{per_cycle:.2}"));
    emit("commands", commands.to_string().replace(' ', ""));
    emit_latencies(&times);
    side.drop_database().await;
    Ok(())
}

/// `acquire` + release against `try_acquire` + release, alternating cycle by cycle on two
/// names of one manager: both send the same two commands, so any gap is the runtime's.
async fn acquire_against_try(side: &Side, warmup: usize, cycles: usize) -> Result<(), String> {
    let manager = side.manager(LockOptions::default()).await?;
    let waiting = manager.lock("s1-acquire").map_err(|e| e.to_string())?;
    let trying = manager.lock("s1-try").map_err(|e| e.to_string())?;
    let try_cycle = || async {
        let guard = trying
            .try_acquire()
            .await
            .map_err(|e| format!("try_acquire: {e}"))?
            .ok_or("an uncontended try_acquire found the lock held")?;
        guard.release().await.map_err(|e| format!("release: {e}"))
    };
    for _ in 0..warmup {
        cycle(&waiting).await?;
        try_cycle().await?;
    }
    let (mut acquire, mut tried) = (Vec::with_capacity(cycles), Vec::with_capacity(cycles));
    for _ in 0..cycles {
        let started = Instant::now();
        cycle(&waiting).await?;
        acquire.push(micros(started.elapsed()));
        let started = Instant::now();
        try_cycle().await?;
        tried.push(micros(started.elapsed()));
    }
    manager.shutdown().await;
    if let (Some(acquire), Some(tried)) = (quantile(&acquire, 0.5), quantile(&tried, 0.5)) {
        emit("acquire_p50_us", format!("{acquire:.1}"));
        emit("try_p50_us", format!("{tried:.1}"));
        emit("ratio", format!("{:.3}", acquire / tried));
    }
    Ok(())
}

/// S1 as a paired comparison: mongolock and the driver floor alternate cycle by cycle in one
/// process on one client, so changes in the machine's load hit both alike; the ratio of their
/// p50s is the headline figure.
async fn paired(side: &Side, warmup: usize, cycles: usize) -> Result<(), String> {
    let floor = Floor::of_default_manager(&side.database, &side.log)
        .await?
        .for_name("s1-floor");
    let manager = side.manager(LockOptions::default()).await?;
    let lock = manager.lock("s1").map_err(|e| e.to_string())?;
    for _ in 0..warmup {
        cycle(&lock).await?;
        cycle(&floor).await?;
    }
    let (mut ours, mut theirs) = (Vec::with_capacity(cycles), Vec::with_capacity(cycles));
    for _ in 0..cycles {
        let started = Instant::now();
        cycle(&lock).await?;
        ours.push(micros(started.elapsed()));
        let started = Instant::now();
        cycle(&floor).await?;
        theirs.push(micros(started.elapsed()));
    }
    manager.shutdown().await;
    if let (Some(ours), Some(theirs)) = (quantile(&ours, 0.5), quantile(&theirs, 0.5)) {
        emit("mongolock_p50_us", format!("{ours:.1}"));
        emit("floor_p50_us", format!("{theirs:.1}"));
        emit("ratio", format!("{:.3}", ours / theirs));
    }
    Ok(())
}

/// S1's cost to the server: the server's CPU time per 1,000 cycles of mongolock's mutex, of
/// the very commands it sends replayed through the driver (the floor of the paired row), and
/// of the same cycle as mongolock sent it before shared kinds (see [`BeforeShared`]), in
/// rotating blocks of `cycles / 10` on one client, so the machine's load drift hits all
/// alike. mongolock against the replay is what the runtime adds around its commands (none,
/// if the commands are all it sends); the replay against the older cycle is what today's
/// pipelines cost. Emits nothing when the server's CPU cannot be read.
///
/// `floor_gap` (default none) pauses the client after each replayed cycle, so the replay's
/// commands stay the same and only its pace changes: how much of a cycle's server CPU
/// follows the client's pace rather than the commands.
async fn server_cpu(
    side: &Side,
    warmup: usize,
    cycles: usize,
    floor_gap: Duration,
) -> Result<(), String> {
    const BLOCKS: usize = 10;
    let before = BeforeShared::new(&side.database, "s1-before-shared").await?;
    let floor = Floor::of_default_manager(&side.database, &side.log)
        .await?
        .for_name("s1-cpu-floor");
    let manager = side.manager(LockOptions::default()).await?;
    let lock = manager.lock("s1").map_err(|e| e.to_string())?;
    for _ in 0..warmup {
        cycle(&lock).await?;
        cycle(&floor).await?;
        cycle(&before).await?;
    }
    let block = (cycles / BLOCKS).max(1);
    let mut spent = [Duration::ZERO; 3];
    let mut wall = [Duration::ZERO; 3];
    let mut sent = vec![CommandCounts::default(); 3];
    for round in 0..BLOCKS {
        // Each round starts with a different cycle (the order stays cyclic), so no cycle
        // always runs first, right after a round's probe.
        for turn in 0..3 {
            let which = (round + turn) % 3;
            let Some(start) = probe::server_cpu() else {
                manager.shutdown().await;
                return Ok(());
            };
            let (started, counted) = (Instant::now(), side.log.counts());
            for _ in 0..block {
                match which {
                    0 => cycle(&lock).await?,
                    1 => {
                        cycle(&floor).await?;
                        if !floor_gap.is_zero() {
                            tokio::time::sleep(floor_gap).await;
                        }
                    }
                    _ => cycle(&before).await?,
                }
            }
            wall[which] += started.elapsed();
            sent[which].add(&side.log.counts().since(&counted));
            let end = probe::server_cpu().unwrap_or(start);
            spent[which] += end.saturating_sub(start);
        }
    }
    manager.shutdown().await;
    // Seconds × 10⁶ ÷ cycles: milliseconds per 1,000 cycles, or microseconds per cycle.
    #[allow(clippy::cast_precision_loss)]
    let per_thousand = |total: Duration| total.as_secs_f64() * 1e6 / (block * BLOCKS) as f64;
    for (which, label) in ["mongolock", "floor", "before_shared"].iter().enumerate() {
        emit(
            &format!("{label}_wall_us"),
            format!("{:.1}", per_thousand(wall[which])),
        );
        emit(
            &format!("{label}_commands"),
            sent[which].to_string().replace(' ', ""),
        );
    }
    let [ours, replayed, theirs] = spent;
    emit("mongolock_cpu_ms", format!("{:.1}", per_thousand(ours)));
    emit("floor_cpu_ms", format!("{:.1}", per_thousand(replayed)));
    emit(
        "before_shared_cpu_ms",
        format!("{:.1}", per_thousand(theirs)),
    );
    let ratio = |a: Duration, b: Duration| {
        (!b.is_zero()).then(|| format!("{:.3}", a.as_secs_f64() / b.as_secs_f64()))
    };
    if let Some(r) = ratio(ours, theirs) {
        emit("ratio", r);
    }
    if let Some(r) = ratio(ours, replayed) {
        emit("runtime_ratio", r);
    }
    if let Some(r) = ratio(replayed, theirs) {
        emit("commands_ratio", r);
    }
    Ok(())
}

/// S1 leftovers: live tasks and resident memory after `cycles` acquire + release cycles on
/// the memory store, right after and one second later, against the idle process.
pub(crate) async fn leftovers(args: &Args) -> Result<(), String> {
    let cycles = args.get("cycles", 10_000_usize);
    let manager = LockManager::start(MemoryStore::new(), LockOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let lock = manager.lock("s1").map_err(|e| e.to_string())?;
    cycle(&lock).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (tasks_idle, rss_idle) = (probe::alive_tasks(), probe::rss_kib().unwrap_or(0));
    for _ in 0..cycles {
        cycle(&lock).await?;
    }
    let (tasks_after, rss_after) = (probe::alive_tasks(), probe::rss_kib().unwrap_or(0));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (tasks_later, rss_later) = (probe::alive_tasks(), probe::rss_kib().unwrap_or(0));
    emit("cycles", cycles);
    emit("tasks_idle", tasks_idle);
    emit("tasks_after", tasks_after);
    emit("tasks_after_1s", tasks_later);
    emit(
        "extra_tasks_after_1s",
        tasks_later.saturating_sub(tasks_idle),
    );
    emit("rss_idle_kib", rss_idle);
    emit("rss_after_kib", rss_after);
    emit("extra_rss_after_1s_kib", rss_later.saturating_sub(rss_idle));
    manager.shutdown().await;
    Ok(())
}

/// S2: acquire + release on the memory store against two mpsc + oneshot round trips, on a
/// current-thread runtime; per-cycle means of `batches` batches, median reported.
pub(crate) async fn s2(args: &Args) -> Result<(), String> {
    let cycles = args.get("cycles", 20_000_u32);
    let batches = args.get("batches", 5_usize);
    let manager = LockManager::start(MemoryStore::new(), LockOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let lock = manager.lock("s2").map_err(|e| e.to_string())?;
    let echo = Echo::spawn();
    for _ in 0..cycles / 10 {
        cycle(&lock).await?;
        echo.two_round_trips().await;
    }
    let (mut lock_ns, mut channel_ns) = (Vec::new(), Vec::new());
    for _ in 0..batches {
        let started = Instant::now();
        for _ in 0..cycles {
            cycle(&lock).await?;
        }
        lock_ns.push(started.elapsed().as_secs_f64() * 1e9 / f64::from(cycles));
        let started = Instant::now();
        for _ in 0..cycles {
            std::hint::black_box(echo.two_round_trips().await);
        }
        channel_ns.push(started.elapsed().as_secs_f64() * 1e9 / f64::from(cycles));
    }
    if let (Some(lock_ns), Some(channel_ns)) = (Summary::of(&lock_ns), Summary::of(&channel_ns)) {
        emit("lock_ns", format!("{:.0}", lock_ns.median));
        emit("two_round_trips_ns", format!("{:.0}", channel_ns.median));
    }
    manager.shutdown().await;
    Ok(())
}

/// Runs `tasks` tasks, each cycling its own contender until `duration` is over; returns the
/// cycles completed.
async fn cycle_concurrently<C: Contender>(
    contenders: Vec<C>,
    duration: Duration,
) -> Result<u64, String> {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = tokio::time::Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for contender in contenders {
        let done = Arc::clone(&done);
        tasks.spawn(async move {
            while tokio::time::Instant::now() < deadline {
                cycle(&contender).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|e| format!("S4 task: {e}"))??;
    }
    Ok(done.load(Ordering::Relaxed))
}

/// S4: `tasks` tasks on distinct names for `secs`, for `system` `mongolock` or `floor`.
pub(crate) async fn s4(args: &Args) -> Result<(), String> {
    let system = args.text("system", "mongolock");
    let tasks = args.get("tasks", 8_usize);
    let duration = args.millis("millis", 3000);
    let side = Side::connect("s4", &scratch_name("s4")).await?;
    let (completed, elapsed, commands) = match system.as_str() {
        "mongolock" => {
            let manager = side.manager(LockOptions::default()).await?;
            let locks: Vec<Lock> = (0..tasks)
                .map(|i| manager.lock(format!("s4-{i}")))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            for lock in &locks {
                cycle(lock).await?;
            }
            let before = side.log.counts();
            let started = Instant::now();
            let completed = cycle_concurrently(locks, duration).await?;
            let elapsed = started.elapsed();
            let commands = side.log.counts().since(&before);
            manager.shutdown().await;
            (completed, elapsed, commands)
        }
        "floor" => {
            let floor = Floor::of_default_manager(&side.database, &side.log).await?;
            let floors: Vec<Floor> = (0..tasks)
                .map(|i| floor.for_name(&format!("s4-floor-{i}")))
                .collect();
            for floor in &floors {
                cycle(floor).await?;
            }
            let before = side.log.counts();
            let started = Instant::now();
            let completed = cycle_concurrently(floors, duration).await?;
            (
                completed,
                started.elapsed(),
                side.log.counts().since(&before),
            )
        }
        other => return Err(format!("unknown S4 system {other:?}")),
    };
    let elapsed = elapsed.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    {
        emit("cycles_per_s", format!("{:.1}", completed as f64 / elapsed));
        emit(
            "cmds_per_cycle",
            format!("{:.2}", commands.total() as f64 / completed.max(1) as f64),
        );
    }
    side.drop_database().await;
    Ok(())
}
