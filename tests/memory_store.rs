//! The conformance suite on the embedded [`MemoryStore`], under Tokio's paused clock: every
//! timing (expiry, cadence, deadlines, backoff) runs exactly and instantly.

#[macro_use]
mod common;

use async_trait::async_trait;
use common::Backend;
use mongolock::{LockName, MemoryStore};

struct Memory;

#[async_trait]
impl Backend for Memory {
    type Store = MemoryStore;

    async fn fresh(&self) -> MemoryStore {
        MemoryStore::new()
    }

    async fn peer(&self, store: &MemoryStore) -> MemoryStore {
        store.clone()
    }

    async fn delete_record(&self, store: &MemoryStore, name: &LockName) {
        store.remove(name);
    }
}

conformance_suite!(Memory, start_paused = true);

/// No task or timer outlives its purpose: after many acquire/release cycles the runtime is
/// back to the tasks it had before, and the timer service holds no timer of a released hold
/// (they are cancelled, not left until they fire; a loss notification of a released hold
/// ends).
#[tokio::test(start_paused = true)]
async fn released_holds_leave_no_sleeping_timers() {
    use mongolock::{LockManager, LockOptions};
    use std::time::Duration;

    let manager = LockManager::start(MemoryStore::new(), LockOptions::default())
        .await
        .unwrap();
    let lock = manager.lock("cycled").unwrap();
    lock.acquire().await.unwrap().release().await.unwrap();
    // Let the first cycle's background work finish; what is alive now is the baseline (the
    // supervisor, the lock actor, the renewer, the timer service, the store's sweeper).
    tokio::time::sleep(Duration::from_millis(1)).await;
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let baseline = alive() + 1; // the sink actor below
    let (sink, _) = ractor::Actor::spawn(None, Sink, ()).await.unwrap();
    for _ in 0..200 {
        let guard = lock.acquire().await.unwrap();
        guard.notify(&sink, |_| ()); // watches for a loss that never comes
        guard.release().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        alive(),
        baseline,
        "tasks left behind by 200 acquire/release cycles"
    );
    assert_eq!(
        manager.pending_timers(),
        1,
        "timers left behind by 200 acquire/release cycles (only the idle actor's stop is due)"
    );
    let held = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(manager.pending_timers(), 1, "one timer per held lock");
    held.release().await.unwrap();
    manager.shutdown().await;
}

/// An actor that ignores what it is sent.
struct Sink;

impl ractor::Actor for Sink {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ractor::ActorRef<()>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}
