//! P2 and P3 of issue 17: one shared-kind name, 64 tasks in two "processes" (each with its
//! own client and manager, as in S3), a 1 ms hold. P2 is a semaphore of 8 permits; P3 a
//! reader/writer lock with 90 % reads. Every acquisition is timed in this one process, so
//! the timeline of waits and holds is exact. P3's floor (`lock=tokio`) runs the same tasks
//! on one `tokio::sync::RwLock`, a first-come-first-served lock with no store and no
//! processes: what strict arrival order costs with nothing else.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mongolock::{Fairness, LockGuard, LockManager, LockOptions, RwLock, Semaphore};
use tokio::time::Instant;

use crate::child::{Args, emit};
use crate::primitives::Backend;
use crate::support::commands::CommandCounts;
use crate::support::stats::{millis, quantile};

/// What a task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Permit,
    Read,
    Write,
}

/// One acquisition: when its task started waiting, got the lock, called release and saw
/// release return.
#[derive(Debug, Clone, Copy)]
struct Hold {
    process: usize,
    op: Op,
    waited: Instant,
    acquired: Instant,
    releasing: Instant,
}

#[derive(Debug, Default)]
struct Timeline {
    holds: Vec<Hold>,
    /// Waits still unanswered when the run ended: (process, op, since).
    pending: Vec<(usize, Op, Instant)>,
}

/// Which operation a task does next.
#[derive(Debug, Clone, Copy)]
enum Mix {
    /// Every acquisition a permit of the semaphore.
    Permits,
    /// Each acquisition a write with probability `write_pct` %, drawn per operation.
    Ops { write_pct: u64 },
    /// The first `writers` tasks only write, the others only read.
    Roles { writers: usize },
}

/// A small deterministic generator (xorshift64*), one per task, so runs draw the same mix.
struct Draw(u64);

impl Draw {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn percent(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % 100
    }
}

/// What the tasks of one process contend for.
#[derive(Clone)]
enum Target {
    Semaphore(Semaphore),
    Rw(RwLock),
    /// P3's floor: one in-memory FIFO reader/writer lock shared by every task.
    InProcess(Arc<tokio::sync::RwLock<()>>),
}

/// A held acquisition of a [`Target`].
enum Held {
    Lock(LockGuard),
    Read(tokio::sync::OwnedRwLockReadGuard<()>),
    Write(tokio::sync::OwnedRwLockWriteGuard<()>),
}

impl Target {
    async fn acquire(&self, op: Op) -> Result<Held, String> {
        let acquired = match (self, op) {
            (Self::Semaphore(semaphore), _) => semaphore.acquire().await,
            (Self::Rw(rw), Op::Write) => rw.write().await,
            (Self::Rw(rw), _) => rw.read().await,
            (Self::InProcess(rw), Op::Write) => {
                return Ok(Held::Write(Arc::clone(rw).write_owned().await));
            }
            (Self::InProcess(rw), _) => return Ok(Held::Read(Arc::clone(rw).read_owned().await)),
        };
        acquired
            .map(Held::Lock)
            .map_err(|e| format!("{op:?} acquire: {e}"))
    }
}

impl Held {
    async fn release(self, op: Op) -> Result<(), String> {
        match self {
            Self::Lock(guard) => guard
                .release()
                .await
                .map_err(|e| format!("{op:?} release: {e}")),
            Self::Read(guard) => {
                drop(guard);
                Ok(())
            }
            Self::Write(guard) => {
                drop(guard);
                Ok(())
            }
        }
    }
}

