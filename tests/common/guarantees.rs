//! Conformance scenarios for the guarantees a fast path could break: the loss margin (a
//! holder told of a loss has `expiry − renew_deadline` to stop before anyone else is
//! granted the lock) and the hold's validity at release.

use std::time::Duration;

use mongolock::LossReason;
use tokio::time::{Instant, sleep, timeout, timeout_at};

use super::{Backend, SLACK, fast_options, start};
use mongolock::testing::FaultyStore;

/// A renewal hangs and the store answers again shortly before the holder's deadline: the
/// holder is told at the deadline, and the lease it may still be working under stays on the
/// store — nobody else is granted the lock for the promised margin — unless the holder lets
/// go first, which frees it at once.
///
/// The holder that lets go runs in a manager of its own, whose store stays hung until that
/// holder was told: in one manager its renewal could miss the hung command (sent a little
/// later, on a loaded machine) and go through once the store recovered, and a lease renewed
/// in time is not lost.
pub(crate) async fn loss_margin_holds_when_the_store_recovers_before_the_deadline<B: Backend>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let faulty = FaultyStore::new(store.clone());
    let a = start(faulty.clone()).await;
    let faulty_dropped = FaultyStore::new(backend.peer(&store).await);
    let a_dropped = start(faulty_dropped.clone()).await;
    let b = start(backend.peer(&store).await).await;
    let options = fast_options();
    let margin = options.lease_duration() - options.renew_deadline();
    let kept = a.lock("margin-kept").unwrap().acquire().await.unwrap();
    let dropped = a_dropped
        .lock("margin-dropped")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let acquired = Instant::now();

    // The first renewal (one cadence in) hangs; the store answers again before the deadline.
    sleep(options.renew_interval() / 2).await;
    // Every renewal that got through was sent before this: each hold's deadline is within
    // a renew deadline of it.
    let hang_began = Instant::now();
    faulty.hang();
    faulty_dropped.hang();
    sleep(options.renew_deadline() - options.renew_interval()).await;
    faulty.heal();

    let contender = |name: &'static str| {
        let lock = b.lock(name).unwrap();
        tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(10)).await;
            (Instant::now(), guard)
        })
    };
    let (kept_contender, dropped_contender) =
        (contender("margin-kept"), contender("margin-dropped"));

    let reason = timeout(options.renew_deadline() + SLACK, kept.lost())
        .await
        .expect("the holder was not told by its deadline");
    assert_eq!(reason, LossReason::DeadlineExceeded);
    let told = Instant::now();
    assert!(
        told - acquired < options.lease_duration(),
        "told after the lease could expire"
    );

    // Letting go acknowledges the loss: that lease is freed at once.
    let reason = timeout_at(
        hang_began + options.renew_deadline() + SLACK,
        dropped.lost(),
    )
    .await
    .expect("the second holder was not told by its deadline");
    assert_eq!(reason, LossReason::DeadlineExceeded);
    let dropped_told = Instant::now();
    faulty_dropped.heal();
    drop(dropped);
    let (granted, guard) = dropped_contender.await.unwrap();
    let _granted = guard.expect("the lock its holder let go of was not granted");
    assert!(
        granted - dropped_told < SLACK,
        "a lease whose holder let go was freed only {:?} after the loss",
        granted - dropped_told
    );

    // The holder that keeps its guard keeps the margin it was promised.
    let (granted, guard) = kept_contender.await.unwrap();
    let _granted = guard.expect("the lock was not granted after the margin");
    let after = granted - told;
    assert!(
        after + SLACK / 4 >= margin,
        "another process was granted the lock {after:?} after the holder was told; the margin is {margin:?}"
    );
    drop(kept);
}
