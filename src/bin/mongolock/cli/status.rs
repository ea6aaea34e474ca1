//! `mongolock status`: the locks of a collection as a table or JSON, once or refreshing.
//!
//! With `--watch` on a terminal the screen is redrawn; into a pipe or a file every refresh is
//! appended, without escape codes. Every refresh says when it was taken, and a refresh that
//! fails (or gets no answer within [`refresh_timeout`]) keeps the last good data on screen,
//! marked with its age, under the reason in a few words.

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::connect::Connection;
use super::progress::Progress;
use super::signals::Signals;
use super::{CliError, StatusArgs, duration};
use mongolock::LockRecord;

/// Runs `mongolock status`. Read-only: unlike `run` and `elect` it neither checks the server
/// version nor creates the TTL index.
pub(super) async fn status(
    args: StatusArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let connection = super::connect(&args.connection, signals, progress).await?;
    let Some(every) = args.watch else {
        let locks = tokio::select! {
            listed = connection.store.list() => {
                listed.map_err(|error| connection.endpoint.store_error(&error))?
            }
            signal = signals.recv() => return Err(super::signals::interrupted(signal)),
        };
        let snapshot = Snapshot {
            time: SystemTime::now(),
            locks,
        };
        let text = if args.json {
            format!("{}\n", snapshot.json(&connection))
        } else {
            render_table(&snapshot.locks)
        };
        // A closed pipe (`| head`) just ends the output.
        let _ = print_flushed(&text);
        return Ok(0);
    };
    watch(&connection, every, args.json, signals).await
}

/// One successful read of the collection.
struct Snapshot {
    time: SystemTime,
    locks: Vec<(String, LockRecord)>,
}

impl Snapshot {
    fn json(&self, connection: &Connection) -> serde_json::Value {
        let millis = |duration: Option<Duration>| {
            duration.map(|duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
        };
        let locks: Vec<serde_json::Value> = self
            .locks
            .iter()
            .map(|(name, record)| {
                json!({
                    "name": name,
                    "state": if record.is_held() { "held" } else { "free" },
                    "holder": record.holder.as_ref().map(mongolock::HolderId::as_str),
                    "token": record.token,
                    "expires_in_ms": millis(record.expires_in),
                    "contended_for_ms": millis(record.contended_for),
                })
            })
            .collect();
        json!({
            "time": timestamp(self.time),
            "database": connection.store.database().name(),
            "collection": connection.store.collection_name(),
            "locks": locks,
        })
    }
}

/// How long a refresh may take before the screen says the server is not answering: the
/// refresh period, but at least 2 s so a slow link is not mistaken for a dead one.
pub(super) fn refresh_timeout(every: Duration) -> Duration {
    every.max(Duration::from_secs(2))
}

/// `--watch`: refreshes every `every` until a termination signal (exit 0).
async fn watch(
    connection: &Connection,
    every: Duration,
    json: bool,
    signals: &mut Signals,
) -> Result<u8, CliError> {
    let terminal = std::io::stdout().is_terminal();
    let title = format!(
        "mongolock status: {} every {} (Ctrl-C to stop)",
        connection.namespace(),
        duration::show(every)
    );
    let mut last: Option<Snapshot> = None;
    loop {
        let started = tokio::time::Instant::now();
        let listed = tokio::select! {
            listed = tokio::time::timeout(refresh_timeout(every), connection.store.list()) => listed,
            _ = signals.recv() => return Ok(0),
        };
        let now = SystemTime::now();
        let failure = match listed {
            Ok(Ok(locks)) => {
                last = Some(Snapshot { time: now, locks });
                None
            }
            Ok(Err(error)) => Some(connection.endpoint.describe_store(&error)),
            Err(_) => Some(format!(
                "MongoDB did not answer within {}",
                duration::show(refresh_timeout(every))
            )),
        };
        let text = if json {
            match &failure {
                None => last
                    .as_ref()
                    .map(|snapshot| format!("{}\n", snapshot.json(connection)))
                    .unwrap_or_default(),
                Some(error) => format!("{}\n", json!({ "time": timestamp(now), "error": error })),
            }
        } else {
            let frame = frame(&title, now, last.as_ref(), failure.as_deref());
            if terminal {
                // Clear the screen, cursor home, then the whole frame in one write.
                format!("\x1b[2J\x1b[H{frame}")
            } else {
                format!("{frame}\n")
            }
        };
        if print_flushed(&text).is_err() {
            return Ok(0);
        }
        tokio::select! {
            () = tokio::time::sleep_until(started + every) => {}
            _ = signals.recv() => return Ok(0),
        }
    }
}

/// One `--watch` screen: the title, when the data is from, then the table. After a failed
/// refresh: the failure, and the last good data marked with its age.
fn frame(title: &str, now: SystemTime, last: Option<&Snapshot>, failure: Option<&str>) -> String {
    let mut text = format!("{title}\n");
    match (failure, last) {
        (None, Some(snapshot)) => {
            text.push_str(&format!("updated {}\n\n", timestamp(snapshot.time)));
            text.push_str(&render_table(&snapshot.locks));
        }
        (Some(failure), Some(snapshot)) => {
            let age = now.duration_since(snapshot.time).unwrap_or_default();
            text.push_str(&format!(
                "refresh failed at {}: {}\nshowing the last data, from {} ({} old):\n\n",
                timestamp(now),
                one_line(failure),
                timestamp(snapshot.time),
                duration::show(age)
            ));
            text.push_str(&render_table(&snapshot.locks));
        }
        (failure, None) => {
            text.push_str(&format!(
                "refresh failed at {}: {}\nno data yet\n",
                timestamp(now),
                one_line(failure.unwrap_or("no answer"))
            ));
        }
    }
    text
}

/// A wall-clock time for people and scripts: `2025-01-31T12:03:04Z` (UTC).
fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Writes `text` to stdout at once. An error means nobody reads any more (`| head` exited):
/// the caller stops.
pub(super) fn print_flushed(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The table `mongolock status` prints: `NAME STATE HOLDER TOKEN EXPIRES IN CONTENDED`, one
/// row per lock, columns aligned; `CONTENDED` says how long other managers have been trying
/// to take a held lock. Control characters in names are escaped so a name cannot break the
/// table.
pub(super) fn render_table(locks: &[(String, LockRecord)]) -> String {
    const HEADER: [&str; 6] = [
        "NAME",
        "STATE",
        "HOLDER",
        "TOKEN",
        "EXPIRES IN",
        "CONTENDED",
    ];
    if locks.is_empty() {
        return "no locks\n".to_owned();
    }
    let rows: Vec<[String; 6]> = locks
        .iter()
        .map(|(name, record)| {
            [
                printable(name),
                if record.is_held() { "held" } else { "free" }.to_owned(),
                record
                    .holder
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |holder| printable(holder.as_str())),
                record.token.to_string(),
                record
                    .expires_in
                    .map_or_else(|| "-".to_owned(), duration::show),
                record
                    .contended_for
                    .map_or_else(|| "-".to_owned(), duration::show),
            ]
        })
        .collect();
    let mut widths = HEADER.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    let mut line = |cells: [&str; 6]| {
        let mut text = String::new();
        for (column, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if column + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(cell);
                let pad = width - cell.chars().count() + 2;
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        table.push_str(text.trim_end());
        table.push('\n');
    };
    line(HEADER);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
    }
    table
}

/// `text` with control characters escaped (`\n`, `\u{1b}`…).
fn printable(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect()
    } else if text.is_empty() {
        "\"\"".to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use mongolock::HolderId;

    #[test]
    fn names_cannot_break_the_table() {
        let free = LockRecord::free(1);
        let table = render_table(&[("a\nb\u{1b}[2J".into(), free.clone())]);
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("a\\nb\\u{1b}[2J"), "{table}");
        let held = LockRecord::held(
            HolderId::from_string("h".into()),
            2,
            Duration::from_secs(90),
        );
        let table = render_table(&[("x".into(), held)]);
        assert!(
            table.ends_with("held   h       2      1m 30s      -\n"),
            "{table:?}"
        );
        assert_eq!(render_table(&[]), "no locks\n");
    }