/// The loop of one task: acquire, hold for `critical`, release, until `end`.
async fn contend(
    process: usize,
    task: usize,
    target: Target,
    mix: Mix,
    critical: Duration,
    end: Instant,
    timeline: Arc<Mutex<Timeline>>,
) -> Result<(), String> {
    let record = |update: &dyn Fn(&mut Timeline)| {
        update(&mut timeline.lock().unwrap_or_else(PoisonError::into_inner));
    };
    let mut draw = Draw::new(task as u64 + 1);
    loop {
        let op = match mix {
            Mix::Permits => Op::Permit,
            Mix::Ops { write_pct } if draw.percent() < write_pct => Op::Write,
            Mix::Ops { .. } => Op::Read,
            Mix::Roles { writers } if task < writers => Op::Write,
            Mix::Roles { .. } => Op::Read,
        };
        let waited = Instant::now();
        if waited >= end {
            return Ok(());
        }
        let guard = match tokio::time::timeout_at(end, target.acquire(op)).await {
            Ok(guard) => guard?,
            Err(_) => {
                record(&|timeline| timeline.pending.push((process, op, waited)));
                return Ok(());
            }
        };
        let acquired = Instant::now();
        tokio::time::sleep(critical).await;
        let releasing = Instant::now();
        guard.release(op).await?;
        record(&|timeline| {
            timeline.holds.push(Hold {
                process,
                op,
                waited,
                acquired,
                releasing,
            });
        });
    }
}

/// What the timeline says about the window `[from, to]`.
#[derive(Debug, Default)]
struct Figures {
    /// Grants in the window, per process.
    per_process: Vec<usize>,
    /// Grants in the window per operation: permits or reads, writes.
    reads: usize,
    writes: usize,
    /// Critical sections (acquire returned → release called) inside the window, summed.
    busy: Duration,
    /// Critical sections of the grants in the window.
    critical_ms: Vec<f64>,
    /// Waits (waiting → acquire returned) of the grants in the window, plus the waits still
    /// unanswered at its end (counted up to the end: a lower bound).
    read_waits_ms: Vec<f64>,
    write_waits_ms: Vec<f64>,
    pending_reads: usize,
    pending_writes: usize,
    /// The most critical sections at one instant.
    max_holders: usize,
    /// Critical sections that began while a writer's was under way, or writers' that began
    /// while any was (must be 0).
    writer_overlaps: usize,
    /// Time in the window with at least `permits` critical sections under way.
    all_busy: Duration,
    /// The lock's idle time between one turn and the next (nobody holding, then somebody
    /// entering), in the window: the next turn in the process that held last (`[0]`) or in
    /// another one (`[1]`). Each is what a turn costs beyond its holds: a store round trip,
    /// and across processes a release-feed wake-up too.
    turn_gaps_ms: [Vec<f64>; 2],
    /// Whole seconds of the window in which no read (or permit), or no write, was granted.
    seconds: usize,
    seconds_without_read: usize,
    seconds_without_write: usize,
}

