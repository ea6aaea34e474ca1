//! Helpers the integration test binaries share: the test servers' URIs and a checked
//! client, command monitoring, fail points, polling for a condition, and free ports.
#![allow(dead_code)]

pub(crate) mod commands;
pub(crate) mod fail_point;
pub(crate) mod net;

use std::time::{Duration, Instant};

use mongodb::Client;
use mongodb::bson::doc;
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongodb::options::ClientOptions;

/// The MongoDB server under test; a test that needs one and has none fails, naming the fix.
pub(crate) fn uri() -> String {
    match std::env::var("MONGODB_URI") {
        Ok(uri) if !uri.trim().is_empty() => uri,
        _ => panic!(
            "MONGODB_URI is not set. The MongoDB tests need a server: run `scripts/test.sh` \
             (it starts a throw-away SecantusDB test server) or set MONGODB_URI to a MongoDB 5.0+ \
             server, e.g. MONGODB_URI=mongodb://127.0.0.1:27017/?directConnection=true"
        ),
    }
}

/// A standalone server (no replica set, so no change streams), for the tests of what
/// waiters do without a release feed; fails naming the fix when there is none.
pub(crate) fn standalone_uri() -> String {
    match std::env::var("MONGODB_STANDALONE_URI") {
        Ok(uri) if !uri.trim().is_empty() => uri,
        _ => panic!(
            "MONGODB_STANDALONE_URI is not set. These tests need a standalone server (no change \
             streams): run `scripts/test.sh` (it starts one, SecantusDB with --standalone) or set \
             MONGODB_STANDALONE_URI to a standalone mongod"
        ),
    }
}

/// The SecantusDB server binary, for tests that run (kill, restart) a server of their own;
/// fails naming the fix when there is none.
pub(crate) fn secantus_binary() -> std::path::PathBuf {
    let configured = std::env::var_os("SECANTUS_BIN").map(std::path::PathBuf::from);
    let built =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/secantus/bin/secantusd-rs");
    match configured.filter(|path| path.is_file()) {
        Some(path) => path,
        None if built.is_file() => built,
        None => panic!(
            "no SecantusDB binary: this test restarts a server of its own. Run `scripts/test.sh` \
             (it builds one into .tools/secantus and exports SECANTUS_BIN) or \
             `scripts/test-server.sh --build`"
        ),
    }
}

/// A new client for `uri` (a new connection pool, as a separate process would have),
/// checked reachable.
pub(crate) async fn client_for(
    uri: &str,
    app_name: Option<String>,
    commands: Option<EventHandler<CommandEvent>>,
) -> Client {
    let mut options = ClientOptions::parse(uri)
        .await
        .unwrap_or_else(|e| panic!("MONGODB_URI {uri:?} is not a valid connection string: {e}"));
    options.server_selection_timeout = Some(Duration::from_secs(5));
    options.app_name = app_name;
    options.command_event_handler = commands;
    let client = Client::with_options(options)
        .unwrap_or_else(|e| panic!("cannot create a client for {uri:?}: {e}"));
    if let Err(e) = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
    {
        panic!(
            "the MongoDB server at MONGODB_URI={uri:?} is unreachable ({e}). Run `scripts/test.sh` \
             (it starts a throw-away SecantusDB test server) or point MONGODB_URI at a running server."
        );
    }
    client
}

/// Polls `condition` every 20 ms until it holds; panics naming `what` after `within`.
pub(crate) fn eventually(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> u16 {
    net::free_port().expect("a free loopback port")
}
