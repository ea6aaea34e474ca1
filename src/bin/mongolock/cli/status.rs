//! `mongolock status`: the locks of a collection as a table, once or refreshing.

use std::io::Write;

use super::connect::Connection;
use super::signals::Signals;
use super::{CliError, StatusArgs, duration};
use mongolock::store::LockRecord;

/// Runs `mongolock status`. Read-only: unlike `run` and `elect` it neither checks the server
/// version nor creates the TTL index.
pub(super) async fn status(args: StatusArgs, signals: &mut Signals) -> Result<u8, CliError> {
    let connection = Connection::open(&args.connection).await?;
    let first = tokio::select! {
        listed = connection.store.list() => {
            listed.map_err(|error| CliError::from_store(error, &connection.shown_uri))?
        }
        signal = signals.recv() => return Err(super::signals::interrupted(signal)),
    };
    let Some(every) = args.watch else {
        print!("{}", render_table(&first));
        return Ok(0);
    };
    let title = format!(
        "mongolock status: {}.{} every {} (Ctrl-C to stop)",
        connection.store.database().name(),
        connection.store.collection_name(),
        duration::show(every)
    );
    let mut screen = render_table(&first);
    loop {
        // Clear the screen, cursor home, then the whole frame in one write.
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\x1b[2J\x1b[H{title}\n\n{screen}");
        let _ = out.flush();
        drop(out);
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = signals.recv() => return Ok(0),
        }
        screen = tokio::select! {
            // A failure while watching is shown, not fatal: the server may come back.
            listed = connection.store.list() => match listed {
                Ok(locks) => render_table(&locks),
                Err(error) => format!(
                    "{}\n",
                    CliError::from_store(error, &connection.shown_uri).one_line()
                ),
            },
            _ = signals.recv() => return Ok(0),
        };
    }
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
    use std::time::Duration;

    use mongolock::store::HolderId;

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
}
