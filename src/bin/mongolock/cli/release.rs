//! `mongolock release --force NAME`: frees a lock whose holder is stuck, out of band (like
//! Redisson's `forceUnlock` or `consul kv delete` on a lock key), and says whose it was.

use mongolock::LockRecord;
use mongolock::{LockName, store::LockStore};

use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CliError, ReleaseArgs, duration};

/// Runs `mongolock release`: without `--force` only shows who holds the lock (exit 64).
pub(super) async fn release(
    args: ReleaseArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let name = LockName::new(&args.name).map_err(|error| CliError::Usage(error.to_string()))?;
    let connection = super::connect(&args.connection, signals, progress).await?;
    let store = &connection.store;
    if !args.force {
        let record = tokio::select! {
            found = store.inspect(&name) => {
                found.map_err(|error| connection.endpoint.store_error(&error))?
            }
            signal = signals.recv() => return Err(interrupted(signal)),
        };
        let state = match record.as_ref().filter(|record| record.is_held()) {
            Some(record) => format!("lock {:?} is {}", name.as_str(), describe(record)),
            None => format!("lock {:?} is not held", name.as_str()),
        };
        return Err(CliError::Usage(format!(
            "{state}. Releasing takes the lock from its holder without asking: pass --force to do it"
        )));
    }
    let cleared = tokio::select! {
        cleared = store.force_release(&name) => {
            cleared.map_err(|error| connection.endpoint.store_error(&error))?
        }
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    match cleared {
        Some(record) => println!(
            "released lock {:?}, which was {}; the holder learns it at its next renewal",
            name.as_str(),
            describe(&record)
        ),
        None => println!("lock {:?} was not held; nothing changed", name.as_str()),
    }
    Ok(0)
}

/// `held by H (token T, 12s left)`.
fn describe(record: &LockRecord) -> String {
    let holder = record
        .holder
        .as_ref()
        .map_or_else(|| "unknown".to_owned(), ToString::to_string);
    let left = record
        .expires_in
        .map(|left| format!(", {} left", duration::show(left)))
        .unwrap_or_default();
    format!("held by {holder} (token {}{left})", record.token)
}
