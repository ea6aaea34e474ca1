//! The command line: subcommands, flags and their help texts (clap derive).

use std::ffi::OsString;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

use super::{duration, exit_code};

/// `mongolock`: run commands under MongoDB-backed distributed locks.
#[derive(Debug, Parser)]
#[command(
    name = "mongolock",
    version,
    about = "Run commands under MongoDB-backed distributed locks and leader elections",
    after_help = exit_code::HELP
)]
pub(crate) struct Cli {
    /// No progress lines on stderr (errors are still reported).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More detail on stderr: connection steps and the library's events (-vv: every event).
    /// `RUST_LOG`, when set, chooses the library's events instead.
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,
    /// Where the locks live: given before the subcommand (like `kubectl` or `etcdctl`) or
    /// after it.
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// What `run` holds for each combination of flags, at the end of `mongolock run --help`.
const RUN_KINDS: &str = "\
What is held:
  --lock NAME               the lock NAME: one run at a time
  --lock NAME --shared      a read lock on the reader/writer lock NAME: shared with
                            other --shared runs; excluded by an --exclusive one
  --lock NAME --exclusive   the write lock on the reader/writer lock NAME: alone;
                            once it waits, new --shared runs wait behind it
  --lock NAME --permits N   a permit of the semaphore NAME: at most N runs at once
                            (every run on NAME gives the same N)
  --lock A --lock B ...     the locks A and B (plain) all at once, or none: taken in
                            one order whatever the order given, so never a deadlock;
                            the command is stopped if any of them is lost
A name is one kind for everyone: a plain --lock NAME and --shared/--exclusive on NAME
are different kinds, and do not mix (exit 78).

Who goes next:
  (default)                 whichever waiting run's attempt reaches the server
                            first once the lock is free
  --arrival-order           first come, first served across processes: the run
                            waits in the name's line with the library's
                            Fairness::ArrivalOrder peers; `mongolock status NAME`
                            shows the line, a `waiting` line per process";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command while holding a lock, a permit, a read or write lock, or several locks.
    ///
    /// Like flock(1): a plain --lock is a lock with one holder at a time; --shared and
    /// --exclusive take the read or the write side of a reader/writer lock; --permits N
    /// takes a permit of a semaphore of N; several --lock take all those locks at once (see
    /// "What is held" below). A name is one kind of lock for everyone: a run asking for
    /// another kind than the name's holders have exits with 78 and holds nothing.
    ///
    /// The command gets the fencing token in `MONGOLOCK_TOKEN` and the name in
    /// `MONGOLOCK_LOCK`; with several --lock those are the first name's (in byte order), and
    /// `MONGOLOCK_TOKENS` has every name with its token, `NAME=TOKEN` joined by commas in
    /// byte order (`a=12,b=40`), so the names cannot contain a comma. When the lock is
    /// released (the command exited) or lost (any of several), every process the command
    /// started is stopped: SIGTERM, then SIGKILL after --grace. If it is lost, mongolock
    /// exits with 76; otherwise with the command's code (128+N if signal N killed it).
    ///
    /// With a terminal on stdin the command runs in the foreground like any shell job: it
    /// reads the terminal, and Ctrl-C, Ctrl-\ and Ctrl-Z reach it directly; mongolock passes
    /// SIGTERM on. Without one it runs in a process group of its own, and SIGINT, SIGTERM,
    /// SIGHUP and SIGQUIT sent to mongolock are passed on to that group.
    #[command(after_help = format!("{RUN_KINDS}\n\n{}", exit_code::RUN_HELP))]
    Run(RunArgs),
    /// Run a command only while this process leads an election.
    ///
    /// Campaigns for leadership of NAME; while leader, runs the command with the term's
    /// fencing token in `MONGOLOCK_TOKEN`. When deposed, the command and everything it
    /// started get SIGTERM (SIGKILL after --grace) and mongolock keeps campaigning,
    /// restarting the command on its next term. When the command exits on its own, mongolock
    /// resigns and exits with its code. Terminals and signals are handled as by `run`.
    #[command(after_help = exit_code::ELECT_HELP)]
    Elect(ElectArgs),
    /// Show the locks of a collection: name, state, holder, fencing token, time left.
    ///
    /// The first line names the database and collection read. Semaphores and reader/writer
    /// locks also show their kind (with a semaphore's permits) and one line per holder: each
    /// with its fencing token and time left. A name asked for that has no record there shows
    /// as `no record`; if another database's collection of the same name has one, a note
    /// under the table says which, and the `--database` that points at it.
    ///
    /// A lock that processes wait for in arrival order (`run --arrival-order`, the library's
    /// `Fairness::ArrivalOrder`) shows its line under its holders: one `waiting (ACCESS)`
    /// line per waiting process, earliest first, with the process's holder id and, under
    /// CONTENDED, how long its longest-waiting task has waited. The next grant goes to the
    /// first of them, unless the holder's own process has a task that asked earlier: a
    /// process is on the line only once it has been refused, so the holder's own waiters are
    /// not shown. A place ends when its process stops asking (killed or paused) within
    /// about 1.6 s.
    ///
    /// A name longer than 40 characters gets a line of its own, its row following with the
    /// NAME column blank; --json always gives names whole.
    #[command(after_help = exit_code::STATUS_HELP)]
    Status(StatusArgs),
    /// Free a lock whose holder is stuck (needs --force).
    ///
    /// Clears the holder's lease on the server at once and prints whose it was. The holder is
    /// not asked: its next renewal (within a third of its lease) finds the lease gone, and a
    /// `mongolock run` or `elect` holding it then stops its command (run exits with 76).
    /// Until then the old holder may still be working while a new one starts, so only writes
    /// fenced with the token are protected. The fencing token keeps rising. Without --force
    /// it only shows who holds the lock, or says that nobody does. A name with no record in
    /// the collection changes nothing and exits with 66: the message names the database and
    /// collection looked in, and any other database that has a record of the name.
    #[command(after_help = exit_code::RELEASE_HELP)]
    Release(ReleaseArgs),
    /// Print what happens to locks, as it happens, from every process.
    ///
    /// One line per change to the named locks: acquired (by whom, with which fencing token),
    /// released, expired (its holder stopped renewing), force-released, deleted; it starts
    /// with each lock's current state in the database and collection watched (held, free
    /// with the last grant's token, or no record there, with any other database that has
    /// one) and runs until Ctrl-C or SIGTERM. Follows a change
    /// stream; on a server without change streams it reads the locks every second instead.
    #[command(after_help = exit_code::WATCH_HELP)]
    Watch(WatchArgs),
    /// Say whether a deployment is fit for locks, and why.
    ///
    /// Checks the server version, the topology, change streams, the store's write concern and
    /// its measured round trip, journaling, the lock collection's indexes and shard key,
    /// whether a lock manager would start, every member's clock against the primary's
    /// ($$NOW), the driver's heartbeat, failover timing and the renewal headroom, against the
    /// lease the application will use (--lease). Each finding is ok, warning or problem, with
    /// the fix. It acquires, renews and releases a scratch lock of its own and deletes it;
    /// like a starting lock manager it creates the lock collection and its TTL index.
    #[command(after_help = exit_code::DOCTOR_HELP)]
    Doctor(DoctorArgs),
    /// Verify locks on this deployment: processes contend for scratch locks and check the
    /// guarantees.
    ///
    /// Starts --processes worker processes of this program, each running --tasks tasks that
    /// for --duration take random scratch locks (of --locks), write to a protected record per
    /// lock with their fencing token and once more with an older token, and report every
    /// critical section. Then checks that no two holders overlapped unless the earlier had
    /// been told of its loss, that tokens increased in entry order, that every stale write
    /// was refused and that the records count exactly the applied writes; prints the
    /// throughput, the hand-over latency to a waiting holder and the commands per
    /// acquisition. The scratch locks (in the lock collection) and the protected records
    /// (collection `mongolock_check_RUN`) are deleted at the end.
    #[command(after_help = exit_code::CHECK_HELP)]
    Check(CheckArgs),
    /// Internal: one worker process of `mongolock check`.
    #[command(name = "__check-worker", hide = true)]
    CheckWorker(CheckWorkerArgs),
    /// Internal: the guardian process between mongolock and the command.
    #[command(name = "__guard", hide = true)]
    Guard(GuardArgs),
}

