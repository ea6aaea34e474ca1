//! `mongolock status`: the locks of a collection as a table or JSON, once or refreshing.
//!
//! Semaphores and reader/writer locks have several holders: the table then gains a `KIND`
//! column and one line per holder, and the JSON lists every holder of every lock. A table
//! of mutexes alone looks as it always did.
//!
//! The output names the `database.collection` it read. A name asked for that has no record
//! there shows as `no record`, never as free: its application may keep its locks elsewhere,
//! and when another database's collection of the same name has a record of it (or, for an
//! empty collection, has records at all), a note under the table says which and how to
//! point at it ([`elsewhere`](super::elsewhere)).
//!
//! With `--watch` on a terminal the screen is redrawn; into a pipe or a file every refresh is
//! appended, without escape codes. Every refresh says when it was taken, and a refresh that
//! fails (or gets no answer within [`refresh_timeout`]) keeps the last good data on screen,
//! marked with its age, under the reason in a few words.

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::connect::Connection;
use super::elsewhere::{self, Sighting};
use super::progress::Progress;
use super::signals::Signals;
use super::{CliError, ConnectionArgs, StatusArgs, duration};
use mongolock::store::LockStore;
use mongolock::{LockKind, LockName, LockRecord, StoreError};

/// One lock as shown: its name and record (`None`: a name asked for that has no record).
type Row = (String, Option<LockRecord>);

