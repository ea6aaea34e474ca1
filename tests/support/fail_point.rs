//! `failCommand` fail points on the test server (it runs with test commands enabled).

use std::sync::{Mutex, MutexGuard, PoisonError};

use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};

/// The server keeps one `failCommand` configuration at a time: tests that set one take turns.
static TURN: Mutex<()> = Mutex::new(());

/// An active `failCommand` fail point, turned off when dropped (also when the test fails).
///
/// Both ends run on a thread and runtime of their own, so a fail point can be set and
/// cleared from synchronous tests, from async ones, and while a test's runtime unwinds.
pub(crate) struct FailPoint {
    uri: String,
    _turn: MutexGuard<'static, ()>,
}

impl FailPoint {
    /// `configureFailPoint: failCommand` with `mode` (`"alwaysOn"`, `{times: n}`) and `data`,
    /// which should name an `appName` so that only the test's own client is affected.
    pub(crate) fn on(uri: &str, mode: Bson, data: Document) -> Self {
        let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let command = doc! { "configureFailPoint": "failCommand", "mode": mode, "data": data };
        let result = on_own_runtime(uri, command);
        if let Err(error) = result {
            panic!("configureFailPoint (the server must run with test commands enabled): {error}");
        }
        Self {
            uri: uri.to_owned(),
            _turn: turn,
        }
    }
}

impl Drop for FailPoint {
    fn drop(&mut self) {
        let off = doc! { "configureFailPoint": "failCommand", "mode": "off" };
        let _ = on_own_runtime(&self.uri, off);
    }
}

/// Runs `command` on the admin database of `uri` from a new thread and runtime.
fn on_own_runtime(uri: &str, command: Document) -> Result<(), String> {
    let uri = uri.to_owned();
    let run = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let client = Client::with_uri_str(&uri)
                .await
                .map_err(|e| e.to_string())?;
            client
                .database("admin")
                .run_command(command)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    });
    run.join()
        .unwrap_or_else(|_| Err("the fail point thread panicked".to_owned()))
}
