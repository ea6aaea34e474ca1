//! `Lock::run_locked` (run a future while holding a lock) on the memory store under Tokio's
//! paused clock; and, the one other test of a convenience with no store behind it, the
//! holder identity's host part.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mongolock::HolderId;
use mongolock::{LockError, LockManager, LockName, LockOptions, LossReason, MemoryStore};
use tokio::sync::oneshot;
use tokio::time::Instant;

const EXPIRY: Duration = Duration::from_secs(3);

async fn manager(store: &MemoryStore) -> LockManager {
    LockManager::start(
        store.clone(),
        LockOptions::default().with_lease_duration(EXPIRY),
    )
    .await
    .expect("the manager starts")
}

/// Sets its flag when dropped: tells whether a future was dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn run_locked_returns_the_output_and_releases_before_returning() {
    let store = MemoryStore::new();
    let (ours, theirs) = (manager(&store).await, manager(&store).await);
    let lock = ours.lock("report").unwrap();
    let peer = theirs.lock("report").unwrap();

    let (token, stored, taken_meanwhile) = lock
        .run_locked(async |guard| {
            let stored = lock.inspect().await.unwrap().expect("a record").token;
            let taken = peer.try_acquire().await.unwrap().is_some();
            (guard.token(), stored, taken)
        })
        .await
        .unwrap();

    assert!(!taken_meanwhile, "the work ran while the lock was held");
    assert_eq!(token, stored, "the work has the grant's token at hand");
    assert_eq!(
        lock.inspect()
            .await
            .unwrap()
            .and_then(|record| record.holder().cloned()),
        None,
        "released by the time run_locked returns, not left to expire"
    );
    let next = peer.try_acquire().await.unwrap().expect("free for others");
    assert!(next.token() > token);
}

#[tokio::test(start_paused = true)]
async fn a_loss_mid_run_drops_the_work_at_once_and_says_why() {
    let store = MemoryStore::new();
    let ours = manager(&store).await;
    let lock = ours.lock("job").unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let (started, signal) = oneshot::channel();

    // Spawned, so the helper's future must be `Send` with an async closure borrowing the guard.
    let run = tokio::spawn({
        let (lock, dropped) = (lock.clone(), dropped.clone());
        async move {
            lock.run_locked(async move |guard| {
                let _dropped = SetOnDrop(dropped);
                started.send(guard.loss_signal()).unwrap();
                std::future::pending::<()>().await;
            })
            .await
        }
    });
    let signal = signal.await.expect("the work started");
    assert!(
        store.remove(&LockName::new("job").unwrap()),
        "record deleted"
    );
    let reason = signal.lost().await;
    let lost_at = Instant::now();

    let result = tokio::time::timeout(EXPIRY, run)
        .await
        .expect("run_locked returns after the loss")
        .unwrap();
    assert_eq!(reason, LossReason::Superseded);
    assert!(
        matches!(result, Err(LockError::Lost(LossReason::Superseded))),
        "{result:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the work's future was dropped"
    );
    assert_eq!(
        lost_at.elapsed(),
        Duration::ZERO,
        "stopped when the loss was signalled, no timer later"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_run_locked_mid_work_drops_the_work_and_releases() {
    let store = MemoryStore::new();
    let (ours, theirs) = (manager(&store).await, manager(&store).await);
    let lock = ours.lock("cancelled").unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let (started, running) = oneshot::channel();

    let mut run = Box::pin(lock.run_locked({
        let dropped = dropped.clone();
        async move |_guard| {
            let _dropped = SetOnDrop(dropped);
            started.send(()).unwrap();
            std::future::pending::<()>().await;
        }
    }));
    tokio::select! {
        result = &mut run => panic!("the work never finishes, yet: {result:?}"),
        _ = running => {}
    }
    drop(run);

    assert!(
        dropped.load(Ordering::SeqCst),
        "the work's future was dropped"
    );
    let requested = Instant::now();
    let taken = theirs
        .lock("cancelled")
        .unwrap()
        .acquire_timeout(EXPIRY / 2)
        .await;
    assert!(
        taken.is_ok(),
        "released on cancellation, not left to expire: {taken:?} after {:?}",
        requested.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn run_locked_timeout_gives_up_without_running_the_work() {
    let store = MemoryStore::new();
    let (ours, theirs) = (manager(&store).await, manager(&store).await);
    let _held = theirs.lock("busy").unwrap().acquire().await.unwrap();
    let ran = AtomicBool::new(false);
    let timeout = Duration::from_millis(500);

    let result = ours
        .lock("busy")
        .unwrap()
        .run_locked_timeout(timeout, async |_guard| ran.store(true, Ordering::SeqCst))
        .await;

    assert!(
        matches!(result, Err(LockError::Timeout(t)) if t == timeout),
        "{result:?}"
    );
    assert!(!ran.load(Ordering::SeqCst), "the work must not run");
}

#[tokio::test(start_paused = true)]
async fn run_locked_timeout_runs_the_work_past_the_timeout_once_acquired() {
    let store = MemoryStore::new();
    let ours = manager(&store).await;
    let lock = ours.lock("slow").unwrap();
    let output = lock
        .run_locked_timeout(Duration::from_millis(10), async |guard| {
            tokio::time::sleep(EXPIRY * 2).await; // renewed meanwhile
            guard.loss()
        })
        .await
        .unwrap();
    assert_eq!(output, None, "held throughout");
}

#[test]
fn the_holder_id_starts_with_the_os_host_name() {
    let output = std::process::Command::new("hostname")
        .output()
        .expect("the `hostname` command runs (Debian: apt-get install hostname)");
    let host = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(!host.is_empty(), "`hostname` printed nothing");
    let id = HolderId::generate();
    assert!(
        id.as_str()
            .starts_with(&format!("{host}:{}:", std::process::id())),
        "{id} does not start with {host}:{}:",
        std::process::id()
    );
}
