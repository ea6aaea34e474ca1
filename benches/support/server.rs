//! The MongoDB server under measurement and the clients the benches open on it.

use std::time::Duration;

use mongodb::bson::doc;
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};

use super::commands::CommandLog;

/// `MONGODB_URI`; panics naming the fix when it is not set (benches never skip).
pub(crate) fn uri() -> String {
    match std::env::var("MONGODB_URI") {
        Ok(uri) if !uri.trim().is_empty() => uri,
        _ => panic!(
            "MONGODB_URI is not set. The MongoDB benches need a server: run `scripts/bench.sh` \
             (it starts a throw-away SecantusDB test server) or set MONGODB_URI to a MongoDB \
             5.0+ server, e.g. MONGODB_URI=mongodb://127.0.0.1:27017/?directConnection=true"
        ),
    }
}

/// A new client (its own connection pool, as a separate process would have) whose commands
/// are counted by `log`, checked reachable with a `ping` (which `log` counts too).
///
/// # Errors
///
/// A message naming the URI when it is malformed or the server does not answer.
pub(crate) async fn client(uri: &str, app_name: &str, log: &CommandLog) -> Result<Client, String> {
    client_with_handler(uri, app_name, log.handler()).await
}

/// [`client`] with another command event handler (one that also reads the replies, say).
///
/// # Errors
///
/// As [`client`].
pub(crate) async fn client_with_handler(
    uri: &str,
    app_name: &str,
    handler: EventHandler<CommandEvent>,
) -> Result<Client, String> {
    let mut options = ClientOptions::parse(uri)
        .await
        .map_err(|e| format!("MONGODB_URI {uri:?} is not a valid connection string: {e}"))?;
    options.server_selection_timeout = Some(Duration::from_secs(5));
    options.app_name = Some(app_name.to_owned());
    options.command_event_handler = Some(handler);
    let client = Client::with_options(options)
        .map_err(|e| format!("cannot create a client for {uri:?}: {e}"))?;
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .map_err(|e| {
            format!(
                "the MongoDB server at MONGODB_URI={uri:?} is unreachable ({e}). Run \
                 `scripts/bench.sh` (it starts a throw-away SecantusDB test server) or point \
                 MONGODB_URI at a running server."
            )
        })?;
    Ok(client)
}

/// A database of its own for one measurement, named after it and this process, so
/// concurrent or earlier runs never share documents or indexes.
pub(crate) fn scratch_database(client: &Client, label: &str) -> Database {
    client.database(&format!("bench_{label}_{}", std::process::id()))
}
