//! [`MongoStore`]'s renewals: one lease or a batch, mutex leases and shared places in one
//! `update` each, the read-back when the counts leave an answer open, and the traces that
//! tell a forced release from another loss.

use std::collections::HashSet;

use mongodb::bson::{Bson, Document, doc};

use super::pipeline;
use super::{MongoStore, document, errors, fields};
use crate::error::StoreError;
#[cfg(doc)]
use crate::store::LockStore;
use crate::store::{ExtendOutcome, ExtendRequest, LeaseId, check_lease_length};

impl MongoStore {
    /// [`LockStore::extend_many`] on this store: the round trips the impl's documentation
    /// describes.
    pub(super) async fn extend_leases(
        &self,
        requests: &[ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let Some(first) = requests.first() else {
            return Vec::new();
        };
        if let Err(refused) = check_lease_length(first.lease_duration) {
            return vec![Err(refused); requests.len()];
        }
        let one_expiry = requests
            .iter()
            .all(|r| r.lease_duration == first.lease_duration);
        let all: Vec<&ExtendRequest> = requests.iter().collect();
        if requests.len() == 1 || !one_expiry {
            let mut results = Vec::with_capacity(requests.len());
            for request in requests {
                results.push(self.extend_one(request).await);
            }
            return self.name_forced_releases(&all, results).await;
        }
        let (shared, mutexes): (Vec<&ExtendRequest>, Vec<&ExtendRequest>) =
            requests.iter().partition(|r| r.key.shared);
        let (shared_results, mutex_results) =
            futures::join!(self.extend_shared(&shared), self.extend_mutexes(&mutexes));
        let (mut shared_results, mut mutex_results) =
            (shared_results.into_iter(), mutex_results.into_iter());
        let results = requests
            .iter()
            .map(|r| {
                let next = if r.key.shared {
                    shared_results.next()
                } else {
                    mutex_results.next()
                };
                next.unwrap_or(Ok(ExtendOutcome::NotOwner))
            })
            .collect();
        self.name_forced_releases(&all, results).await
    }

    /// One lease's renewal, a forced release not yet told apart from other losses.
    pub(super) async fn extend_one(
        &self,
        request: &ExtendRequest,
    ) -> Result<ExtendOutcome, StoreError> {
        check_lease_length(request.lease_duration)?;
        if request.key.shared {
            return self
                .extend_shared(&[request])
                .await
                .pop()
                .unwrap_or(Ok(ExtendOutcome::NotOwner));
        }
        self.extend_mutex(request).await
    }

    /// One mutex lease's renewal: the batch's decision for a batch of one.
    async fn extend_mutex(&self, request: &ExtendRequest) -> Result<ExtendOutcome, StoreError> {
        self.extend_mutexes(&[request])
            .await
            .pop()
            .unwrap_or(Ok(ExtendOutcome::NotOwner))
    }

    /// Extends mutex leases, all with one expiry: one `update` for the batch (one
    /// `updateOne` for a single lease), plus one `aggregate` when some lease was matched but
    /// not modified.
    ///
    /// MongoDB counts only the documents an update changed. An expired lease matches the
    /// owner check but is left as it is; so is a lease renewed in the same server millisecond
    /// as its last write (`$$NOW + lease` is the expiry it already has). Only then is a second
    /// round trip needed, to tell the two apart. One lease and many take the same decision,
    /// so the batch with one lease named twice (one statement, one `$$NOW`, one document
    /// modified) exercises the same-millisecond answer deterministically.
    pub(super) async fn extend_mutexes(
        &self,
        requests: &[&ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let Some(first) = requests.first() else {
            return Vec::new();
        };
        let names: Vec<&str> = requests.iter().map(|r| r.key.name.as_str()).collect();
        let leases: Vec<_> = requests
            .iter()
            .map(|r| document::lease_value(r.key.lease))
            .collect();
        let failed = |error| vec![Err(error); requests.len()];
        let update = pipeline::extend::extend(first.lease_duration);
        let updated = match requests {
            [single] => {
                self.collection
                    .update_one(
                        pipeline::filter::by_owner(&single.key.name, &leases[0]),
                        update,
                    )
                    .await
            }
            _ => {
                self.collection
                    .update_many(pipeline::filter::by_leases(&names, &leases), update)
                    .await
            }
        };
        let result = match updated {
            Ok(result) => result,
            Err(error) => return failed(errors::backend("extend (update)", error)),
        };
        if usize::try_from(result.modified_count).is_ok_and(|modified| modified == requests.len()) {
            return vec![Ok(ExtendOutcome::Extended); requests.len()];
        }
        if result.matched_count == 0 {
            return vec![Ok(ExtendOutcome::NotOwner); requests.len()];
        }
        match self.held_leases(&names, &leases).await {
            Ok(held) => outcomes_by_lease(requests, &held),
            Err(error) => failed(error),
        }
    }

    /// Extends places in shared records, all with one expiry: one `update` that changes a
    /// record only if every lease of the batch in it still holds (so a modified count equal
    /// to the number of records means every lease was extended). Otherwise — a place was
    /// lost, or renewed in the same server millisecond as its last write — a second `update`
    /// extends each place that still holds and one `aggregate` says which those are.
    pub(super) async fn extend_shared(
        &self,
        requests: &[&ExtendRequest],
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let Some(first) = requests.first() else {
            return Vec::new();
        };
        let batch = pipeline::extend::LeasesByRecord::group(
            requests
                .iter()
                .map(|r| (r.key.name.as_str(), document::lease_value(r.key.lease))),
        );
        let failed = |error| vec![Err(error); requests.len()];
        let every_lease = self
            .update_records(
                &batch,
                pipeline::extend::shared_extend(&batch, first.lease_duration, true),
            )
            .await;
        match every_lease {
            Ok(result) if result.matched_count == 0 => {
                return vec![Ok(ExtendOutcome::NotOwner); requests.len()];
            }
            Ok(result)
                if usize::try_from(result.modified_count)
                    .is_ok_and(|modified| modified == batch.records()) =>
            {
                return vec![Ok(ExtendOutcome::Extended); requests.len()];
            }
            Ok(_) => {}
            Err(error) => return failed(error),
        }
        let each_held = self
            .update_records(
                &batch,
                pipeline::extend::shared_extend(&batch, first.lease_duration, false),
            )
            .await;
        if let Err(error) = each_held {
            return failed(error);
        }
        match self.held_shared_leases(&batch).await {
            Ok(held) => outcomes_by_lease(requests, &held),
            Err(error) => failed(error),
        }
    }

    /// Applies `update` to the records of `batch`: `updateOne` for one record, else `update`
    /// with `multi`.
    async fn update_records(
        &self,
        batch: &pipeline::extend::LeasesByRecord<'_>,
        update: Vec<Document>,
    ) -> Result<mongodb::results::UpdateResult, StoreError> {
        let updated = if batch.records() == 1 {
            self.collection.update_one(batch.filter(), update).await
        } else {
            self.collection.update_many(batch.filter(), update).await
        };
        updated.map_err(|error| errors::backend("extend (update shared)", error))
    }

    /// Which of `leases` (of `names`) hold an unexpired lock now, by the server's clock.
    async fn held_leases(
        &self,
        names: &[&str],
        leases: &[Bson],
    ) -> Result<HashSet<LeaseId>, StoreError> {
        let pipeline = vec![
            doc! { "$match": pipeline::filter::by_leases(names, leases) },
            pipeline::filter::unexpired(),
            doc! { "$project": { fields::LEASE_ID: 1 } },
        ];
        self.leases_found(pipeline, "extend (aggregate held leases)", |found| {
            document::lease_of(found)
        })
        .await
    }

    /// Which leases of `batch` hold an unexpired place in their shared records now, by the
    /// server's clock (one `aggregate`).
    async fn held_shared_leases(
        &self,
        batch: &pipeline::extend::LeasesByRecord<'_>,
    ) -> Result<HashSet<LeaseId>, StoreError> {
        self.leases_found(
            pipeline::extend::held_shared_leases(batch),
            "extend (aggregate held places)",
            |found| document::leases_in(found, fields::RELEASED_LEASES),
        )
        .await
    }

    /// `outcomes` (one per request) with each lease gone that an operator's forced release
    /// cleared answered [`ExtendOutcome::ForceReleased`], by the trace the release left (one
    /// `aggregate`, only when some lease is gone). The lease is lost either way: when the
    /// trace cannot be read, the answer stays `NotOwner`.
    pub(super) async fn name_forced_releases(
        &self,
        requests: &[&ExtendRequest],
        mut outcomes: Vec<Result<ExtendOutcome, StoreError>>,
    ) -> Vec<Result<ExtendOutcome, StoreError>> {
        let gone: Vec<&str> = requests
            .iter()
            .zip(&outcomes)
            .filter(|(_, outcome)| matches!(outcome, Ok(ExtendOutcome::NotOwner)))
            .map(|(request, _)| request.key.name.as_str())
            .collect();
        if gone.is_empty() {
            return outcomes;
        }
        let forced = match self
            .leases_found(
                pipeline::read::forced_releases(&gone),
                "extend (aggregate forced releases)",
                document::forced_leases,
            )
            .await
        {
            Ok(forced) => forced,
            Err(error) => {
                tracing::debug!(%error, "could not read the traces of forced releases");
                return outcomes;
            }
        };
        for (request, outcome) in requests.iter().zip(&mut outcomes) {
            if matches!(outcome, Ok(ExtendOutcome::NotOwner)) && forced.contains(&request.key.lease)
            {
                *outcome = Ok(ExtendOutcome::ForceReleased);
            }
        }
        outcomes
    }
}

/// Each request's answer from the set of leases found still held.
fn outcomes_by_lease(
    requests: &[&ExtendRequest],
    held: &HashSet<LeaseId>,
) -> Vec<Result<ExtendOutcome, StoreError>> {
    requests
        .iter()
        .map(|r| {
            Ok(if held.contains(&r.key.lease) {
                ExtendOutcome::Extended
            } else {
                ExtendOutcome::NotOwner
            })
        })
        .collect()
}
