//! A running `mongolock` whose output is collected as it comes, so tests wait for lines.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// What a process wrote so far, line by line, and whether each stream has ended.
#[derive(Default)]
struct Written {
    stdout: String,
    stderr: String,
    closed: usize,
}

/// Which stream of a [`Running`] process.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

type Shared = Arc<(Mutex<Written>, Condvar)>;

/// A running process (`mongolock`, or `script` running it) whose output is collected as it
/// comes, so a test can wait for a line instead of sleeping. Stopped (SIGTERM, then SIGKILL)
/// if the test ends without waiting for it.
pub(crate) struct Running {
    child: Option<Child>,
    pid: Pid,
    stdin: Option<ChildStdin>,
    written: Shared,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    pub(crate) fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the process");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
        let written: Shared = Arc::default();
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            readers.push(collect(stdout, Stream::Stdout, Arc::clone(&written)));
        }
        if let Some(stderr) = child.stderr.take() {
            readers.push(collect(stderr, Stream::Stderr, Arc::clone(&written)));
        }
        let stdin = child.stdin.take();
        Self {
            child: Some(child),
            pid,
            stdin,
            written,
            readers,
        }
    }

    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    pub(crate) fn signal(&self, signal: Signal) {
        kill(self.pid, signal).expect("signal the process");
    }

    /// Writes to the process's stdin (spawned with `Stdio::piped()`).
    pub(crate) fn type_in(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin was piped");
        stdin.write_all(bytes).expect("write to stdin");
        stdin.flush().expect("flush stdin");
    }

    /// Everything written to `stream` so far.
    pub(crate) fn text(&self, stream: Stream) -> String {
        let written = self
            .written
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match stream {
            Stream::Stdout => written.stdout.clone(),
            Stream::Stderr => written.stderr.clone(),
        }
    }

    /// Waits until `stream` contains `wanted` (at most `within`), woken by each new line.
    pub(crate) fn wait_for(&self, stream: Stream, wanted: &str, within: Duration) {
        self.wait_until(stream, within, wanted, |text| text.contains(wanted));
    }

    /// Waits until `condition` holds for what `stream` has so far (at most `within`).
    pub(crate) fn wait_until(
        &self,
        stream: Stream,
        within: Duration,
        what: &str,
        condition: impl Fn(&str) -> bool,
    ) {
        let deadline = Instant::now() + within;
        let (lock, changed) = &*self.written;
        let mut written = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let text = match stream {
                Stream::Stdout => &written.stdout,
                Stream::Stderr => &written.stderr,
            };
            if condition(text) {
                return;
            }
            let now = Instant::now();
            assert!(
                now < deadline && written.closed < 2,
                "no {what:?} on {stream:?} within {within:?}; stdout:\n{}\nstderr:\n{}",
                written.stdout,
                written.stderr
            );
            written = changed
                .wait_timeout(written, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Stops a `mongolock` that still holds its lock with SIGTERM: it exits 143 (the
    /// command's signal, forwarded) and never reports the lock lost.
    pub(crate) fn terminate_still_holding(self, limit: Duration) {
        self.signal(Signal::SIGTERM);
        let output = self.finish(limit);
        let text = crate::fixture::stderr(&output);
        assert_eq!(crate::fixture::code(output.status), Some(143), "{text}");
        assert!(!text.contains("lost lock"), "{text}");
    }

    /// Waits for the exit (at most `limit`) and returns the status and output.
    pub(crate) fn finish(mut self, limit: Duration) -> Output {
        let mut child = self.child.take().expect("not finished yet");
        drop(self.stdin.take());
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().expect("poll the process") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the process did not exit within {limit:?}; stderr: {}",
                    self.text(Stream::Stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        Output {
            status,
            stdout: self.text(Stream::Stdout).into_bytes(),
            stderr: self.text(Stream::Stderr).into_bytes(),
        }
    }
}

/// Copies `from` into `written` line by line, waking waiters after each line.
fn collect(
    from: impl std::io::Read + Send + 'static,
    stream: Stream,
    written: Shared,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            let done = !matches!(reader.read_until(b'\n', &mut line), Ok(read) if read > 0);
            let (lock, changed) = &*written;
            let mut shared = lock.lock().unwrap_or_else(PoisonError::into_inner);
            let text = String::from_utf8_lossy(&line);
            match stream {
                Stream::Stdout => shared.stdout.push_str(&text),
                Stream::Stderr => shared.stderr.push_str(&text),
            }
            if done {
                shared.closed += 1;
            }
            changed.notify_all();
            if done {
                return;
            }
        }
    })
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            let _ = kill(self.pid, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