/// Where the locks live. Global: accepted before or after the subcommand.
#[derive(Debug, Clone, Args)]
pub(crate) struct ConnectionArgs {
    /// MongoDB connection string (MongoDB 5.0 or newer). Unless it sets them, mongolock uses
    /// serverSelectionTimeoutMS=5000 and heartbeatFrequencyMS=500.
    #[arg(
        long,
        global = true,
        env = "MONGODB_URI",
        hide_env_values = true,
        value_name = "URI"
    )]
    pub uri: Option<String>,
    /// Database of the lock collection [default: the URI's database, else "mongolock"].
    #[arg(
        long,
        global = true,
        env = "MONGOLOCK_DATABASE",
        hide_env_values = true,
        value_name = "NAME"
    )]
    pub database: Option<String>,
    /// Collection holding one document per lock.
    #[arg(
        long,
        global = true,
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
    /// Name of the lock; repeat it to hold several locks at once.
    #[arg(long, value_name = "NAME", required = true, action = ArgAction::Append)]
    pub lock: Vec<String>,
    /// Hold a read lock on the reader/writer lock NAME, shared with other readers.
    #[arg(long, conflicts_with_all = ["exclusive", "permits"])]
    pub shared: bool,
    /// Hold the write lock on the reader/writer lock NAME, excluding readers and writers
    /// (not the same lock as a plain --lock NAME).
    #[arg(long, conflicts_with = "permits")]
    pub exclusive: bool,
    /// Hold a permit of the semaphore NAME of N permits (1 to 1000; every run on NAME must
    /// give the same N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(mongolock::MAX_PERMITS)))]
    pub permits: Option<u32>,
    /// Give up (exit 75) if the lock (every lock, with several) is not acquired within this
    /// time; 0 tries once [default: wait forever].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub wait: Option<Duration>,
    /// Wait in line: the lock (permit, read or write lock) goes to whoever asked first, in
    /// any process, by the server's clock — the line of the library's
    /// `Fairness::ArrivalOrder`, so a script can join the line its Rust peers use. Every
    /// process using the name should wait this way: a run without it neither waits in line
    /// nor looks at it. `status` shows the line: a `waiting` line per process. Each turn then
    /// costs a store call [default: bounded fairness, the library's default]. Not with several
    /// --lock.
    #[arg(long)]
    pub arrival_order: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub held: HeldCommandArgs,
}

