//! The guardian: a small second `mongolock` process (`mongolock __guard`, started by
//! [`Child::spawn`](super::child::Child::spawn)) between `mongolock` and the command, whose
//! only job is that no process the command starts outlives the lock.
//!
//! ```text
//! mongolock ──▶ mongolock __guard ──▶ CMD ──▶ CMD's children, grandchildren…
//!  (lock)        (own process group,    (own process group; on a terminal,
//!                 child subreaper)       mongolock's group instead)
//! ```
//!
//! - On Linux it is a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): whatever the command
//!   starts stays below it even when intermediate processes exit (double forks, `setsid`,
//!   `nohup … &`), so it can always find and stop them; it reaps them too.
//! - It stops everything below it (SIGTERM and SIGCONT, then SIGKILL after the grace period,
//!   repeated until nothing is left) when the command exits by itself (leftover background
//!   processes), when `mongolock` asks (SIGUSR1: the lock was lost or the term ended), and
//!   when `mongolock` dies, even by SIGKILL: on Linux the kernel tells it at once
//!   (`PR_SET_PDEATHSIG` = SIGUSR2), elsewhere it notices within [`PARENT_POLL`].
//! - SIGINT, SIGTERM, SIGHUP and SIGQUIT it receives (from `mongolock`) are passed on to
//!   the command: to its process group, or on a terminal to the command alone.
//! - It lives in a process group of its own, so neither the terminal's keys (Ctrl-C,
//!   Ctrl-Z) nor `kill -- -PGID` of `mongolock`'s group reach it: it stays to clean up.
//! - It exits with the command's code (`128 + N` if signal N killed it). It prints nothing
//!   except when the command cannot be started (exit 126 or 127, like a shell).
//!
//! What escapes: processes started outside the tree (through a service manager, `at`,
//! `ssh`), and, if the guardian itself is killed with SIGKILL, everything but the command (which the
//! kernel kills with it on Linux).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Stdio;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpid, getppid};
use tokio::signal::unix::{SignalKind, signal};

use super::GuardArgs;
use super::exit_code;

/// How often the guardian checks that `mongolock` is alive where the kernel cannot tell it.
#[cfg(not(target_os = "linux"))]
const PARENT_POLL: Duration = Duration::from_millis(100);

/// How long to wait for killed processes to be reaped before looking for more.
const KILL_ROUND: Duration = Duration::from_millis(50);

/// Runs the guardian to the end; returns its exit code (the command's).
pub(crate) fn run(args: &GuardArgs) -> u8 {
    let parent = Pid::from_raw(args.parent);
    #[cfg(target_os = "linux")]
    {
        // Both are best effort: without them the guardian still stops the command's group.
        let _ = nix::sys::prctl::set_child_subreaper(true);
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGUSR2);
    }
    // mongolock may have died before the line above: then start nothing.
    if getppid() != parent {
        return exit_code::SOFTWARE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mongolock: guardian: cannot start: {error}");
            return exit_code::SOFTWARE;
        }
    };
    runtime.block_on(guard(args, parent))
}

/// The signals the guardian listens to. Installed before the command starts, so none is
/// missed; handled (not ignored) signals return to their defaults in the command.
struct Inbox {
    child: tokio::signal::unix::Signal,
    forward: [(Signal, tokio::signal::unix::Signal); 4],
    stop: tokio::signal::unix::Signal,
    parent_died: tokio::signal::unix::Signal,
}

impl Inbox {
    fn install() -> io::Result<Self> {
        Ok(Self {
            child: signal(SignalKind::child())?,
            forward: [
                (Signal::SIGINT, signal(SignalKind::interrupt())?),
                (Signal::SIGTERM, signal(SignalKind::terminate())?),
                (Signal::SIGHUP, signal(SignalKind::hangup())?),
                (Signal::SIGQUIT, signal(SignalKind::quit())?),
            ],
            stop: signal(SignalKind::user_defined1())?,
            parent_died: signal(SignalKind::user_defined2())?,
        })
    }
}

