//! [`CliError`]: every way a `mongolock` command can fail, each with its exit code.

use mongolock::{LockError, LossReason, StoreError};

use super::exit_code;

/// Why a `mongolock` command failed. [`exit_code`](Self::exit_code) gives the documented
/// exit code, [`one_line`](Self::one_line) the message printed after `mongolock: `.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CliError {
    /// Neither `--uri` nor `MONGODB_URI` was given.
    #[error("no MongoDB URI: pass --uri or set MONGODB_URI")]
    NoUri,
    /// The URI could not be parsed.
    #[error("invalid MongoDB URI {uri}: {reason}")]
    InvalidUri {
        /// The URI with any password hidden.
        uri: String,
        /// What the driver said.
        reason: String,
    },
    /// A bad value on the command line (lock name, collection, database, option combination).
    #[error("{0}")]
    Usage(String),
    /// MongoDB could not be reached or failed a request.
    #[error("cannot use MongoDB at {uri}: {reason}")]
    Unavailable {
        /// The URI with any password hidden.
        uri: String,
        /// What went wrong.
        reason: String,
    },
    /// The server is too old or otherwise unable to run the lock store.
    #[error("MongoDB at {uri} is not supported: {reason}")]
    Unsupported {
        /// The URI with any password hidden.
        uri: String,
        /// Why.
        reason: String,
    },
    /// `run --wait`: the lock stayed held elsewhere.
    #[error("{}", not_acquired(.asked, .blocker, .waited.as_deref()))]
    NotAcquired {
        /// What was asked for: `lock "x"`, `a permit of semaphore "x"`, `locks "a", "b"`.
        asked: String,
        /// What stood in the way at the end.
        blocker: Blocker,
        /// How long was waited, for people; `None` for a single attempt (`--wait 0`).
        waited: Option<String>,
    },
    /// `run`: the lock was lost while the command ran; the command was stopped.
    #[error("{what} was lost while the command ran ({reason}); the command was stopped")]
    Lost {
        /// What was lost: `lock "x"`, `a read lock on "x"`.
        what: String,
        /// Why the lock was lost.
        reason: LossReason,
    },
    /// `release`: the collection has no record of the name, so nothing changed. Most often
    /// the wrong database or collection: the message names the one looked in, and any other
    /// database whose collection of the same name has a record of it.
    #[error("no record of {name:?} in {namespace}; nothing changed{}", elsewhere.as_ref().map(|found| format!(". {found}")).unwrap_or_default())]
    NoRecord {
        /// The lock's name.
        name: String,
        /// `database.collection`.
        namespace: String,
        /// Where a record of it is, and the flag that points there.
        elsewhere: Option<String>,
    },
    /// `run`: the name is another kind of lock than the run asked for; nothing was held.
    #[error(
        "{error}. Every run on a name must ask for the same kind: a plain --lock for a lock, --shared or --exclusive for a reader/writer lock, --permits N with the same N for a semaphore"
    )]
    KindMismatch {
        /// The library's error, naming the lock, what it is and what was asked.
        error: LockError,
    },
    /// The command could not be started.
    #[error("cannot run {program:?}: {source}")]
    Spawn {
        /// The program as given.
        program: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `mongolock` received a signal before the command started (or while no command ran).
    #[error("interrupted by {name}")]
    Interrupted {
        /// The signal's number.
        signal: i32,
        /// The signal's name.
        name: &'static str,
    },
    /// A bug or an unexpected runtime failure.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What kept a lock from being acquired: `subject` is `state`, for example `lock "x"` is
/// `held by H`, or `semaphore "x"` is `full: 2 permits held by H1, H2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocker {
    /// The lock that is taken (one member of several).
    pub subject: String,
    /// How it is held (`held` when the store no longer says).
    pub state: String,
}

fn not_acquired(asked: &str, blocker: &Blocker, waited: Option<&str>) -> String {
    let Blocker { subject, state } = blocker;
    match waited {
        Some(waited) if subject == asked => {
            format!("{asked} not acquired within {waited} ({state})")
        }
        Some(waited) => format!("{asked} not acquired within {waited} ({subject} is {state})"),
        None => format!("{subject} is {state}; not waiting (--wait 0)"),
    }
}

