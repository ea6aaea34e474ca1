//! Criterion benches of S1 and S4 against the MongoDB server at `MONGODB_URI` (started by
//! `scripts/bench.sh`): an uncontended acquire + release through mongolock next to the driver
//! floor (the same commands issued directly), the DistributedLock algorithm, the peer crate
//! `distributed-lock-mongo` and the memory store; then distinct names at 1, 8 and 64
//! concurrent tasks against the floor's throughput.
//!
//! `cargo bench -p mongolock-benches --bench mongo_ops` (the markdown table with ratios comes
//! from `cargo bench -p mongolock-benches --bench scenarios`).

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

mod support;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use distributed_lock_mongo::MongoDistributedLock;
use mongodb::{Client, Database};
use mongolock::{LockManager, LockOptions, MemoryStore, MongoStore};
use support::commands::CommandLog;
use support::contender::{Contender, cycle};
use support::dlock::{DlLock, DlOptions};
use support::floor::Floor;
use tokio::runtime::Runtime;

fn must<T>(result: Result<T, String>) -> T {
    result.unwrap_or_else(|e| panic!("{e}"))
}

/// A runtime, a counted client on a scratch database, a default manager on it, and the driver
/// floor captured from such a manager.
struct Setup {
    rt: Runtime,
    client: Client,
    database: Database,
    manager: LockManager,
    floor: Floor,
}

impl Setup {
    fn new(label: &str) -> Self {
        let rt = support::runtime();
        let log = CommandLog::new();
        let client = rt.block_on(async {
            must(support::server::client(&support::server::uri(), "mongo_ops", &log).await)
        });
        let database = support::server::scratch_database(&client, label);
        let manager = rt
            .block_on(LockManager::start(
                MongoStore::new(database.clone()),
                LockOptions::default(),
            ))
            .expect("manager starts");
        let floor = must(rt.block_on(Floor::of_default_manager(&database, &log)));
        Self {
            rt,
            client,
            database,
            manager,
            floor,
        }
    }

    /// Stops the manager, drops the scratch database and shuts the client down before the
    /// runtime goes, so no driver task is left waiting on a dropped pool.
    fn finish(self) {
        self.rt.block_on(async {
            self.manager.shutdown().await;
            let _ = self.database.drop().await;
            self.client.shutdown().await;
        });
    }
}

fn bench_cycle<C: Contender>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &Runtime,
    label: &str,
    contender: &C,
) {
    group.bench_function(label, |b| {
        b.to_async(rt)
            .iter(|| async { must(cycle(contender).await) });
    });
}

fn s1(c: &mut Criterion) {
    let setup = Setup::new("criterion");
    let (rt, database) = (&setup.rt, &setup.database);
    let lock = setup.manager.lock("s1").expect("valid name");
    let floor = setup.floor.for_name("s1-floor");
    let dl = DlLock::new(database, "dl_locks", "s1", DlOptions::default());
    must(rt.block_on(dl.ensure_ttl_index()));
    let peer = MongoDistributedLock::new(
        "s1".to_owned(),
        database.clone(),
        Some("peer_locks".to_owned()),
        None,
    );
    let memory = rt
        .block_on(LockManager::start(
            MemoryStore::new(),
            LockOptions::default(),
        ))
        .expect("manager starts");
    let memory_lock = memory.lock("s1").expect("valid name");

    let mut group = c.benchmark_group("s1 uncontended acquire+release");
    bench_cycle(&mut group, rt, "mongolock (MongoDB)", &lock);
    let label = format!("driver floor ({})", floor.describe());
    bench_cycle(&mut group, rt, &label, &floor);
    bench_cycle(&mut group, rt, "DistributedLock algorithm", &dl);
    bench_cycle(&mut group, rt, "distributed-lock-mongo 0.2", &peer);
    bench_cycle(&mut group, rt, "mongolock (memory store)", &memory_lock);
    group.finish();

    rt.block_on(memory.shutdown());
    drop(lock);
    setup.finish();
}

/// `tasks` tasks, one contender each, each doing `iters` cycles: the time for all of them.
async fn concurrently<C: Contender + Clone>(contenders: &[C], iters: u64) -> Duration {
    let started = Instant::now();
    let mut joins = tokio::task::JoinSet::new();
    for contender in contenders {
        let contender = contender.clone();
        joins.spawn(async move {
            for _ in 0..iters {
                must(cycle(&contender).await);
            }
        });
    }
    while let Some(joined) = joins.join_next().await {
        joined.expect("task finished");
    }
    started.elapsed()
}

fn s4(c: &mut Criterion) {
    let setup = Setup::new("criterion_s4");
    let (rt, manager, floor) = (&setup.rt, &setup.manager, &setup.floor);
    let mut group = c.benchmark_group("s4 distinct names");
    group.sample_size(10);
    for tasks in [1_usize, 8, 64] {
        let locks: Vec<_> = (0..tasks)
            .map(|i| manager.lock(format!("s4-{i}")).expect("valid name"))
            .collect();
        let floors: Vec<Floor> = (0..tasks)
            .map(|i| floor.for_name(&format!("s4-floor-{i}")))
            .collect();
        group.throughput(Throughput::Elements(tasks as u64));
        group.bench_function(format!("mongolock, {tasks} tasks"), |b| {
            b.to_async(rt)
                .iter_custom(|iters| concurrently(&locks, iters));
        });
        group.bench_function(format!("driver floor, {tasks} tasks"), |b| {
            b.to_async(rt)
                .iter_custom(|iters| concurrently(&floors, iters));
        });
    }
    group.finish();
    setup.finish();
}

criterion_group!(benches, s1, s4);
criterion_main!(benches);
