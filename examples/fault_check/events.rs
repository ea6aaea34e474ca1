//! What a worker process records, one line per event in its own log file.
//!
//! Times are [`clock::now`](crate::clock::now) nanoseconds, comparable across processes,
//! taken when the event happens. The file is written by a thread of its own, one unbuffered
//! `write` per line as soon as it is recorded: a write that the kernel stalls (dirty-page
//! throttling on a busy machine can take a second) must not stall the runtime whose timing
//! is being checked. A `SIGKILL` can lose only lines not yet handed to the kernel, which the
//! checks allow for killed processes.

use std::fmt;
use std::io::Write;
use std::sync::mpsc;

/// The outcome of one fenced write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// Acknowledged as applied.
    Applied,
    /// Refused: the document records this larger token.
    Fenced(u64),
    /// No document matched (should not happen: every write upserts).
    NoMatch,
    /// Failed or timed out: maybe applied, maybe not.
    Failed(String),
}

/// What a critical section holds: the whole of a mutex (or an election's leadership), one
/// permit of a semaphore of `n`, or a reader/writer lock's read or write side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    Exclusive,
    Permit(u32),
    Read,
    Write,
}

impl Access {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "x" => Self::Exclusive,
            "r" => Self::Read,
            "w" => Self::Write,
            _ => Self::Permit(text.strip_prefix('p')?.parse().ok()?),
        })
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exclusive => f.write_str("x"),
            Self::Permit(permits) => write!(f, "p{permits}"),
            Self::Read => f.write_str("r"),
            Self::Write => f.write_str("w"),
        }
    }
}

/// One line of a worker's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The process started its manager under `holder`.
    Hello { pid: u32, holder: String },
    /// A critical section began: `acquire` was called at `asked` and returned at `at`.
    Enter {
        lock: String,
        task: u32,
        token: u64,
        asked: u64,
        at: u64,
        access: Access,
    },
    /// A fenced write of the section `token`, sent at `sent`, answered at `done`.
    Write {
        lock: String,
        task: u32,
        token: u64,
        seq: u64,
        sent: u64,
        done: u64,
        outcome: WriteOutcome,
    },
    /// The section was told it lost the lock.
    Lost {
        lock: String,
        task: u32,
        token: u64,
        at: u64,
        reason: String,
    },
    /// The section stopped touching the resource at `at` and its release returned at
    /// `released` (`outcome` = `ok` or the error).
    Exit {
        lock: String,
        task: u32,
        token: u64,
        at: u64,
        released: u64,
        outcome: String,
    },
    /// `acquire_timeout(limit)` called at `asked` gave up at `at`.
    Timeout {
        lock: String,
        task: u32,
        asked: u64,
        at: u64,
        limit_ms: u64,
        access: Access,
    },
    /// `acquire` failed with something other than a timeout.
    AcquireError {
        lock: String,
        task: u32,
        asked: u64,
        at: u64,
        message: String,
    },
    /// An operation that must be bounded took too long (`what` says which).
    Hang {
        at: u64,
        waited_ms: u64,
        what: String,
    },
    /// The process finished its run and shut its manager down.
    Done { at: u64 },
}

fn clean(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

impl fmt::Display for WriteOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Applied => f.write_str("applied"),
            Self::Fenced(recorded) => write!(f, "fenced:{recorded}"),
            Self::NoMatch => f.write_str("nomatch"),
            Self::Failed(message) => write!(f, "failed:{}", clean(message)),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hello { pid, holder } => write!(f, "hello\t{pid}\t{holder}"),
            Self::Enter {
                lock,
                task,
                token,
                asked,
                at,
                access,
            } => write!(f, "enter\t{lock}\t{task}\t{token}\t{asked}\t{at}\t{access}"),
            Self::Write {
                lock,
                task,
                token,
                seq,
                sent,
                done,
                outcome,
            } => write!(
                f,
                "write\t{lock}\t{task}\t{token}\t{seq}\t{sent}\t{done}\t{outcome}"
            ),
            Self::Lost {
                lock,
                task,
                token,
                at,
                reason,
            } => write!(f, "lost\t{lock}\t{task}\t{token}\t{at}\t{}", clean(reason)),
            Self::Exit {
                lock,
                task,
                token,
                at,
                released,
                outcome,
            } => write!(
                f,
                "exit\t{lock}\t{task}\t{token}\t{at}\t{released}\t{}",
                clean(outcome)
            ),
            Self::Timeout {
                lock,
                task,
                asked,
                at,
                limit_ms,
                access,
            } => write!(
                f,
                "timeout\t{lock}\t{task}\t{asked}\t{at}\t{limit_ms}\t{access}"
            ),
            Self::AcquireError {
                lock,
                task,
                asked,
                at,
                message,
            } => write!(
                f,
                "acqerr\t{lock}\t{task}\t{asked}\t{at}\t{}",
                clean(message)
            ),
            Self::Hang {
                at,
                waited_ms,
                what,
            } => {
                write!(f, "hang\t{at}\t{waited_ms}\t{}", clean(what))
            }
            Self::Done { at } => write!(f, "done\t{at}"),
        }
    }
}

