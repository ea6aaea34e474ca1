//! `mongolock watch NAME…`: one line per thing that happens to the named locks, from every
//! process — acquired (by whom, with which token), released, expired, force-released,
//! deleted — until Ctrl-C; `--json` prints one object per line for scripts. It starts with
//! each lock's current state in the `database.collection` it watches: held, free (with the
//! last grant's token), or no record there — never a token it does not know — with the
//! other databases that have a record of the name.

use std::time::{Duration, SystemTime};

use mongolock::{LockChange, LockOptions};
use serde_json::json;

use super::connect::Connection;
use super::elsewhere;
use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::status::print_flushed;
use super::{CliError, ConnectionArgs, WatchArgs, duration};

/// Runs `mongolock watch`: exit 0 after Ctrl-C or SIGTERM.
pub(super) async fn watch(
    args: WatchArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let connection = super::connect(at, signals, progress).await?;
    let endpoint = connection.endpoint.clone();
    let place = Place {
        connection: connection.clone(),
        progress,
    };
    let manager = tokio::select! {
        started = connection.start(LockOptions::default()) => started?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let mut changes = manager
        .watch(&args.names)
        .map_err(|error| endpoint.lock_error(error))?;
    loop {
        let change = tokio::select! {
            change = changes.recv() => change,
            // Stopping is how a watch ends: not an error.
            _ = signals.recv() => break,
        };
        let Some(change) = change else { break };
        let pointer = tokio::select! {
            pointer = place.pointer(&change) => pointer,
            _ = signals.recv() => break,
        };
        let namespace = place.connection.namespace();
        let line = if args.json {
            if let Some(pointer) = &pointer {
                place.progress.say(format_args!(
                    "no record of {:?} in {namespace}; {pointer}",
                    change.name().as_str()
                ));
            }
            format!("{}\n", change_json(&change, &place.connection))
        } else {
            let what = describe(&change, &namespace, pointer.as_deref());
            format!("{} {} {what}\n", now(), escaped(change.name().as_str()))
        };
        if print_flushed(&line).is_err() {
            break;
        }
    }
    manager.shutdown().await;
    Ok(0)
}

/// Where the watched locks live, to name it and to look for records elsewhere.
struct Place {
    connection: Connection,
    progress: Progress,
}

impl Place {
    /// For a name that has no record here, where a record of it is and how to point there.
    async fn pointer(&self, change: &LockChange) -> Option<String> {
        if !has_no_record(change) {
            return None;
        }
        let name = change.name();
        let sightings = elsewhere::look(&self.connection, &[name], self.progress).await;
        elsewhere::pointer(
            &elsewhere::of(&sightings, name.as_str()),
            self.connection.store.collection_name(),
            "one",
        )
    }
}

/// Whether `change` is the current state of a name the store has no record of: the library
/// reports that as free with token 0, a token no grant has.
fn has_no_record(change: &LockChange) -> bool {
    matches!(
        change,
        LockChange::Current {
            holder: None,
            token: 0,
            ..
        }
    )
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn holder_text(holder: Option<&mongolock::HolderId>) -> String {
    holder.map_or_else(|| "an unknown holder".to_owned(), ToString::to_string)
}

/// What happened, after the time and the name: `acquired by web-1:4242:9a8b (token 17)`;
/// the current state names `namespace`: `in app.distributed_locks is free (last token 17)`,
/// `has no record in app.distributed_locks` (and, with `pointer`, where one is).
fn describe(change: &LockChange, namespace: &str, pointer: Option<&str>) -> String {
    match change {
        _ if has_no_record(change) => match pointer {
            Some(pointer) => format!("has no record in {namespace}; {pointer}"),
            None => format!("has no record in {namespace}"),
        },
        LockChange::Current {
            holder: Some(holder),
            token,
            expires_in,
            ..
        } => format!(
            "in {namespace} is held by {holder} (token {token}{})",
            expires_in
                .map(|left| format!(", {} left", duration::show(left)))
                .unwrap_or_default()
        ),
        LockChange::Current { token, .. } => {
            format!("in {namespace} is free (last token {token})")
        }
        LockChange::Acquired { holder, token, .. } => {
            format!(
                "acquired by {} (token {token})",
                holder_text(holder.as_ref())
            )
        }
        LockChange::Released { holder, token, .. } => {
            format!(
                "released by {} (token {token})",
                holder_text(holder.as_ref())
            )
        }
        LockChange::ForceReleased { holder, token, .. } => format!(
            "force-released: {}'s lease (token {token}) was cleared",
            holder_text(holder.as_ref())
        ),
        LockChange::Expired { holder, token, .. } => format!(
            "expired: {} stopped renewing (token {token})",
            holder_text(holder.as_ref())
        ),
        LockChange::Deleted { .. } => "deleted: its record is gone".to_owned(),
        other => format!("{other:?}"),
    }
}

/// A name with control characters escaped, so it cannot break the line.
fn escaped(name: &str) -> String {
    name.chars().flat_map(char::escape_default).collect()
}

/// One line of `watch --json`; a name with no record has a null token.
fn change_json(change: &LockChange, connection: &Connection) -> serde_json::Value {
    let millis = |left: &Option<Duration>| {
        left.map(|left| u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
    };
    let holder = |holder: &Option<mongolock::HolderId>| {
        holder.as_ref().map(|holder| holder.as_str().to_owned())
    };
    let (kind, who, token, left) = match change {
        LockChange::Current {
            holder,
            token,
            expires_in,
            ..
        } => {
            let token = (!has_no_record(change)).then_some(*token);
            ("current", holder, token, millis(expires_in))
        }
        LockChange::Acquired { holder, token, .. } => ("acquired", holder, Some(*token), None),
        LockChange::Released { holder, token, .. } => ("released", holder, Some(*token), None),
        LockChange::ForceReleased { holder, token, .. } => {
            ("force_released", holder, Some(*token), None)
        }
        LockChange::Expired { holder, token, .. } => ("expired", holder, Some(*token), None),
        LockChange::Deleted { .. } => ("deleted", &None, None, None),
        _ => ("other", &None, None, None),
    };
    json!({
        "time": now(),
        "database": connection.store.database().name(),
        "collection": connection.store.collection_name(),
        "name": change.name().as_str(),
        "change": kind,
        "holder": holder(who),
        "token": token,
        "expires_in_ms": left,
    })
}

#[cfg(test)]
mod tests {
    use mongolock::{HolderId, LockName};

    use super::*;

    fn current(holder: Option<&str>, token: u64) -> LockChange {
        LockChange::Current {
            name: LockName::new("orders").unwrap(),
            holder: holder.map(|holder| HolderId::from_string(holder.into())),
            token,
            expires_in: holder.map(|_| Duration::from_secs(9)),
        }
    }

    #[test]
    fn the_current_state_names_the_collection_and_no_unknown_token() {
        let place = "app.distributed_locks";
        assert_eq!(
            describe(&current(None, 0), place, None),
            "has no record in app.distributed_locks"
        );
        assert_eq!(
            describe(
                &current(None, 0),
                place,
                Some("jobs.distributed_locks has one: pass --database jobs")
            ),
            "has no record in app.distributed_locks; jobs.distributed_locks has one: pass --database jobs"
        );
        assert_eq!(
            describe(&current(None, 17), place, None),
            "in app.distributed_locks is free (last token 17)"
        );
        assert_eq!(
            describe(&current(Some("web-1"), 18), place, None),
            "in app.distributed_locks is held by web-1 (token 18, 9s left)"
        );
        let acquired = LockChange::Acquired {
            name: LockName::new("orders").unwrap(),
            holder: None,
            token: 19,
        };
        assert!(!has_no_record(&acquired));
        assert_eq!(
            describe(&acquired, place, None),
            "acquired by an unknown holder (token 19)"
        );
    }
}
