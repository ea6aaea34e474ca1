//! The command `mongolock` runs under a lock or while leading: spawned in its own process
//! group so every process it starts can be signalled together, stopped with SIGTERM and
//! then SIGKILL after a grace period.
//!
//! On Linux the command also gets `PR_SET_PDEATHSIG = SIGKILL`: if `mongolock` itself is
//! killed (SIGKILL, the OOM killer), nothing renews the lock any more and the command is
//! killed with it rather than running on unprotected. Processes the command started keep
//! running in that case; they are stopped with the group only while `mongolock` lives.
//!
//! Because the command runs in a process group of its own, it is not in the terminal's
//! foreground group: `mongolock` passes Ctrl-C (and SIGTERM, SIGHUP, SIGQUIT) on to it, but
//! a command that reads from the terminal is stopped by the kernel (`SIGTTIN`), as with
//! `timeout(1)` without `--foreground`.

use std::ffi::OsString;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Command;

use super::CliError;

/// Environment variable carrying the fencing token to the command.
pub(crate) const TOKEN_ENV: &str = "MONGOLOCK_TOKEN";
/// Environment variable carrying the lock (or election) name to the command.
pub(crate) const LOCK_ENV: &str = "MONGOLOCK_LOCK";

/// A running command (the leader of its own process group).
#[derive(Debug)]
pub(crate) struct Child {
    process: tokio::process::Child,
    group: Pid,
}

impl Child {
    /// Starts `command` (program and arguments) with `MONGOLOCK_TOKEN` and `MONGOLOCK_LOCK`
    /// set, inheriting stdin, stdout and stderr.
    ///
    /// Call it from the task that will outlive the command (the CLI's main task): on Linux
    /// the kill-on-parent-death signal fires when the *thread* that spawned it exits.
    ///
    /// Errors: [`CliError::Spawn`] (exit code 127 if the program is missing, 126 otherwise).
    pub(crate) fn spawn(command: &[OsString], token: u64, lock: &str) -> Result<Self, CliError> {
        let Some((program, args)) = command.split_first() else {
            return Err(CliError::Usage("no command given after --".to_owned()));
        };
        let mut builder = Command::new(program);
        builder
            .args(args)
            .env(TOKEN_ENV, token.to_string())
            .env(LOCK_ENV, lock)
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(false);
        die_with_parent(&mut builder);
        let spawn_failed = |source: io::Error| CliError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        };
        let process = builder.spawn().map_err(spawn_failed)?;
        let pid = process
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| CliError::Internal("the spawned command has no pid".to_owned()))?;
        Ok(Self {
            process,
            group: Pid::from_raw(pid),
        })
    }

    /// Waits for the command to exit. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> Result<ExitStatus, CliError> {
        self.process
            .wait()
            .await
            .map_err(|error| CliError::Internal(format!("cannot wait for the command: {error}")))
    }

    /// Sends `signal` to the command's process group. A group that is already gone is not
    /// an error.
    pub(crate) fn signal(&self, signal: Signal) {
        signal_group(self.group, signal);
    }

    /// Stops the command: SIGTERM to its group, SIGKILL to the group if the command has not
    /// exited after `grace` — and to whatever is left of the group once it has, so nothing
    /// it started keeps running. Returns the command's exit status.
    pub(crate) async fn terminate(mut self, grace: Duration) -> Result<ExitStatus, CliError> {
        self.signal(Signal::SIGTERM);
        let status = match tokio::time::timeout(grace, self.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.signal(Signal::SIGKILL);
                self.wait().await
            }
        };
        self.signal(Signal::SIGKILL);
        status
    }
}

fn signal_group(group: Pid, signal: Signal) {
    // Errors mean there is nothing left to signal (ESRCH: the group is empty; EPERM: only
    // members that changed user remain), so they are ignored.
    let _ = killpg(group, signal);
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // `pre_exec` is unsafe by contract; the closure below keeps to it.
fn die_with_parent(command: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe system calls prctl and getppid; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The parent may have died between fork and prctl: then nothing would kill us.
            // (`io::Error::from(Errno)` does not allocate, which matters after a fork.)
            if nix::unistd::getppid() != parent {
                return Err(io::Error::from(Errno::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[tokio::test]
    async fn passes_token_and_name() {
        let mut child = Child::spawn(
            &command(&[
                "sh",
                "-c",
                r#"test "$MONGOLOCK_TOKEN" = 42 && test "$MONGOLOCK_LOCK" = jobs"#,
            ]),
            42,
            "jobs",
        )
        .unwrap();
        assert!(child.wait().await.unwrap().success());
    }

    #[tokio::test]
    async fn terminate_escalates_to_sigkill() {
        use std::os::unix::process::ExitStatusExt;
        let ready = std::env::temp_dir().join(format!("mongolock-trap-{}", uuid::Uuid::new_v4()));
        let script = format!(
            "trap '' TERM; touch '{}'; while :; do sleep 0.05; done",
            ready.display()
        );
        let child = Child::spawn(&command(&["sh", "-c", &script]), 1, "x").unwrap();
        // SIGTERM before the trap is installed would end the shell without SIGKILL.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the shell never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = std::fs::remove_file(&ready);
        let status = child.terminate(Duration::from_millis(200)).await.unwrap();
        assert_eq!(status.signal(), Some(9));
    }

    #[tokio::test]
    async fn missing_programs_are_reported() {
        let error = Child::spawn(&command(&["/nonexistent/program"]), 1, "x").unwrap_err();
        assert_eq!(error.exit_code(), 127);
        assert!(Child::spawn(&[], 1, "x").is_err());
    }
}
