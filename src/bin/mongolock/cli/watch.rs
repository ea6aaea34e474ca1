//! `mongolock watch NAME…`: one line per thing that happens to the named locks, from every
//! process — acquired (by whom, with which token), released, expired, force-released,
//! deleted — until Ctrl-C; `--json` prints one object per line for scripts. It starts with
//! each lock's current state.

use std::time::{Duration, SystemTime};

use mongolock::{LockChange, LockOptions};
use serde_json::json;

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
        let line = if args.json {
            format!("{}\n", change_json(&change))
        } else {
            format!("{}\n", describe(&change))
        };
        if print_flushed(&line).is_err() {
            break;
        }
    }
    manager.shutdown().await;
    Ok(0)
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn holder_text(holder: Option<&mongolock::HolderId>) -> String {
    holder.map_or_else(|| "an unknown holder".to_owned(), ToString::to_string)
}

/// `2026-11-24T10:00:00.123Z orders acquired by web-1:4242:9a8b (token 17)`.
fn describe(change: &LockChange) -> String {
    let what = match change {
        LockChange::Current {
            holder: Some(holder),
            token,
            expires_in,
            ..
        } => format!(
            "is held by {holder} (token {token}{})",
            expires_in
                .map(|left| format!(", {} left", duration::show(left)))
                .unwrap_or_default()
        ),
        LockChange::Current { token, .. } => format!("is free (last token {token})"),
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
    };
    format!("{} {} {what}", now(), escaped(change.name().as_str()))
}

/// A name with control characters escaped, so it cannot break the line.
fn escaped(name: &str) -> String {
    name.chars().flat_map(char::escape_default).collect()
}

fn change_json(change: &LockChange) -> serde_json::Value {
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
        } => ("current", holder, Some(*token), millis(expires_in)),
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
        "name": change.name().as_str(),
        "change": kind,
        "holder": holder(who),
        "token": token,
        "expires_in_ms": left,
    })
}
