//! `mongolock release --force NAME`: frees a lock whose holder is stuck, out of band (like
//! Redisson's `forceUnlock` or `consul kv delete` on a lock key), and says whose it was and
//! in which database and collection.

use mongolock::{LockKind, LockName, LockRecord, store::LockStore};

use super::elsewhere;
use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CliError, ConnectionArgs, ReleaseArgs, duration};

/// Runs `mongolock release`: with `--force` frees the lock; without it, refuses (exit 64)
/// to free a held lock and shows who holds it. A lock nobody holds is left alone (exit 0);
/// a name with no record in the collection exits with 66, naming any other database that has
/// one. Every message names the database and collection.
pub(super) async fn release(
    args: ReleaseArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let name = LockName::new(&args.name).map_err(|error| CliError::Usage(error.to_string()))?;
    let connection = super::connect(at, signals, progress).await?;
    let store = &connection.store;
    let namespace = connection.namespace();
    if args.force {
        let cleared = tokio::select! {
            cleared = store.force_release(&name) => {
                cleared.map_err(|error| connection.endpoint.store_error(&error))?
            }
            signal = signals.recv() => return Err(interrupted(signal)),
        };
        if let Some(record) = cleared {
            println!(
                "released {} {:?} in {namespace}, which was {}; {}",
                kind(&record),
                name.as_str(),
                describe(&record),
                if record.holders.len() > 1 {
                    "each holder learns it at its next renewal"
                } else {
                    "the holder learns it at its next renewal"
                }
            );
            return Ok(0);
        }
    }
    // Nothing was freed, or nothing was asked to be: whether there is a record at all tells
    // a lock nobody holds from a name looked for in the wrong place.
    let record = tokio::select! {
        found = store.inspect(&name) => {
            found.map_err(|error| connection.endpoint.store_error(&error))?
        }
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let Some(record) = record else {
        let names = [&name];
        let sightings = tokio::select! {
            found = elsewhere::look(&connection, &names, progress) => found,
            signal = signals.recv() => return Err(interrupted(signal)),
        };
        return Err(CliError::NoRecord {
            name: name.as_str().to_owned(),
            namespace,
            elsewhere: elsewhere::pointer(
                &elsewhere::of(&sightings, name.as_str()),
                store.collection_name(),
                "one",
            ),
        });
    };
    let subject = format!("{} {:?} in {namespace}", kind(&record), name.as_str());
    if args.force {
        // Free when asked (it may have been taken since).
        println!("{subject} was not held; nothing changed");
    } else if record.is_held() {
        return Err(CliError::Usage(format!(
            "{subject} is {}. Releasing takes the lock from its holder without asking: pass --force to do it",
            describe(&record)
        )));
    } else {
        println!("{subject} is not held; nothing to release");
    }
    Ok(0)
}

/// `lock`, `semaphore` or `reader/writer lock`: what `--force` frees every holder of.
fn kind(record: &LockRecord) -> &'static str {
    match record.kind {
        LockKind::Semaphore { .. } => "semaphore",
        LockKind::ReadWrite => "reader/writer lock",
        _ => "lock",
    }
}

/// `held by H (token T, 12s left)`; for a semaphore or reader/writer lock every holder,
/// each with its own token: `held by H1 (token 5, 3s left), H2 (token 6, 9s left)`.
fn describe(record: &LockRecord) -> String {
    if record.holders.len() > 1 {
        let each: Vec<String> = record
            .holders
            .iter()
            .map(|holding| {
                format!(
                    "{} (token {}, {} left)",
                    holding.holder,
                    holding.token,
                    duration::show(holding.expires_in)
                )
            })
            .collect();
        return format!("held by {}", each.join(", "));
    }
    let first = record.holders.first();
    let holder = first
        .map(|holding| holding.holder.clone())
        .or_else(|| record.holder().cloned())
        .map_or_else(|| "unknown".to_owned(), |holder| holder.to_string());
    let token = first.map_or(record.token, |holding| holding.token);
    let left = first
        .map(|holding| holding.expires_in)
        .or(record.expires_in())
        .map(|left| format!(", {} left", duration::show(left)))
        .unwrap_or_default();
    format!("held by {holder} (token {token}{left})")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mongolock::{Access, HolderId, Holding};

    use super::*;

    #[test]
    fn every_holder_of_a_shared_lock_is_named_with_its_own_token() {
        let mutex = LockRecord::held(HolderId::from_string("m".into()), 7, Duration::from_secs(3));
        assert_eq!(
            (kind(&mutex), describe(&mutex).as_str()),
            ("lock", "held by m (token 7, 3s left)")
        );
        let permit = |id: &str, token| {
            Holding::new(
                HolderId::from_string(id.into()),
                token,
                Access::Permit { permits: 2 },
                Duration::from_secs(2),
            )
        };
        let pool = LockRecord::shared(
            LockKind::Semaphore { permits: 2 },
            6,
            vec![permit("a", 5), permit("b", 6)],
        );
        assert_eq!(kind(&pool), "semaphore");
        assert_eq!(
            describe(&pool),
            "held by a (token 5, 2s left), b (token 6, 2s left)"
        );
        let one = LockRecord::shared(LockKind::ReadWrite, 9, vec![permit("r", 4)]);
        assert_eq!(
            describe(&one),
            "held by r (token 4, 2s left)",
            "its own token, not the last grant's"
        );
    }
}
