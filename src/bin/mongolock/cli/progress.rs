//! What `mongolock` tells the operator on stderr while it works, like `flock --verbose` or
//! `consul lock -verbose`: waiting (for whom, for how long), acquired (the token), elected
//! and deposed (why), and the library's warnings, which include renewal trouble. `-q`
//! silences all of it; `-v` adds connection steps and the library's debug events; `RUST_LOG`,
//! when set, chooses the library's events itself.
//!
//! Every line starts with `mongolock: ` so it stands out from the command's own output on a
//! shared terminal. Final errors are not progress: they are printed even with `-q`.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How much to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verbosity {
    /// `-q`: nothing but the final error.
    Quiet,
    /// The default: progress lines and the library's warnings.
    Normal,
    /// `-v`: also connection steps and the library's debug events.
    Verbose,
    /// `-vv`: every event the library emits.
    Trace,
}

impl Verbosity {
    /// From the `-q` and `-v` flags.
    pub(crate) fn from_flags(quiet: bool, verbose: u8) -> Self {
        match (quiet, verbose) {
            (true, _) => Self::Quiet,
            (false, 0) => Self::Normal,
            (false, 1) => Self::Verbose,
            (false, _) => Self::Trace,
        }
    }

    /// The library's events to show unless `RUST_LOG` says otherwise.
    fn default_filter(self) -> Option<&'static str> {
        match self {
            Self::Quiet => None,
            // A failed renewal is told by the CLI's own at-risk line (lock, time left, cause
            // in a few words); the library's per-renewal warning would repeat it, longer,
            // before it. `-v` and `RUST_LOG` show it.
            Self::Normal => Some("mongolock=warn,mongolock::lock::engine::held_lease=error"),
            Self::Verbose => Some("mongolock=debug"),
            Self::Trace => Some("mongolock=trace"),
        }
    }
}

/// Writes progress lines to stderr.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    verbosity: Verbosity,
}

impl Progress {
    /// A reporter at `verbosity`.
    pub(crate) fn new(verbosity: Verbosity) -> Self {
        Self { verbosity }
    }

    /// Whether progress lines are shown (not with `-q`): skip work that only feeds them.
    pub(crate) fn enabled(&self) -> bool {
        self.verbosity >= Verbosity::Normal
    }

    /// A progress line (not with `-q`).
    pub(crate) fn say(&self, line: impl fmt::Display) {
        if self.verbosity >= Verbosity::Normal {
            eprintln!("mongolock: {line}");
        }
    }

    /// A detail line (only with `-v`).
    pub(crate) fn detail(&self, line: impl fmt::Display) {
        if self.verbosity >= Verbosity::Verbose {
            eprintln!("mongolock: {line}");
        }
    }
}

/// Sends the library's tracing events to stderr: those `RUST_LOG` selects when it is set,
/// otherwise warnings and errors (`-v`: debug, `-vv`: all; `-q`: none).
pub(crate) fn init_tracing(verbosity: Verbosity) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::new(directives),
        _ => match verbosity.default_filter() {
            Some(directives) => EnvFilter::new(directives),
            None => return,
        },
    };
    // A second subscriber (only in tests) is not an error worth reporting.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(OneLine)
        .try_init();
}

/// `mongolock: warning: lease renewal failed; … lock=orders error=…`: the level, the message,
/// the event's fields, then the fields of the spans it happened in.
struct OneLine;

impl<S, N> FormatEvent<S, N> for OneLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(writer, "mongolock: {level}: ")?;
        context
            .field_format()
            .format_fields(writer.by_ref(), event)?;
        if let Some(scope) = context.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    write!(writer, " {fields}")?;
                }
            }
        }
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_choose_the_verbosity() {
        assert_eq!(Verbosity::from_flags(true, 0), Verbosity::Quiet);
        assert_eq!(Verbosity::from_flags(false, 0), Verbosity::Normal);
        assert_eq!(Verbosity::from_flags(false, 1), Verbosity::Verbose);
        assert_eq!(Verbosity::from_flags(false, 3), Verbosity::Trace);
        assert_eq!(Verbosity::Quiet.default_filter(), None);
        assert_eq!(
            Verbosity::Normal.default_filter(),
            Some("mongolock=warn,mongolock::lock::engine::held_lease=error")
        );
    }
}
