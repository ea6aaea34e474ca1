//! A withdrawal ([`LockStore::withdraw`](crate::store::LockStore::withdraw)): a manager
//! whose waiters for a lock all gave up takes off its document what it left there for them
//! — its place in the line (arrival order) and its writers' mark (a reader/writer lock in
//! the default mode) — so that the managers it held back need not wait for either to end,
//! and stamps `withdrawnAt`, which the release feed reports as it does a release: those it
//! held back try again at once.
//!
//! One `updateOne` whose filter matches only a document carrying something of the
//! manager's; every field it rewrites stays missing on a document that had none.

use mongodb::bson::{Bson, Document, doc};

use super::fields::{HOLDER, WITHDRAWN_AT, WRITER_WAITING_UNTIL, WRITERS_MARKED_BY};
use super::line::{self, LINE};
use super::writers_marks;
use crate::store::request::HolderId;

/// The document of `name` with a place or a writers' mark of `holder`.
pub(super) fn filter(name: &str, holder: &HolderId) -> Document {
    doc! { "_id": name, "$or": [
        { format!("{LINE}.{HOLDER}"): holder.as_str() },
        { format!("{WRITERS_MARKED_BY}.{HOLDER}"): holder.as_str() },
    ] }
}

/// The document without `holder`'s place and mark (nor any that ended), the writers'
/// waiting mark moved back to the latest of the marks left, and `withdrawnAt` stamped.
pub(super) fn update(holder: &HolderId) -> Vec<Document> {
    let holder = holder.as_str();
    // Rules 20 and 11: the place and the writers' mark go; `withdrawnAt` tells the feeds (rule 22).
    let (marks, writer_waiting_until) = writers_marks::without(holder);
    vec![doc! { "$set": {
        LINE: where_array(LINE, line::others_in_line(holder).into()),
        WRITERS_MARKED_BY: where_array(WRITERS_MARKED_BY, marks),
        WRITER_WAITING_UNTIL: { "$cond": [
            { "$isArray": format!("${WRITERS_MARKED_BY}") },
            writer_waiting_until,
            format!("${WRITER_WAITING_UNTIL}"),
        ] },
        WITHDRAWN_AT: "$$NOW",
    } }]
}

/// `value` where the document has the array `field`; otherwise the field stays missing.
fn where_array(field: &str, value: Bson) -> Document {
    doc! { "$cond": [{ "$isArray": format!("${field}") }, value, "$$REMOVE"] }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mongo::expression::literal;

    #[test]
    fn a_holder_id_is_a_value_in_the_filter() {
        let holder = HolderId::from_string("$where".to_owned());
        let filter = filter("$gt", &holder);
        assert_eq!(filter.get_str("_id").ok(), Some("$gt"));
        let text = filter.to_string();
        assert!(text.contains("\"line.holder\": \"$where\""), "{text}");
        // The update compares holders as literals, never as field paths.
        let update = format!("{:?}", update(&holder));
        assert!(
            update.contains(&format!("{:?}", literal("$where".into()))),
            "{update}"
        );
    }
}
