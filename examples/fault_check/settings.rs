//! The worker's command line (the orchestrator builds it) and the run's timings.

use std::path::PathBuf;
use std::time::Duration;

/// What a worker process contends for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// `tasks` tasks taking random locks.
    Lock,
    /// One election candidate per election name.
    Election,
    /// `tasks` tasks taking a permit of random semaphores of `permits`.
    Semaphore,
    /// `tasks` tasks reading or (`write_percent` of the time) writing random reader/writer
    /// locks.
    ReadWrite,
}

/// Arguments of `fault_check worker` (internal: started by the orchestrator).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    pub(crate) uri: String,
    #[arg(long)]
    pub(crate) database: String,
    #[arg(long)]
    pub(crate) locks_collection: String,
    #[arg(long)]
    pub(crate) protected_collection: String,
    #[arg(long)]
    pub(crate) log: PathBuf,
    #[arg(long)]
    pub(crate) index: u32,
    #[arg(long, value_enum)]
    pub(crate) mode: Mode,
    /// Lock (or election) names are `<prefix>-0` .. `<prefix>-<locks - 1>`.
    #[arg(long)]
    pub(crate) prefix: String,
    #[arg(long)]
    pub(crate) locks: u32,
    #[arg(long)]
    pub(crate) tasks: u32,
    /// When to stop at the latest, on the shared monotonic clock (nanoseconds).
    #[arg(long)]
    pub(crate) until: u64,
    /// Stop (finish the current critical section, shut down) once this file exists.
    #[arg(long)]
    pub(crate) stop_file: PathBuf,
    #[arg(long)]
    pub(crate) expiry_ms: u64,
    /// Extension cadence for locks; retry period for elections.
    #[arg(long)]
    pub(crate) cadence_ms: u64,
    #[arg(long)]
    pub(crate) renew_deadline_ms: u64,
    #[arg(long)]
    pub(crate) backoff_min_ms: u64,
    #[arg(long)]
    pub(crate) backoff_max_ms: u64,
    #[arg(long)]
    pub(crate) acquire_timeout_ms: u64,
    #[arg(long)]
    pub(crate) hold_min_ms: u64,
    #[arg(long)]
    pub(crate) hold_max_ms: u64,
    #[arg(long)]
    pub(crate) write_every_ms: u64,
    /// Percent of acquisitions that go to this process's own uncontended lock
    /// (`solo-w<index>-t<task>`), so that a stalled acquisition finds the lock free when the server
    /// finally applies it.
    #[arg(long, default_value_t = 0)]
    pub(crate) solo_percent: u32,
    /// Longest random pause between two acquisitions of one task.
    #[arg(long, default_value_t = 20)]
    pub(crate) idle_max_ms: u64,
    /// The semaphores' count (semaphore mode).
    #[arg(long, default_value_t = 3)]
    pub(crate) permits: u32,
    /// Percent of acquisitions that write (reader/writer mode).
    #[arg(long, default_value_t = 30)]
    pub(crate) write_percent: u32,
    /// Plain locks grant in arrival order across processes (`Fairness::ArrivalOrder`).
    #[arg(long)]
    pub(crate) arrival_order: bool,
}

impl WorkerArgs {
    /// Whether the run goes on: before the deadline and no stop file yet.
    pub(crate) fn running(&self) -> bool {
        crate::clock::now() < self.until && !self.stop_file.exists()
    }

    pub(crate) fn lease_duration(&self) -> Duration {
        Duration::from_millis(self.expiry_ms)
    }

    /// The command line that parses back into these arguments.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mode = match self.mode {
            Mode::Lock => "lock",
            Mode::Election => "election",
            Mode::Semaphore => "semaphore",
            Mode::ReadWrite => "read-write",
        };
        let pairs: [(&str, String); 20] = [
            ("--uri", self.uri.clone()),
            ("--database", self.database.clone()),
            ("--locks-collection", self.locks_collection.clone()),
            ("--protected-collection", self.protected_collection.clone()),
            ("--log", self.log.display().to_string()),
            ("--index", self.index.to_string()),
            ("--mode", mode.to_owned()),
            ("--prefix", self.prefix.clone()),
            ("--locks", self.locks.to_string()),
            ("--tasks", self.tasks.to_string()),
            ("--until", self.until.to_string()),
            ("--stop-file", self.stop_file.display().to_string()),
            ("--expiry-ms", self.expiry_ms.to_string()),
            ("--cadence-ms", self.cadence_ms.to_string()),
            ("--renew-deadline-ms", self.renew_deadline_ms.to_string()),
            ("--backoff-min-ms", self.backoff_min_ms.to_string()),
            ("--backoff-max-ms", self.backoff_max_ms.to_string()),
            ("--acquire-timeout-ms", self.acquire_timeout_ms.to_string()),
            ("--hold-min-ms", self.hold_min_ms.to_string()),
            ("--hold-max-ms", self.hold_max_ms.to_string()),
        ];
        let mut args = vec!["worker".to_owned()];
        for (flag, value) in pairs {
            args.push(flag.to_owned());
            args.push(value);
        }
        args.push("--write-every-ms".to_owned());
        args.push(self.write_every_ms.to_string());
        args.push("--solo-percent".to_owned());
        args.push(self.solo_percent.to_string());
        args.push("--idle-max-ms".to_owned());
        args.push(self.idle_max_ms.to_string());
        args.push("--permits".to_owned());
        args.push(self.permits.to_string());
        args.push("--write-percent".to_owned());
        args.push(self.write_percent.to_string());
        if self.arrival_order {
            args.push("--arrival-order".to_owned());
        }
        args
    }
}
