//! [`MongoStore`]'s attempts: a mutex's `findAndModify`, a shared record's (whose filter names
//! the kind), and what the store reads back when an upsert fails or the answer is empty.

use mongodb::options::ReturnDocument;

use super::pipeline;
use super::{MongoStore, document, errors};
use crate::error::StoreError;
use crate::kind::{Access, LockKind};
use crate::name::LockName;
#[cfg(doc)]
use crate::store::LockStore;
use crate::store::{AcquireOutcome, AcquireRequest, check_lease_length, check_permits};

impl MongoStore {
    /// [`LockStore::try_acquire`] on this store: the round trips the impl's documentation
    /// describes.
    pub(super) async fn acquire(
        &self,
        request: &AcquireRequest,
    ) -> Result<AcquireOutcome, StoreError> {
        // Rule 5.
        check_lease_length(request.lease_duration)?;
        if let Access::Permit { permits } = request.access {
            check_permits(permits)?;
        }
        if request.access.kind().is_shared() {
            return self.try_acquire_shared(request).await;
        }
        let lease = document::lease_value(request.lease);
        let returned = self
            .collection
            .find_one_and_update(
                pipeline::filter::by_name(&request.name),
                pipeline::acquire::acquire(
                    &lease,
                    request.holder.as_str(),
                    request.lease_duration,
                    (request.waited, pipeline::acquire::Waits::of(request)),
                ),
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        match returned {
            // The pipeline leaves a shared record as it was; the answer is that record.
            Ok(Some(record)) => match document::record_kind(&record)? {
                LockKind::Mutex => {
                    let listed = (!request.retry_within.is_zero())
                        .then(|| (request.holder.as_str(), request.retry_within));
                    document::acquire_outcome(Some(record), request.lease, listed)
                }
                // Rule 7: a mutex request on a shared record is a mismatch.
                found => Err(document::kind_mismatch(
                    &request.name,
                    found,
                    LockKind::Mutex,
                )),
            },
            Ok(None) => document::acquire_outcome(None, request.lease, None),
            // Two first acquisitions raced to insert the document; the other one won.
            Err(error) if errors::is_duplicate_key(&error) => Ok(AcquireOutcome::busy(None)),
            Err(error) => Err(errors::backend("acquire (findAndModify)", error)),
        }
    }

    /// `try_acquire` of a shared kind: one `findAndModify` (upsert) whose filter names the
    /// kind (and a semaphore's count); on a duplicate `_id`, one read tells a kind mismatch
    /// from a racing first grant, which is retried once; on an empty answer (a test-server
    /// divergence), one read says whether the grant was applied.
    pub(super) async fn try_acquire_shared(
        &self,
        request: &AcquireRequest,
    ) -> Result<AcquireOutcome, StoreError> {
        let lease = document::lease_value(request.lease);
        let readers_of = (request.in_arrival_order && request.access == Access::Read)
            .then_some(request.holder.as_str());
        // Refused in line, the place's end carries the server's clock.
        let placed = (request.in_arrival_order && !request.retry_within.is_zero())
            .then(|| (request.holder.as_str(), request.retry_within));
        for _ in 0..2 {
            let returned = self
                .collection
                .find_one_and_update(
                    pipeline::filter::shared_by_kind(&request.name, request.access),
                    pipeline::acquire::shared_acquire(
                        request.access,
                        &lease,
                        request.holder.as_str(),
                        request.lease_duration,
                        (
                            request.waited,
                            request.retry_within,
                            request.in_arrival_order,
                        ),
                    ),
                )
                .upsert(true)
                .return_document(ReturnDocument::After)
                .await;
            match returned {
                Ok(Some(returned)) => {
                    return document::shared_acquire_outcome(
                        Some(returned),
                        request.lease,
                        (readers_of, placed),
                    );
                }
                // MongoDB always returns the upserted or updated document here. The test
                // server, under racing first grants, has answered with none after applying
                // the grant: read the record back, so a place granted to us is not left
                // held by nobody who knows it.
                Ok(None) => {
                    let found = self.read_record(&request.name).await?;
                    return document::shared_acquire_outcome(
                        found,
                        request.lease,
                        (readers_of, None),
                    );
                }
                Err(error) if errors::is_duplicate_key(&error) => {
                    self.refuse_other_kind(&request.name, request.access.kind())
                        .await?;
                }
                Err(error) => return Err(errors::backend("acquire (findAndModify)", error)),
            }
        }
        Ok(AcquireOutcome::busy(None))
    }

    /// After an upsert for `asked` on `name` failed on the unique `_id` (its filter, which
    /// names the kind, matched no document): the kind the record has, read back, if it is
    /// another kind than `asked` — the request's error. `Ok(())`: the record is of the
    /// asked kind after all (a racing first grant inserted it) or gone, and the caller may
    /// try once more.
    async fn refuse_other_kind(&self, name: &LockName, asked: LockKind) -> Result<(), StoreError> {
        // Rule 7.
        let Some(found) = self.read_record(name).await? else {
            return Ok(());
        };
        match document::record_kind(&found)? {
            kind if document::accepts(&found, kind, asked) => Ok(()),
            kind => Err(document::kind_mismatch(name, kind, asked)),
        }
    }
}
