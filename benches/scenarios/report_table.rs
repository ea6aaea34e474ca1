//! What every section of the report is built from: the results by job key, the figures read
//! from them, and the markdown cells and tables they are shown in. Below the report and its
//! sections (`report.rs`, `report_primitives.rs`, `report_fleet.rs`), so that none of them
//! imports another back.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::runner::Run;
use crate::support::stats::Summary;

/// Every run of every job, by job key.
pub(crate) type Results = BTreeMap<String, Vec<Run>>;

pub(crate) fn runs<'a>(results: &'a Results, key: &str) -> &'a [Run] {
    results.get(key).map_or(&[], Vec::as_slice)
}

/// The figure `name` of job `key` over its repetitions.
pub(crate) fn figure(results: &Results, key: &str, name: &str) -> Option<Summary> {
    let values: Vec<f64> = runs(results, key)
        .iter()
        .filter_map(|run| run.values.get(name)?.parse().ok())
        .collect();
    Summary::of(&values)
}

/// A reported text (the same in every run, or the first one's).
pub(crate) fn text(results: &Results, key: &str, name: &str) -> Option<String> {
    runs(results, key)
        .iter()
        .find_map(|run| run.values.get(name).cloned())
}

/// A reported text of the last run that has it, or `—`.
pub(crate) fn last_text(results: &Results, key: &str, name: &str) -> String {
    runs(results, key)
        .iter()
        .rev()
        .find_map(|run| run.values.get(name).cloned())
        .unwrap_or_else(|| "—".into())
}

/// `timeout (>120 s) ×2` for the runs of `key` that did not complete (or reported a phase
/// that hit its cap).
pub(crate) fn failures(results: &Results, key: &str) -> Option<String> {
    let mut counted: BTreeMap<String, usize> = BTreeMap::new();
    for run in runs(results, key) {
        let reported = run
            .values
            .get("timeout")
            .map(|phase| format!("timeout ({phase})"));
        if let Some(failure) = run.failure.clone().or(reported) {
            let short: String = failure.chars().take(120).collect();
            *counted.entry(short).or_insert(0) += 1;
        }
    }
    if counted.is_empty() {
        return None;
    }
    Some(
        counted
            .into_iter()
            .map(|(failure, n)| {
                if n > 1 {
                    format!("{failure} ×{n}")
                } else {
                    failure
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
    )
}

pub(crate) fn number(value: f64, decimals: usize) -> String {
    format!("{value:.decimals$}")
}

/// `1.22 ms (1.19–1.30, n=3)`, or what went wrong.
pub(crate) fn cell(
    results: &Results,
    key: &str,
    name: &str,
    decimals: usize,
    unit: &str,
) -> String {
    match figure(results, key, name) {
        Some(s) if s.count > 1 => format!(
            "{}{unit} ({}–{}, n={})",
            number(s.median, decimals),
            number(s.min, decimals),
            number(s.max, decimals),
            s.count
        ),
        Some(s) => format!("{}{unit} (n=1)", number(s.median, decimals)),
        None => failures(results, key).map_or_else(|| "—".to_owned(), |f| format!("_{f}_")),
    }
}

/// `measured / baseline` of the medians.
pub(crate) fn ratio(
    results: &Results,
    (key, name): (&str, &str),
    (base_key, base): (&str, &str),
) -> Option<f64> {
    let measured = figure(results, key, name)?.median;
    let baseline = figure(results, base_key, base)?.median;
    (baseline != 0.0).then(|| measured / baseline)
}

pub(crate) fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "no figure",
    }
}

pub(crate) struct Table {
    pub(crate) text: String,
}

impl Table {
    pub(crate) fn new(headers: &[&str]) -> Self {
        let mut text = format!("| {} |\n", headers.join(" | "));
        let _ = writeln!(text, "|{}", "---|".repeat(headers.len()));
        Self { text }
    }

    pub(crate) fn row(&mut self, cells: &[String]) {
        let _ = writeln!(self.text, "| {} |", cells.join(" | "));
    }
}
