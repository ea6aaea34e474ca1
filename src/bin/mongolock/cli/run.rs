//! `mongolock run`: acquire, run the command while the lock is held, release. What is held
//! — a lock, a permit, a read or write lock, several locks — is a [`Target`]; acquiring,
//! waiting, supervising and releasing are the same for each.

use std::time::Duration;

use futures::future::select_all;
use tokio::time::Instant;

use super::at_risk;
use super::child::{Child, fencing_env};
use super::connect::Endpoint;
use super::hold::{Ask, Held, Target};
use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CliError, ConnectionArgs, RunArgs, duration, exit_code};
use mongolock::{AtRisk, Fairness, LockError, LockManager, LockOptions, LossReason, LossSignal};

/// How often a waiting `run` says it is still waiting.
const WAIT_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Runs `mongolock run`; returns the command's exit code.
pub(super) async fn run(
    args: RunArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    // Everything that can be checked without a server is checked first.
    let ask = Ask::from_args(&args)?;
    let fairness = if args.arrival_order {
        Fairness::ArrivalOrder
    } else {
        Fairness::Bounded
    };
    let options = LockOptions::default()
        .with_lease_duration(args.held.lease)
        .with_fairness(fairness);
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
    let connection = super::connect(at, signals, progress).await?;
    let place = Place {
        endpoint: connection.endpoint.clone(),
        namespace: connection.namespace(),
    };
    let manager = tokio::select! {
        started = connection.start(options) => started?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let result = hold_and_run(&manager, ask, &args, grace, &place, signals, progress).await;
    // Releases whatever is still held (an interrupted acquisition leaves nothing behind).
    manager.shutdown().await;
    result
}

/// The server and the `database.collection` the locks are in, for messages.
struct Place {
    endpoint: Endpoint,
    namespace: String,
}

async fn hold_and_run(
    manager: &LockManager,
    ask: Ask,
    args: &RunArgs,
    grace: Duration,
    place: &Place,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let endpoint = &place.endpoint;
    let target = Target::new(manager, ask).map_err(|error| endpoint.lock_error(error))?;
    let ask = target.ask();
    let started = Instant::now();
    let acquired = tokio::select! {
        acquired = acquire(&target, args.wait, progress) => acquired,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let held = match acquired {
        Ok(held) => held,
        Err(LockError::Timeout(_)) => {
            let blocker = target
                .blocker(false)
                .await
                .unwrap_or_else(|| ask.unknown_blocker());
            return Err(CliError::NotAcquired {
                asked: ask.asked(),
                blocker,
                waited: args.wait.filter(|wait| !wait.is_zero()).map(duration::show),
            });
        }
        Err(error) => return Err(endpoint.lock_error(error)),
    };
    let waited = started.elapsed();
    let tokens = held.tokens();
    let shown: Vec<String> = tokens
        .iter()
        .map(|(name, token)| match ask {
            Ask::All(_) => format!("{name:?} (token {token})"),
            _ => format!("{} (token {token})", ask.asked()),
        })
        .collect();
    let what = match ask {
        Ask::All(_) => format!("locks {}", shown.join(", ")),
        _ => shown.join(", "),
    };
    progress.say(format_args!(
        "acquired {what} in {}{}",
        place.namespace,
        if waited >= Duration::from_secs(1) {
            format!(" after waiting {}", duration::show(waited))
        } else {
            String::new()
        }
    ));
    let child = match Child::spawn(&args.held.command, &fencing_env(&tokens), grace) {
        Ok(child) => child,
        Err(error) => {
            let _ = held.release().await;
            return Err(error);
        }
    };
    supervise(child, held, ask, grace, signals, progress).await
}

/// Acquires the target, waiting up to `wait` (forever without it; a single attempt for 0)
/// and saying who holds it meanwhile.
async fn acquire(
    target: &Target,
    wait: Option<Duration>,
    progress: Progress,
) -> Result<Held, LockError> {
    let started = Instant::now();
    if let Some(held) = target.try_acquire().await? {
        return Ok(held);
    }
    if wait.is_some_and(|wait| wait.is_zero()) {
        return Err(LockError::Timeout(Duration::ZERO));
    }
    report_waiting(target, None, wait, progress).await;
    let attempt = async {
        match wait {
            None => target.acquire().await,
            Some(wait) => {
                target
                    .acquire_timeout(wait.saturating_sub(started.elapsed()))
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
                report_waiting(target, Some(started.elapsed()), wait, progress).await;
            }
        }
    }
}

/// `lock "x" is held by H (token T, lease ends in 12s); waiting`, or after `so_far`:
/// `still waiting for lock "x" after 10s; held by H (token T, …)`. For a permit, a read or
/// write lock, or several locks, the lock in the way is named: `semaphore "x" is full: …`,
/// `still waiting for locks "a", "b" after 10s; lock "b" is held by …`.
async fn report_waiting(
    target: &Target,
    so_far: Option<Duration>,
    wait: Option<Duration>,
    progress: Progress,
) {
    if !progress.enabled() {
        return;
    }
    let asked = target.ask().asked();
    let blocker = target.blocker(true).await;
    let limit = wait.map_or_else(String::new, |wait| {
        format!(", giving up after {}", duration::show(wait))
    });
    let line = match (so_far, blocker) {
        (None, Some(blocker)) => {
            format!("{} is {}; waiting{limit}", blocker.subject, blocker.state)
        }
        (None, None) => format!("waiting for {asked}{limit}"),
        (Some(so_far), Some(blocker)) => {
            let so_far = duration::show(so_far);
            if blocker.subject == asked {
                format!(
                    "still waiting for {asked} after {so_far}; {}",
                    blocker.state
                )
            } else {
                format!(
                    "still waiting for {asked} after {so_far}; {} is {}",
                    blocker.subject, blocker.state
                )
            }
        }
        (Some(so_far), None) => {
            format!("still waiting for {asked} after {}", duration::show(so_far))
        }
    };
    progress.say(line);
}

/// A change in the hold of one of the held locks (by its index).
enum Change {
    AtRisk(usize, AtRisk),
    Recovered(usize),
    Lost(usize, LossReason),
}

/// The next change to any of `signals`: at risk (or recovered, where `warned`) and lost.
async fn next_change(signals: &[LossSignal], warned: &[bool]) -> Change {
    let watches = signals
        .iter()
        .zip(warned)
        .enumerate()
        .map(|(at, (signal, &warned))| {
            Box::pin(async move {
                tokio::select! {
                    risk = signal.at_risk(), if !warned => Change::AtRisk(at, risk),
                    () = signal.recovered(), if warned => Change::Recovered(at),
                    reason = signal.lost() => Change::Lost(at, reason),
                }
            })
        });
    select_all(watches).await.0
}

/// Holds the locks while the command runs: passes signals on, stops the command if any
/// is lost, releases them when it exits.
async fn supervise(
    mut child: Child,
    held: Held,
    ask: &Ask,
    grace: Duration,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let guards = held.guards();
    let names: Vec<String> = guards.iter().map(|guard| ask.held(guard.name())).collect();
    let losses: Vec<LossSignal> = guards
        .iter()
        .map(mongolock::LockGuard::loss_signal)
        .collect();
    let mut warned = vec![false; losses.len()];
    let held_since = Instant::now();
    loop {
        tokio::select! {
            change = next_change(&losses, &warned) => match change {
                Change::AtRisk(at, risk) => {
                    warned[at] = true;
                    at_risk::tell(progress, &names[at], &risk);
                }
                Change::Recovered(at) => {
                    warned[at] = false;
                    progress.say(format_args!("renewals of {} succeed again", names[at]));
                }
                Change::Lost(at, reason) => {
                    progress.say(format_args!(
                        "lost {}: {reason}; stopping the command (SIGTERM, SIGKILL after {})",
                        names[at],
                        duration::show(grace)
                    ));
                    let _ = child.terminate().await;
                    // Waited for, not dropped: a multi-lock frees its other members in the
                    // background otherwise, and the process may exit before that call ran.
                    let _ = held.release().await;
                    return Err(CliError::Lost { what: names[at].clone(), reason });
                }
            },
            status = child.wait() => {
                let code = exit_code::of_status(status?);
                return match held.release().await {
                    Ok(()) => {
                        progress.detail(format_args!(
                            "released {} after {}",
                            ask.asked(),
                            duration::show(held_since.elapsed())
                        ));
                        Ok(code)
                    }
                    // Lost just before the command finished: its last moments may not have
                    // been exclusive, which the caller must hear about.
                    Err(LockError::Lost(reason)) => {
                        let at = losses.iter().position(|loss| loss.loss().is_some());
                        let what = at.map_or_else(|| ask.asked(), |at| names[at].clone());
                        Err(CliError::Lost { what, reason })
                    }
                    // The lease expires on its own; the command's result stands.
                    Err(_) => Ok(code),
                };
            }
            signal = signals.recv() => child.forward(signal),
        }
    }
}
