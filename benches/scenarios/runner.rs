//! Runs one child process with a time cap and collects its `RESULT key=value` lines.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What one run reported, and why it ended early if it did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Run {
    pub(crate) values: BTreeMap<String, String>,
    /// `timeout (>120 s)` or the child's error; `None` for a complete run.
    pub(crate) failure: Option<String>,
    pub(crate) took: Duration,
}

impl Run {
    /// Whether the run, or a phase of it (a reported `timeout`), hit its time cap.
    pub(crate) fn timed_out(&self) -> bool {
        self.values.contains_key("timeout")
            || self
                .failure
                .as_ref()
                .is_some_and(|failure| failure.starts_with("timeout"))
    }
}

/// Runs `current_exe --child args…`, killing it after `cap`.
pub(crate) fn run_child(args: &[String], cap: Duration) -> Run {
    let started = Instant::now();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return failed(format!("current_exe: {e}"), started),
    };
    let spawned = Command::new(exe)
        .arg("--child")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return failed(format!("spawn: {e}"), started),
    };
    let values = Arc::new(Mutex::new(BTreeMap::new()));
    let stdout_reader = child.stdout.take().map(|stdout| {
        let values = Arc::clone(&values);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some((key, value)) = line
                    .strip_prefix("RESULT ")
                    .and_then(|rest| rest.split_once('='))
                {
                    values
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key.to_owned(), value.to_owned());
                }
            }
        })
    });
    let stderr_reader = child.stderr.take().map(|mut stderr| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        })
    });
    let deadline = started + cap;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                // Only this child, by its own handle.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    if let Some(reader) = stdout_reader {
        let _ = reader.join();
    }
    let stderr = stderr_reader
        .and_then(|reader| reader.join().ok())
        .unwrap_or_default();
    let values = std::mem::take(&mut *values.lock().unwrap_or_else(PoisonError::into_inner));
    let failure = match status {
        None => Some(format!("timeout (>{} s)", cap.as_secs())),
        Some(status) if status.success() => None,
        Some(status) => {
            let last: Vec<&str> = stderr.lines().rev().take(6).collect();
            let last: Vec<&str> = last.into_iter().rev().collect();
            Some(format!("failed ({status}): {}", last.join(" / ")))
        }
    };
    Run {
        values,
        failure,
        took: started.elapsed(),
    }
}

fn failed(reason: String, started: Instant) -> Run {
    Run {
        values: BTreeMap::new(),
        failure: Some(reason),
        took: started.elapsed(),
    }
}
