//! S3: one lock, many tasks in two "processes" (each with its own client and, for mongolock,
//! its own manager), a short critical section. Every acquisition is timed in one process, so
//! the timeline of waits and holds is exact.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use distributed_lock_mongo::MongoDistributedLock;
use mongolock::{Fairness, LockOptions};
use tokio::time::Instant;

use crate::child::{Args, Side, emit, scratch_name};
use crate::latency::{DL_COLLECTION, PEER_COLLECTION};
use crate::support::commands::CommandCounts;
use crate::support::contender::Contender;
use crate::support::dlock::{DlLock, DlOptions};
use crate::support::stats::{millis, quantile};

/// One acquisition: when its task started waiting, got the lock, called release and saw
/// release return.
#[derive(Debug, Clone, Copy)]
struct Hold {
    side: usize,
    waited: Instant,
    acquired: Instant,
    releasing: Instant,
    released: Instant,
}

#[derive(Debug, Default)]
struct Timeline {
    holds: Vec<Hold>,
    /// Waits still unanswered when the run ended: the side, and when it began.
    pending: Vec<(usize, Instant)>,
}

/// The loop of one task: acquire, hold for `critical`, release, until `end`.
async fn contend<C: Contender>(
    side: usize,
    contender: Arc<C>,
    critical: Duration,
    end: Instant,
    timeline: Arc<Mutex<Timeline>>,
) -> Result<(), String> {
    let record = |update: &dyn Fn(&mut Timeline)| {
        update(&mut timeline.lock().unwrap_or_else(PoisonError::into_inner));
    };
    loop {
        let waited = Instant::now();
        if waited >= end {
            return Ok(());
        }
        let held = match tokio::time::timeout_at(end, contender.acquire()).await {
            Ok(held) => held?,
            Err(_) => {
                record(&|timeline| timeline.pending.push((side, waited)));
                return Ok(());
            }
        };
        let acquired = Instant::now();
        tokio::time::sleep(critical).await;
        let releasing = Instant::now();
        contender.release(held).await?;
        let released = Instant::now();
        record(&|timeline| {
            timeline.holds.push(Hold {
                side,
                waited,
                acquired,
                releasing,
                released,
            });
        });
    }
}

/// What the timeline says about the window `[from, to]`.
#[derive(Debug, Default)]
struct Figures {
    acquisitions: usize,
    /// Share of the time someone waited during which nobody held the lock.
    free_while_waiting: f64,
    /// Critical sections that overlapped another one (must be 0).
    overlaps: usize,
    /// Hand-overs between the two sides: release called on one, acquire returned on the other.
    handovers_ms: Vec<f64>,
    per_side: [usize; 2],
    /// Critical sections (acquire returned → release called) in the window: their mean
    /// bounds the acquisitions per second any lock can reach.
    critical_ms: Vec<f64>,
    /// Per side, each acquisition's wait (acquire called → returned) for those granted in
    /// the window, and for waits still unanswered at its end their wait so far.
    waits_ms: [Vec<f64>; 2],
}

fn figures(timeline: &Timeline, from: Instant, to: Instant) -> Figures {
    let mut holds: Vec<Hold> = timeline.holds.clone();
    holds.sort_by_key(|hold| hold.acquired);
    let mut figures = Figures::default();
    // Sweep over (time, Δheld, Δwaiting), clipped to the window.
    let mut edges: Vec<(Instant, i32, i32)> = Vec::new();
    let clip = |t: Instant| t.clamp(from, to);
    for hold in &holds {
        edges.push((clip(hold.waited), 0, 1));
        edges.push((clip(hold.acquired), 0, -1));
        edges.push((clip(hold.acquired), 1, 0));
        edges.push((clip(hold.released), -1, 0));
        if (from..=to).contains(&hold.acquired) {
            figures.acquisitions += 1;
            figures.per_side[hold.side.min(1)] += 1;
            figures.critical_ms.push(millis(
                hold.releasing.saturating_duration_since(hold.acquired),
            ));
            figures.waits_ms[hold.side.min(1)]
                .push(millis(hold.acquired.saturating_duration_since(hold.waited)));
        }
    }
    for &(side, waited) in &timeline.pending {
        edges.push((clip(waited), 0, 1));
        edges.push((to, 0, -1));
        figures.waits_ms[side.min(1)].push(millis(to.saturating_duration_since(waited)));
    }
    // Ends before starts at equal instants, so a hand-over at one instant is not a gap.
    edges.sort_by_key(|&(t, held, waiting)| (t, held.min(waiting) >= 0));
    let (mut held, mut waiting) = (0_i32, 0_i32);
    let (mut waited_total, mut free_total) = (Duration::ZERO, Duration::ZERO);
    let mut last = from;
    for (t, d_held, d_waiting) in edges {
        let span = t.saturating_duration_since(last);
        if waiting > 0 {
            waited_total += span;
            if held == 0 {
                free_total += span;
            }
        }
        held += d_held;
        waiting += d_waiting;
        last = t;
    }
    figures.free_while_waiting = if waited_total.is_zero() {
        0.0
    } else {
        free_total.as_secs_f64() / waited_total.as_secs_f64()
    };
    let mut critical_end: Option<Instant> = None;
    for pair in holds.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        if after.side != before.side && (from..=to).contains(&after.acquired) {
            figures.handovers_ms.push(millis(
                after.acquired.saturating_duration_since(before.releasing),
            ));
        }
    }
    for hold in &holds {
        if critical_end.is_some_and(|end| hold.acquired < end) {
            figures.overlaps += 1;
        }
        critical_end = Some(critical_end.map_or(hold.releasing, |end| end.max(hold.releasing)));
    }
    figures
}

