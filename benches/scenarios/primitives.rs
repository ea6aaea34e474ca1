//! Issue 17's rows on the primitives beside the mutex: P1, one task cycling a semaphore
//! permit, a read lock, a write lock and a multi-lock, interleaved cycle by cycle with the
//! mutex cycle they are judged against; P4, one manager holding many permits across many
//! semaphores through three renewal cadences. P2 and P3 (contention) are in
//! `shared_contention.rs`.
//!
//! Every child here also runs on the memory store (`store=memory`, no command counts), to
//! tell the runtime's share of a figure from the server's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mongolock::{LockGuard, LockManager, LockOptions, MemoryStore, MongoStore, Semaphore};

use crate::child::{Args, Side, emit, scratch_name};
use crate::support::commands::CommandCounts;
use crate::support::contender::{Reading, Writing, cycle};
use crate::support::floor::Floor;
use crate::support::probe;
use crate::support::stats::{micros, quantile};

/// Where a child's managers keep their locks: the MongoDB server (one counted client per
/// "process") or one memory store they all share.
pub(crate) enum Backend {
    Mongo(Vec<Side>),
    Memory(MemoryStore),
}

impl Backend {
    /// `processes` clients on one scratch database, or a memory store with `store=memory`.
    pub(crate) async fn open(args: &Args, label: &str, processes: usize) -> Result<Self, String> {
        if args.text("store", "mongo") == "memory" {
            return Ok(Self::Memory(MemoryStore::new()));
        }
        let database = scratch_name(label);
        let mut sides = Vec::with_capacity(processes);
        for process in 0..processes {
            sides.push(Side::connect(&format!("{label}-{process}"), &database).await?);
        }
        Ok(Self::Mongo(sides))
    }

    /// A manager of "process" `process` (its own client on MongoDB).
    pub(crate) async fn manager(
        &self,
        process: usize,
        options: LockOptions,
    ) -> Result<LockManager, String> {
        match self {
            Self::Mongo(sides) => {
                let side = sides
                    .get(process)
                    .ok_or_else(|| format!("no client for process {process}"))?;
                side.manager(options).await
            }
            Self::Memory(store) => LockManager::start(store.clone(), options)
                .await
                .map_err(|e| format!("manager start: {e}")),
        }
    }

    /// The commands every client sent so far; `None` on the memory store.
    pub(crate) fn counts(&self) -> Option<CommandCounts> {
        match self {
            Self::Mongo(sides) => {
                let mut total = CommandCounts::default();
                for side in sides {
                    total.add(&side.log.counts());
                }
                Some(total)
            }
            Self::Memory(_) => None,
        }
    }

    /// Drops the scratch database, if any.
    pub(crate) async fn finish(&self) {
        if let Self::Mongo(sides) = self
            && let Some(side) = sides.first()
        {
            side.drop_database().await;
        }
    }
}

/// The kinds P1 cycles, in the order of their figures' names: the primitives, then (on
/// MongoDB) the driver floors of the mutex, the semaphore and the read lock — the very
/// commands each sent, replayed through the driver with no runtime — which tell the server's
/// share of a gap from the runtime's.
pub(crate) const P1_KINDS: [&str; 8] = [
    "mutex",
    "semaphore",
    "read",
    "write",
    "multi",
    "mutex_floor",
    "semaphore_floor",
    "read_floor",
];

/// The primitives P1 has floors of, with their floors' kinds.
const P1_FLOORED: [(usize, usize); 3] = [(0, 5), (1, 6), (2, 7)];

struct P1Handles {
    mutex: mongolock::Lock,
    semaphore: Semaphore,
    read: Reading,
    write: Writing,
    multi: mongolock::MultiLock,
    /// The floors of the mutex, the semaphore and the read lock (none on the memory store).
    floors: Vec<Floor>,
}

impl P1Handles {
    async fn cycle(&self, kind: usize) -> Result<(), String> {
        match kind {
            0 => cycle(&self.mutex).await,
            1 => cycle(&self.semaphore).await,
            2 => cycle(&self.read).await,
            3 => cycle(&self.write).await,
            4 => cycle(&self.multi).await,
            floor => match self.floors.get(floor - 5) {
                Some(floor) => cycle(floor).await,
                None => Err(format!("no floor for kind {floor}")),
            },
        }
    }