/// What woke the guardian.
enum Wake {
    Child,
    Forward(Signal),
    Stop,
    ParentMaybeDied,
}

impl Inbox {
    async fn next(&mut self) -> Wake {
        let [
            (int, sigint),
            (term, sigterm),
            (hup, sighup),
            (quit, sigquit),
        ] = &mut self.forward;
        #[cfg(not(target_os = "linux"))]
        let poll = tokio::time::sleep(PARENT_POLL);
        #[cfg(target_os = "linux")]
        let poll = std::future::pending::<()>();
        tokio::select! {
            _ = self.child.recv() => Wake::Child,
            _ = sigint.recv() => Wake::Forward(*int),
            _ = sigterm.recv() => Wake::Forward(*term),
            _ = sighup.recv() => Wake::Forward(*hup),
            _ = sigquit.recv() => Wake::Forward(*quit),
            _ = self.stop.recv() => Wake::Stop,
            _ = self.parent_died.recv() => Wake::ParentMaybeDied,
            () = poll => Wake::ParentMaybeDied,
        }
    }
}

/// The command being guarded.
struct Guarded {
    pid: Pid,
    /// Whether the command leads a process group of its own (no terminal).
    own_group: bool,
    /// Its exit code, once it has been reaped.
    code: Option<u8>,
    grace: Duration,
}

async fn guard(args: &GuardArgs, parent: Pid) -> u8 {
    let mut inbox = match Inbox::install() {
        Ok(inbox) => inbox,
        Err(error) => {
            eprintln!("mongolock: guardian: cannot install signal handlers: {error}");
            return exit_code::SOFTWARE;
        }
    };
    let mut guarded = match start(&args.command, args.join_group) {
        Ok(pid) => Guarded {
            pid,
            own_group: args.join_group.is_none(),
            code: None,
            grace: Duration::from_millis(args.grace_ms),
        },
        Err(code) => return code,
    };
    loop {
        if !guarded.reap() || guarded.code.is_some() {
            // The command is done: whatever it left running must not outlive the lock.
            guarded.stop_everything(&mut inbox).await;
            return guarded.exit_code();
        }
        match inbox.next().await {
            Wake::Child => {}
            Wake::Forward(signal) => guarded.forward(signal),
            Wake::Stop => {
                guarded.stop_everything(&mut inbox).await;
                return guarded.exit_code();
            }
            Wake::ParentMaybeDied => {
                if getppid() != parent {
                    guarded.stop_everything(&mut inbox).await;
                    return guarded.exit_code();
                }
            }
        }
    }
}

/// Starts the command in a new process group (or `join_group`), killed by the kernel if the
/// guardian dies. Errors: the exit code after the message was printed (127 not found, 126
/// not executable).
fn start(command: &[OsString], join_group: Option<i32>) -> Result<Pid, u8> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(exit_code::USAGE);
    };
    let mut builder = std::process::Command::new(program);
    builder
        .args(arguments)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .process_group(join_group.unwrap_or(0));
    die_with_guardian(&mut builder);
    match builder.spawn() {
        Ok(child) => i32::try_from(child.id())
            .map(Pid::from_raw)
            .map_err(|_| exit_code::SOFTWARE),
        Err(error) => {
            let shown = program.to_string_lossy();
            eprintln!("mongolock: cannot run {shown:?}: {error}");
            Err(if error.kind() == io::ErrorKind::NotFound {
                exit_code::NOT_FOUND
            } else {
                exit_code::CANNOT_EXECUTE
            })
        }
    }
}

