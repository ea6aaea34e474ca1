//! `mongolock elect`: campaign, run the command only while leading, restart it on every new
//! term.

use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::child::Child;
use super::connect::Endpoint;
use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CliError, ConnectionArgs, ElectArgs, duration, exit_code};
use mongolock::{
    Election, ElectionEvent, ElectionOptions, LeaderInfo, LockManager, LockName, LockOptions,
};

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
        .map_err(|error| CliError::Usage(format!("--lease {}: {error}", duration::show(lease))))?;
    Ok(options)
}

/// Runs `mongolock elect`; returns the command's exit code once it exits on its own.
pub(super) async fn elect(
    args: ElectArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let name = LockName::new(&args.name).map_err(|error| CliError::Usage(error.to_string()))?;
    let options = election_options(args.held.lease)?;
    let grace = super::grace_within(
        args.held.grace,
        args.held.lease,
        renew_deadline_for(args.held.lease),
    )?;
    let connection = super::connect(at, signals, progress).await?;
    let endpoint = connection.endpoint.clone();
    let namespace = connection.namespace();
    let manager = tokio::select! {
        started = connection.start(LockOptions::default()) => started?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let candidate = Candidate {
        manager: &manager,
        name: &name,
        args: &args,
        namespace: &namespace,
        grace,
        progress,
        campaigning_since: Instant::now(),
    };
    let result = candidate.lead(options, &endpoint, signals).await;
    manager.shutdown().await;
    result
}

/// One `mongolock elect` run.
struct Candidate<'a> {
    manager: &'a LockManager,
    name: &'a LockName,
    /// `database.collection`, for messages.
    namespace: &'a str,
    args: &'a ElectArgs,
    grace: Duration,
    progress: Progress,
    campaigning_since: Instant,
}

impl Candidate<'_> {
    async fn lead(
        mut self,
        options: ElectionOptions,
        endpoint: &Endpoint,
        signals: &mut Signals,
    ) -> Result<u8, CliError> {
        let election = self
            .manager
            .election(self.name.as_str(), options)
            .map_err(|error| endpoint.lock_error(error))?;
        let mut events = election.subscribe();
        election
            .campaign_in_background()
            .map_err(|error| endpoint.lock_error(error))?;
        self.progress.say(format_args!(
            "campaigning for leadership of {:?} in {}",
            self.name.as_str(),
            self.namespace
        ));
        let mut child: Option<Child> = None;
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(ElectionEvent::Elected { token }) => {
                        if child.is_none() {
                            self.progress.say(format_args!(
                                "elected leader of {:?} (token {token}); starting the command",
                                self.name.as_str()
                            ));
                            child = Some(self.start(&election, token).await?);
                        }
                    }
                    Ok(ElectionEvent::Deposed { reason, .. }) => {
                        self.campaigning_since = Instant::now();
                        if let Some(running) = child.take() {
                            self.progress.say(format_args!(
                                "deposed as leader of {:?}: {reason}; stopping the command and campaigning again",
                                self.name.as_str()
                            ));
                            let _ = running.terminate().await;
                        }
                    }
                    Ok(ElectionEvent::AtRisk { time_left, .. }) => {
                        self.progress.say(format_args!(
                            "renewals of the leadership of {:?} are failing: deposed in {} unless one succeeds",
                            self.name.as_str(),
                            duration::show(time_left)
                        ));
                    }
                    Ok(ElectionEvent::Recovered { .. }) => {
                        self.progress.say(format_args!(
                            "renewals of the leadership of {:?} succeed again",
                            self.name.as_str()
                        ));
                    }
                    Ok(ElectionEvent::Resigned { .. }) => {
                        self.campaigning_since = Instant::now();
                        if let Some(running) = child.take() {
                            let _ = running.terminate().await;
                        }
                    }
                    Ok(ElectionEvent::LeaderChanged { leader }) => {
                        if child.is_none() {
                            self.report_leader(leader.as_ref());
                        }
                    }
                    Ok(_) => {}
                    // Missed events: ask the store who leads and catch up.
                    Err(RecvError::Lagged(_)) => {
                        child = self.reconcile(&election, child).await?;
                    }
                    Err(RecvError::Closed) => {
                        if let Some(running) = child.take() {
                            let _ = running.terminate().await;
                        }
                        return Err(CliError::Internal("the election stopped".to_owned()));
                    }
                },
                status = wait_for(&mut child) => {
                    let code = exit_code::of_status(status?);
                    self.progress.detail(format_args!(
                        "the command exited ({code}); resigning leadership of {:?}",
                        self.name.as_str()
                    ));
                    let _ = election.resign().await;
                    return Ok(code);
                }
                signal = signals.recv() => match &child {
                    Some(running) => running.forward(signal),
                    None => {
                        let _ = election.resign().await;
                        return Err(interrupted(signal));
                    }
                },
            }
        }
    }

    /// Says who leads while this candidate waits.
    fn report_leader(&self, leader: Option<&LeaderInfo>) {
        let name = self.name.as_str();
        let so_far = duration::show(self.campaigning_since.elapsed());
        match leader {
            Some(leader) if &leader.holder != self.manager.holder_id() => {
                self.progress.say(format_args!(
                    "{name:?} is led by {} (token {}); campaigning for {so_far} so far",
                    leader.holder, leader.token
                ));
            }
            Some(_) => {}
            None => self.progress.detail(format_args!(
                "{name:?} has no leader; campaigning for {so_far} so far"
            )),
        }
    }

    /// Starts the command for a new term; if it cannot start, steps down.
    async fn start(&self, election: &Election, token: u64) -> Result<Child, CliError> {
        let env = super::child::fencing_env(&[(self.name.as_str(), token)]);
        match Child::spawn(&self.args.held.command, &env, self.grace) {
            Ok(child) => Ok(child),
            Err(error) => {
                let _ = election.resign().await;
                Err(error)
            }
        }
    }

    /// After missed events: runs the command iff the store says this manager leads.
    async fn reconcile(
        &self,
        election: &Election,
        child: Option<Child>,
    ) -> Result<Option<Child>, CliError> {
        let leader = election.leader().await.ok().flatten();
        let ours = leader.filter(|leader| &leader.holder == self.manager.holder_id());
        match (ours, child) {
            (Some(leader), None) => Ok(Some(self.start(election, leader.token).await?)),
            (None, Some(running)) => {
                let _ = running.terminate().await;
                Ok(None)
            }
            (_, child) => Ok(child),
        }
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
        assert!(election_options(duration::MIN_LEASE).is_ok());
    }
}
