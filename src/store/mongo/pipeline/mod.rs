//! The queries and update pipelines, one file per store operation. Every time value comes from the
//! server's `$$NOW`; every caller-supplied string inside an aggregation expression is wrapped
//! in `$literal`, and query filters only compare values, so no lock name or holder id can be
//! read as a field path or an operator.
//!
//! A mutex's document has no `kind`; a shared record's (a semaphore's or a reader/writer
//! lock's) has one. A mutex attempt finds its document by the `_id` equality alone, which the
//! server answers by its fast `_id` path (`IDHACK`, no query planning): naming `kind:
//! {$exists: false}` in the filter cost about 6 % more server CPU per uncontended cycle on the
//! test server. Its pipeline tests the kind instead and leaves a shared record exactly as it
//! was, so the answer is that record and tells the mismatch in the same round trip. Every
//! shared operation's filter names the kind (and a semaphore's count): a request of another
//! kind matches nothing, its upsert fails on the unique `_id` (writing nothing) and the store
//! reads the record to report the mismatch. (Moving that test into the shared pipeline too
//! was measured: guarding each of its fields cost what the fast path saved.)
//!
//! | file | holds |
//! |---|---|
//! | `filter.rs` | the query filters: by name, by owner, by kind |
//! | `acquire.rs` | an attempt: a mutex's, and a shared record's grant rules (rules 8 to 10, 16) |
//! | `release.rs` | a release, forced or not, and the readers' turn a write's release begins |
//! | `hand_over.rs` | a hand-over to a waiter of the same manager |
//! | `extend.rs` | a renewal, one lease or a batch, and its read-back |
//! | `permits.rs` | `set_permits` |
//! | `read.rs` | the aggregations that only read |
//! | `holders.rs` | expressions over a shared record's holder entries, below the files above |
//! | `token.rs` | the next fencing token and its block, below the files above |
//! | `tests.rs` | their unit tests |

pub(super) mod acquire;
pub(super) mod extend;
pub(super) mod filter;
pub(super) mod hand_over;
mod holders;
pub(super) mod permits;
pub(super) mod read;
pub(super) mod release;
mod token;

#[cfg(test)]
mod tests;
