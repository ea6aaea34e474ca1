//! `mongolock elect`: campaign, run the command only while leading, restart it on every new
//! term.

use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use super::child::Child;
use super::connect::Connection;
use super::signals::{Signals, interrupted};
use super::{CliError, ElectArgs, exit_code};
use mongolock::{Election, ElectionEvent, ElectionOptions, LockManager, LockName, LockOptions};

/// The election timings for a leader lease: renew deadline 2/3 and retry period 2/15 of it
/// (15 s → 10 s and 2 s, the library's defaults).
/// A leader steps down after 2/3 of its lease without a confirmed renewal (client-go's
/// 10 s of 15 s).
fn renew_deadline_for(lease: Duration) -> Duration {
    lease * 2 / 3
}

fn election_options(lease: Duration) -> Result<ElectionOptions, CliError> {
    let options = ElectionOptions::default()
        .with_lease_duration(lease)
        .with_renew_deadline(renew_deadline_for(lease))
        .with_retry_period(lease * 2 / 15);
    options
        .validate()
        .map_err(|error| CliError::Usage(format!("--lease {lease:?}: {error}")))?;
    Ok(options)
}

/// Runs `mongolock elect`; returns the command's exit code once it exits on its own.
pub(super) async fn elect(args: ElectArgs, signals: &mut Signals) -> Result<u8, CliError> {
    let name = LockName::new(&args.name).map_err(|error| CliError::Usage(error.to_string()))?;
    let options = election_options(args.lease)?;
    let grace = super::grace_within(args.grace, args.lease, renew_deadline_for(args.lease))?;
    let connection = Connection::open(&args.connection).await?;
    let uri = connection.shown_uri.clone();
    let manager = tokio::select! {
        started = connection.start(LockOptions::default()) => started?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let result = lead(&manager, &name, options, &args, grace, &uri, signals).await;
    manager.shutdown().await;
    result
}

async fn lead(
    manager: &LockManager,
    name: &LockName,
    options: ElectionOptions,
    args: &ElectArgs,
    grace: Duration,
    uri: &str,
    signals: &mut Signals,
) -> Result<u8, CliError> {
    let election = manager
        .election(name.as_str(), options)
        .map_err(|error| CliError::from_lock(error, uri))?;
    let mut events = election.subscribe();
    election
        .campaign_in_background()
        .map_err(|error| CliError::from_lock(error, uri))?;
    let mut child: Option<Child> = None;
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(ElectionEvent::Elected { token }) => {
                    if child.is_none() {
                        child = Some(start(&election, &args.command, token, name).await?);
                    }
                }
                Ok(ElectionEvent::Deposed { reason, .. }) => {
                    if let Some(running) = child.take() {
                        eprintln!(
                            "mongolock: no longer leader of {:?} ({reason}); stopped the command, campaigning again",
                            name.as_str()
                        );
                        let _ = running.terminate(grace).await;
                    }
                }
                Ok(ElectionEvent::Resigned { .. }) => {
                    if let Some(running) = child.take() {
                        let _ = running.terminate(grace).await;
                    }
                }
                Ok(_) => {}
                // Missed events: ask the store who leads and catch up.
                Err(RecvError::Lagged(_)) => {
                    child = reconcile(manager, &election, child, args, grace, name).await?;
                }
                Err(RecvError::Closed) => {
                    if let Some(running) = child.take() {
                        let _ = running.terminate(grace).await;
                    }
                    return Err(CliError::Internal("the election stopped".to_owned()));
                }
            },
            status = wait_for(&mut child) => {
                let code = exit_code::of_status(status?);
                let _ = election.resign().await;
                return Ok(code);
            }
            signal = signals.recv() => match &child {
                Some(running) => running.signal(signal),
                None => {
                    let _ = election.resign().await;
                    return Err(interrupted(signal));
                }
            },
        }
    }
}

/// Starts the command for a new term; if it cannot start, steps down.
async fn start(
    election: &Election,
    command: &[std::ffi::OsString],
    token: u64,
    name: &LockName,
) -> Result<Child, CliError> {
    match Child::spawn(command, token, name.as_str()) {
        Ok(child) => Ok(child),
        Err(error) => {
            let _ = election.resign().await;
            Err(error)
        }
    }
}

/// After missed events: runs the command iff the store says this manager leads.
async fn reconcile(
    manager: &LockManager,
    election: &Election,
    child: Option<Child>,
    args: &ElectArgs,
    grace: Duration,
    name: &LockName,
) -> Result<Option<Child>, CliError> {
    let leader = election.leader().await.ok().flatten();
    let ours = leader.filter(|leader| &leader.holder == manager.holder_id());
    match (ours, child) {
        (Some(leader), None) => Ok(Some(
            start(election, &args.command, leader.token, name).await?,
        )),
        (None, Some(running)) => {
            let _ = running.terminate(grace).await;
            Ok(None)
        }
        (_, child) => Ok(child),
    }
}

/// The exit of the running command; never resolves while none runs.
async fn wait_for(child: &mut Option<Child>) -> Result<std::process::ExitStatus, CliError> {
    match child {
        Some(running) => running.wait().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_lease_gives_the_library_defaults() {
        assert_eq!(
            election_options(Duration::from_secs(15)).unwrap(),
            ElectionOptions::default()
        );
        assert!(election_options(Duration::from_secs(2)).is_ok());
    }
}