/// `mongolock elect`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ElectArgs {
    /// Name of the election (the lock it runs on).
    #[arg(long, value_name = "NAME")]
    pub name: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub held: HeldCommandArgs,
}

/// What `run` and `elect` share: the lease, the grace period and the command.
#[derive(Debug, Clone, Args)]
pub(crate) struct HeldCommandArgs {
    /// Lease length on the server: a crashed mongolock blocks others for at most this long.
    /// Renewed every third of it (`elect`: every 2/15, its retry period); if no renewal is
    /// confirmed for two thirds of it, the command is stopped. At least 1s, at most a year.
    #[arg(
        long,
        alias = "expiry",
        value_name = "DURATION",
        default_value = "15s",
        value_parser = duration::parse_lease
    )]
    pub lease: Duration,
    /// Time between SIGTERM and SIGKILL when the command must stop. It must end before the
    /// lease can expire on the server, or the stopping command could overlap the next
    /// holder [default: half of lease − renew deadline, 2.5s with the default lease].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub grace: Option<Duration>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD", num_args = 1..)]
    pub command: Vec<OsString>,
}

/// `mongolock status`.
#[derive(Debug, Clone, Args)]
pub(crate) struct StatusArgs {
    /// Show only these locks, in this order (a name with no record in the collection shows
    /// as `no record`, and a note says which other databases have one) [default: every lock
    /// of the collection].
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Refresh every SECONDS (default 2) until Ctrl-C. On a terminal the screen is redrawn;
    /// into a pipe or file each refresh is appended. Every refresh says when it was taken.
    #[arg(
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        default_missing_value = "2",
        value_parser = duration::parse_positive
    )]
    pub watch: Option<Duration>,
    /// Print JSON for scripts instead of a table: one object
    /// `{"time", "database", "collection", "locks": [{"name", "state", "holder", "token",
    /// "expires_in_ms", "contended_for_ms", "kind", "permits", "holders": [{"holder",
    /// "access", "token", "expires_in_ms"}], "queue": [{"holder", "access",
    /// "waiting_for_ms"}], "elsewhere"}], "elsewhere"}`, one line per refresh with --watch (a
    /// failed refresh prints `{"time", "error"}`). Names are never shortened. `state` is
    /// `"held"`, `"free"` or `"no_record"` (a name asked for that has no record: `token` and
    /// `kind` null); `kind` is `"mutex"`, `"semaphore"` (with `permits`) or `"read_write"`;
    /// `access` is `"exclusive"`, `"permit"`, `"read"` or `"write"`; for a semaphore or
    /// reader/writer lock, `holder` is the first holder, `token` the last grant's and
    /// `expires_in_ms` the longest time left. `queue` is the line of processes waiting in
    /// arrival order, earliest first. A lock's `elsewhere` lists the other databases whose
    /// collection of the same name has a record of a name with none here; the top-level
    /// `elsewhere`, every such database (for an empty collection: those with any record).
    #[arg(long)]
    pub json: bool,
}

