//! Expressions over a shared record's holder entries, and the record's expiry that they
//! (with its marks and line) decide.

use mongodb::bson::{Bson, Document, doc};

use crate::store::mongo::expression::field;
use crate::store::mongo::fields::{
    ACCESS, EXPIRES_AT, HOLDERS, READERS_TURN_UNTIL, READERS_WAITING_UNTIL, WRITER_WAITING_UNTIL,
};
use crate::store::mongo::line;

/// The variable a holder entry is bound to inside `$filter` and `$map`.
pub(super) const ENTRY: &str = "entry";

/// `"$$entry.field"`: a field of the holder entry bound by `$filter` or `$map`.
pub(super) fn entry_field(name: &str) -> String {
    format!("$${ENTRY}.{name}")
}

/// The record's holder entries, an empty list when it has none yet.
pub(super) fn holders() -> Document {
    doc! { "$ifNull": [field(HOLDERS), []] }
}

/// The holder entries for which `keep` (an expression on `$$entry`) is true.
pub(super) fn holders_where(keep: impl Into<Bson>) -> Document {
    doc! { "$filter": { "input": holders(), "as": ENTRY, "cond": keep.into() } }
}

/// The holder entries for which `keep` is true, on a record known to have a holder list
/// (an earlier stage set it, or the filter matched an entry): without `holders`' `$ifNull`,
/// which costs the server on every command it is in.
pub(super) fn listed_holders_where(keep: impl Into<Bson>) -> Document {
    doc! { "$filter": { "input": field(HOLDERS), "as": ENTRY, "cond": keep.into() } }
}

/// The holder entries unexpired by the server's clock.
pub(super) fn unexpired_holders() -> Document {
    holders_where(doc! { "$gt": [entry_field(EXPIRES_AT), "$$NOW"] })
}

/// How many holder entries have `access`, once an earlier stage has set the holders.
pub(super) fn count_with_access(access: &str) -> Document {
    doc! { "$size": listed_holders_where(doc! { "$eq": [entry_field(ACCESS), access] }) }
}

/// A shared record's `expiresAt`: the latest of its holders' expiries, its live waiting
/// marks, the server's now and (`keep_line`: arrival order) the end of its line's last place,
/// so the TTL index deletes a record only once nobody holds it, nobody's mark is on and
/// nobody waits in its line (never the record of a lock in use).
pub(super) fn record_expiry(keep_line: bool) -> Document {
    // Every stage before this one set the holders (an array), and `$max` skips a mark that
    // is null or missing; the holders' `$$NOW` keeps the result a date.
    let latest_holder = doc! { "$reduce": {
        "input": field(HOLDERS),
        "initialValue": "$$NOW",
        "in": { "$max": ["$$value", "$$this.expiresAt"] },
    } };
    let mut latest = vec![
        Bson::from(latest_holder),
        field(WRITER_WAITING_UNTIL).into(),
        field(READERS_WAITING_UNTIL).into(),
        field(READERS_TURN_UNTIL).into(),
    ];
    if keep_line {
        latest.push(line::now_or_last_place_end().into());
    }
    doc! { "$max": latest }
}