impl Event {
    /// Parses one line written by [`Display`]; `None` for a torn or unknown line.
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split('\t').collect();
        let text = |i: usize| fields.get(i).map(|s| (*s).to_owned());
        let num = |i: usize| fields.get(i).and_then(|s| s.parse::<u64>().ok());
        let task = |i: usize| fields.get(i).and_then(|s| s.parse::<u32>().ok());
        let access = |i: usize| fields.get(i).and_then(|s| Access::parse(s));
        Some(match *fields.first()? {
            "hello" => Self::Hello {
                pid: task(1)?,
                holder: text(2)?,
            },
            "enter" => Self::Enter {
                lock: text(1)?,
                task: task(2)?,
                token: num(3)?,
                asked: num(4)?,
                at: num(5)?,
                access: access(6)?,
            },
            "write" => Self::Write {
                lock: text(1)?,
                task: task(2)?,
                token: num(3)?,
                seq: num(4)?,
                sent: num(5)?,
                done: num(6)?,
                outcome: {
                    let raw = fields.get(7)?;
                    if *raw == "applied" {
                        WriteOutcome::Applied
                    } else if *raw == "nomatch" {
                        WriteOutcome::NoMatch
                    } else if let Some(recorded) = raw.strip_prefix("fenced:") {
                        WriteOutcome::Fenced(recorded.parse().ok()?)
                    } else {
                        WriteOutcome::Failed(raw.strip_prefix("failed:")?.to_owned())
                    }
                },
            },
            "lost" => Self::Lost {
                lock: text(1)?,
                task: task(2)?,
                token: num(3)?,
                at: num(4)?,
                reason: text(5)?,
            },
            "exit" => Self::Exit {
                lock: text(1)?,
                task: task(2)?,
                token: num(3)?,
                at: num(4)?,
                released: num(5)?,
                outcome: text(6)?,
            },
            "timeout" => Self::Timeout {
                lock: text(1)?,
                task: task(2)?,
                asked: num(3)?,
                at: num(4)?,
                limit_ms: num(5)?,
                access: access(6)?,
            },
            "acqerr" => Self::AcquireError {
                lock: text(1)?,
                task: task(2)?,
                asked: num(3)?,
                at: num(4)?,
                message: text(5)?,
            },
            "hang" => Self::Hang {
                at: num(1)?,
                waited_ms: num(2)?,
                what: text(3)?,
            },
            "done" => Self::Done { at: num(1)? },
            _ => return None,
        })
    }
}

/// A worker's log; cheap to clone, never blocks the caller.
#[derive(Clone)]
pub(crate) struct EventLog(mpsc::Sender<String>);

/// The thread writing the log; [`finish`](Self::finish) waits for every line to be written.
pub(crate) struct LogWriter {
    thread: std::thread::JoinHandle<()>,
    lines: mpsc::Sender<String>,
}

impl EventLog {
    pub(crate) fn create(path: &std::path::Path) -> std::io::Result<(Self, LogWriter)> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let (lines, receiver) = mpsc::channel::<String>();
        let thread = std::thread::spawn(move || {
            // An empty line is the end (every real line ends with a newline).
            for line in receiver.iter().take_while(|line| !line.is_empty()) {
                if let Err(error) = file.write_all(line.as_bytes()) {
                    eprintln!("fault_check worker: cannot write its log: {error}");
                }
            }
        });
        Ok((Self(lines.clone()), LogWriter { thread, lines }))
    }

    /// Queues one event for the writer thread (one `write` call per line).
    pub(crate) fn record(&self, event: &Event) {
        let _ = self.0.send(format!("{event}\n"));
    }
}

impl LogWriter {
    /// Waits until every line recorded so far is written.
    pub(crate) fn finish(self) {
        let _ = self.lines.send(String::new());
        let _ = self.thread.join();
    }
}

/// Reads a worker's log, skipping a torn last line.
pub(crate) fn read_log(path: &std::path::Path) -> Vec<Event> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(Event::parse)
        .collect()
}

/// The library's warning when a grant came back too late to use and is released at once.
const GIVEN_BACK: &str = "acquisition answered too late to use";

/// A grant the library was answered too late to use and gave back, read from its warning on
/// the worker's stderr: when the worker read the answer (the shared clock) and which grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GivenBack {
    pub(crate) at: u64,
    pub(crate) lock: String,
    pub(crate) token: u64,
}

impl GivenBack {
    /// `<ms on the shared clock>  WARN <target>: <message> lock=<name> token=<n> took=<d>`.
    fn parse(line: &str) -> Option<Self> {
        if !line.contains(GIVEN_BACK) {
            return None;
        }
        let at_ms: f64 = line.split_whitespace().next()?.parse().ok()?;
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(name))
        };
        let at = std::time::Duration::try_from_secs_f64(at_ms / 1e3).ok()?;
        Some(Self {
            at: u64::try_from(at.as_nanos()).ok()?,
            lock: field("lock=")?.to_owned(),
            token: field("token=")?.parse().ok()?,
        })
    }
}

