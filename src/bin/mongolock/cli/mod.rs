//! The `mongolock` command-line tool (feature `cli`, Unix only): the library's locks and
//! elections for shell scripts, cron jobs and process supervisors.
//!
//! - `mongolock run --lock NAME -- CMD…` runs a command while holding a lock (like
//!   `flock(1)`, `consul lock`, `etcdctl lock`): the fencing token is passed in
//!   `MONGOLOCK_TOKEN`; if the lock is lost the command gets SIGTERM, then SIGKILL after
//!   `--grace`, and `mongolock` exits with 76. `--shared` / `--exclusive` hold the read or
//!   write side of a reader/writer lock, `--permits N` a permit of a semaphore, and several
//!   `--lock` hold all those locks at once ([`hold`]).
//! - `mongolock elect --name NAME -- CMD…` runs a command only while this process leads the
//!   election, restarting it on every new term.
//! - `mongolock status [NAME…]` prints the locks of a collection, with every holder of a
//!   semaphore or reader/writer lock and the processes waiting in line (`--watch` refreshes,
//!   `--json` for scripts).
//! - `mongolock release --force NAME` frees a lock whose holder is stuck.
//! - `mongolock watch NAME…` prints what happens to locks as it happens.
//! - `mongolock doctor` says whether a deployment is fit for locks, and why.
//! - `mongolock check` verifies the guarantees on a deployment: processes contend for
//!   scratch locks, and the runs are checked.
//!
//! The command runs under a [guardian] process, so nothing it starts outlives the lock, even
//! when `mongolock` is killed with SIGKILL; [`child`] says how terminals and signals are handled.
//! Progress goes to stderr ([`progress`]). The connection comes from `--uri` or
//! `MONGODB_URI`; the database from `--database`, the URI's path, or `mongolock`; the
//! collection from `--collection` (default `distributed_locks`, the library's default). The
//! three flags are global: like `kubectl` or `etcdctl`, they go before the subcommand or
//! after it. Every command that reads or writes locks names the `database.collection` it
//! used, and a name with no record there is said to have none (never shown as free); when
//! another database's collection of the same name has a record of it, the command says so
//! and how to point at it ([`elsewhere`]). Exit codes are listed in [`exit_code`].

mod args;
mod at_risk;
mod check;
pub(crate) mod child;
pub(crate) mod connect;
mod doctor;
pub(crate) mod duration;
mod elect;
mod elsewhere;
mod error;
pub(crate) mod exit_code;
pub(crate) mod guardian;
pub(crate) mod hints;
mod hold;
pub(crate) mod progress;
mod release;
mod run;
pub(crate) mod signals;
mod status;
mod watch;

use std::time::Duration;

pub(crate) use args::{
    CheckArgs, CheckWorkerArgs, Cli, Command, ConnectionArgs, DoctorArgs, ElectArgs, GuardArgs,
    ReleaseArgs, RunArgs, StatusArgs, WatchArgs,
};
pub(crate) use error::CliError;
use progress::{Progress, Verbosity};

/// Runs a parsed command line to completion on its own Tokio runtime and returns the exit
/// code (the command's, for `run` and `elect`).
///
/// Errors: a [`CliError`]; print [`CliError::one_line`] and exit with
/// [`CliError::exit_code`].
pub(crate) fn execute(cli: Cli) -> Result<u8, CliError> {
    if let Command::Guard(args) = &cli.command {
        return Ok(guardian::run(args));
    }
    let verbosity = Verbosity::from_flags(cli.quiet, cli.verbose);
    progress::init_tracing(verbosity);
    let progress = Progress::new(verbosity);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| CliError::Internal(format!("cannot start the runtime: {error}")))?;
    // The command is spawned from this (the main) thread, inside `block_on`: see
    // `Child::spawn` on why the thread matters.
    let result = runtime.block_on(async {
        let mut signals = signals::Signals::install()?;
        let at = &cli.connection;
        match cli.command {
            Command::Run(args) => run::run(args, at, &mut signals, progress).await,
            Command::Elect(args) => elect::elect(args, at, &mut signals, progress).await,
            Command::Status(args) => status::status(args, at, &mut signals, progress).await,
            Command::Release(args) => release::release(args, at, &mut signals, progress).await,
            Command::Watch(args) => watch::watch(args, at, &mut signals, progress).await,
            Command::Doctor(args) => doctor::doctor(args, at, &mut signals, progress).await,
            Command::Check(args) => check::check(args, at, &mut signals, progress).await,
            Command::CheckWorker(args) => check::worker::run(args, at).await,
            Command::Guard(_) => Err(CliError::Internal("the guardian runs apart".to_owned())),
        }
    });
    // Driver background tasks (monitors, pool maintenance) must not delay the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Opens the connection, giving up at once (exit 128+N) on a termination signal.
pub(crate) async fn connect(
    args: &ConnectionArgs,
    signals: &mut signals::Signals,
    progress: Progress,
) -> Result<connect::Connection, CliError> {
    if let Some(uri) = &args.uri {
        progress.detail(format_args!("connecting to {}", connect::redact(uri)));
    }
    let connection = tokio::select! {
        opened = connect::Connection::open(args) => opened?,
        signal = signals.recv() => return Err(signals::interrupted(signal)),
    };
    progress.detail(format_args!(
        "connected; locks in {}",
        connection.namespace()
    ));
    Ok(connection)
}

/// The SIGTERM → SIGKILL grace period for a command holding a lease of `lease` whose loss is
/// signalled `renew_deadline` after the last confirmed renewal was sent: the command must be
/// gone before the lease can expire on the server (the gap between the two), or it could
/// overlap the next holder. Default: half the gap; a longer request is refused.
pub(crate) fn grace_within(
    requested: Option<Duration>,
    lease: Duration,
    renew_deadline: Duration,
) -> Result<Duration, CliError> {
    let gap = lease.saturating_sub(renew_deadline);
    match requested {
        None => Ok(gap / 2),
        Some(grace) if grace < gap => Ok(grace),
        Some(grace) => Err(CliError::Usage(format!(
            "--grace {} must be shorter than the {} between a loss being signalled and the lease expiring on the server (lengthen the lease, or shorten --grace)",
            duration::show(grace),
            duration::show(gap)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_defaults_to_half_the_gap_and_refuses_to_outlast_the_lease() {
        let (lease, deadline) = (Duration::from_secs(15), Duration::from_secs(10));
        assert_eq!(
            grace_within(None, lease, deadline).ok(),
            Some(Duration::from_millis(2500))
        );
        let short = Some(Duration::from_secs(4));
        assert_eq!(grace_within(short, lease, deadline).ok(), short);
        let long = Some(Duration::from_secs(5));
        assert!(matches!(
            grace_within(long, lease, deadline),
            Err(CliError::Usage(_))
        ));
    }
}
