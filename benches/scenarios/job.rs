//! What one measurement is: a job (a child process's arguments, how often it is repeated and
//! how long it may take) and the mode that decides how thoroughly. Below the plan and the
//! scenario groups that contribute jobs to it (`fleet.rs`), so neither imports the other back.

use std::time::Duration;

/// How thoroughly to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Under `cargo test`: every scenario once, tiny, to prove the bench still runs.
    Smoke,
    /// `--quick`: one repetition of shortened scenarios (a few minutes at most).
    Quick,
    /// The figures for RESULTS.md: at least three repetitions of everything.
    Full,
}

/// One measurement, repeated `reps` times.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The scenario group (`s1`, `s3`, …), for `--only`.
    pub(crate) group: &'static str,
    /// Unique key the report looks results up by (`s1/mongolock`).
    pub(crate) key: String,
    /// The child's arguments (`s1 system=mongolock cycles=1000`).
    pub(crate) args: Vec<String>,
    pub(crate) reps: usize,
    /// A run still going after this is killed and reported as a timeout.
    pub(crate) cap: Duration,
}

pub(crate) fn job(
    group: &'static str,
    key: &str,
    args: &[String],
    reps: usize,
    cap_secs: u64,
) -> Job {
    Job {
        group,
        key: key.to_owned(),
        args: args.to_vec(),
        reps,
        cap: Duration::from_secs(cap_secs),
    }
}

/// `["s1", "system=floor", "cycles=1000"]` from `"s1 system=floor cycles=1000"`.
pub(crate) fn args(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}
