//! The `mongolock` command-line tool (feature `cli`, Unix only): the library's locks and
//! elections for shell scripts, cron jobs and process supervisors.
//!
//! - `mongolock run --lock NAME -- CMD…` runs a command while holding a lock (like
//!   `flock(1)`, `consul lock`, `etcdctl lock`): the fencing token is passed in
//!   `MONGOLOCK_TOKEN`; if the lock is lost the command gets SIGTERM, then SIGKILL after
//!   `--grace`, and `mongolock` exits with 76.
//! - `mongolock elect --name NAME -- CMD…` runs a command only while this process leads the
//!   election, restarting it on every new term.
//! - `mongolock status` prints the locks of a collection (`--watch` refreshes).
//!
//! The connection comes from `--uri` or `MONGODB_URI`; the database from `--database`, the
//! URI's path, or `mongolock`; the collection from `--collection` (default
//! `distributed_locks`, the library's default). Exit codes are listed in [`exit_code`].

pub(crate) mod child;
pub(crate) mod connect;
pub(crate) mod duration;
mod elect;
mod error;
pub(crate) mod exit_code;
mod run;
pub(crate) mod signals;
mod status;

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub(crate) use error::CliError;

/// `mongolock`: run commands under MongoDB-backed distributed locks.
#[derive(Debug, Parser)]
#[command(
    name = "mongolock",
    version,
    about = "Run commands under MongoDB-backed distributed locks and leader elections",
    after_help = exit_code::HELP
)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command while holding a lock.
    ///
    /// The command gets the lock's fencing token in `MONGOLOCK_TOKEN` and its name in
    /// `MONGOLOCK_LOCK`. It runs in its own process group; SIGINT, SIGTERM, SIGHUP and SIGQUIT
    /// sent to mongolock are passed on to it. If the lock is lost, the group gets SIGTERM,
    /// then SIGKILL after --grace, and mongolock exits with 76. Otherwise the lock is
    /// released when the command exits, and mongolock exits with the command's code
    /// (128+N if signal N killed it).
    #[command(after_help = exit_code::HELP)]
    Run(RunArgs),
    /// Run a command only while this process leads an election.
    ///
    /// Campaigns for leadership of NAME; while leader, runs the command with the term's
    /// fencing token in `MONGOLOCK_TOKEN`. When deposed, the command gets SIGTERM (SIGKILL
    /// after --grace) and mongolock keeps campaigning, restarting the command on its next
    /// term. When the command exits on its own, mongolock resigns and exits with its code.
    #[command(after_help = exit_code::HELP)]
    Elect(ElectArgs),
    /// Show the locks of a collection: name, state, holder, fencing token, time left.
    #[command(after_help = exit_code::HELP)]
    Status(StatusArgs),
}

/// Where the locks live.
#[derive(Debug, Clone, Args)]
pub(crate) struct ConnectionArgs {
    /// MongoDB connection string (MongoDB 5.0 or newer).
    #[arg(long, env = "MONGODB_URI", hide_env_values = true, value_name = "URI")]
    pub uri: Option<String>,
    /// Database of the lock collection [default: the URI's database, else "mongolock"].
    #[arg(
        long,
        env = "MONGOLOCK_DATABASE",
        hide_env_values = true,
        value_name = "NAME"
    )]
    pub database: Option<String>,
    /// Collection holding one document per lock.
    #[arg(
        long,
        env = "MONGOLOCK_COLLECTION",
        hide_env_values = true,
        value_name = "NAME",
        default_value = mongolock::MongoStore::DEFAULT_COLLECTION
    )]
    pub collection: String,
}

/// `mongolock run`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// Name of the lock.
    #[arg(long, value_name = "NAME")]
    pub lock: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connection: ConnectionArgs,
    /// Give up (exit 75) if the lock is not acquired within this time; 0 tries once
    /// [default: wait forever].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub wait: Option<Duration>,
    /// Lease length on the server: a crashed mongolock blocks others at most this long. The
    /// lease is renewed every third of it.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration::parse_positive)]
    pub expiry: Duration,
    /// Time between SIGTERM and SIGKILL when the command must stop. It must end before the
    /// lease can expire on the server, or the stopping command could overlap the next
    /// holder [default: half of lease − renew deadline, 2.5s with the default lease].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub grace: Option<Duration>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD", num_args = 1..)]
    pub command: Vec<OsString>,
}

/// `mongolock elect`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ElectArgs {
    /// Name of the election (the lock it runs on).
    #[arg(long, value_name = "NAME")]
    pub name: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connection: ConnectionArgs,
    /// Leader lease: a crashed leader is replaced within about this long. The leader renews
    /// every 2/15 of it and steps down after 2/3 of it without a confirmed renewal.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration::parse_positive)]
    pub lease: Duration,
    /// Time between SIGTERM and SIGKILL when the command must stop. It must end before the
    /// lease can expire on the server, or the stopping command could overlap the next
    /// holder [default: half of lease − renew deadline, 2.5s with the default lease].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub grace: Option<Duration>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD", num_args = 1..)]
    pub command: Vec<OsString>,
}

/// `mongolock status`.
#[derive(Debug, Clone, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connection: ConnectionArgs,
    /// Clear the screen and refresh every SECONDS (default 2) until Ctrl-C.
    #[arg(
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "2",
        value_parser = duration::parse_positive
    )]
    pub watch: Option<Duration>,
}

/// Runs a parsed command line to completion on its own Tokio runtime and returns the exit
/// code (the command's, for `run` and `elect`).
///
/// Errors: a [`CliError`]; print [`CliError::one_line`] and exit with
/// [`CliError::exit_code`].
pub(crate) fn execute(cli: Cli) -> Result<u8, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| CliError::Internal(format!("cannot start the runtime: {error}")))?;
    // The command is spawned from this (the main) thread, inside `block_on`: see
    // `Child::spawn` on why the thread matters.
    let result = runtime.block_on(async {
        let mut signals = signals::Signals::install()?;
        match cli.command {
            Command::Run(args) => run::run(args, &mut signals).await,
            Command::Elect(args) => elect::elect(args, &mut signals).await,
            Command::Status(args) => status::status(args, &mut signals).await,
        }
    });
    // Driver background tasks (monitors, pool maintenance) must not delay the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
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

    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_command_after_double_dash() {
        let cli = Cli::try_parse_from([
            "mongolock",
            "run",
            "--lock",
            "jobs",
            "--uri",
            "mongodb://h",
            "--wait",
            "200ms",
            "--",
            "sh",
            "-c",
            "exit 7",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.lock, "jobs");
        assert_eq!(args.wait, Some(Duration::from_millis(200)));
        assert_eq!(args.expiry, Duration::from_secs(15));
        assert_eq!(args.grace, None);
        assert_eq!(args.command, ["sh", "-c", "exit 7"]);
        assert_eq!(args.connection.collection, "distributed_locks");
        assert!(Cli::try_parse_from(["mongolock", "run", "--lock", "jobs"]).is_err());
    }

    #[test]
    fn watch_defaults_to_two_seconds() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(Command::Status(status)) => Ok(status.watch),
            Ok(_) => panic!("not status"),
            Err(error) => Err(error),
        };
        assert_eq!(parse(&["mongolock", "status"]).unwrap(), None);
        assert_eq!(
            parse(&["mongolock", "status", "--watch"]).unwrap(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse(&["mongolock", "status", "--watch=5"]).unwrap(),
            Some(Duration::from_secs(5))
        );
        assert!(parse(&["mongolock", "status", "--watch=0"]).is_err());
    }
}
