//! The exit codes of `mongolock`, and how a child's exit status becomes one.
//!
//! The codes `mongolock` chooses itself come from BSD's `sysexits.h`, so scripts can tell
//! "try again later" from "broken configuration" without parsing messages. Every other code
//! is the command's own.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | `status`: done (also after Ctrl-C ends `--watch`); `watch`: stopped with Ctrl-C; `release --force`: released, or nothing held the lock; `release`: nothing holds the lock; `doctor`: no finding is a problem (warnings allowed) |
//! | 1 | `doctor --strict`: the worst finding is a warning; `check`: a check failed |
//! | 2 | `doctor`: some finding is a problem |
//! | the command's | `run`/`elect`: the command exited by itself with this code |
//! | 128 + N | `run`/`elect`: the command was killed by signal N (`sh` convention); any subcommand: `mongolock` got signal N before it was done (130 for Ctrl-C) |
//! | 64 `EX_USAGE` | bad usage or input: unknown flag, missing URI, invalid lock name, collection, database or duration, a lease under 1s, `--permits` outside 1..=1000, several `--lock` with `--shared`, `--exclusive` or `--permits` (or with a name containing a comma, or with `--arrival-order`), `release` of a held lock without `--force` |
//! | 66 `EX_NOINPUT` | `release`: the collection has no record of the name (nothing changed; the message names the database and collection, and any other database that has a record of it) |
//! | 69 `EX_UNAVAILABLE` | MongoDB unreachable, refused the request, or too old (needs 5.0+) |
//! | 70 `EX_SOFTWARE` | internal error |
//! | 75 `EX_TEMPFAIL` | `run`: the lock was not acquired within `--wait` |
//! | 76 | `run`: the lock was lost while the command ran; the command was stopped |
//! | 78 `EX_CONFIG` | `run`: the name is another kind of lock than asked for (a plain `--lock` on a reader/writer lock or a semaphore, `--shared`/`--exclusive` on a lock or a semaphore, `--permits N` on a semaphore of another count, or the reverse); nothing was held |
//! | 126 | `run`/`elect`: the command could not be executed (permission denied, not executable) |
//! | 127 | `run`/`elect`: the command was not found |
//!
//! A command that exits with one of these codes itself is indistinguishable from
//! `mongolock` reporting it, as with `timeout(1)` and `flock(1)`.

use std::process::ExitStatus;

/// Bad usage or input (`EX_USAGE`).
pub(crate) const USAGE: u8 = 64;
/// `release`: the collection has no record of the name (`EX_NOINPUT`): most likely the wrong
/// database or collection, which neither a retry nor `--force` would fix.
pub(crate) const NO_RECORD: u8 = 66;
/// MongoDB is unreachable, failed, or is unsupported (`EX_UNAVAILABLE`).
pub(crate) const UNAVAILABLE: u8 = 69;
/// Internal error (`EX_SOFTWARE`).
pub(crate) const SOFTWARE: u8 = 70;
/// The lock was not acquired within `--wait` (`EX_TEMPFAIL`).
pub(crate) const NOT_ACQUIRED: u8 = 75;
/// The lock was lost while the command ran; the command was stopped.
pub(crate) const LOST: u8 = 76;
/// The name is another kind of lock (or a semaphore of another count) than the run asked
/// for (`EX_CONFIG`): the processes sharing it disagree about what it is, which waiting or
/// retrying cannot fix.
pub(crate) const KIND_MISMATCH: u8 = 78;
/// The command exists but could not be executed.
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit code table, as shown at the end of `mongolock --help`.
pub(crate) const HELP: &str = "\
Exit codes:
  <command's>  run/elect: the command's own exit code
  128+N        run/elect: the command was killed by signal N;
               any subcommand: mongolock got signal N first (130: Ctrl-C)
  0            status: done; release --force: released, or not held;
               release: not held; doctor: no finding is a problem (warnings
               allowed)
  1 / 2        doctor: 1 with --strict if the worst finding is a warning,
               2 if one is a problem; check: 1 when a check failed
  64           usage error: bad flag or value, missing URI, invalid lock name,
               release of a held lock without --force
  66           release: no record of the name in the database and collection
  69           MongoDB unreachable, failing, or older than 5.0
  70           internal error
  75           run: lock not acquired within --wait
  76           run: lock lost while the command ran (the command was stopped)
  78           run: the name is another kind of lock than asked for
  126 / 127    run/elect: the command could not be executed / was not found";