impl Guarded {
    /// Reaps every child that has exited, noting the command's code. Returns whether any
    /// child (the command or an adopted orphan) is still running.
    fn reap(&mut self) -> bool {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return true,
                Ok(WaitStatus::Exited(pid, code)) => {
                    if pid == self.pid {
                        self.code = Some(u8::try_from(code & 0xff).unwrap_or(exit_code::SOFTWARE));
                    }
                }
                Ok(WaitStatus::Signaled(pid, signal, _)) => {
                    if pid == self.pid {
                        self.code = Some(exit_code::for_signal(signal as i32));
                    }
                }
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => return false,
            }
        }
    }

    fn exit_code(&self) -> u8 {
        // Not reaped (never seen exiting) only if waiting failed: report a stopped command.
        self.code
            .unwrap_or_else(|| exit_code::for_signal(Signal::SIGKILL as i32))
    }

    /// Passes a signal from mongolock on to the command (its group when it has one).
    fn forward(&self, signal: Signal) {
        if self.code.is_some() {
            return;
        }
        // Errors mean there is nothing left to signal.
        let _ = if self.own_group {
            killpg(self.pid, signal)
        } else {
            kill(self.pid, signal)
        };
    }

    /// Sends `signal` to every process below the guardian (and to the command's group).
    fn signal_all(&self, signal: Signal) {
        if self.own_group {
            let _ = killpg(self.pid, signal);
        } else if self.code.is_none() {
            let _ = kill(self.pid, signal);
        }
        for pid in descendants() {
            let _ = kill(pid, signal);
        }
    }

    /// SIGTERM (and SIGCONT, so stopped processes can act on it) to everything below; after
    /// the grace period SIGKILL, repeated until no child is left to reap.
    async fn stop_everything(&mut self, inbox: &mut Inbox) {
        if !self.reap() {
            return;
        }
        self.signal_all(Signal::SIGTERM);
        self.signal_all(Signal::SIGCONT);
        let deadline = tokio::time::Instant::now() + self.grace;
        while self.reap() {
            tokio::select! {
                _ = inbox.child.recv() => {}
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        // SIGKILLed processes cannot start new ones; their children are adopted by the
        // guardian and found in the next round.
        while self.reap() {
            self.signal_all(Signal::SIGKILL);
            let _ = tokio::time::timeout(KILL_ROUND, inbox.child.recv()).await;
        }
    }
}

/// On Linux, `PR_SET_PDEATHSIG = SIGKILL` for the command: if the guardian is killed (only
/// SIGKILL can stop it before it has stopped the command), the command dies with it.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // `pre_exec` is unsafe by contract; the closure below keeps to it.
fn die_with_guardian(command: &mut std::process::Command) {
    let guardian = getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe system calls prctl and getppid; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The guardian may have died between fork and prctl: then nothing would kill us.
            // (`io::Error::from(Errno)` does not allocate, which matters after a fork.)
            if getppid() != guardian {
                return Err(io::Error::from(Errno::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_guardian(_command: &mut std::process::Command) {}

/// Every process below the guardian, from `/proc` (Linux). Elsewhere only the command's group
/// is known (see [`Guarded::signal_all`]).
fn descendants() -> Vec<Pid> {
    let me = getpid().as_raw();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(parent) = parent_of(pid) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut seen = HashSet::from([me]);
    let mut queue = vec![me];
    while let Some(parent) = queue.pop() {
        for &child in children.get(&parent).map_or(&[][..], Vec::as_slice) {
            if seen.insert(child) {
                found.push(Pid::from_raw(child));
                queue.push(child);
            }
        }
    }
    found
}

/// The parent pid from `/proc/PID/stat` (`pid (comm) state ppid …`; comm may contain
/// anything, so the fields are read after its last `)`).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn finds_its_own_children_and_theirs() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // The grandchild appears once sh has forked it.
        let grandchild = loop {
            let below = descendants();
            assert!(below.contains(&pid), "{below:?}");
            if let Some(other) = below.into_iter().find(|found| *found != pid) {
                break other;
            }
            assert!(std::time::Instant::now() < deadline, "sh never forked");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(parent_of(grandchild.as_raw()), Some(pid.as_raw()));
        let _ = kill(grandchild, Signal::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
    }
}