/// Runs `tasks` tasks split over the two sides' contenders; returns the figures of the
/// window after `warmup` and the commands both clients sent in it.
async fn run<C: Contender>(
    sides: &[Side; 2],
    contenders: [Arc<C>; 2],
    tasks: usize,
    critical: Duration,
    warmup: Duration,
    measured: Duration,
) -> Result<(Figures, CommandCounts), String> {
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let start = Instant::now();
    let (from, to) = (start + warmup, start + warmup + measured);
    let mut joins = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let side = task % 2;
        joins.spawn(contend(
            side,
            Arc::clone(&contenders[side]),
            critical,
            to,
            Arc::clone(&timeline),
        ));
    }
    let counts = || {
        let mut total = sides[0].log.counts();
        total.add(&sides[1].log.counts());
        total
    };
    tokio::time::sleep_until(from).await;
    let before = counts();
    tokio::time::sleep_until(to).await;
    let commands = counts().since(&before);
    // Tasks finish their last critical section; a release stuck past this is a failure.
    let finished = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(joined) = joins.join_next().await {
            joined.map_err(|e| format!("S3 task: {e}"))??;
        }
        Ok::<(), String>(())
    })
    .await;
    match finished {
        Ok(result) => result?,
        Err(_) => return Err("S3 tasks did not finish within 30 s of the end".to_owned()),
    }
    let timeline = timeline.lock().unwrap_or_else(PoisonError::into_inner);
    Ok((figures(&timeline, from, to), commands))
}

/// The fairness bound of `mongolock-bound800`: the backoff's maximum, which was both the
/// threshold and the step back of the rule before the bound (starvation mode).
const BOUND_AS_BEFORE: Duration = Duration::from_millis(800);

