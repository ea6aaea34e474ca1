//! Durations on the command line: `200ms`, `15s`, `1m30s`, `2h` (humantime syntax), or a
//! bare number of seconds (`5`, `0.5`); and durations shown to people.

use std::time::Duration;

/// Parses a command-line duration: a bare number is seconds, anything else is humantime
/// syntax (`200ms`, `1m 30s`).
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration; use e.g. 500ms, 15s or 2m".to_owned());
    }
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let seconds: f64 = text
            .parse()
            .map_err(|_| format!("invalid duration {text:?}; use e.g. 500ms, 15s or 2m"))?;
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("duration {text:?} is out of range"));
    }
    humantime::parse_duration(text)
        .map_err(|error| format!("invalid duration {text:?} ({error}); use e.g. 500ms, 15s or 2m"))
}

/// Like [`parse`], rejecting zero.
pub(crate) fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        duration if duration.is_zero() => Err("the duration must be greater than zero".to_owned()),
        duration => Ok(duration),
    }
}

/// The shortest lease `run` and `elect` accept. A lease is renewed every third of it and lost
/// after two thirds without a confirmed renewal, so below this a single slow round trip to
/// MongoDB, or a busy machine, would make the lock flap.
pub(crate) const MIN_LEASE: Duration = Duration::from_secs(1);

/// Like [`parse`], for `--lease`: at least [`MIN_LEASE`], at most the library's
/// [`MAX_LEASE_DURATION`](mongolock::MAX_LEASE_DURATION) (a year), so the timings derived
/// from it never overflow.
pub(crate) fn parse_lease(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        lease if lease < MIN_LEASE => Err(format!(
            "the lease must be at least {}: it is renewed several times within it, and a shorter one would be lost to a single slow round trip to MongoDB (the default is 15s)",
            show(MIN_LEASE)
        )),
        lease if lease > mongolock::MAX_LEASE_DURATION => Err(format!(
            "the lease must be at most {} (the default is 15s)",
            show(mongolock::MAX_LEASE_DURATION)
        )),
        lease => Ok(lease),
    }
}

/// A duration for people: `850ms`, `12.3s`, `5m 3s`.
pub(crate) fn show(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{}ms", duration.as_millis())
    } else if duration < Duration::from_secs(60) && duration.subsec_millis() >= 50 {
        format!("{:.1}s", duration.as_secs_f64())
    } else if duration < Duration::from_secs(60) {
        format!("{}s", duration.as_secs())
    } else {
        humantime::format_duration(Duration::from_secs(duration.as_secs())).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds() {
        assert_eq!(parse("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse(" 0 "), Ok(Duration::ZERO));
        assert!(parse("1.2.3").is_err());
        assert!(parse("").is_err());
        assert!(parse("-1").is_err());
        assert!(parse("1e400").is_err());
    }

    #[test]
    fn units_follow_humantime() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1m 5s"), Ok(Duration::from_secs(65)));
    }

    #[test]
    fn parse_show_and_positive_examples() {
        assert_eq!(parse("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse("soon").is_err());
        assert!(parse_positive("0s").is_err());
        assert!(parse_positive("1s").is_ok());
        assert!(parse_lease("999ms").is_err());
        assert_eq!(parse_lease("365days"), Ok(mongolock::MAX_LEASE_DURATION));
        assert!(parse_lease("366days").is_err());
        assert!(parse_lease("10000000000000000000").is_err());
        assert_eq!(parse_lease("1"), Ok(MIN_LEASE));
        assert_eq!(show(Duration::from_millis(850)), "850ms");
        assert_eq!(show(Duration::from_millis(12_345)), "12.3s");
        assert_eq!(show(Duration::from_secs(2)), "2s");
        assert_eq!(show(Duration::from_secs(303)), "5m 3s");
    }
}
