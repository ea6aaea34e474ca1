//! The fencing token a grant takes, and the block it reserves, computed from the last one
//! recorded and the server's clock.

use mongodb::bson::{Document, doc};

use crate::store::TOKENS_PER_GRANT;
use crate::store::mongo::fields::TOKEN;

/// How many fencing tokens fit in one millisecond of server time before tokens run ahead of
/// the clock (see the module documentation of [`crate::store::mongo`]).
pub(in crate::store::mongo) const TOKENS_PER_MS: i64 = 1000;

/// The next grant's token: max(previous reserved + 1, server ms × 1000), so it is past every
/// token reserved before, also after the document is deleted. A new document has no token:
/// `$toLong` and `$add` of a missing value give null, which `$max` skips.
pub(super) fn next_token() -> Document {
    // Rules 1 and 6.
    doc! {
        "$max": [
            { "$add": [{ "$toLong": format!("${TOKEN}") }, 1_i64] },
            { "$multiply": [{ "$toLong": "$$NOW" }, TOKENS_PER_MS] },
        ]
    }
}

/// The last token of the next grant's block (see [`TOKENS_PER_GRANT`]).
pub(super) fn next_reserved_until() -> Document {
    // Rule 6.
    let after_first = i64::try_from(TOKENS_PER_GRANT - 1).unwrap_or(0);
    doc! { "$add": [next_token(), after_first] }
}
