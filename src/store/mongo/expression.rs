//! Helpers that build the aggregation expressions every pipeline is written in: a value
//! taken literally, a field reference, and times counted from the server's `$$NOW`.
//!
//! SecantusDB (the test server) rejects `$add`/`$subtract` on dates, so dates are only built
//! with `$dateAdd` and turned into numbers with `$toLong` before any arithmetic.

use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};

use crate::store::request::wait_length;

pub(super) fn literal(value: Bson) -> Bson {
    // Rule 4: a caller's value is never read as a field path or an operator.
    Bson::Document(doc! { "$literal": value })
}

/// `"$field"`: a reference to a field of the document being updated.
pub(super) fn field(name: &str) -> String {
    format!("${name}")
}

/// A duration in whole milliseconds, rounded up.
pub(super) fn duration_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX)
}

/// The lease length in whole milliseconds, rounded up so a sub-millisecond expiry still
/// lasts a moment.
pub(super) fn expiry_ms(expiry: Duration) -> i64 {
    duration_ms(expiry).max(1)
}

/// `$$NOW + expiry`.
pub(super) fn expires_from_now(expiry: Duration) -> Document {
    doc! {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": expiry_ms(expiry) }
    }
}

/// `$$NOW + duration`, to the millisecond (rounded up).
pub(super) fn now_plus(duration: Duration) -> Document {
    doc! {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": duration_ms(duration) }
    }
}

/// `$$NOW − waited`: when a requester started waiting, by the server's clock (`$$NOW`
/// itself for a first attempt, which waited for nothing: the smaller command costs the
/// server less).
pub(super) fn waiting_since(waited: Duration) -> Bson {
    let waited_ms = duration_ms(wait_length(waited));
    if waited_ms == 0 {
        return "$$NOW".into();
    }
    doc! {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": -waited_ms }
    }
    .into()
}

/// Whether the date in `name` is still ahead of the server's clock: false when unset, as a
/// missing or null value sorts below every date (BSON comparison order). No `$ifNull`: every
/// expression in a pipeline costs the server on each command it is in, evaluated or not.
pub(super) fn live(name: &str) -> Document {
    doc! { "$gt": [field(name), "$$NOW"] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rounds_up_to_a_millisecond() {
        assert_eq!(expiry_ms(Duration::from_micros(1)), 1);
        assert_eq!(expiry_ms(Duration::from_micros(1500)), 2);
        assert_eq!(expiry_ms(Duration::from_secs(30)), 30_000);
        assert_eq!(expiry_ms(Duration::MAX), i64::MAX);
    }
}
