//! End-to-end tests of the `mongolock` binary against a real MongoDB-compatible server:
//! mutual exclusion of `run`, the token in the environment, `--wait`, the command stopped on
//! lock loss, exit codes, signal forwarding, progress lines, commands on a terminal (under
//! `script(1)`), no process outliving a killed `mongolock`, `status` (table, `--watch`,
//! `--json`), `release --force`, connection errors, recovery after a primary steps down,
//! and `elect`.
//!
//! Needs `MONGODB_URI` (`scripts/test.sh` starts a throw-away SecantusDB server and sets it)
//! and `script` from util-linux; the tests that need them fail, never skip, without them.
//! Each test works in its own collection. Tests wait for output lines and exits; files are
//! polled with deadlines; the only fixed waits check that something does *not* happen.
#![cfg(unix)]

#[path = "../support/mod.rs"]
mod support;

mod check;
mod doctor;
mod elect;
mod fixture;
mod primitives;
mod process;
mod release;
mod run;
mod status;
mod terminal;
mod usage;
mod watch;
