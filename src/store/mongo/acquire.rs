//! [`MongoStore`]'s attempts: a mutex's `findAndModify`, a shared record's (whose filter names
//! the kind), and what the store reads back when an upsert fails or the answer is empty.

use mongodb::bson::Document;
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
        let (record, answered) = match returned {
            Ok(Some(record)) => (record, true),
            Ok(None) => match self.read_back(&request.name).await? {
                Some(record) => (record, false),
                None => return Ok(AcquireOutcome::busy(None)),
            },
            // Two first acquisitions raced to insert the document; the other one won.
            Err(error) if errors::is_duplicate_key(&error) => {
                return Ok(AcquireOutcome::busy(None));
            }
            Err(error) => return Err(errors::backend("acquire (findAndModify)", error)),
        };
        match document::record_kind(&record)? {
            LockKind::Mutex => {
                // A record read back may carry a place of an earlier request: only the
                // answer's own place tells the server's time of this one.
                let listed = (answered && !request.retry_within.is_zero())
                    .then(|| (request.holder.as_str(), request.retry_within));
                document::acquire_outcome(record, request.lease, listed)
            }
            // Rule 7: a mutex request on a shared record (which the pipeline leaves as it
            // was) is a mismatch.
            found => Err(document::kind_mismatch(
                &request.name,
                found,
                LockKind::Mutex,
            )),
        }
    }

    /// The record after an upsert `findAndModify` answered with no document, read back.
    /// MongoDB always returns the upserted or updated document there. The test server,
    /// when its upsert finds a record another request inserted after its own lookup,
    /// applies the update to that record and answers with none: had the other request
    /// released it meanwhile, the update granted it to us, and taking the empty answer
    /// for a refusal would leave the lock held by nobody who knows it until its lease
    /// ends.
    async fn read_back(&self, name: &LockName) -> Result<Option<Document>, StoreError> {
        tracing::debug!(lock = %name, "an upsert answered with no document; reading the record back");
        self.read_record(name).await
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
                Ok(None) => {
                    let found = self.read_back(&request.name).await?;
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
