//! `mongolock run`: acquire, run the command while the lock is held, release.

use std::time::Duration;

use tokio::time::Instant;

use super::child::Child;
use super::connect::Endpoint;
use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CliError, RunArgs, duration, exit_code};
use mongolock::{AtRisk, Lock, LockError, LockGuard, LockManager, LockName, LockOptions};

/// How often a waiting `run` says it is still waiting.
const WAIT_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Runs `mongolock run`; returns the command's exit code.
pub(super) async fn run(
    args: RunArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    // Everything that can be checked without a server is checked first.
    let name = LockName::new(&args.lock).map_err(|error| CliError::Usage(error.to_string()))?;
    let options = LockOptions::default().with_lease_duration(args.held.lease);
    options.validate().map_err(|error| {
        CliError::Usage(format!(
            "--lease {}: {error}",
            duration::show(args.held.lease)
        ))
    })?;
    let grace = super::grace_within(
        args.held.grace,
        options.lease_duration(),
        options.renew_deadline(),
    )?;
    let connection = super::connect(&args.connection, signals, progress).await?;
    let endpoint = connection.endpoint.clone();
    let manager = tokio::select! {
        started = connection.start(options) => started?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let result = hold_and_run(&manager, &name, &args, grace, &endpoint, signals, progress).await;
    // Releases whatever is still held (an interrupted acquisition leaves nothing behind).
    manager.shutdown().await;
    result
}

async fn hold_and_run(
    manager: &LockManager,
    name: &LockName,
    args: &RunArgs,
    grace: Duration,
    endpoint: &Endpoint,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let lock = manager
        .lock(name.as_str())
        .map_err(|error| endpoint.lock_error(error))?;
    let started = Instant::now();
    let acquired = tokio::select! {
        acquired = acquire(&lock, args.wait, progress) => acquired,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(LockError::Timeout(_)) => {
            let holder = lock
                .inspect()
                .await
                .ok()
                .flatten()
                .and_then(|record| record.holder)
                .map(|holder| holder.as_str().to_owned());
            return Err(CliError::NotAcquired {
                name: name.to_string(),
                waited: args.wait.filter(|wait| !wait.is_zero()).map(duration::show),
                holder,
            });
        }
        Err(error) => return Err(endpoint.lock_error(error)),
    };
    let waited = started.elapsed();
    progress.say(format_args!(
        "acquired lock {:?} (token {}){}",
        name.as_str(),
        guard.token(),
        if waited >= Duration::from_secs(1) {
            format!(" after waiting {}", duration::show(waited))
        } else {
            String::new()
        }
    ));
    let child = match Child::spawn(&args.held.command, guard.token(), name.as_str(), grace) {
        Ok(child) => child,
        Err(error) => {
            let _ = guard.release().await;
            return Err(error);
        }
    };
    supervise(child, guard, name, grace, signals, progress).await
}

/// Acquires the lock, waiting up to `wait` (forever without it; a single attempt for 0)
/// and saying who holds it meanwhile.
async fn acquire(
    lock: &Lock,
    wait: Option<Duration>,
    progress: Progress,
) -> Result<LockGuard, LockError> {
    let started = Instant::now();
    if let Some(guard) = lock.try_acquire().await? {
        return Ok(guard);
    }
    if wait.is_some_and(|wait| wait.is_zero()) {
        return Err(LockError::Timeout(Duration::ZERO));
    }
    report_waiting(lock, None, wait, progress).await;
    let attempt = async {
        match wait {
            None => lock.acquire().await,
            Some(wait) => {
                lock.acquire_timeout(wait.saturating_sub(started.elapsed()))
                    .await
            }
        }
    };
    tokio::pin!(attempt);
    let mut reports = tokio::time::interval_at(started + WAIT_REPORT_EVERY, WAIT_REPORT_EVERY);
    loop {
        tokio::select! {
            biased;
            acquired = &mut attempt => return acquired,
            _ = reports.tick() => {
                report_waiting(lock, Some(started.elapsed()), wait, progress).await;
            }
        }
    }
}

/// `lock "x" is held by H (token T, expires in 12s); waiting`, or after `so_far`:
/// `still waiting for lock "x" after 10s; held by H (token T)`.
async fn report_waiting(
    lock: &Lock,
    so_far: Option<Duration>,
    wait: Option<Duration>,
    progress: Progress,
) {
    if !progress.enabled() {
        return;
    }
    let name = lock.name().as_str();
    let record = lock.inspect().await.ok().flatten();
    let holder = record.as_ref().and_then(|record| {
        let holder = record.holder.as_ref()?;
        let left = record
            .expires_in
            .map(|left| format!(", lease ends in {}", duration::show(left)))
            .unwrap_or_default();
        Some(format!("held by {holder} (token {}{left})", record.token))
    });
    let limit = wait.map_or_else(String::new, |wait| {
        format!(", giving up after {}", duration::show(wait))
    });
    let line = match (so_far, holder) {
        (None, Some(holder)) => format!("lock {name:?} is {holder}; waiting{limit}"),
        (None, None) => format!("waiting for lock {name:?}{limit}"),
        (Some(so_far), Some(holder)) => format!(
            "still waiting for lock {name:?} after {}; {holder}",
            duration::show(so_far)
        ),
        (Some(so_far), None) => format!(
            "still waiting for lock {name:?} after {}",
            duration::show(so_far)
        ),
    };
    progress.say(line);
}

/// The progress line for a hold at risk.
fn at_risk_line(name: &LockName, risk: &AtRisk) -> String {
    let cause = risk
        .last_error()
        .map_or_else(|| "no answer in time".to_owned(), str::to_owned);
    format!(
        "renewals of lock {:?} are failing ({cause}); the lock is lost in {} unless the store answers",
        name.as_str(),
        duration::show(risk.time_left())
    )
}

/// Holds the lock while the command runs: passes signals on, stops the command if the lock
/// is lost, releases when it exits.
async fn supervise(
    mut child: Child,
    guard: LockGuard,
    name: &LockName,
    grace: Duration,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let loss = guard.loss_signal();
    let held_since = Instant::now();
    let mut warned = false;
    loop {
        tokio::select! {
            risk = loss.at_risk(), if !warned => {
                warned = true;
                progress.say(at_risk_line(name, &risk));
            }
            () = loss.recovered(), if warned => {
                warned = false;
                progress.say(format_args!(
                    "renewals of lock {:?} succeed again",
                    name.as_str()
                ));
            }
            status = child.wait() => {
                let code = exit_code::of_status(status?);
                return match guard.release().await {
                    Ok(()) => {
                        progress.detail(format_args!(
                            "released lock {:?} after {}",
                            name.as_str(),
                            duration::show(held_since.elapsed())
                        ));
                        Ok(code)
                    }
                    // Lost just before the command finished: its last moments may not have
                    // been exclusive, which the caller must hear about.
                    Err(LockError::Lost(reason)) => Err(CliError::Lost {
                        name: name.to_string(),
                        reason,
                    }),
                    // The lease expires on its own; the command's result stands.
                    Err(_) => Ok(code),
                };
            }
            reason = loss.lost() => {
                progress.say(format_args!(
                    "lost lock {:?}: {reason}; stopping the command (SIGTERM, SIGKILL after {})",
                    name.as_str(),
                    duration::show(grace)
                ));
                let _ = child.terminate().await;
                drop(guard);
                return Err(CliError::Lost { name: name.to_string(), reason });
            }
            signal = signals.recv() => child.forward(signal),
        }
    }
}
