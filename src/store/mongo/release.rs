//! [`MongoStore`]'s releases: a batch's mutex keys and shared keys in one `update` each, and
//! the read-back of the batch's traces when the counts leave an answer open.

use std::collections::HashSet;

use mongodb::bson::{Bson, doc};

use super::pipeline;
use super::pipeline::release::Released;
use super::{MongoStore, document, errors, fields};
use crate::error::StoreError;
use crate::store::{LeaseId, LeaseKey};

impl MongoStore {
    /// Whether a release of `keys` keeps each record while a place in its line lasts: when
    /// any of them was granted in arrival order (one update serves them all).
    fn keeps_a_line(keys: &[&LeaseKey]) -> bool {
        keys.iter().any(|key| key.in_arrival_order)
    }

    /// Releases mutex leases in one `update` that records the batch on each document it
    /// releases; `true` when the modified count says every key matched (each released).
    pub(super) async fn release_mutexes(
        &self,
        keys: &[&LeaseKey],
        batch: &Bson,
    ) -> Result<bool, StoreError> {
        let names: Vec<&str> = keys.iter().map(|key| key.name.as_str()).collect();
        let leases: Vec<_> = keys
            .iter()
            .map(|key| document::lease_value(key.lease))
            .collect();
        let result = self
            .collection
            .update_many(
                pipeline::filter::by_leases(&names, &leases),
                pipeline::release::release_traced(batch, Self::keeps_a_line(keys)),
            )
            .await
            .map_err(|error| errors::backend("release many (update)", error))?;
        Ok(usize::try_from(result.modified_count).is_ok_and(|released| released == keys.len()))
    }

    /// Releases places in shared records in one `update` that records the batch and the
    /// leases it released on each record; `true` when the counts say every key matched
    /// (each name once, every record modified).
    pub(super) async fn release_shared(
        &self,
        keys: &[&LeaseKey],
        batch: &Bson,
    ) -> Result<bool, StoreError> {
        let names: Vec<&str> = keys.iter().map(|key| key.name.as_str()).collect();
        let distinct: HashSet<&str> = names.iter().copied().collect();
        let leases: Vec<_> = keys
            .iter()
            .map(|key| document::lease_value(key.lease))
            .collect();
        let result = self
            .collection
            .update_many(
                pipeline::filter::by_holders(&names, &leases),
                pipeline::release::shared_release(
                    &leases,
                    Some(batch),
                    Self::keeps_a_line(keys),
                    Released::of(keys.iter().copied()),
                ),
            )
            .await
            .map_err(|error| errors::backend("release many (update shared)", error))?;
        Ok(distinct.len() == keys.len()
            && usize::try_from(result.modified_count).is_ok_and(|released| released == keys.len()))
    }

    /// The leases the `release_many` call `batch` released from the documents of `names`
    /// (one `aggregate`), read when its counts left some key's answer open.
    pub(super) async fn released_in_batch(
        &self,
        names: &[&str],
        batch: &Bson,
    ) -> Result<HashSet<LeaseId>, StoreError> {
        let leases_field = format!("{}.{}", fields::RELEASED, fields::RELEASED_LEASES);
        let pipeline = vec![
            doc! { "$match": pipeline::filter::released_by(names, batch) },
            doc! { "$project": { fields::RELEASED_LEASES: format!("${leases_field}") } },
        ];
        self.leases_found(pipeline, "release many (aggregate released)", |found| {
            document::leases_in(found, fields::RELEASED_LEASES)
        })
        .await
    }
}
