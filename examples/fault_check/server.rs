//! The SecantusDB server the run owns: started on its own storage path so that it can be
//! stopped, killed and restarted on the same data and port, and with `--sync-on-commit`, so
//! that a write it acknowledged survives a `SIGKILL` (the counterpart of journaled
//! majority writes on a replica set). Without it the server forgets its last ~16–50 ms of
//! acknowledged writes when killed, and a lost grant looks like a lock bug.

use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub(crate) struct Server {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    starts: u32,
}

impl Server {
    /// Starts `binary` on a free port with test commands enabled, data under `dir`.
    pub(crate) fn start(binary: &Path, dir: &Path) -> Result<Self, String> {
        let mut server = Self {
            binary: binary.to_owned(),
            dir: dir.to_owned(),
            port: 0,
            child: None,
            starts: 0,
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> Result<(), String> {
        self.starts += 1;
        let log_path = self.dir.join(format!("server-{}.log", self.starts));
        let log = File::create(&log_path).map_err(|e| format!("{log_path:?}: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&self.binary)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--storage-path")
            .arg(self.dir.join("db"))
            .arg("--enable-test-commands")
            .arg("--sync-on-commit")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", self.binary))?;
        let pid = child.id();
        self.child = Some(child);
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let port = text.lines().find_map(|line| {
                line.strip_prefix("secantusd-rs listening on 127.0.0.1:")
                    .and_then(|rest| rest.trim().parse::<u16>().ok())
            });
            if let Some(port) = port
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                self.port = port;
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "secantusd-rs (pid {pid}) exited with {status} before listening:\n{text}"
                ));
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(format!("secantusd-rs did not listen within 60 s:\n{text}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    fn pid(&self) -> Option<Pid> {
        self.child
            .as_ref()
            .and_then(|child| i32::try_from(child.id()).ok())
            .map(Pid::from_raw)
    }

    pub(crate) fn signal(&self, signal: Signal) -> Result<(), String> {
        let pid = self.pid().ok_or("the server is not running")?;
        kill(pid, signal).map_err(|e| format!("{signal} to the server: {e}"))
    }

    /// `SIGKILL` and reap.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same data and port.
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.launch()
    }

    /// Stops it (`SIGCONT` first in case it was stopped, then `SIGTERM`, then `SIGKILL`).
    pub(crate) fn shutdown(&mut self) {
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGTERM);
        if let Some(child) = self.child.as_mut() {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.kill();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.signal(Signal::SIGCONT);
        self.kill();
    }
}
