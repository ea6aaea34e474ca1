//! The child-process side: every measurement runs in a fresh process of this binary
//! (`scenarios --child NAME key=value…`), so resident memory and live tasks start from a
//! clean slate, a wedged client cannot spoil the next measurement, and the parent can stop a
//! run that overstays its time cap. A child reports `RESULT key=value` lines on stdout.

use std::collections::HashMap;
use std::fmt::Display;
use std::io::Write as _;
use std::str::FromStr;
use std::time::Duration;

use mongodb::Database;
use mongolock::{LockManager, LockOptions, MongoStore};

use crate::support::commands::CommandLog;
use crate::support::server;

/// The `key=value` arguments of a child.
#[derive(Debug, Default)]
pub(crate) struct Args(HashMap<String, String>);

impl Args {
    pub(crate) fn parse(args: &[String]) -> Self {
        Self(
            args.iter()
                .filter_map(|arg| arg.split_once('='))
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect(),
        )
    }

    /// The value of `key`, or `default` when absent or unparsable.
    pub(crate) fn get<T: FromStr>(&self, key: &str, default: T) -> T {
        self.0
            .get(key)
            .and_then(|value| value.parse().ok())
            .unwrap_or(default)
    }

    pub(crate) fn text(&self, key: &str, default: &str) -> String {
        self.0
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    pub(crate) fn millis(&self, key: &str, default: u64) -> Duration {
        Duration::from_millis(self.get(key, default))
    }
}

/// Reports one figure to the parent.
pub(crate) fn emit(key: &str, value: impl Display) {
    let mut out = std::io::stdout().lock();
    // A closed pipe means the parent gave up on this child; nothing left to tell.
    let _ = writeln!(out, "RESULT {key}={value}");
    let _ = out.flush();
}

/// A counted client of its own (as a separate process would have).
pub(crate) struct Side {
    pub(crate) log: CommandLog,
    pub(crate) database: Database,
}

impl Side {
    /// A new client on the scratch database `database` (shared by every side of one run).
    pub(crate) async fn connect(app: &str, database: &str) -> Result<Self, String> {
        let log = CommandLog::new();
        let client = server::client(&server::uri(), app, &log).await?;
        let database = client.database(database);
        Ok(Self { log, database })
    }

    /// A lock manager on this side's client, default collection.
    pub(crate) async fn manager(&self, options: LockOptions) -> Result<LockManager, String> {
        LockManager::start(MongoStore::new(self.database.clone()), options)
            .await
            .map_err(|e| format!("manager start: {e}"))
    }

    /// Drops the scratch database, bounded in time.
    pub(crate) async fn drop_database(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.database.drop()).await;
    }
}

/// The scratch database of one child run.
pub(crate) fn scratch_name(label: &str) -> String {
    format!("bench_{label}_{}", std::process::id())
}
