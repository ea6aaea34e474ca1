//! What a check worker reports, one JSON line each on its stdout: its identity, each critical
//! section once it ended, and a summary.

use serde::{Deserialize, Serialize};

/// The outcome of one fenced write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum Write {
    Applied,
    /// Refused: the record holds this larger token.
    Fenced {
        recorded: u64,
    },
    /// Failed: maybe applied, maybe not.
    Failed {
        error: String,
    },
}

/// A write with an older token of the same task on the same lock, made while holding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StaleWrite {
    pub(crate) token: u64,
    pub(crate) write: Write,
}

/// One critical section. Times are [`clock::now`](super::clock::now) nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Section {
    pub(crate) worker: u32,
    pub(crate) task: u32,
    pub(crate) lock: String,
    pub(crate) token: u64,
    /// `acquire` was called.
    pub(crate) asked: u64,
    /// `acquire` returned.
    pub(crate) entered: u64,
    /// The section stopped touching the resource (just before `release`).
    pub(crate) exited: u64,
    /// The holder's own fenced write.
    pub(crate) write: Write,
    pub(crate) stale: Option<StaleWrite>,
    /// When the section learnt it had lost the lock, and why, if it did.
    pub(crate) lost: Option<(u64, String)>,
    /// `None` if released, else the error.
    pub(crate) release_error: Option<String>,
}

/// One line of a worker's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Record {
    Hello {
        worker: u32,
        holder: String,
    },
    Section(Section),
    Summary {
        worker: u32,
        /// Lock commands the worker's manager sent, by name.
        commands: std::collections::BTreeMap<String, u64>,
        /// Acquisitions that failed with an error (not a timeout at the end).
        errors: Vec<String>,
    },
}