/// The exit codes of `mongolock run`.
pub(crate) const RUN_HELP: &str = "\
Exit codes:
  <command's>  the command's own exit code
  128+N        the command was killed by signal N (or mongolock was, before it started)
  64           usage error: bad flag or value, missing URI, invalid lock name,
               --permits outside 1..=1000, several --lock with --shared,
               --exclusive, --permits or --arrival-order, or a comma in a name
               with several --lock
  69           MongoDB unreachable, failing, or older than 5.0
  70           internal error
  75           lock not acquired within --wait (any of several)
  76           lock lost while the command ran (the command was stopped)
  78           the name is another kind of lock than asked for: a lock (plain
               --lock), a reader/writer lock (--shared/--exclusive) or a semaphore
               of another count (--permits N); nothing was held
  126 / 127    the command could not be executed / was not found";

/// The exit codes of `mongolock elect`.
pub(crate) const ELECT_HELP: &str = "\
Exit codes:
  <command's>  the command's own exit code (it exited by itself while leading)
  128+N        the command was killed by signal N (or mongolock was, while not leading)
  64           usage error: bad flag or value, missing URI, invalid name
  69           MongoDB unreachable, failing, or older than 5.0
  70           internal error
  126 / 127    the command could not be executed / was not found";

/// The exit codes of `mongolock status`.
pub(crate) const STATUS_HELP: &str = "\
Exit codes:
  0            done (with --watch: stopped with Ctrl-C or SIGTERM)
  64           usage error: bad flag or value, missing URI, invalid collection
  69           MongoDB unreachable or failing
  70           internal error
  128+N        interrupted by signal N before the first answer (130: Ctrl-C)";

/// The exit codes of `mongolock release`.
pub(crate) const RELEASE_HELP: &str = "\
Exit codes:
  0            released (its holder was printed), or nothing held the lock
  64           usage error: a held lock without --force (the holder is shown),
               invalid lock name
  66           no record of the name in the database and collection: nothing
               changed (another database that has one is named)
  69           MongoDB unreachable or failing
  70           internal error
  128+N        interrupted by signal N (130: Ctrl-C)";

/// The exit codes of `mongolock watch`.
pub(crate) const WATCH_HELP: &str = "\
Exit codes:
  0            stopped with Ctrl-C or SIGTERM (or its output was closed)
  64           usage error: bad flag or value, missing URI, invalid lock name
  69           MongoDB unreachable or failing
  70           internal error
  128+N        interrupted by signal N before watching began (130: Ctrl-C)";

/// The exit codes of `mongolock doctor`.
pub(crate) const DOCTOR_HELP: &str = "\
Exit codes:
  0            every finding is ok, or the worst is a warning: fit for locks
               (a warning costs margin, availability or latency; see its fix)
  1            --strict only: the worst finding is a warning
  2            some finding is a problem (locks are unsafe or will not work),
               with or without --strict
  64           usage error: bad flag or value, missing URI, invalid collection
  69           MongoDB unreachable
  70           internal error
  128+N        interrupted by signal N (130: Ctrl-C)";

/// The exit codes of `mongolock check`.
pub(crate) const CHECK_HELP: &str = "\
Exit codes:
  0            every check passed
  1            a check failed (the report lists the violations)
  64           usage error: bad flag or value, missing URI, invalid collection
  69           MongoDB unreachable, or the check could not run (a worker failed)
  70           internal error
  128+N        interrupted by signal N (130: Ctrl-C); the scratch data is deleted";

/// `128 + signal`, the shell's code for a process killed by `signal`.
pub(crate) fn for_signal(signal: i32) -> u8 {
    u8::try_from(128 + signal.clamp(0, 127)).unwrap_or(u8::MAX)
}

/// The code `mongolock` exits with for a child that ended with `status`: its exit code, or
/// `128 + signal` if a signal killed it.
pub(crate) fn of_status(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        // Exit codes are 0..=255 on Unix; keep the low byte as the shell does.
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(SOFTWARE),
        (None, Some(signal)) => for_signal(signal),
        (None, None) => SOFTWARE,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn statuses_map_like_a_shell() {
        assert_eq!(of_status(ExitStatus::from_raw(0)), 0);
        assert_eq!(of_status(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(of_status(ExitStatus::from_raw(2)), 130);
        assert_eq!(for_signal(9), 137);
        assert_eq!(for_signal(1000), 255);
    }

    #[test]
    fn signal_and_status_examples() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(for_signal(15), 143);
        assert_eq!(of_status(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(of_status(ExitStatus::from_raw(9)), 137); // killed by SIGKILL
    }
}
