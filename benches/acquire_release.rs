//! S2: cost of an uncontended acquire + release through the runtime on the memory store, next
//! to one and two plain tokio mpsc + oneshot round trips measured in the same run (the floor
//! any actor-based design pays per message exchange; acquire + release is two exchanges).
//!
//! `cargo bench -p mongolock-benches --bench acquire_release`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

#[path = "support/channels.rs"]
mod channels;

use channels::Echo;
use criterion::{Criterion, criterion_group, criterion_main};
use mongolock::{LockManager, LockOptions, MemoryStore};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot build a tokio runtime: {error}"),
    }
}

fn acquire_release(c: &mut Criterion) {
    let rt = runtime();
    let manager = rt
        .block_on(LockManager::start(
            MemoryStore::new(),
            LockOptions::default(),
        ))
        .expect("manager starts");
    let lock = manager.lock("bench").expect("valid name");

    let mut group = c.benchmark_group("uncontended");
    group.bench_function("acquire+release (memory store)", |b| {
        b.to_async(&rt).iter(|| async {
            let guard = lock.acquire().await.expect("uncontended acquire");
            guard.release().await.expect("release");
        });
    });
    group.bench_function("try_acquire+release (memory store)", |b| {
        b.to_async(&rt).iter(|| async {
            let guard = lock
                .try_acquire()
                .await
                .expect("try_acquire")
                .expect("free");
            guard.release().await.expect("release");
        });
    });

    let echo = rt.block_on(async { Echo::spawn() });
    group.bench_function("baseline: mpsc+oneshot round trip", |b| {
        b.to_async(&rt).iter(|| echo.round_trip());
    });
    group.bench_function("baseline: two mpsc+oneshot round trips", |b| {
        b.to_async(&rt).iter(|| echo.two_round_trips());
    });
    group.finish();
    rt.block_on(manager.shutdown());
}

criterion_group!(benches, acquire_release);
criterion_main!(benches);
