//! How `run` tells the operator that a held lock is at risk: one short line with what is
//! held, the time left and the cause in a few words. The store's full report — for MongoDB the
//! driver's error with a raw dump of the server's reply, hundreds of characters — would bury
//! the time left at the end of the line, so it goes to the library's event log instead,
//! shown with `-v` or a `RUST_LOG` that selects `mongolock=info`.

use mongolock::AtRisk;

use super::duration;
use super::progress::Progress;

/// The longest cause shown; longer ones are cut, the whole is behind `-v`.
const CAUSE_CHARS: usize = 60;

/// Says that `what` (`lock "x"`) is at risk in one short line, then logs the store's full
/// report, if it gave one, as an info event.
pub(crate) fn tell(progress: Progress, what: &str, risk: &AtRisk) {
    progress.say(line(what, risk));
    if let Some(report) = risk.last_error() {
        tracing::info!("renewals of {what} are failing: {report}");
    }
}

/// `renewals of lock "x" are failing: lost in 1.9s unless one succeeds (server error
/// ShutdownInProgress)`.
fn line(what: &str, risk: &AtRisk) -> String {
    format!(
        "renewals of {what} are failing: lost in {} unless one succeeds ({})",
        duration::show(risk.time_left()),
        cause(risk.last_error())
    )
}

/// A few words for why renewals fail, from the store's report (`None`: no answer in time):
/// the server's error name when it gave one, else the driver's kind of error, else the
/// report's start.
fn cause(report: Option<&str>) -> String {
    let Some(report) = report else {
        return "no answer in time".to_owned();
    };
    if let Some(name) = server_error_name(report) {
        return format!("server error {name}");
    }
    // The driver's errors read `Kind: <what>, labels: {…}, source: …, server response: …`.
    let driver_kind = report
        .split_once("Kind: ")
        .map(|(_, kind)| kind.split_once(", labels:").map_or(kind, |(kind, _)| kind));
    let words = driver_kind.unwrap_or_else(|| {
        ["store backend error: ", "store rejected the request: "]
            .iter()
            .find_map(|prefix| report.strip_prefix(prefix))
            .unwrap_or(report)
    });
    cut(words.trim(), CAUSE_CHARS)
}

/// The name of the server's error code in a driver error: `ShutdownInProgress` from `Error
/// code 91 (ShutdownInProgress)` (command errors) or `code_name: "ShutdownInProgress"` (write
/// errors).
fn server_error_name(report: &str) -> Option<&str> {
    let valid = |name: &str| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if let Some((_, after)) = report.split_once("Error code ")
        && let Some((_, named)) = after.split_once(" (")
        && let Some((name, _)) = named.split_once(')')
        && valid(name)
    {
        return Some(name);
    }
    let (_, after) = report.split_once("code_name: \"")?;
    let (name, _) = after.split_once('"')?;
    valid(name).then_some(name)
}

/// `text` cut to at most `limit` characters, marked with `…` when cut.
fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_owned(),
        Some(_) => {
            let kept: String = text.chars().take(limit.saturating_sub(1)).collect();
            format!("{kept}…")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_the_server_error_name_when_there_is_one() {
        let command = "store backend error: MongoDB extend (update) failed: Kind: Command \
            failed: Error code 91 (ShutdownInProgress): Failing command via 'failCommand' \
            failpoint, labels: {}, source: None, server response: Some(RawDocumentBuf { data: \
            \"f10000\" })";
        assert_eq!(cause(Some(command)), "server error ShutdownInProgress");
        let write = "store backend error: MongoDB acquire failed: Kind: An error occurred \
            when trying to execute a write operation: WriteError(WriteError { code: 10107, \
            code_name: \"NotWritablePrimary\", message: \"not primary\" }), labels: {}";
        assert_eq!(cause(Some(write)), "server error NotWritablePrimary");
    }

    #[test]
    fn otherwise_the_driver_kind_or_the_report_start_in_few_words() {
        assert_eq!(cause(None), "no answer in time");
        let io = "store backend error: MongoDB extend (update) failed: Kind: I/O error: \
            Connection reset by peer (os error 104), labels: {}, source: None";
        assert_eq!(
            cause(Some(io)),
            "I/O error: Connection reset by peer (os error 104)"
        );
        assert_eq!(
            cause(Some("store backend error: extend failed: reset")),
            "extend failed: reset"
        );
        let long = format!("store call panicked: {}", "x".repeat(200));
        let shown = cause(Some(&long));
        assert_eq!(shown.chars().count(), CAUSE_CHARS, "{shown}");
        assert!(shown.ends_with('…'), "{shown}");
        assert_eq!(cut("ééé", 2), "é…");
        assert_eq!(cut("ééé", 3), "ééé");
    }
}