impl CliError {
    /// The documented exit code for this failure (see [`exit_code`]).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::NoUri | Self::InvalidUri { .. } | Self::Usage(_) => exit_code::USAGE,
            Self::Unavailable { .. } | Self::Unsupported { .. } => exit_code::UNAVAILABLE,
            Self::NotAcquired { .. } => exit_code::NOT_ACQUIRED,
            Self::Lost { .. } => exit_code::LOST,
            Self::KindMismatch { .. } => exit_code::KIND_MISMATCH,
            Self::NoRecord { .. } => exit_code::NO_RECORD,
            Self::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                exit_code::NOT_FOUND
            }
            Self::Spawn { .. } => exit_code::CANNOT_EXECUTE,
            Self::Interrupted { signal, .. } => exit_code::for_signal(*signal),
            Self::Internal(_) => exit_code::SOFTWARE,
        }
    }

    /// The message on one line: driver errors can span several, and stderr should get one.
    pub(crate) fn one_line(&self) -> String {
        self.to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Maps a library error that is not a store failure (see
    /// [`Endpoint::lock_error`](super::connect::Endpoint::lock_error) for those): invalid
    /// input is a usage error, anything else is internal.
    pub(crate) fn from_lock(error: LockError) -> Self {
        match error {
            LockError::InvalidName { .. } | LockError::InvalidOptions(_) => {
                Self::Usage(error.to_string())
            }
            LockError::KindMismatch { .. } => Self::KindMismatch { error },
            other => Self::Internal(other.to_string()),
        }
    }

    /// Maps a store error on the server `uri`; `reason` says what went wrong in a few words.
    pub(crate) fn from_store(error: &StoreError, uri: &str, reason: &str) -> Self {
        let uri = uri.to_owned();
        match error {
            StoreError::InvalidConfig(reason) => Self::Usage(reason.clone()),
            StoreError::KindMismatch { name, found, asked } => Self::KindMismatch {
                error: LockError::KindMismatch {
                    name: name.clone(),
                    found: *found,
                    asked: *asked,
                },
            },
            StoreError::Unsupported(reason) => Self::Unsupported {
                uri,
                reason: reason.clone(),
            },
            _ => Self::Unavailable {
                uri,
                reason: reason.to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_sysexits() {
        let store = |error: StoreError| CliError::from_store(&error, "mongodb://h", "why");
        assert_eq!(store(StoreError::backend("down")).exit_code(), 69);
        assert_eq!(store(StoreError::Unsupported("4.4".into())).exit_code(), 69);
        assert_eq!(
            store(StoreError::InvalidConfig("bad".into())).exit_code(),
            64
        );
        assert_eq!(
            CliError::from_lock(LockError::InvalidOptions("x".into())).exit_code(),
            64
        );
        assert_eq!(CliError::from_lock(LockError::Shutdown).exit_code(), 70);
        let not_found = std::io::Error::from(std::io::ErrorKind::NotFound);
        let spawn = CliError::Spawn {
            program: "nope".into(),
            source: not_found,
        };
        assert_eq!(spawn.exit_code(), 127);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let spawn = CliError::Spawn {
            program: "/etc".into(),
            source: denied,
        };
        assert_eq!(spawn.exit_code(), 126);
        let interrupted = CliError::Interrupted {
            signal: 2,
            name: "SIGINT",
        };
        assert_eq!(interrupted.exit_code(), 130);
    }

    #[test]
    fn messages_name_the_lock_and_holder() {
        let held_by = |state: &str| Blocker {
            subject: "lock \"orders\"".into(),
            state: state.into(),
        };
        let error = CliError::NotAcquired {
            asked: "lock \"orders\"".into(),
            blocker: held_by("held by host:1:ab"),
            waited: Some("200ms".into()),
        };
        assert_eq!(error.exit_code(), 75);
        assert_eq!(
            error.one_line(),
            "lock \"orders\" not acquired within 200ms (held by host:1:ab)"
        );
        let once = CliError::NotAcquired {
            asked: "lock \"orders\"".into(),
            blocker: held_by("held by host:1:ab"),
            waited: None,
        };
        assert_eq!(
            once.one_line(),
            "lock \"orders\" is held by host:1:ab; not waiting (--wait 0)"
        );
        let several = CliError::NotAcquired {
            asked: "locks \"a\", \"orders\"".into(),
            blocker: held_by("held"),
            waited: Some("1s".into()),
        };
        assert_eq!(
            several.one_line(),
            "locks \"a\", \"orders\" not acquired within 1s (lock \"orders\" is held)"
        );
        let lost = CliError::Lost {
            what: "a permit of semaphore \"orders\"".into(),
            reason: LossReason::Superseded,
        };
        assert_eq!(lost.exit_code(), 76);
        assert!(
            lost.one_line()
                .starts_with("a permit of semaphore \"orders\" was lost")
        );
        assert!(lost.one_line().contains("taken over"));
    }

    #[test]
    fn a_kind_mismatch_has_its_own_code_and_says_how_to_agree() {
        use mongolock::LockKind;
        let mismatch = CliError::from_lock(LockError::KindMismatch {
            name: "imports".into(),
            found: LockKind::Semaphore { permits: 3 },
            asked: LockKind::ReadWrite,
        });
        assert_eq!(mismatch.exit_code(), 78);
        let line = mismatch.one_line();
        assert!(
            line.starts_with(
                "lock \"imports\" is a semaphore of 3 permits, not a reader/writer lock; nothing was written."
            ),
            "{line}"
        );
        assert!(line.contains("--permits N with the same N"), "{line}");
        let from_store = CliError::from_store(
            &StoreError::KindMismatch {
                name: "imports".into(),
                found: LockKind::Mutex,
                asked: LockKind::ReadWrite,
            },
            "mongodb://h",
            "why",
        );
        assert_eq!(from_store.exit_code(), 78);
    }

    #[test]
    fn no_record_has_its_own_code_and_says_where_else_to_look() {
        let nowhere = CliError::NoRecord {
            name: "nightly-report".into(),
            namespace: "mongolock.distributed_locks".into(),
            elsewhere: None,
        };
        assert_eq!(nowhere.exit_code(), 66);
        assert_eq!(
            nowhere.one_line(),
            "no record of \"nightly-report\" in mongolock.distributed_locks; nothing changed"
        );
        let elsewhere = CliError::NoRecord {
            name: "nightly-report".into(),
            namespace: "mongolock.distributed_locks".into(),
            elsewhere: Some("app.distributed_locks has one: pass --database app".into()),
        };
        assert!(
            elsewhere
                .one_line()
                .ends_with("nothing changed. app.distributed_locks has one: pass --database app"),
            "{}",
            elsewhere.one_line()
        );
    }

    #[test]
    fn one_line_and_exit_code_examples() {
        let error = CliError::NoUri;
        assert_eq!(error.exit_code(), 64);
        assert_eq!(
            error.one_line(),
            "no MongoDB URI: pass --uri or set MONGODB_URI"
        );
        assert_eq!(CliError::Internal("oops".into()).exit_code(), 70);
        assert_eq!(
            CliError::Usage("bad\n  value".into()).one_line(),
            "bad value"
        );
    }
}
