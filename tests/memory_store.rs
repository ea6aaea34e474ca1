//! The conformance suite on the embedded [`MemoryStore`], under Tokio's paused clock: every
//! timing (expiry, cadence, deadlines, backoff) runs exactly and instantly.

#[macro_use]
mod common;

use async_trait::async_trait;
use common::Backend;
use mongolock::{LockName, MemoryStore};

struct Memory;

#[async_trait]
impl Backend for Memory {
    type Store = MemoryStore;

    async fn fresh(&self) -> MemoryStore {
        MemoryStore::new()
    }

    async fn peer(&self, store: &MemoryStore) -> MemoryStore {
        store.clone()
    }

    async fn delete_record(&self, store: &MemoryStore, name: &LockName) {
        store.remove(name);
    }
}

conformance_suite!(Memory, start_paused = true);
