//! [`MongoStore`]'s releases: a batch's mutex keys and shared keys in one `update` each, and
//! the read-back of the batch's traces when the counts leave an answer open.

use std::collections::HashSet;

use mongodb::bson::{Bson, doc};
use mongodb::options::ReturnDocument;

use super::pipeline;
use super::pipeline::release::Released;
use super::{MongoStore, document, errors, fields};
use crate::error::StoreError;
#[cfg(doc)]
use crate::store::LockStore;
use crate::store::{LeaseId, LeaseKey, ReleaseOutcome};

impl MongoStore {
    /// [`LockStore::release`] on this store: the round trips the impl's documentation describes.
    pub(super) async fn release_lease(&self, key: &LeaseKey) -> Result<ReleaseOutcome, StoreError> {
        let lease = document::lease_value(key.lease);
        let (filter, update) = if key.shared {
            (
                pipeline::filter::by_holder(&key.name, &lease),
                pipeline::release::shared_release(
                    std::slice::from_ref(&lease),
                    None,
                    key.in_arrival_order,
                    Released::of([key]),
                ),
            )
        } else {
            (
                pipeline::filter::by_owner(&key.name, &lease),
                pipeline::release::release(key.in_arrival_order),
            )
        };
        let after = self
            .collection
            .find_one_and_update(filter, update)
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("release (findAndModify)", error))?;
        Ok(document::release_outcome(after))
    }

    /// [`LockStore::release_many`] on this store: the round trips the impl's documentation
    /// describes.
    pub(super) async fn release_leases(
        &self,
        keys: &[LeaseKey],
    ) -> Vec<Result<ReleaseOutcome, StoreError>> {
        if let [key] = keys {
            return vec![self.release_lease(key).await];
        }
        if keys.is_empty() {
            return Vec::new();
        }
        let batch = document::lease_value(LeaseId::new());
        let (shared, mutexes): (Vec<&LeaseKey>, Vec<&LeaseKey>) =
            keys.iter().partition(|key| key.shared);
        // `Ok(true)`: every key of that update was released (or it had none).
        let (shared_done, mutexes_done) = futures::join!(
            async {
                if shared.is_empty() {
                    return Ok(true);
                }
                self.release_shared(&shared, &batch).await
            },
            async {
                if mutexes.is_empty() {
                    return Ok(true);
                }
                self.release_mutexes(&mutexes, &batch).await
            },
        );
        let released = if matches!(shared_done, Ok(false)) || matches!(mutexes_done, Ok(false)) {
            let names: Vec<&str> = keys.iter().map(|key| key.name.as_str()).collect();
            Some(self.released_in_batch(&names, &batch).await)
        } else {
            None
        };
        keys.iter()
            .map(|key| {
                let done = if key.shared {
                    &shared_done
                } else {
                    &mutexes_done
                };
                match (done, &released) {
                    (Err(error), _) => Err(error.clone()),
                    (Ok(true), _) => Ok(ReleaseOutcome::Released {
                        contended_for: None,
                    }),
                    (Ok(false), Some(Ok(released))) if released.contains(&key.lease) => {
                        Ok(ReleaseOutcome::Released {
                            contended_for: None,
                        })
                    }
                    (Ok(false), Some(Ok(_))) => Ok(ReleaseOutcome::NotOwner),
                    (Ok(false), Some(Err(error))) => Err(error.clone()),
                    (Ok(false), None) => Ok(ReleaseOutcome::NotOwner),
                }
            })
            .collect()
    }

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
        let (names, leases) = names_and_leases(keys);
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
        let (names, leases) = names_and_leases(keys);
        let distinct: HashSet<&str> = names.iter().copied().collect();
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

/// The names of `keys` and their leases as stored, in the keys' order: what a batch's
/// filter matches.
fn names_and_leases<'a>(keys: &[&'a LeaseKey]) -> (Vec<&'a str>, Vec<Bson>) {
    let names = keys.iter().map(|key| key.name.as_str()).collect();
    let leases = keys
        .iter()
        .map(|key| document::lease_value(key.lease))
        .collect();
    (names, leases)
}
