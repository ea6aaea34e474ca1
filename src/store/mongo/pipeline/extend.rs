//! The update pipelines of a renewal: a mutex lease's (`extend`) and a batch of places in
//! shared records (`shared_extend`), and the aggregation that reads back which places hold.

use std::collections::HashMap;
use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};

use super::holders::{ENTRY, entry_field, holders, holders_where};
use crate::store::mongo::expression::{expires_from_now, field, literal};
use crate::store::mongo::fields::{
    EXPIRES_AT, EXTENDED, HOLDERS, ID, KIND, LEASE, OWN_LEASES, RELEASED_LEASES,
};

/// Pushes the expiry of an unexpired lease to `$$NOW + expiry`; an expired one is left as it
/// is — not modified, which is how the caller learns it was lost.
pub(in crate::store::mongo) fn extend(expiry: Duration) -> Vec<Document> {
    // Rule 2: an expired lease is left as it was.
    let expires_at = format!("${EXPIRES_AT}");
    vec![doc! { "$set": { EXPIRES_AT: { "$cond": [
        { "$gt": [&expires_at, "$$NOW"] },
        expires_from_now(expiry),
        &expires_at,
    ] } } }]
}

/// Extends the places of `batch` in their shared records, all to `$$NOW + expiry`. Each
/// record's entries are tested against its own leases only (see [`LeasesByRecord`]).
///
/// `all_or_none`: a record is changed only if every one of its leases in the batch still
/// holds an unexpired place, so an `update` whose modified count equals the number of
/// records extended every lease, with no read-back. Otherwise each held place is extended
/// whatever happened to the others, and only a read-back can say which. A record none of
/// whose entries it extends is left exactly as it was: not modified.
pub(in crate::store::mongo) fn shared_extend(
    batch: &LeasesByRecord<'_>,
    expiry: Duration,
    all_or_none: bool,
) -> Vec<Document> {
    // Rule 2: only unexpired places of the batch's own leases.
    let held = Bson::Document(doc! { "$size": holders_where(own_held_entry()) });
    let extending = if all_or_none {
        Bson::Document(
            doc! { "$cond": [{ "$eq": [held.clone(), { "$size": field(OWN_LEASES) }] }, held, 0] },
        )
    } else {
        held
    };
    let extended =
        doc! { "$mergeObjects": [format!("$${ENTRY}"), { EXPIRES_AT: expires_from_now(expiry) }] };
    vec![
        own_leases_stage(batch),
        doc! { "$set": { EXTENDED: extending } },
        doc! { "$set": {
            HOLDERS: { "$map": {
                "input": holders(),
                "as": ENTRY,
                "in": { "$cond": [
                    { "$and": [{ "$gt": [field(EXTENDED), 0] }, own_held_entry()] },
                    extended,
                    format!("$${ENTRY}"),
                ] },
            } },
            EXPIRES_AT: { "$cond": [
                { "$gt": [field(EXTENDED), 0] },
                { "$max": [field(EXPIRES_AT), expires_from_now(expiry)] },
                field(EXPIRES_AT),
            ] },
        } },
        doc! { "$unset": [EXTENDED, OWN_LEASES] },
    ]
}

/// The leases of a batch (a renewal, its read-back) grouped by the shared record that holds
/// them: `leases[i]` are the leases of `names[i]`, names distinct, in first-seen order.
///
/// A pipeline over the batch gives each record its own list, found by its `_id`, and tests
/// the record's entries against that list alone. Tested against the whole batch's leases
/// instead, each entry costs an `$in` over the batch (which servers scan element by
/// element), and the cost per lease grows with the batch: on the test server 26 µs per lease
/// at 100 leases, 119 µs at 2,000.
#[derive(Debug, Default)]
pub(in crate::store::mongo) struct LeasesByRecord<'a> {
    names: Vec<&'a str>,
    leases: Vec<Vec<Bson>>,
}

impl<'a> LeasesByRecord<'a> {
    /// Groups `(name, lease)` pairs by name.
    pub(in crate::store::mongo) fn group(pairs: impl IntoIterator<Item = (&'a str, Bson)>) -> Self {
        let mut batch = Self::default();
        let mut index = HashMap::new();
        for (name, lease) in pairs {
            let at = *index.entry(name).or_insert_with(|| {
                batch.names.push(name);
                batch.leases.push(Vec::new());
                batch.names.len() - 1
            });
            batch.leases[at].push(lease);
        }
        batch
    }

    /// How many records the batch names.
    pub(in crate::store::mongo) fn records(&self) -> usize {
        self.names.len()
    }

    /// `{_id: {$in: names}, kind: {$exists: true}}`: the shared records of the names (found
    /// by the `_id` index; a mutex of one of the names has no holders to extend); which of
    /// their entries are the batch's is the pipeline's to decide.
    pub(in crate::store::mongo) fn filter(&self) -> Document {
        doc! { ID: { "$in": &self.names }, KIND: { "$exists": true } }
    }
}

/// Sets the temporary `OWN_LEASES` field to the record's own leases in `batch`. The record's
/// `_id` is always among the batch's names (every pipeline over a batch matches by
/// [`LeasesByRecord::filter`]), so the index found is never -1.
fn own_leases_stage(batch: &LeasesByRecord<'_>) -> Document {
    let names: Vec<Bson> = batch.names.iter().map(|&name| name.into()).collect();
    let leases: Vec<Bson> = batch.leases.iter().cloned().map(Bson::Array).collect();
    doc! { "$set": { OWN_LEASES: { "$arrayElemAt": [
        literal(Bson::Array(leases)),
        { "$indexOfArray": [literal(Bson::Array(names)), field(ID)] },
    ] } } }
}

/// Whether the holder entry bound to `$$entry` is one of the record's own leases of the
/// batch and unexpired by the server's clock.
fn own_held_entry() -> Document {
    doc! { "$and": [
        { "$in": [entry_field(LEASE), field(OWN_LEASES)] },
        { "$gt": [entry_field(EXPIRES_AT), "$$NOW"] },
    ] }
}

/// The aggregation that tells which leases of `batch` still hold an unexpired place in
/// their shared records: one document per record, with the held ones in `leases`.
pub(in crate::store::mongo) fn held_shared_leases(batch: &LeasesByRecord<'_>) -> Vec<Document> {
    vec![
        doc! { "$match": batch.filter() },
        own_leases_stage(batch),
        doc! { "$project": { RELEASED_LEASES: {
            "$map": {
                "input": holders_where(own_held_entry()),
                "as": ENTRY,
                "in": entry_field(LEASE),
            },
        } } },
    ]
}