/// S3 for `system`: `mongolock`, `mongolock-random`, `mongolock-bound800`, `mongolock-fifo`
/// (arrival order across processes), `dl` or `peer`.
pub(crate) async fn s3(args: &Args) -> Result<(), String> {
    let system = args.text("system", "mongolock");
    let tasks = args.get("tasks", 64_usize);
    let critical = args.millis("critical_ms", 1);
    let warmup = args.millis("warmup_ms", 1000);
    let measured = args.millis("millis", 10_000);
    let database = scratch_name("s3");
    let sides = [
        Side::connect("s3-a", &database).await?,
        Side::connect("s3-b", &database).await?,
    ];
    let name = "s3";
    let outcome = match system.as_str() {
        "mongolock" | "mongolock-random" | "mongolock-bound800" | "mongolock-fifo" => {
            let mut options =
                LockOptions::default().with_adaptive_backoff(system != "mongolock-random");
            if system == "mongolock-bound800" {
                options = options.with_fairness_bound(BOUND_AS_BEFORE);
            }
            if system == "mongolock-fifo" {
                options = options.with_fairness(Fairness::ArrivalOrder);
            }
            let managers = [
                sides[0].manager(options.clone()).await?,
                sides[1].manager(options).await?,
            ];
            let locks = [
                Arc::new(managers[0].lock(name).map_err(|e| e.to_string())?),
                Arc::new(managers[1].lock(name).map_err(|e| e.to_string())?),
            ];
            let outcome = run(&sides, locks, tasks, critical, warmup, measured).await;
            for manager in &managers {
                let _ = tokio::time::timeout(Duration::from_secs(10), manager.shutdown()).await;
            }
            outcome
        }
        "dl" => {
            let lock = |side: &Side| {
                Arc::new(DlLock::new(
                    &side.database,
                    DL_COLLECTION,
                    name,
                    DlOptions::default(),
                ))
            };
            let locks = [lock(&sides[0]), lock(&sides[1])];
            locks[0].ensure_ttl_index().await?;
            run(&sides, locks, tasks, critical, warmup, measured).await
        }
        "peer" => {
            let lock = |side: &Side| {
                Arc::new(MongoDistributedLock::new(
                    name.to_owned(),
                    side.database.clone(),
                    Some(PEER_COLLECTION.to_owned()),
                    None,
                ))
            };
            run(
                &sides,
                [lock(&sides[0]), lock(&sides[1])],
                tasks,
                critical,
                warmup,
                measured,
            )
            .await
        }
        other => return Err(format!("unknown S3 system {other:?}")),
    };
    let (figures, commands) = outcome?;
    let seconds = measured.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    {
        let acquisitions = figures.acquisitions as f64;
        emit("acq_per_s", format!("{:.1}", acquisitions / seconds));
        emit(
            "held_pct",
            format!("{:.1}", 100.0 * (1.0 - figures.free_while_waiting)),
        );
        emit(
            "cmds_per_acq",
            format!("{:.2}", commands.total() as f64 / acquisitions.max(1.0)),
        );
        emit("commands", commands.to_string().replace(' ', ""));
        emit(
            "share_a_pct",
            format!(
                "{:.1}",
                100.0 * figures.per_side[0] as f64 / acquisitions.max(1.0)
            ),
        );
    }
    #[allow(clippy::cast_precision_loss)]
    if !figures.critical_ms.is_empty() {
        let critical_ms =
            figures.critical_ms.iter().sum::<f64>() / figures.critical_ms.len() as f64;
        emit("critical_ms", format!("{critical_ms:.2}"));
        // The ceiling: back-to-back critical sections with no gap at all.
        let acquisitions = figures.acquisitions as f64;
        emit(
            "of_ceiling_pct",
            format!(
                "{:.1}",
                100.0 * acquisitions / seconds * critical_ms / 1000.0
            ),
        );
    }
    emit_waits(&figures, tasks, measured);
    emit("overlaps", figures.overlaps);
    emit("handovers", figures.handovers_ms.len());
    if let (Some(p50), Some(p99)) = (
        quantile(&figures.handovers_ms, 0.5),
        quantile(&figures.handovers_ms, 0.99),
    ) {
        emit("handover_p50_ms", format!("{p50:.1}"));
        emit("handover_p99_ms", format!("{p99:.1}"));
    }
    sides[0].drop_database().await;
    Ok(())
}

/// Each acquisition's wait: p50, p99 and max per side and overall, and the two worst against
/// the FIFO share, (tasks − 1) × the mean gap between grants — what a task would wait if the
/// lock went round all tasks in strict arrival order at the measured rate.
#[allow(clippy::cast_precision_loss)]
fn emit_waits(figures: &Figures, tasks: usize, measured: Duration) {
    let all: Vec<f64> = figures.waits_ms.concat();
    let max = |waits: &[f64]| {
        waits
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))))
    };
    for (label, waits) in [
        ("", &all[..]),
        ("_a", &figures.waits_ms[0][..]),
        ("_b", &figures.waits_ms[1][..]),
    ] {
        if let (Some(p50), Some(p99), Some(max)) =
            (quantile(waits, 0.5), quantile(waits, 0.99), max(waits))
        {
            emit(&format!("wait{label}_p50_ms"), format!("{p50:.1}"));
            emit(&format!("wait{label}_p99_ms"), format!("{p99:.1}"));
            emit(&format!("wait{label}_max_ms"), format!("{max:.1}"));
        }
    }
    if figures.acquisitions == 0 {
        return;
    }
    let gap_ms = millis(measured) / figures.acquisitions as f64;
    let fifo_share_ms = (tasks.saturating_sub(1)) as f64 * gap_ms;
    emit("fifo_share_ms", format!("{fifo_share_ms:.1}"));
    if let (Some(p99), Some(max)) = (quantile(&all, 0.99), max(&all)) {
        emit("wait_p99_fifo", format!("{:.2}", p99 / fifo_share_ms));
        emit("wait_max_fifo", format!("{:.2}", max / fifo_share_ms));
    }
}
