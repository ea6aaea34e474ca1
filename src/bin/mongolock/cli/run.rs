//! `mongolock run`: acquire, run the command while the lock is held, release.

use std::time::Duration;

use super::child::Child;
use super::connect::Connection;
use super::signals::{Signals, interrupted};
use super::{CliError, RunArgs, duration, exit_code};
use mongolock::{Lock, LockError, LockGuard, LockManager, LockName, LockOptions};

/// Runs `mongolock run`; returns the command's exit code.
pub(super) async fn run(args: RunArgs, signals: &mut Signals) -> Result<u8, CliError> {
    // Everything that can be checked without a server is checked first.
    let name = LockName::new(&args.lock).map_err(|error| CliError::Usage(error.to_string()))?;
    let options = LockOptions::default().with_expiry(args.expiry);
    options
        .validate()
        .map_err(|error| CliError::Usage(format!("--expiry {:?}: {error}", args.expiry)))?;
    let grace = super::grace_within(args.grace, options.expiry(), options.renew_deadline())?;
    let connection = Connection::open(&args.connection).await?;
    let uri = connection.shown_uri.clone();
    let manager = tokio::select! {
        started = connection.start(options) => started?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let result = hold_and_run(&manager, &name, &args, grace, &uri, signals).await;
    // Releases whatever is still held (an interrupted acquisition leaves nothing behind).
    manager.shutdown().await;
    result
}

async fn hold_and_run(
    manager: &LockManager,
    name: &LockName,
    args: &RunArgs,
    grace: Duration,
    uri: &str,
    signals: &mut Signals,
) -> Result<u8, CliError> {
    let lock = manager
        .lock(name.as_str())
        .map_err(|error| CliError::from_lock(error, uri))?;
    let acquired = tokio::select! {
        acquired = acquire(&lock, args.wait) => acquired,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(LockError::Timeout(waited)) => {
            let holder = lock
                .inspect()
                .await
                .ok()
                .flatten()
                .and_then(|record| record.holder)
                .map(|holder| holder.as_str().to_owned());
            return Err(CliError::NotAcquired {
                name: name.to_string(),
                waited: duration::show(waited),
                holder,
            });
        }
        Err(error) => return Err(CliError::from_lock(error, uri)),
    };
    let child = match Child::spawn(&args.command, guard.token(), name.as_str()) {
        Ok(child) => child,
        Err(error) => {
            let _ = guard.release().await;
            return Err(error);
        }
    };
    supervise(child, guard, name, grace, signals).await
}

/// Waits for `--wait` (forever without it; a single attempt for 0).
async fn acquire(lock: &Lock, wait: Option<Duration>) -> Result<LockGuard, LockError> {
    match wait {
        None => lock.acquire().await,
        Some(wait) if wait.is_zero() => lock.try_acquire().await?.ok_or(LockError::Timeout(wait)),
        Some(wait) => lock.acquire_timeout(wait).await,
    }
}

/// Holds the lock while the command runs: passes signals on, stops the command if the lock
/// is lost, releases when it exits.
async fn supervise(
    mut child: Child,
    guard: LockGuard,
    name: &LockName,
    grace: Duration,
    signals: &mut Signals,
) -> Result<u8, CliError> {
    let loss = guard.loss_signal();
    loop {
        tokio::select! {
            status = child.wait() => {
                let code = exit_code::of_status(status?);
                return match guard.release().await {
                    Ok(()) => Ok(code),
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
                let _ = child.terminate(grace).await;
                drop(guard);
                return Err(CliError::Lost { name: name.to_string(), reason });
            }
            signal = signals.recv() => child.signal(signal),
        }
    }
}
