//! [`MongoStore`]'s `set_permits`: a semaphore's count, changed in one `findAndModify`.

use mongodb::options::ReturnDocument;

use super::pipeline;
use super::{MongoStore, document, errors};
use crate::error::StoreError;
use crate::kind::LockKind;
use crate::name::LockName;
#[cfg(doc)]
use crate::store::LockStore;
use crate::store::check_permits;

impl MongoStore {
    /// [`LockStore::set_permits`] on this store: the round trips the impl's documentation
    /// describes.
    pub(super) async fn set_count(
        &self,
        name: &LockName,
        permits: u32,
    ) -> Result<Option<u32>, StoreError> {
        check_permits(permits)?;
        let asked = LockKind::Semaphore { permits };
        for _ in 0..2 {
            let before = self
                .collection
                .find_one_and_update(
                    pipeline::filter::semaphore_by_name(name),
                    pipeline::permits::set_permits(permits),
                )
                .upsert(true)
                .return_document(ReturnDocument::Before)
                .await;
            match before {
                Ok(None) => return Ok(None),
                Ok(Some(before)) => {
                    return match document::record_kind(&before)? {
                        LockKind::Semaphore { permits: old } => Ok(Some(old)),
                        found => Err(document::kind_mismatch(name, found, asked)),
                    };
                }
                Err(error) if errors::is_duplicate_key(&error) => {
                    // Any semaphore is this request's kind here: only another kind refuses.
                    let Some(found) = self.read_record(name).await? else {
                        continue;
                    };
                    match document::record_kind(&found)? {
                        LockKind::Semaphore { .. } => {}
                        kind => return Err(document::kind_mismatch(name, kind, asked)),
                    }
                }
                Err(error) => return Err(errors::backend("set permits (findAndModify)", error)),
            }
        }
        Err(StoreError::backend(format!(
            "setting the count of {name} raced with its record's creation twice; try again"
        )))
    }
}