    /// The kinds this run cycles.
    fn kinds(&self) -> usize {
        5 + self.floors.len()
    }

    /// Captures the floors from the handles' own commands, each replayed on a name of its
    /// own.
    async fn capture_floors(&mut self, backend: &Backend) -> Result<(), String> {
        let Backend::Mongo(sides) = backend else {
            return Ok(());
        };
        let Some(side) = sides.first() else {
            return Ok(());
        };
        let collection = MongoStore::DEFAULT_COLLECTION;
        let (log, database) = (&side.log, &side.database);
        self.floors = vec![
            Floor::capture(&self.mutex, log, database, collection)
                .await?
                .for_name("p1-floor-mutex"),
            Floor::capture(&self.semaphore, log, database, collection)
                .await?
                .for_name("p1-floor-semaphore"),
            Floor::capture(&self.read, log, database, collection)
                .await?
                .for_name("p1-floor-read"),
        ];
        Ok(())
    }
}

/// P1: `cycles` rounds after `warmup`, each one cycle of every kind on its own free name(s),
/// the kind that goes first rotating, so the mutex baseline sees the same moment of the
/// machine as the rest. Commands are counted cycle by cycle (nothing else runs).
pub(crate) async fn p1(args: &Args) -> Result<(), String> {
    let cycles = args.get("cycles", 1000_usize);
    let warmup = args.get("warmup", 100_usize);
    let permits = args.get("permits", 8_u32);
    let k = args.get("k", 4_usize);
    let backend = Backend::open(args, "p1", 1).await?;
    let manager = backend.manager(0, LockOptions::default()).await?;
    let mut handles = (|| {
        Ok::<_, mongolock::LockError>(P1Handles {
            mutex: manager.lock("p1-mutex")?,
            semaphore: manager.semaphore("p1-semaphore", permits)?,
            read: Reading(manager.rw_lock("p1-read")?),
            write: Writing(manager.rw_lock("p1-write")?),
            multi: manager.multi_lock((0..k).map(|i| format!("p1-multi-{i}")))?,
            floors: Vec::new(),
        })
    })()
    .map_err(|e| e.to_string())?;
    handles.capture_floors(&backend).await?;
    let kinds = handles.kinds();
    for round in 0..warmup {
        for step in 0..kinds {
            handles.cycle((round + step) % kinds).await?;
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(cycles); kinds];
    let mut commands: Vec<CommandCounts> = vec![CommandCounts::default(); kinds];
    for round in 0..cycles {
        for step in 0..kinds {
            let kind = (round + step) % kinds;
            let before = backend.counts();
            let started = Instant::now();
            handles.cycle(kind).await?;
            times[kind].push(micros(started.elapsed()));
            if let (Some(before), Some(after)) = (before, backend.counts()) {
                commands[kind].add(&after.since(&before));
            }
        }
    }
    manager.shutdown().await;
    emit("k", k);
    emit("permits", permits);
    let mutex_p50 = quantile(&times[0], 0.5);
    for (kind, name) in P1_KINDS.iter().enumerate().take(kinds) {
        if let (Some(p50), Some(p99)) = (quantile(&times[kind], 0.5), quantile(&times[kind], 0.99))
        {
            emit(&format!("{name}_p50_us"), format!("{p50:.1}"));
            emit(&format!("{name}_p99_us"), format!("{p99:.1}"));
            if let Some(mutex) = mutex_p50.filter(|m| *m > 0.0) {
                emit(&format!("{name}_ratio"), format!("{:.3}", p50 / mutex));
            }
        }
        if matches!(backend, Backend::Mongo(_)) {
            #[allow(clippy::cast_precision_loss)]
            let per_cycle = commands[kind].total() as f64 / cycles.max(1) as f64;
            emit(&format!("{name}_cmds_per_cycle"), format!("{per_cycle:.2}"));
            emit(
                &format!("{name}_commands"),
                commands[kind].to_string().replace(' ', ""),
            );
        }
    }
    // The runtime's share (a primitive over its own floor) and the server's (a floor over
    // the mutex's floor).
    let p50 = |kind: usize| quantile(&times[kind], 0.5).filter(|p| *p > 0.0);
    if kinds > 5
        && let Some(mutex_floor) = p50(5)
    {
        for (kind, floor) in P1_FLOORED {
            if let (Some(own), Some(floor_p50)) = (p50(kind), p50(floor)) {
                emit(
                    &format!("{}_runtime_ratio", P1_KINDS[kind]),
                    format!("{:.3}", own / floor_p50),
                );
                emit(
                    &format!("{}_server_ratio", P1_KINDS[kind]),
                    format!("{:.3}", floor_p50 / mutex_floor),
                );
            }
        }
    }
    backend.finish().await;
    Ok(())
}

/// P4: one manager acquires `permits` permits of each of `sems` semaphores with
/// `concurrency` tasks (consecutive acquisitions on different names, so the per-name
/// attempts in flight do not serialise them), holds them for three cadences and reports the
/// losses, the commands in those cadences, and the memory per held permit.
pub(crate) async fn p4(args: &Args) -> Result<(), String> {
    let sems = args.get("sems", 1000_usize).max(1);
    let permits = args.get("permits", 10_u32).max(1);
    let cadence = args.millis("cadence_ms", 2000);
    let expiry = args.millis("expiry_ms", 6000);
    let concurrency = args.get("concurrency", 64_usize).max(1);
    let acquire_cap = args.millis("acquire_cap_ms", 60_000);
    let options = LockOptions::default()
        .with_lease_duration(expiry)
        .with_renew_interval(cadence);
    let backend = Backend::open(args, "p4", 1).await?;
    let manager = backend.manager(0, options).await?;
    let warm = manager
        .semaphore("p4-warm", permits)
        .map_err(|e| e.to_string())?;
    cycle(&warm).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = probe::rss_kib().unwrap_or(0);

    let handles: Arc<Vec<Semaphore>> = Arc::new(
        (0..sems)
            .map(|i| manager.semaphore(format!("p4-{i:05}"), permits))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?,
    );
    #[allow(clippy::cast_possible_truncation)]
    let total = sems * permits as usize;
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = tokio::time::Instant::now() + acquire_cap;
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (next, handles) = (Arc::clone(&next), Arc::clone(&handles));
        workers.spawn(async move {
            let mut held: Vec<LockGuard> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(semaphore) = (i < total).then(|| &handles[i % handles.len()]) else {
                    return Ok::<_, String>(held);
                };
                match tokio::time::timeout_at(deadline, semaphore.acquire()).await {
                    Ok(guard) => held.push(guard.map_err(|e| format!("acquire: {e}"))?),
                    Err(_) => return Ok(held),
                }
            }
        });
    }
    let mut guards: Vec<LockGuard> = Vec::with_capacity(total);
    while let Some(joined) = workers.join_next().await {
        guards.extend(joined.map_err(|e| format!("P4 worker: {e}"))??);
    }
    emit("sems", sems);
    emit("permits", permits);
    emit("acquired", guards.len());
    emit(
        "acquire_s",
        format!("{:.1}", started.elapsed().as_secs_f64()),
    );
    if guards.len() < total {
        emit("timeout", format!("acquire>{}s", acquire_cap.as_secs()));
    }
    emit(
        "lost_while_acquiring",
        guards.iter().filter(|g| g.loss().is_some()).count(),
    );
    let rss_held = probe::rss_kib().unwrap_or(0);
    #[allow(clippy::cast_precision_loss)]
    if !guards.is_empty() {
        emit(
            "kib_per_permit",
            format!(
                "{:.2}",
                rss_held.saturating_sub(rss_before) as f64 / guards.len() as f64
            ),
        );
    }

    let before = backend.counts();
    tokio::time::sleep(cadence * 3).await;
    let lost = guards.iter().filter(|g| g.loss().is_some()).count();
    emit("lost", lost);
    if let (Some(before), Some(after)) = (before, backend.counts()) {
        let renewals = after.since(&before);
        #[allow(clippy::cast_precision_loss)]
        emit(
            "cmds_per_cadence",
            format!("{:.1}", renewals.total() as f64 / 3.0),
        );
        emit("renewal_commands", renewals.to_string().replace(' ', ""));
    }

    // Releasing is not measured; bounded so a wedged client cannot hold the run.
    let released = tokio::time::timeout(Duration::from_secs(30), async {
        drop(guards);
        manager.shutdown().await;
    })
    .await;
    if released.is_err() {
        emit("shutdown", "timeout>30s");
    }
    backend.finish().await;
    Ok(())
}