#[allow(clippy::too_many_lines)]
fn figures(
    timeline: &Timeline,
    from: Instant,
    to: Instant,
    permits: usize,
    processes: usize,
) -> Figures {
    let mut figures = Figures {
        per_process: vec![0; processes.max(1)],
        ..Figures::default()
    };
    let seconds = usize::try_from(to.saturating_duration_since(from).as_secs()).unwrap_or(0);
    figures.seconds = seconds;
    let mut per_second = vec![[0_usize; 2]; seconds];
    let clip = |t: Instant| t.clamp(from, to);
    // Sweep of critical sections: (time, is_start, is_write, process); ends first at equal
    // instants, so a hand-over at one instant is not an overlap.
    let mut edges: Vec<(Instant, bool, bool, usize)> = Vec::with_capacity(timeline.holds.len() * 2);
    for hold in &timeline.holds {
        let write = hold.op == Op::Write;
        edges.push((hold.acquired, true, write, hold.process));
        edges.push((hold.releasing, false, write, hold.process));
        figures.busy += clip(hold.releasing).saturating_duration_since(clip(hold.acquired));
        if !(from..=to).contains(&hold.acquired) {
            continue;
        }
        if let Some(count) = figures.per_process.get_mut(hold.process) {
            *count += 1;
        }
        let wait = millis(hold.acquired.saturating_duration_since(hold.waited));
        if write {
            figures.writes += 1;
            figures.write_waits_ms.push(wait);
        } else {
            figures.reads += 1;
            figures.read_waits_ms.push(wait);
        }
        figures.critical_ms.push(millis(
            hold.releasing.saturating_duration_since(hold.acquired),
        ));
        let second = usize::try_from(hold.acquired.saturating_duration_since(from).as_secs())
            .unwrap_or(usize::MAX);
        if let Some(bucket) = per_second.get_mut(second) {
            bucket[usize::from(write)] += 1;
        }
    }
    for &(_, op, since) in &timeline.pending {
        let wait = millis(to.saturating_duration_since(since));
        if op == Op::Write {
            figures.pending_writes += 1;
            figures.write_waits_ms.push(wait);
        } else {
            figures.pending_reads += 1;
            figures.read_waits_ms.push(wait);
        }
    }
    figures.seconds_without_read = per_second.iter().filter(|s| s[0] == 0).count();
    figures.seconds_without_write = per_second.iter().filter(|s| s[1] == 0).count();
    edges.sort_by_key(|&(t, start, _, _)| (t, start));
    let (mut holders, mut writers) = (0_usize, 0_usize);
    let mut last = from;
    // Since when nobody holds, and in which process the last holder was.
    let mut idle: Option<(Instant, usize)> = None;
    for (t, start, write, process) in edges {
        if holders >= permits && t > from {
            figures.all_busy += clip(t).saturating_duration_since(clip(last));
        }
        last = t;
        if start {
            if writers > 0 || (write && holders > 0) {
                figures.writer_overlaps += 1;
            }
            if let Some((since, last_process)) = idle.take()
                && (from..=to).contains(&since)
            {
                figures.turn_gaps_ms[usize::from(process != last_process)]
                    .push(millis(t.saturating_duration_since(since)));
            }
            holders += 1;
            writers += usize::from(write);
            figures.max_holders = figures.max_holders.max(holders);
        } else {
            holders = holders.saturating_sub(1);
            writers = writers.saturating_sub(usize::from(write));
            if holders == 0 {
                idle = Some((t, process));
            }
        }
    }
    figures
}

/// Runs `tasks` tasks split over the processes' targets (task `i` in process `i mod n`);
/// returns the figures of the window after `warmup` and the commands every client sent in
/// it.
#[allow(clippy::too_many_arguments)]
async fn run(
    backend: &Backend,
    targets: &[Target],
    mix: Mix,
    tasks: usize,
    critical: Duration,
    warmup: Duration,
    measured: Duration,
    permits: usize,
) -> Result<(Figures, Option<u64>, String), String> {
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let start = Instant::now();
    let (from, to) = (start + warmup, start + warmup + measured);
    let mut joins = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let process = task % targets.len();
        joins.spawn(contend(
            process,
            task,
            targets[process].clone(),
            mix,
            critical,
            to,
            Arc::clone(&timeline),
        ));
    }
    tokio::time::sleep_until(from).await;
    let before = backend.counts();
    tokio::time::sleep_until(to).await;
    let commands = before.zip(backend.counts()).map(|(b, a)| a.since(&b));
    // Tasks finish their last critical section; a release stuck past this is a failure.
    let finished = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(joined) = joins.join_next().await {
            joined.map_err(|e| format!("task: {e}"))??;
        }
        Ok::<(), String>(())
    })
    .await;
    match finished {
        Ok(result) => result?,
        Err(_) => return Err("tasks did not finish within 30 s of the end".to_owned()),
    }
    let timeline = timeline.lock().unwrap_or_else(PoisonError::into_inner);
    Ok((
        figures(&timeline, from, to, permits, targets.len()),
        commands.as_ref().map(CommandCounts::total),
        commands.map_or_else(|| "—".to_owned(), |c| c.to_string().replace(' ', "")),
    ))
}

