//! [`MongoStore`]'s reads that decide: a record with the server's `$$NOW`, and the leases an
//! aggregation finds.

use std::collections::HashSet;

use mongodb::bson::Document;

use super::pipeline;
use super::{MongoStore, errors};
use crate::error::StoreError;
use crate::name::LockName;
use crate::store::LeaseId;

impl MongoStore {
    /// The document of `name` with the server's `$$NOW` (one `aggregate`), as inspection
    /// reads it; `None` if there is none.
    pub(super) async fn read_record(
        &self,
        name: &LockName,
    ) -> Result<Option<Document>, StoreError> {
        let failed = |error| errors::backend("inspect (aggregate)", error);
        let mut cursor = self
            .collection
            .aggregate(pipeline::read::inspect(name))
            .read_concern(self.read_concern.clone())
            .await
            .map_err(failed)?;
        if !cursor.advance().await.map_err(failed)? {
            return Ok(None);
        }
        cursor.deserialize_current().map(Some).map_err(failed)
    }

    /// Runs `pipeline` (one `aggregate`, read as decisions are) and gathers the leases
    /// `read` finds in each document it returns.
    pub(super) async fn leases_found<I: IntoIterator<Item = LeaseId>>(
        &self,
        pipeline: Vec<Document>,
        operation: &str,
        read: impl Fn(&Document) -> I,
    ) -> Result<HashSet<LeaseId>, StoreError> {
        let failed = |error| errors::backend(operation, error);
        let mut cursor = self
            .collection
            .aggregate(pipeline)
            .read_concern(self.multi_document_read_concern())
            .await
            .map_err(failed)?;
        let mut found = HashSet::new();
        while cursor.advance().await.map_err(failed)? {
            let document: Document = cursor.deserialize_current().map_err(failed)?;
            found.extend(read(&document));
        }
        Ok(found)
    }
}
