//! What the benches share: the server and counted clients, the baselines (driver floor,
//! DistributedLock's algorithm, the peer crate, channel round trips) behind one
//! [`contender::Contender`] interface, process probes and statistics.
//!
//! [`commands`] and [`probe`] depend on nothing else here, so tests can reuse them with
//! `#[path = "../benches/support/commands.rs"] mod commands;`.
// Each bench uses part of it.
#![allow(dead_code)]

pub(crate) mod before_shared;
pub(crate) mod channels;
pub(crate) mod commands;
pub(crate) mod contender;
pub(crate) mod dlock;
pub(crate) mod floor;
pub(crate) mod probe;
pub(crate) mod server;
pub(crate) mod stats;

/// A tokio runtime like an application's on this machine: multi-threaded, two workers.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot build a tokio runtime: {error}"),
    }
}