/// `mongolock watch`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WatchArgs {
    /// The locks to watch.
    #[arg(value_name = "NAME", required = true, num_args = 1..)]
    pub names: Vec<String>,
    /// Print one JSON object per change for scripts: `{"time", "database", "collection",
    /// "name", "change" (current|acquired|released|force_released|expired|deleted),
    /// "holder", "token", "expires_in_ms"}`; a `current` line of a name with no record has
    /// a null holder and token.
    #[arg(long)]
    pub json: bool,
}

/// `mongolock doctor`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DoctorArgs {
    /// The lease the application uses, to judge renewal headroom, clock offsets and failover
    /// timing against (renewed every third of it; a loss told after two thirds).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "15s",
        value_parser = duration::parse_lease
    )]
    pub lease: Duration,
    /// Round trips to measure of each kind (acquire/release, renewal).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub samples: u16,
    /// Print one JSON object for scripts instead of a table: `{"time", "uri", "database",
    /// "collection", "lease_ms", "findings": [{"check", "status", "seen", "fix"}], "worst"}`.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when the worst finding is a warning, for a gate that accepts only a clean bill
    /// (without it, warnings exit 0: locks work, at a cost the fixes name).
    #[arg(long)]
    pub strict: bool,
}

/// `mongolock check`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CheckArgs {
    /// Worker processes.
    #[arg(long, value_name = "P", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub processes: u32,
    /// Contending tasks in each process.
    #[arg(long, value_name = "K", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub tasks: u32,
    /// Scratch locks the tasks contend for.
    #[arg(long, value_name = "L", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub locks: u32,
    /// How long they contend.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "20s",
        value_parser = duration::parse_positive
    )]
    pub duration: Duration,
    /// The scratch locks' lease.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "15s",
        value_parser = duration::parse_lease
    )]
    pub lease: Duration,
    /// Print one JSON object for scripts instead of the report: the figures, `"checks":
    /// [{"check", "cases", "passed", "violations"}]` and `"passed"`.
    #[arg(long)]
    pub json: bool,
}

/// `mongolock __check-worker` (internal; see `check`).
#[derive(Debug, Clone, Args)]
pub(crate) struct CheckWorkerArgs {
    /// The run's id, part of every scratch name.
    #[arg(long)]
    pub run: String,
    /// This worker's index.
    #[arg(long)]
    pub worker: u32,
    /// Contending tasks.
    #[arg(long)]
    pub tasks: u32,
    /// Scratch locks.
    #[arg(long)]
    pub locks: u32,
    /// When to start contending, on the machine's monotonic clock (nanoseconds).
    #[arg(long)]
    pub from: u64,
    /// When to stop, on the same clock.
    #[arg(long)]
    pub until: u64,
    /// The scratch locks' lease.
    #[arg(long, value_parser = duration::parse_lease)]
    pub lease: Duration,
}

/// `mongolock release`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ReleaseArgs {
    /// Name of the lock to free.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Really take the lock away from its holder.
    #[arg(long)]
    pub force: bool,
}

/// `mongolock __guard` (internal; see `guardian`).
#[derive(Debug, Clone, Args)]
pub(crate) struct GuardArgs {
    /// The mongolock process this guardian serves: when it is gone, the command is stopped.
    #[arg(long, value_name = "PID")]
    pub parent: i32,
    /// SIGTERM → SIGKILL grace period in milliseconds.
    #[arg(long, value_name = "MS")]
    pub grace_ms: u64,
    /// Run the command in this process group (mongolock's, on a terminal) instead of a new
    /// one.
    #[arg(long, value_name = "PGID")]
    pub join_group: Option<i32>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD", num_args = 1..)]
    pub command: Vec<OsString>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(args).map(|cli| cli.command)
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_command_after_double_dash() {
        let Ok(Command::Run(args)) = parse(&[
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
        ]) else {
            panic!("not run")
        };
        assert_eq!(args.lock, ["jobs"]);
        assert!(!args.shared && !args.exclusive && args.permits.is_none());
        assert_eq!(args.wait, Some(Duration::from_millis(200)));
        assert_eq!(args.held.lease, Duration::from_secs(15));
        assert_eq!(args.held.grace, None);
        assert_eq!(args.held.command, ["sh", "-c", "exit 7"]);
        assert!(parse(&["mongolock", "run", "--lock", "jobs"]).is_err());
    }

