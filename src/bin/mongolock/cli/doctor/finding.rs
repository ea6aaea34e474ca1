//! One finding of `mongolock doctor`: what was checked, how it stands, what was seen and how
//! to fix it; and the table and JSON they are shown as.

use serde_json::json;

/// How a finding stands, from best to worst (the exit code follows the worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    /// Fit for locks.
    Ok,
    /// Locks work, but something costs safety margin, availability or latency.
    Warning,
    /// Locks are unsafe or will not work until this is fixed.
    Problem,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warning => "warning",
            Self::Problem => "problem",
        }
    }

    /// `mongolock doctor`'s exit code for this worst finding: a warning fails (1) only when
    /// `strict`, since locks still work and stay safe with one.
    pub(crate) fn exit_code(self, strict: bool) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Warning if strict => 1,
            Self::Warning => 0,
            Self::Problem => 2,
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// What was checked (`server version`, `topology`…).
    pub(crate) check: &'static str,
    pub(crate) status: Status,
    /// What was seen, measured or concluded.
    pub(crate) seen: String,
    /// What to do about it; empty when nothing is needed.
    pub(crate) fix: String,
}

impl Finding {
    pub(crate) fn ok(check: &'static str, seen: impl Into<String>) -> Self {
        Self::new(check, Status::Ok, seen.into(), String::new())
    }

    pub(crate) fn warning(
        check: &'static str,
        seen: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(check, Status::Warning, seen.into(), fix.into())
    }

    pub(crate) fn problem(
        check: &'static str,
        seen: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(check, Status::Problem, seen.into(), fix.into())
    }

    fn new(check: &'static str, status: Status, seen: String, fix: String) -> Self {
        Self {
            check,
            status,
            seen,
            fix,
        }
    }
}

/// The worst status of `findings` (ok when there are none).
pub(crate) fn worst(findings: &[Finding]) -> Status {
    findings
        .iter()
        .map(|finding| finding.status)
        .max()
        .unwrap_or(Status::Ok)
}

/// The report as a table: one block per finding, the fix indented under it.
pub(crate) fn render_table(header: &str, findings: &[Finding]) -> String {
    let width = findings
        .iter()
        .map(|finding| finding.check.len())
        .max()
        .unwrap_or(0);
    let mut out = format!("{header}\n\n");
    for finding in findings {
        out.push_str(&format!(
            "{:<width$}  {:<7}  {}\n",
            finding.check,
            finding.status.as_str(),
            finding.seen
        ));
        if !finding.fix.is_empty() {
            out.push_str(&format!(
                "{:<width$}  {:<7}  fix: {}\n",
                "", "", finding.fix
            ));
        }
    }
    let count = |status| findings.iter().filter(|f| f.status == status).count();
    let verdict = match worst(findings) {
        Status::Ok => "fit for locks".to_owned(),
        Status::Warning => format!("fit for locks, with {} warning(s)", count(Status::Warning)),
        Status::Problem => format!(
            "NOT fit for locks: {} problem(s), {} warning(s)",
            count(Status::Problem),
            count(Status::Warning)
        ),
    };
    out.push_str(&format!("\nverdict: {verdict}\n"));
    out
}

/// The report as one JSON object.
pub(crate) fn to_json(context: serde_json::Value, findings: &[Finding]) -> serde_json::Value {
    let listed: Vec<serde_json::Value> = findings
        .iter()
        .map(|finding| {
            json!({
                "check": finding.check,
                "status": finding.status.as_str(),
                "seen": finding.seen,
                "fix": finding.fix,
            })
        })
        .collect();
    let mut report = context;
    report["findings"] = serde_json::Value::Array(listed);
    report["worst"] = json!(worst(findings).as_str());
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_finding_decides() {
        let findings = vec![
            Finding::ok("a", "fine"),
            Finding::warning("b", "meh", "do x"),
        ];
        assert_eq!(worst(&findings), Status::Warning);
        assert_eq!(worst(&findings).exit_code(false), 0);
        assert_eq!(worst(&findings).exit_code(true), 1);
        let table = render_table("head", &findings);
        assert!(table.contains("b  warning  meh\n"), "{table}");
        assert!(table.contains("fix: do x"), "{table}");
        assert!(
            table.ends_with("verdict: fit for locks, with 1 warning(s)\n"),
            "{table}"
        );
        let json = to_json(json!({ "uri": "u" }), &findings);
        assert_eq!(json["worst"], "warning");
        assert_eq!(json["findings"][1]["fix"], "do x");
        assert_eq!(worst(&[]), Status::Ok);
        assert_eq!(Status::Problem.exit_code(false), 2);
        assert_eq!(Status::Problem.exit_code(true), 2);
        assert_eq!(Status::Ok.exit_code(true), 0);
    }
}