/// Runs `mongolock status`. Read-only: unlike `run` and `elect` it neither checks the server
/// version nor creates the TTL index.
pub(super) async fn status(
    args: StatusArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let names = args
        .names
        .iter()
        .map(|name| LockName::new(name).map_err(|error| CliError::Usage(error.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let connection = super::connect(at, signals, progress).await?;
    let mut lookout = Lookout::default();
    let Some(every) = args.watch else {
        let (locks, sightings) = tokio::select! {
            listed = read(&connection, &names) => {
                let locks = listed.map_err(|error| connection.endpoint.store_error(&error))?;
                let sightings = lookout.sightings(&connection, &names, &locks, progress).await;
                (locks, sightings)
            }
            signal = signals.recv() => return Err(super::signals::interrupted(signal)),
        };
        let snapshot = Snapshot {
            time: SystemTime::now(),
            locks,
            sightings,
        };
        let place = Place::of(&connection);
        let text = if args.json {
            format!("{}\n", snapshot.json(&place))
        } else if snapshot.locks.is_empty() {
            body(&snapshot, &place)
        } else {
            format!(
                "locks in {}\n{}",
                place.namespace(),
                body(&snapshot, &place)
            )
        };
        // A closed pipe (`| head`) just ends the output.
        let _ = print_flushed(&text);
        return Ok(0);
    };
    let options = Refreshing {
        every,
        json: args.json,
        progress,
    };
    watch(&connection, &names, options, &mut lookout, signals).await
}

/// Where the locks were read: for the output's header, notes and JSON.
struct Place {
    database: String,
    collection: String,
}

impl Place {
    fn of(connection: &Connection) -> Self {
        Self {
            database: connection.store.database().name().to_owned(),
            collection: connection.store.collection_name().to_owned(),
        }
    }

    /// `database.collection`.
    fn namespace(&self) -> String {
        format!("{}.{}", self.database, self.collection)
    }
}

/// What was last looked for in other databases, and found: a `--watch` looks again only
/// when the names without a record change.
#[derive(Default)]
struct Lookout {
    /// The names looked for (empty: any record, for an empty collection); `None` before the
    /// first look.
    looked_for: Option<Vec<String>>,
    found: Vec<Sighting>,
}

impl Lookout {
    /// The other databases with a record of a name in `locks` that has none here; with no
    /// names asked and no lock here, those whose collection has any record.
    async fn sightings(
        &mut self,
        connection: &Connection,
        names: &[LockName],
        locks: &[Row],
        progress: Progress,
    ) -> Vec<Sighting> {
        let missing: Vec<&LockName> = names
            .iter()
            .filter(|name| {
                locks
                    .iter()
                    .any(|(shown, record)| record.is_none() && shown == name.as_str())
            })
            .fold(Vec::new(), |mut unique, name| {
                if !unique.contains(&name) {
                    unique.push(name);
                }
                unique
            });
        if missing.is_empty() && !(names.is_empty() && locks.is_empty()) {
            return Vec::new();
        }
        let wanted: Vec<String> = missing
            .iter()
            .map(|name| name.as_str().to_owned())
            .collect();
        if self.looked_for.as_ref() != Some(&wanted) {
            self.found = elsewhere::look(connection, &missing, progress).await;
            self.looked_for = Some(wanted);
        }
        self.found.clone()
    }
}

/// The locks `names` in that order (each once), or every lock of the collection by name.
async fn read(connection: &Connection, names: &[LockName]) -> Result<Vec<Row>, StoreError> {
    if names.is_empty() {
        let listed = connection.store.list().await?;
        return Ok(listed
            .into_iter()
            .map(|(name, record)| (name, Some(record)))
            .collect());
    }
    let mut unique: Vec<&LockName> = Vec::with_capacity(names.len());
    for name in names {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    let records =
        futures::future::join_all(unique.iter().map(|name| connection.store.inspect(name))).await;
    unique
        .into_iter()
        .zip(records)
        .map(|(name, record)| Ok((name.as_str().to_owned(), record?)))
        .collect()
}

/// One successful read of the collection, with the other databases that have what it
/// lacked.
struct Snapshot {
    time: SystemTime,
    locks: Vec<Row>,
    sightings: Vec<Sighting>,
}

impl Snapshot {
    fn json(&self, place: &Place) -> serde_json::Value {
        let locks: Vec<serde_json::Value> = self
            .locks
            .iter()
            .map(|row| lock_json(row, &elsewhere::of(&self.sightings, &row.0)))
            .collect();
        let elsewhere: Vec<&str> = self
            .sightings
            .iter()
            .map(|sighting| sighting.database.as_str())
            .collect();
        json!({
            "time": timestamp(self.time),
            "database": place.database,
            "collection": place.collection,
            "locks": locks,
            "elsewhere": elsewhere,
        })
    }
}

/// One lock in the JSON of `status --json`; `elsewhere`: the other databases with a record
/// of a name that has none here.
fn lock_json((name, found): &Row, elsewhere: &[&str]) -> serde_json::Value {
    let millis = |duration: Option<Duration>| {
        duration.map(|duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    };
    let Some(record) = found else {
        return json!({
            "name": name, "state": "no_record", "holder": null, "token": null,
            "expires_in_ms": null, "contended_for_ms": null,
            "kind": null, "permits": null, "holders": [], "queue": [],
            "elsewhere": elsewhere,
        });
    };
    let queue: Vec<serde_json::Value> = record
        .queue
        .iter()
        .map(|waiter| {
            json!({
                "holder": waiter.holder.as_str(),
                "access": waiter.access.as_str(),
                "waiting_for_ms": millis(Some(waiter.waiting_for)),
            })
        })
        .collect();
    let holders: Vec<serde_json::Value> = holdings(record)
        .iter()
        .map(|holding| {
            json!({
                "holder": holding.holder.as_str(),
                "access": holding.access.as_str(),
                "token": holding.token,
                "expires_in_ms": millis(Some(holding.expires_in)),
            })
        })
        .collect();
    let (kind, permits) = match record.kind {
        LockKind::Semaphore { permits } => ("semaphore", Some(permits)),
        LockKind::ReadWrite => ("read_write", None),
        _ => ("mutex", None),
    };
    json!({
        "name": name,
        "state": if record.is_held() { "held" } else { "free" },
        "holder": record.holder().map(mongolock::HolderId::as_str),
        "token": record.token,
        "expires_in_ms": millis(record.expires_in()),
        "contended_for_ms": millis(record.contended_for),
        "kind": kind,
        "permits": permits,
        "holders": holders,
        "queue": queue,
        "elsewhere": [],
    })
}

/// How long a refresh may take before the screen says the server is not answering: the
/// refresh period, but at least 2 s so a slow link is not mistaken for a dead one.
pub(super) fn refresh_timeout(every: Duration) -> Duration {
    every.max(Duration::from_secs(2))
}

/// How `--watch` refreshes.
struct Refreshing {
    every: Duration,
    json: bool,
    progress: Progress,
}

/// `--watch`: refreshes every `every` until a termination signal (exit 0).
async fn watch(
    connection: &Connection,
    names: &[LockName],
    options: Refreshing,
    lookout: &mut Lookout,
    signals: &mut Signals,
) -> Result<u8, CliError> {
    let Refreshing {
        every,
        json,
        progress,
    } = options;
    let terminal = std::io::stdout().is_terminal();
    let place = Place::of(connection);
    let title = format!(
        "mongolock status: {} every {} (Ctrl-C to stop)",
        place.namespace(),
        duration::show(every)
    );
    let mut last: Option<Snapshot> = None;
    loop {
        let started = tokio::time::Instant::now();
        let listed = tokio::select! {
            listed = tokio::time::timeout(refresh_timeout(every), read(connection, names)) => listed,
            _ = signals.recv() => return Ok(0),
        };
        let now = SystemTime::now();
        let failure = match listed {
            Ok(Ok(locks)) => {
                let sightings = tokio::select! {
                    found = lookout.sightings(connection, names, &locks, progress) => found,
                    _ = signals.recv() => return Ok(0),
                };
                last = Some(Snapshot {
                    time: now,
                    locks,
                    sightings,
                });
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
                    .map(|snapshot| format!("{}\n", snapshot.json(&place)))
                    .unwrap_or_default(),
                Some(error) => format!("{}\n", json!({ "time": timestamp(now), "error": error })),
            }
        } else {
            let frame = frame(&title, &place, now, last.as_ref(), failure.as_deref());
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
fn frame(
    title: &str,
    place: &Place,
    now: SystemTime,
    last: Option<&Snapshot>,
    failure: Option<&str>,
) -> String {
    let mut text = format!("{title}\n");
    match (failure, last) {
        (None, Some(snapshot)) => {
            text.push_str(&format!("updated {}\n\n", timestamp(snapshot.time)));
            text.push_str(&body(snapshot, place));
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
            text.push_str(&body(snapshot, place));
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

/// The table with a note per name that has no record here but a record elsewhere:
/// `no record of "x" in mongolock.distributed_locks; app.distributed_locks has one: pass
/// --database app`. With no locks at all: `no locks in DATABASE.COLLECTION`, and where
/// records are instead.
fn body(snapshot: &Snapshot, place: &Place) -> String {
    let namespace = place.namespace();
    if snapshot.locks.is_empty() {
        let databases: Vec<&str> = snapshot
            .sightings
            .iter()
            .map(|sighting| sighting.database.as_str())
            .collect();
        return match elsewhere::pointer(&databases, &place.collection, "records") {
            Some(pointer) => format!("no locks in {namespace}; {pointer}\n"),
            None => format!("no locks in {namespace}\n"),
        };
    }
    let mut text = render_table(&snapshot.locks);
    for (name, record) in &snapshot.locks {
        let pointer = elsewhere::pointer(
            &elsewhere::of(&snapshot.sightings, name),
            &place.collection,
            "one",
        );
        if let (None, Some(pointer)) = (record, pointer) {
            text.push_str(&format!(
                "no record of {:?} in {namespace}; {pointer}\n",
                name.as_str()
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

/// The longest name kept in the `NAME` column: a longer one gets a line of its own above
/// its row, so one long name does not push every row past the terminal's width.
const NAME_COLUMN: usize = 40;

/// One line of the table: cells in the columns, or a long name on its own.
enum Line {
    Cells(Vec<String>),
    Alone(String),
}

/// The table `mongolock status` prints: `NAME STATE HOLDER TOKEN EXPIRES IN CONTENDED`, one
/// row per lock, columns aligned; `CONTENDED` says how long other managers have been trying
/// to take a held lock. A name asked for that has no record shows as `no record`, with no
/// token. When a semaphore or reader/writer lock is among them, a `KIND` column follows the
/// name (`mutex`, `semaphore`, `read/write`), their `STATE` says how much is held (`2/3
/// held`, `read (2)`, `write`), and each further holder gets a line of its own under the
/// first (holder, token, time left). Processes waiting in line (arrival order) follow, one
/// line each, earliest first: `waiting (exclusive)`, the process's manager, and how long its
/// longest-waiting task has waited under `CONTENDED`. A name longer than [`NAME_COLUMN`]
/// characters is printed whole on a line of its own, its row following with the `NAME`
/// column blank. Control characters in names are escaped so a name cannot break the table.
pub(super) fn render_table(locks: &[Row]) -> String {
    if locks.is_empty() {
        return "no locks\n".to_owned();
    }
    let with_kind = locks.iter().any(|(_, record)| {
        record
            .as_ref()
            .is_some_and(|record| record.kind.is_shared())
    });
    let mut header = vec![
        "NAME",
        "STATE",
        "HOLDER",
        "TOKEN",
        "EXPIRES IN",
        "CONTENDED",
    ];
    if with_kind {
        header.insert(1, "KIND");
    }
    let mut lines: Vec<Line> = Vec::new();
    let cells = |mut row: Vec<String>, kind: String| {
        if with_kind {
            row.insert(1, kind);
        }
        Line::Cells(row)
    };
    let blank = || "-".to_owned();
    for (name, found) in locks {
        let mut name = printable(name);
        if name.chars().count() > NAME_COLUMN {
            lines.push(Line::Alone(std::mem::take(&mut name)));
        }
        let Some(record) = found else {
            let row = vec![
                name,
                "no record".to_owned(),
                blank(),
                blank(),
                blank(),
                blank(),
            ];
            lines.push(cells(row, blank()));
            continue;
        };
        let holdings = holdings(record);
        let first = holdings.first();
        let row = vec![
            name,
            state(record),
            first.map_or_else(blank, |holding| printable(holding.holder.as_str())),
            first
                .map_or(record.token, |holding| holding.token)
                .to_string(),
            first.map_or_else(blank, |holding| duration::show(holding.expires_in)),
            record.contended_for.map_or_else(blank, duration::show),
        ];
        lines.push(cells(row, kind(record.kind)));
        for holding in holdings.iter().skip(1) {
            let row = vec![
                String::new(),
                String::new(),
                printable(holding.holder.as_str()),
                holding.token.to_string(),
                duration::show(holding.expires_in),
                String::new(),
            ];
            lines.push(cells(row, String::new()));
        }
        for waiter in &record.queue {
            let row = vec![
                String::new(),
                format!("waiting ({})", waiter.access.as_str()),
                printable(waiter.holder.as_str()),
                String::new(),
                String::new(),
                duration::show(waiter.waiting_for),
            ];
            lines.push(cells(row, String::new()));
        }
    }
    let mut widths: Vec<usize> = header.iter().map(|title| title.chars().count()).collect();
    for line in &lines {
        if let Line::Cells(row) = line {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut table = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (column, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            text.push_str(cell);
            if column + 1 < cells.len() {
                let pad = width - cell.chars().count() + 2;
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        table.push_str(text.trim_end());
        table.push('\n');
    };
    line(&header);
    for each in &lines {
        match each {
            Line::Cells(row) => {
                let cells: Vec<&str> = row.iter().map(String::as_str).collect();
                line(&cells);
            }
            Line::Alone(name) => line(&[name.as_str()]),
        }
    }
    table
}

/// The record's holders, earliest grant first.
fn holdings(record: &LockRecord) -> Vec<mongolock::Holding> {
    record.holders.clone()
}

/// `free`, `held`, `2/3 held` (`0/3 held` when free), `read (2)`, `write`.
fn state(record: &LockRecord) -> String {
    match record.kind {
        // A semaphore's count is part of what it is, free or not.
        LockKind::Semaphore { permits } => format!("{}/{permits} held", record.held_count()),
        _ if !record.is_held() => "free".to_owned(),
        LockKind::ReadWrite => {
            let writing = record
                .holders
                .iter()
                .any(|holding| holding.access == mongolock::Access::Write);
            if writing {
                "write".to_owned()
            } else {
                format!("read ({})", record.held_count())
            }
        }
        _ => "held".to_owned(),
    }
}

/// `mutex`, `semaphore`, `read/write`.
fn kind(kind: LockKind) -> String {
    match kind {
        LockKind::Semaphore { .. } => "semaphore",
        LockKind::ReadWrite => "read/write",
        _ => "mutex",
    }
    .to_owned()
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

    fn place() -> Place {
        Place {
            database: "mongolock".into(),
            collection: "distributed_locks".into(),
        }
    }

    fn seen(database: &str, names: &[&str]) -> Sighting {
        Sighting {
            database: database.into(),
            names: names.iter().map(|name| (*name).to_owned()).collect(),
        }
    }

    #[test]
    fn a_name_without_a_record_is_never_free_and_records_elsewhere_are_pointed_at() {
        let snapshot = Snapshot {
            time: SystemTime::UNIX_EPOCH,
            locks: vec![
                ("nightly-report".into(), None),
                ("orders".into(), Some(LockRecord::free(3))),
                ("typo".into(), None),
            ],
            sightings: vec![seen("app", &["nightly-report"])],
        };
        let text = body(&snapshot, &place());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "NAME            STATE      HOLDER  TOKEN  EXPIRES IN  CONTENDED",
                "nightly-report  no record  -       -      -           -",
                "orders          free       -       3      -           -",
                "typo            no record  -       -      -           -",
                "no record of \"nightly-report\" in mongolock.distributed_locks; \
                 app.distributed_locks has one: pass --database app",
            ],
            "{text}"
        );
        let json = snapshot.json(&place());
        assert_eq!(json["database"], "mongolock");
        assert_eq!(json["collection"], "distributed_locks");
        assert_eq!(json["elsewhere"], json!(["app"]));
        assert_eq!(json["locks"][0]["elsewhere"], json!(["app"]));
        assert_eq!(json["locks"][2]["elsewhere"], json!([]));

        let empty = Snapshot {
            time: SystemTime::UNIX_EPOCH,
            locks: Vec::new(),
            sightings: vec![seen("app", &[]), seen("jobs", &[])],
        };
        assert_eq!(
            body(&empty, &place()),
            "no locks in mongolock.distributed_locks; app.distributed_locks and \
             jobs.distributed_locks have records: pass --database app (or jobs)\n"
        );
        let nowhere = Snapshot {
            sightings: Vec::new(),
            ..empty
        };
        assert_eq!(
            body(&nowhere, &place()),
            "no locks in mongolock.distributed_locks\n"
        );
    }

    #[test]
    fn a_long_name_gets_a_line_of_its_own_and_leaves_the_columns_narrow() {
        let long = format!("reports/{}", "x".repeat(300));
        let held = LockRecord::held(HolderId::from_string("h".into()), 2, Duration::from_secs(9));
        let table = render_table(&[
            (long.clone(), Some(held)),
            ("orders".into(), Some(LockRecord::free(3))),
        ]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines,
            [
                "NAME    STATE  HOLDER  TOKEN  EXPIRES IN  CONTENDED",
                long.as_str(),
                "        held   h       2      9s          -",
                "orders  free   -       3      -           -",
            ],
            "{table}"
        );
        let exactly = "n".repeat(NAME_COLUMN);
        let table = render_table(&[(exactly.clone(), Some(LockRecord::free(1)))]);
        assert!(
            table
                .lines()
                .nth(1)
                .is_some_and(|row| row.starts_with(&exactly)
                    && row.ends_with("free   -       1      -           -")),
            "a name of the column's width stays in its row: {table}"
        );
        let json = lock_json(&(long.clone(), None), &[]);
        assert_eq!(json["name"], long.as_str(), "JSON names are whole");
    }

    #[test]
    fn names_cannot_break_the_table() {
        let free = LockRecord::free(1);
        let table = render_table(&[("a\nb\u{1b}[2J".into(), Some(free.clone()))]);
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("a\\nb\\u{1b}[2J"), "{table}");
        let held = LockRecord::held(
            HolderId::from_string("h".into()),
            2,
            Duration::from_secs(90),
        );
        let table = render_table(&[("x".into(), Some(held))]);
        assert!(
            table.ends_with("held   h       2      1m 30s      -\n"),
            "{table:?}"
        );
        assert_eq!(render_table(&[]), "no locks\n");
    }

    #[test]
    fn managers_waiting_in_line_get_a_line_each() {
        let waiting = |holder: &str, ms| {
            mongolock::QueuedWaiter::new(
                HolderId::from_string(holder.into()),
                mongolock::Access::Exclusive,
                Duration::from_millis(ms),
            )
        };
        let record = LockRecord::held(HolderId::from_string("h".into()), 2, Duration::from_secs(9))
            .with_queue(vec![waiting("w1", 1500), waiting("w2", 200)]);
        let table = render_table(&[("x".into(), Some(record.clone()))]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(
            lines[2].contains("waiting (exclusive)") && lines[2].contains("w1"),
            "{table}"
        );
        assert!(lines[3].contains("w2"), "{table}");
        let json = lock_json(&("x".into(), Some(record)), &[]);
        assert_eq!(json["queue"][0]["holder"], "w1");
        assert_eq!(json["queue"][0]["waiting_for_ms"], 1500);
        assert_eq!(json["queue"][1]["access"], "exclusive");
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
        let table = render_table(&[
            ("orders".into(), Some(held)),
            ("reports".into(), Some(free)),
        ]);
        assert_eq!(
            table,
            "NAME     STATE  HOLDER            TOKEN  EXPIRES IN  CONTENDED\n\
             orders   held   web1:42:ab12cd34  7      12.3s       4s\n\
             reports  free   -                 3      -           -\n"
        );
    }

    #[test]
    fn shared_kinds_show_their_kind_and_every_holder() {
        let holding = |id: &str, token, access, secs| {
            mongolock::Holding::new(
                HolderId::from_string(id.into()),
                token,
                access,
                Duration::from_secs(secs),
            )
        };
        let permit = mongolock::Access::Permit { permits: 3 };
        let imports = LockRecord::shared(
            LockKind::Semaphore { permits: 3 },
            12,
            vec![
                holding("web1", 11, permit, 14),
                holding("web2", 12, permit, 13),
            ],
        );
        let docs = LockRecord::shared(
            LockKind::ReadWrite,
            21,
            vec![holding("r1", 20, mongolock::Access::Read, 9)],
        );
        let migration = LockRecord::shared(
            LockKind::ReadWrite,
            25,
            vec![holding("w", 25, mongolock::Access::Write, 15)],
        );
        let idle = LockRecord::shared(LockKind::Semaphore { permits: 2 }, 4, Vec::new());
        let orders = LockRecord::held(
            HolderId::from_string("m".into()),
            7,
            Duration::from_secs(12),
        );
        let table = render_table(&[
            ("docs".into(), Some(docs)),
            ("idle".into(), Some(idle)),
            ("imports".into(), Some(imports)),
            ("migration".into(), Some(migration)),
            ("orders".into(), Some(orders)),
            ("unknown".into(), None),
        ]);
        assert_eq!(
            table,
            "NAME       KIND        STATE      HOLDER  TOKEN  EXPIRES IN  CONTENDED\n\
             docs       read/write  read (1)   r1      20     9s          -\n\
             idle       semaphore   0/2 held   -       4      -           -\n\
             imports    semaphore   2/3 held   web1    11     14s         -\n\
             \x20                                 web2    12     13s\n\
             migration  read/write  write      w       25     15s         -\n\
             orders     mutex       held       m       7      12s         -\n\
             unknown    -           no record  -       -      -           -\n"
        );
    }

    #[test]
    fn json_lists_every_holder_with_its_access() {
        let permit = mongolock::Access::Permit { permits: 2 };
        let record = LockRecord::shared(
            LockKind::Semaphore { permits: 2 },
            9,
            vec![mongolock::Holding::new(
                HolderId::from_string("web1".into()),
                9,
                permit,
                Duration::from_millis(1500),
            )],
        );
        let value = lock_json(&("imports".into(), Some(record)), &[]);
        assert_eq!(value["kind"], "semaphore");
        assert_eq!(value["permits"], 2);
        assert_eq!(value["state"], "held");
        assert_eq!(
            value["holders"],
            json!([{"holder": "web1", "access": "permit", "token": 9, "expires_in_ms": 1500}])
        );
        let mutex = lock_json(&("m".into(), Some(LockRecord::free(3))), &[]);
        assert_eq!(
            (mutex["kind"].as_str(), mutex["permits"].is_null()),
            (Some("mutex"), true)
        );
        assert_eq!(mutex["holders"], json!([]));
        let absent = lock_json(&("gone".into(), None), &["app"]);
        assert!(absent["kind"].is_null(), "{absent}");
        assert_eq!(absent["state"], "no_record", "never free: {absent}");
        assert!(
            absent["token"].is_null(),
            "no token it does not know: {absent}"
        );
        assert_eq!(absent["elsewhere"], json!(["app"]));
        assert_eq!(mutex["elsewhere"], json!([]));
    }

    #[test]
    fn a_failed_refresh_keeps_the_last_data_and_says_how_old_it_is() {
        let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let snapshot = Snapshot {
            time: then,
            locks: vec![("orders".into(), Some(LockRecord::free(3)))],
            sightings: Vec::new(),
        };
        let place = place();
        let fresh = frame("title", &place, then, Some(&snapshot), None);
        assert!(
            fresh.starts_with("title\nupdated 2023-11-14T22:13:20Z\n\nNAME"),
            "{fresh}"
        );
        let later = then + Duration::from_secs(7);
        let stale = frame("title", &place, later, Some(&snapshot), Some("no\nserver"));
        assert!(
            stale.contains("refresh failed at 2023-11-14T22:13:27Z: no server\n"),
            "{stale}"
        );
        assert!(
            stale.contains("from 2023-11-14T22:13:20Z (7s old)"),
            "{stale}"
        );
        assert!(stale.contains("orders"), "{stale}");
        let nothing = frame("title", &place, later, None, Some("down"));
        assert!(nothing.ends_with("down\nno data yet\n"), "{nothing}");
        assert_eq!(
            refresh_timeout(Duration::from_millis(200)),
            Duration::from_secs(2)
        );
    }
}