/// The grants a worker gave back as answered too late, from its stderr file.
pub(crate) fn read_given_back(path: &std::path::Path) -> Vec<GivenBack> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(GivenBack::parse)
        .collect()
}

/// The slowest acquisition attempt or hand-over the library measured, in nanoseconds, from
/// the metrics line a worker in arrival order writes to its stderr at the end
/// (`mongolock_store_operation_seconds{op=acquire} … max=448.5ms …`); `None` without one
/// (the worker was killed, or not in arrival order).
pub(crate) fn read_slowest_attempt(path: &std::path::Path) -> Option<u64> {
    slowest_attempt(&std::fs::read_to_string(path).unwrap_or_default())
}

fn slowest_attempt(text: &str) -> Option<u64> {
    text.lines()
        .filter(|line| line.starts_with("metrics\t"))
        .flat_map(|line| line.split('\t'))
        .filter(|part| {
            part.starts_with("mongolock_store_operation_seconds{op=acquire}")
                || part.starts_with("mongolock_store_operation_seconds{op=hand_over}")
        })
        .filter_map(|part| {
            let max = part
                .split(' ')
                .find_map(|field| field.strip_prefix("max="))?;
            let ms: f64 = max.strip_suffix("ms")?.parse().ok()?;
            let took = std::time::Duration::try_from_secs_f64(ms / 1e3).ok()?;
            u64::try_from(took.as_nanos()).ok()
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_attempt_reads_from_the_metrics_line() {
        let text = "1.0  WARN something\nmetrics\tmongolock_acquire_attempts_total{result=acquired} 22\tmongolock_store_operation_seconds{op=acquire} n=233 p50=6.0ms p99=75.5ms max=448.5ms over100ms=1\tmongolock_store_operation_seconds{op=hand_over} n=21 p50=4.9ms p99=12.1ms max=513.1ms over100ms=0\tmongolock_store_operation_seconds{op=release} n=1 p50=1.8ms p99=1.8ms max=900.0ms over100ms=0\n";
        assert_eq!(slowest_attempt(text), Some(513_100_000));
        assert_eq!(slowest_attempt("1.0  WARN something\n"), None);
    }

    #[test]
    fn a_given_back_grant_reads_from_the_warning() {
        let line = "1557782.5  WARN mongolock::lock::attempt: acquisition answered too late to use; releasing it lock=lock-0 token=1796202425495000 took=412.3ms";
        assert_eq!(
            GivenBack::parse(line),
            Some(GivenBack {
                at: 1_557_782_500_000,
                lock: "lock-0".into(),
                token: 1_796_202_425_495_000,
            })
        );
        assert_eq!(
            GivenBack::parse(
                "1.0  WARN mongolock::lock::attempt: acquisition attempt failed lock=lock-0"
            ),
            None
        );
    }

    #[test]
    fn every_event_reads_back() {
        let events = [
            Event::Hello {
                pid: 7,
                holder: "w1-pid7".into(),
            },
            Event::Enter {
                lock: "lock-0".into(),
                task: 2,
                token: 99,
                asked: 5,
                at: 6,
                access: Access::Permit(3),
            },
            Event::Enter {
                lock: "rw-0".into(),
                task: 1,
                token: 100,
                asked: 5,
                at: 6,
                access: Access::Read,
            },
            Event::Write {
                lock: "lock-0".into(),
                task: 2,
                token: 99,
                seq: 3,
                sent: 7,
                done: 8,
                outcome: WriteOutcome::Fenced(100),
            },
            Event::Write {
                lock: "lock-0".into(),
                task: 2,
                token: 99,
                seq: 4,
                sent: 7,
                done: 8,
                outcome: WriteOutcome::Failed("reset\tby peer".into()),
            },
            Event::Lost {
                lock: "lock-0".into(),
                task: 2,
                token: 99,
                at: 9,
                reason: "deadline".into(),
            },
            Event::Exit {
                lock: "lock-0".into(),
                task: 2,
                token: 99,
                at: 10,
                released: 11,
                outcome: "ok".into(),
            },
            Event::Timeout {
                lock: "lock-1".into(),
                task: 0,
                asked: 1,
                at: 2,
                limit_ms: 300,
                access: Access::Write,
            },
            Event::Hang {
                at: 3,
                waited_ms: 4,
                what: "release".into(),
            },
            Event::Done { at: 12 },
        ];
        for event in events {
            let parsed = Event::parse(&event.to_string()).expect("parses");
            match (&event, &parsed) {
                (
                    Event::Write {
                        outcome: WriteOutcome::Failed(_),
                        ..
                    },
                    Event::Write {
                        outcome: WriteOutcome::Failed(message),
                        ..
                    },
                ) => assert_eq!(message, "reset by peer"),
                _ => assert_eq!(parsed, event),
            }
        }
        assert_eq!(Event::parse("enter\tlock-0\t1"), None);
        assert_eq!(Event::parse("enter\tlock-0\t1\t2\t3\t4\tq"), None);
    }
}
