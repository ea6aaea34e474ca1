//! [`MongoStore`]'s hand-over on a shared record: a release and an attempt in one write,
//! and what one read says when it matched nothing.

use mongodb::bson::Bson;
use mongodb::options::ReturnDocument;

use super::pipeline;
use super::pipeline::release::Released;
use super::{MongoStore, document, errors};
use crate::error::StoreError;
#[cfg(doc)]
use crate::store::LockStore;
use crate::store::{
    AcquireRequest, HandOverOutcome, LeaseKey, check_hand_over, release_then_acquire,
};

impl MongoStore {
    /// [`LockStore::hand_over`] on this store: the round trips the impl's documentation describes.
    pub(super) async fn hand_over_lease(
        &self,
        from: &LeaseKey,
        to: &AcquireRequest,
    ) -> Result<HandOverOutcome, StoreError> {
        check_hand_over(from, to)?;
        let old = document::lease_value(from.lease);
        let new = document::lease_value(to.lease);
        if from.shared {
            return self.hand_over_shared(from, &old, to, &new).await;
        }
        let after = self
            .collection
            .find_one_and_update(
                pipeline::filter::by_unexpired_owner(&from.name, &old),
                pipeline::hand_over::hand_over(
                    &new,
                    to.holder.as_str(),
                    to.lease_duration,
                    to.in_arrival_order.then_some((to.waited, to.retry_within)),
                ),
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("hand over (findAndModify)", error))?;
        document::hand_over_outcome(after, to.lease, to.in_arrival_order)
    }

    /// `hand_over` on a shared record: one `findAndModify` that removes `from`'s place and
    /// decides `to` by the grant rules. When it matches nothing, one read says why: `from`
    /// holds no unexpired place (`NotOwner`), or `to` asks for another kind or count (then
    /// the release and the attempt are sent one after the other, and answer as the
    /// contract says), or the test server answered an applied write with nothing.
    pub(super) async fn hand_over_shared(
        &self,
        from: &LeaseKey,
        old: &Bson,
        to: &AcquireRequest,
        new: &Bson,
    ) -> Result<HandOverOutcome, StoreError> {
        let acquire = pipeline::acquire::shared_acquire(
            to.access,
            new,
            to.holder.as_str(),
            to.lease_duration,
            (to.waited, to.retry_within, to.in_arrival_order),
        );
        let after = self
            .collection
            .find_one_and_update(
                pipeline::filter::shared_hand_over_filter(&from.name, old, to.access),
                pipeline::hand_over::shared_hand_over(
                    (old, Released::of([from])),
                    new,
                    acquire,
                    from.in_arrival_order,
                ),
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(|error| errors::backend("hand over (findAndModify shared)", error))?;
        if let Some(outcome) = document::shared_hand_over_outcome(after, to.lease)? {
            return Ok(outcome);
        }
        let found = self.read_record(&from.name).await?;
        match document::unmatched_hand_over(found.as_ref(), from.lease, to.lease)? {
            Some(outcome) => Ok(outcome),
            None => release_then_acquire(self, from, to).await,
        }
    }
}