    #[test]
    fn lease_is_one_name_with_the_old_spelling_kept_and_a_lower_bound() {
        let lease = |args: &[&str]| match parse(args) {
            Ok(Command::Run(run)) => Ok(run.held.lease),
            Ok(Command::Elect(elect)) => Ok(elect.held.lease),
            Ok(_) => panic!("neither run nor elect"),
            Err(error) => Err(error),
        };
        let run = ["mongolock", "run", "--lock", "x"];
        let with = |base: &[&'static str], extra: &[&'static str]| {
            let mut args = base.to_vec();
            args.extend_from_slice(extra);
            args.extend_from_slice(&["--", "true"]);
            args
        };
        assert_eq!(
            lease(&with(&run, &["--lease", "3s"])).unwrap(),
            Duration::from_secs(3)
        );
        assert_eq!(
            lease(&with(&run, &["--expiry", "4s"])).unwrap(),
            Duration::from_secs(4)
        );
        let elect = ["mongolock", "elect", "--name", "x"];
        assert_eq!(
            lease(&with(&elect, &["--lease", "1s"])).unwrap(),
            Duration::from_secs(1)
        );
        let error = lease(&with(&run, &["--lease", "50ms"])).unwrap_err();
        assert!(error.to_string().contains("at least 1s"), "{error}");
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("--expiry"), "{help}");
    }

    #[test]
    fn watch_takes_seconds_with_or_without_equals() {
        let watch = |args: &[&str]| match parse(args) {
            Ok(Command::Status(status)) => Ok(status.watch),
            Ok(_) => panic!("not status"),
            Err(error) => Err(error),
        };
        assert_eq!(watch(&["mongolock", "status"]).unwrap(), None);
        assert_eq!(
            watch(&["mongolock", "status", "--watch"]).unwrap(),
            Some(Duration::from_secs(2))
        );
        for args in [
            &["mongolock", "status", "--watch=5"][..],
            &["mongolock", "status", "--watch", "5"],
        ] {
            assert_eq!(watch(args).unwrap(), Some(Duration::from_secs(5)));
        }
        assert_eq!(
            watch(&["mongolock", "status", "--watch", "--json"]).unwrap(),
            Some(Duration::from_secs(2))
        );
        assert!(watch(&["mongolock", "status", "--watch=0"]).is_err());
    }

    #[test]
    fn connection_flags_go_before_or_after_the_subcommand() {
        for args in [
            &[
                "mongolock",
                "--uri",
                "mongodb://h",
                "--database",
                "d",
                "status",
            ][..],
            &[
                "mongolock",
                "status",
                "--uri",
                "mongodb://h",
                "--database",
                "d",
            ],
            &[
                "mongolock",
                "--uri",
                "mongodb://h",
                "status",
                "--database",
                "d",
            ],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            assert!(matches!(cli.command, Command::Status(_)), "{args:?}");
            assert_eq!(
                cli.connection.uri.as_deref(),
                Some("mongodb://h"),
                "{args:?}"
            );
            assert_eq!(cli.connection.database.as_deref(), Some("d"), "{args:?}");
            assert_eq!(cli.connection.collection, "distributed_locks", "{args:?}");
        }
        let cli = Cli::try_parse_from([
            "mongolock",
            "--collection",
            "c",
            "run",
            "--lock",
            "x",
            "--",
            "true",
        ])
        .unwrap();
        assert_eq!(cli.connection.collection, "c");
    }

    #[test]
    fn quiet_and_verbose_are_global_and_exclusive() {
        let cli = Cli::try_parse_from(["mongolock", "status", "-vv"]).unwrap();
        assert_eq!((cli.quiet, cli.verbose), (false, 2));
        let cli = Cli::try_parse_from(["mongolock", "-q", "status"]).unwrap();
        assert!(cli.quiet);
        assert!(Cli::try_parse_from(["mongolock", "status", "-q", "-v"]).is_err());
    }
}
