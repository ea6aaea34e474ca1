//! The command `mongolock` runs under a lock or while leading, seen from `mongolock`: it is
//! started under a [guardian](super::guardian) (a second `mongolock` process) that stops
//! it, and everything it started, when told to, when the command exits, and when `mongolock`
//! dies — even by SIGKILL.
//!
//! **Terminals.** When stdin is a terminal, the command joins `mongolock`'s process group,
//! the shell's foreground job: it can read the terminal, and the terminal's signals (Ctrl-C,
//! Ctrl-\, Ctrl-Z, hang-up) reach it directly, as they reach `mongolock`, so `mongolock`
//! forwards only SIGTERM. Ctrl-Z suspends `mongolock` with the command, lease renewal
//! included: a suspension longer than the renew deadline loses the lock, and the command is
//! stopped when the job resumes. Without a terminal the command runs in a process group of
//! its own, and `mongolock` forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to that group.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, getpgrp, getpid};
use tokio::process::Command;

use super::CliError;

/// Environment variable carrying the fencing token to the command.
pub(crate) const TOKEN_ENV: &str = "MONGOLOCK_TOKEN";
/// Environment variable carrying the lock (or election) name to the command.
pub(crate) const LOCK_ENV: &str = "MONGOLOCK_LOCK";
/// Environment variable carrying every lock's name and token to a command holding several:
/// `NAME=TOKEN` joined by commas, in the names' byte order.
pub(crate) const TOKENS_ENV: &str = "MONGOLOCK_TOKENS";

/// The fencing environment of a command holding `held` (name and token of each lock, in
/// the order they were taken): `MONGOLOCK_TOKEN` and `MONGOLOCK_LOCK` of the first, and with
/// several `MONGOLOCK_TOKENS` of all.
pub(crate) fn fencing_env(held: &[(&str, u64)]) -> Vec<(&'static str, String)> {
    let mut env = Vec::with_capacity(3);
    if let Some((name, token)) = held.first() {
        env.push((TOKEN_ENV, token.to_string()));
        env.push((LOCK_ENV, (*name).to_owned()));
    }
    if held.len() > 1 {
        let all: Vec<String> = held
            .iter()
            .map(|(name, token)| format!("{name}={token}"))
            .collect();
        env.push((TOKENS_ENV, all.join(",")));
    }
    env
}

/// Time the guardian gets beyond the grace period to stop everything before it is killed.
const GUARDIAN_MARGIN: Duration = Duration::from_secs(1);

/// Whether commands run in the foreground of the terminal (stdin is one).
pub(crate) fn on_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// A running command, through its guardian.
#[derive(Debug)]
pub(crate) struct Child {
    guardian: tokio::process::Child,
    grace: Duration,
    on_terminal: bool,
}

impl Child {
    /// Starts `command` (program and arguments) under a guardian, with `env` (the
    /// [`fencing_env`]) set, inheriting stdin, stdout and stderr. `grace` is the SIGTERM →
    /// SIGKILL delay whenever it must stop.
    ///
    /// Call it from the thread that will outlive the command (the CLI's main thread, inside
    /// `block_on`): on Linux the guardian learns of `mongolock`'s death when the *thread*
    /// that started it exits.
    ///
    /// Errors: [`CliError::Spawn`] if the guardian (this program) cannot be started. A
    /// command that cannot be started makes the guardian exit with 127 (not found) or 126.
    pub(crate) fn spawn(
        command: &[OsString],
        env: &[(&'static str, String)],
        grace: Duration,
    ) -> Result<Self, CliError> {
        if command.is_empty() {
            return Err(CliError::Usage("no command given after --".to_owned()));
        }
        let on_terminal = on_terminal();
        let mut builder = Command::new(own_executable());
        builder
            .arg0("mongolock")
            .arg("__guard")
            .args(["--parent", &getpid().to_string()])
            .args(["--grace-ms", &grace.as_millis().to_string()]);
        if on_terminal {
            builder.args(["--join-group", &getpgrp().to_string()]);
        }
        builder
            .arg("--")
            .args(command)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(false);
        let guardian = builder.spawn().map_err(|source| CliError::Spawn {
            program: "the mongolock guardian".to_owned(),
            source,
        })?;
        Ok(Self {
            guardian,
            grace,
            on_terminal,
        })
    }

    /// Waits for the command (and whatever it left running) to end; the status carries the
    /// command's exit code. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> Result<ExitStatus, CliError> {
        self.guardian
            .wait()
            .await
            .map_err(|error| CliError::Internal(format!("cannot wait for the command: {error}")))
    }

    /// Passes a signal mongolock received on to the command, unless the terminal already
    /// delivered it there (see the module documentation).
    pub(crate) fn forward(&self, signal: Signal) {
        if self.on_terminal && signal != Signal::SIGTERM {
            return;
        }
        self.signal_guardian(signal);
    }

    fn signal_guardian(&self, signal: Signal) {
        // No id once it has been reaped: there is nothing left to signal then.
        if let Some(pid) = self.guardian.id().and_then(|pid| i32::try_from(pid).ok()) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// Stops the command and everything it started: SIGTERM, then SIGKILL after the grace
    /// period. Returns the command's exit status.
    pub(crate) async fn terminate(mut self) -> Result<ExitStatus, CliError> {
        self.signal_guardian(Signal::SIGUSR1);
        match tokio::time::timeout(self.grace + GUARDIAN_MARGIN, self.wait()).await {
            Ok(status) => status,
            Err(_) => {
                // A guardian that does not finish in time is killed; the kernel kills the
                // command with it (Linux).
                self.signal_guardian(Signal::SIGKILL);
                self.wait().await
            }
        }
    }
}

/// This program, for the guardian. On Linux `/proc/self/exe` still works when the binary
/// was replaced (an upgrade) while mongolock runs.
fn own_executable() -> std::path::PathBuf {
    if cfg!(target_os = "linux") {
        return "/proc/self/exe".into();
    }
    std::env::current_exe().unwrap_or_else(|_| "mongolock".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guardian_is_this_program() {
        assert!(own_executable().exists());
    }

    #[test]
    fn several_locks_get_every_token_and_the_first_as_the_token() {
        assert_eq!(
            fencing_env(&[("jobs", 7)]),
            [(TOKEN_ENV, "7".to_owned()), (LOCK_ENV, "jobs".to_owned())]
        );
        assert_eq!(
            fencing_env(&[("a", 12), ("b", 40)]),
            [
                (TOKEN_ENV, "12".to_owned()),
                (LOCK_ENV, "a".to_owned()),
                (TOKENS_ENV, "a=12,b=40".to_owned())
            ]
        );
    }
}