/// One manager per "process" (`processes`, default 2), with default options but for the
/// retry backoff when `backoff_min_ms` / `backoff_max_ms` are given (for looking into how
/// the backoff shapes a figure), the fairness bound when `fairness_bound_ms` is, and
/// `Fairness::ArrivalOrder` with `fairness=arrival`.
async fn managers(args: &Args, backend: &Backend) -> Result<Vec<LockManager>, String> {
    let mut options = LockOptions::default();
    let (min, max) = options.retry_backoff();
    let (min, max) = (
        args.millis(
            "backoff_min_ms",
            u64::try_from(min.as_millis()).unwrap_or(10),
        ),
        args.millis(
            "backoff_max_ms",
            u64::try_from(max.as_millis()).unwrap_or(800),
        ),
    );
    options = options.with_retry_backoff(min, max);
    let bound = args.millis(
        "fairness_bound_ms",
        u64::try_from(options.fairness_bound().as_millis()).unwrap_or(100),
    );
    options = options.with_fairness_bound(bound);
    match args.text("fairness", "bounded").as_str() {
        "bounded" => {}
        "arrival" => options = options.with_fairness(Fairness::ArrivalOrder),
        other => return Err(format!("unknown fairness {other:?} (bounded or arrival)")),
    }
    let mut managers = Vec::new();
    for process in 0..args.get("processes", 2_usize).max(1) {
        managers.push(backend.manager(process, options.clone()).await?);
    }
    Ok(managers)
}

async fn shut_down(managers: &[LockManager]) {
    for manager in managers {
        let _ = tokio::time::timeout(Duration::from_secs(10), manager.shutdown()).await;
    }
}

/// The figures both P2 and P3 report.
#[allow(clippy::cast_precision_loss)]
fn emit_common(figures: &Figures, commands: Option<u64>, listed: &str, seconds: f64) {
    let grants = (figures.reads + figures.writes) as f64;
    emit("acq_per_s", format!("{:.1}", grants / seconds));
    let shares: Vec<f64> = figures
        .per_process
        .iter()
        .map(|&count| 100.0 * count as f64 / grants.max(1.0))
        .collect();
    for (label, share) in ["share_a_pct", "share_b_pct"].iter().zip(&shares) {
        emit(label, format!("{share:.1}"));
    }
    if shares.len() > 2 {
        let listed: Vec<String> = shares.iter().map(|s| format!("{s:.1}")).collect();
        emit("shares_pct", listed.join("/"));
    }
    if !figures.critical_ms.is_empty() {
        let mean = figures.critical_ms.iter().sum::<f64>() / figures.critical_ms.len() as f64;
        emit("hold_ms", format!("{mean:.2}"));
    }
    if let Some(commands) = commands {
        emit(
            "cmds_per_acq",
            format!("{:.2}", commands as f64 / grants.max(1.0)),
        );
        emit("commands", listed);
    }
    emit("max_holders", figures.max_holders);
    emit("writer_overlaps", figures.writer_overlaps);
    for (side, gaps) in ["local", "cross"].iter().zip(&figures.turn_gaps_ms) {
        emit(&format!("turns_{side}"), gaps.len());
        if let Some(p50) = quantile(gaps, 0.5) {
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            emit(&format!("turn_gap_{side}_p50_ms"), format!("{p50:.2}"));
            emit(&format!("turn_gap_{side}_mean_ms"), format!("{mean:.2}"));
        }
    }
}

/// P2: a semaphore of `permits` permits; `tasks` tasks in two processes, each holding for
/// `critical_ms`.
pub(crate) async fn p2(args: &Args) -> Result<(), String> {
    let permits = args.get("permits", 8_u32);
    let tasks = args.get("tasks", 64_usize);
    let critical = args.millis("critical_ms", 1);
    let warmup = args.millis("warmup_ms", 1000);
    let measured = args.millis("millis", 10_000);
    let backend = Backend::open(args, "p2", args.get("processes", 2_usize).max(1)).await?;
    let managers = managers(args, &backend).await?;
    let targets = managers
        .iter()
        .map(|manager| manager.semaphore("p2", permits).map(Target::Semaphore))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let permits = permits as usize;
    let outcome = run(
        &backend,
        &targets,
        Mix::Permits,
        tasks,
        critical,
        warmup,
        measured,
        permits,
    )
    .await;
    shut_down(&managers).await;
    let (figures, commands, listed) = outcome?;
    let seconds = measured.as_secs_f64();
    emit_common(&figures, commands, &listed, seconds);
    #[allow(clippy::cast_precision_loss)]
    {
        // The ceiling: every permit busy with a critical section all the time.
        emit(
            "held_pct",
            format!(
                "{:.1}",
                100.0 * figures.busy.as_secs_f64() / (permits as f64 * seconds)
            ),
        );
        emit(
            "all_busy_pct",
            format!("{:.1}", 100.0 * figures.all_busy.as_secs_f64() / seconds),
        );
    }
    if let (Some(p50), Some(p99)) = (
        quantile(&figures.read_waits_ms, 0.5),
        quantile(&figures.read_waits_ms, 0.99),
    ) {
        emit("wait_p50_ms", format!("{p50:.1}"));
        emit("wait_p99_ms", format!("{p99:.1}"));
    }
    emit("pending", figures.pending_reads);
    emit("permits", permits);
    backend.finish().await;
    Ok(())
}