    #[test]
    fn table_example() {
        let held = LockRecord::held(
            HolderId::from_string("web1:42:ab12cd34".into()),
            7,
            Duration::from_millis(12_300),
        )
        .with_contended_for(Duration::from_secs(4));
        let free = LockRecord::free(3);
        let table = render_table(&[("orders".into(), held), ("reports".into(), free)]);
        assert_eq!(
            table,
            "NAME     STATE  HOLDER            TOKEN  EXPIRES IN  CONTENDED\n\
             orders   held   web1:42:ab12cd34  7      12.3s       4s\n\
             reports  free   -                 3      -           -\n"
        );
    }

    #[test]
    fn a_failed_refresh_keeps_the_last_data_and_says_how_old_it_is() {
        let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let snapshot = Snapshot {
            time: then,
            locks: vec![("orders".into(), LockRecord::free(3))],
        };
        let fresh = frame("title", then, Some(&snapshot), None);
        assert!(
            fresh.starts_with("title\nupdated 2023-11-14T22:13:20Z\n\nNAME"),
            "{fresh}"
        );
        let later = then + Duration::from_secs(7);
        let stale = frame("title", later, Some(&snapshot), Some("no\nserver"));
        assert!(
            stale.contains("refresh failed at 2023-11-14T22:13:27Z: no server\n"),
            "{stale}"
        );
        assert!(
            stale.contains("from 2023-11-14T22:13:20Z (7s old)"),
            "{stale}"
        );
        assert!(stale.contains("orders"), "{stale}");
        let nothing = frame("title", later, None, Some("down"));
        assert!(nothing.ends_with("down\nno data yet\n"), "{nothing}");
        assert_eq!(
            refresh_timeout(Duration::from_millis(200)),
            Duration::from_secs(2)
        );
    }
}
