//! S5: one manager holding N locks through three renewal cadences: how many it loses, how
//! many commands renewal costs, how much memory a held lock takes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mongolock::{LockGuard, LockOptions};

use crate::child::{Args, Side, emit, scratch_name};
use crate::support::probe;

/// Acquires `n` distinct locks with `concurrency` tasks, holds them for three cadences and
/// reports; every phase is capped so a struggling runtime still yields figures.
pub(crate) async fn s5(args: &Args) -> Result<(), String> {
    let n = args.get("n", 1000_usize);
    let cadence = args.millis("cadence_ms", 2000);
    let expiry = args.millis("expiry_ms", 6000);
    let concurrency = args.get("concurrency", 64_usize).max(1);
    let acquire_cap = args.millis("acquire_cap_ms", 60_000);
    let options = LockOptions::default()
        .with_lease_duration(expiry)
        .with_renew_interval(cadence);
    let side = Side::connect("s5", &scratch_name("s5")).await?;
    let manager = side.manager(options).await?;
    // Warm the client and the runtime before the memory baseline.
    let warm = manager.lock("s5-warm").map_err(|e| e.to_string())?;
    crate::support::contender::cycle(&warm).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = probe::rss_kib().unwrap_or(0);

    let next = Arc::new(AtomicUsize::new(0));
    let deadline = tokio::time::Instant::now() + acquire_cap;
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (next, manager) = (Arc::clone(&next), manager.clone());
        workers.spawn(async move {
            let mut held: Vec<LockGuard> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, String>(held);
                }
                let lock = manager
                    .lock(format!("s5-{i:06}"))
                    .map_err(|e| e.to_string())?;
                match tokio::time::timeout_at(deadline, lock.acquire()).await {
                    Ok(guard) => held.push(guard.map_err(|e| format!("acquire: {e}"))?),
                    Err(_) => return Ok(held),
                }
            }
        });
    }
    let mut guards: Vec<LockGuard> = Vec::with_capacity(n);
    while let Some(joined) = workers.join_next().await {
        guards.extend(joined.map_err(|e| format!("S5 worker: {e}"))??);
    }
    let acquire_time = started.elapsed();
    emit("acquired", guards.len());
    emit("acquire_s", format!("{:.1}", acquire_time.as_secs_f64()));
    if guards.len() < n {
        emit("timeout", format!("acquire>{}s", acquire_cap.as_secs()));
    }
    let lost_while_acquiring = guards.iter().filter(|g| g.loss().is_some()).count();
    emit("lost_while_acquiring", lost_while_acquiring);
    let rss_held = probe::rss_kib().unwrap_or(0);
    #[allow(clippy::cast_precision_loss)]
    if !guards.is_empty() {
        emit(
            "kib_per_lock",
            format!(
                "{:.2}",
                rss_held.saturating_sub(rss_before) as f64 / guards.len() as f64
            ),
        );
    }

    let before = side.log.counts();
    tokio::time::sleep(cadence * 3).await;
    let renewals = side.log.counts().since(&before);
    let lost = guards.iter().filter(|g| g.loss().is_some()).count();
    emit("lost", lost);
    #[allow(clippy::cast_precision_loss)]
    emit(
        "cmds_per_cadence",
        format!("{:.1}", renewals.total() as f64 / 3.0),
    );
    emit("renewal_commands", renewals.to_string().replace(' ', ""));

    // Releasing is not measured; bounded so a wedged client cannot hold the run.
    let released = tokio::time::timeout(Duration::from_secs(30), async {
        drop(guards);
        manager.shutdown().await;
    })
    .await;
    if released.is_err() {
        emit("shutdown", "timeout>30s");
    }
    side.drop_database().await;
    Ok(())
}