/// P3: a reader/writer lock; `tasks` tasks in two processes, `write_pct` % writes (`mix=ops`:
/// drawn per operation; `mix=roles`: that share of the tasks only write), each holding for
/// `critical_ms`. `lock=tokio`: the tasks share one `tokio::sync::RwLock` instead (the floor).
pub(crate) async fn p3(args: &Args) -> Result<(), String> {
    let tasks = args.get("tasks", 64_usize);
    let write_pct = args.get("write_pct", 10_u64).min(100);
    let mix = match args.text("mix", "ops").as_str() {
        "ops" => Mix::Ops { write_pct },
        "roles" => {
            #[allow(clippy::cast_possible_truncation)]
            let writers = ((tasks as u64 * write_pct + 50) / 100) as usize;
            Mix::Roles { writers }
        }
        other => return Err(format!("unknown mix {other:?} (ops or roles)")),
    };
    let critical = args.millis("critical_ms", 1);
    let warmup = args.millis("warmup_ms", 1000);
    let measured = args.millis("millis", 10_000);
    let backend = Backend::open(args, "p3", args.get("processes", 2_usize).max(1)).await?;
    let managers = managers(args, &backend).await?;
    let targets = match args.text("lock", "mongolock").as_str() {
        "mongolock" => managers
            .iter()
            .map(|manager| manager.rw_lock("p3").map(Target::Rw))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?,
        "tokio" => {
            let shared = Arc::new(tokio::sync::RwLock::new(()));
            vec![Target::InProcess(shared); managers.len()]
        }
        other => return Err(format!("unknown lock {other:?} (mongolock or tokio)")),
    };
    let outcome = run(
        &backend,
        &targets,
        mix,
        tasks,
        critical,
        warmup,
        measured,
        usize::MAX,
    )
    .await;
    shut_down(&managers).await;
    let (figures, commands, listed) = outcome?;
    emit_common(&figures, commands, &listed, measured.as_secs_f64());
    if let Mix::Roles { writers } = mix {
        emit("writer_tasks", writers);
    }
    emit("reads", figures.reads);
    emit("writes", figures.writes);
    emit("pending_reads", figures.pending_reads);
    emit("pending_writes", figures.pending_writes);
    for (side, waits) in [
        ("write", &figures.write_waits_ms),
        ("read", &figures.read_waits_ms),
    ] {
        for (label, q) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
            if let Some(value) = quantile(waits, q) {
                emit(&format!("{side}_wait_{label}_ms"), format!("{value:.1}"));
            }
        }
    }
    if let (Some(p99), false) = (
        quantile(&figures.write_waits_ms, 0.99),
        figures.critical_ms.is_empty(),
    ) {
        #[allow(clippy::cast_precision_loss)]
        let hold = figures.critical_ms.iter().sum::<f64>() / figures.critical_ms.len() as f64;
        emit("write_p99_over_hold", format!("{:.1}", p99 / hold));
    }
    emit("seconds", figures.seconds);
    emit("seconds_without_read", figures.seconds_without_read);
    emit("seconds_without_write", figures.seconds_without_write);
    backend.finish().await;
    Ok(())
}
