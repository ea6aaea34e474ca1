//! The per-name actor, one for every kind of lock: it owns one name's local waiters, the
//! acquisition for them, the leases this process holds on the name and the releases in
//! flight. A mutex, a semaphore and a reader/writer lock differ only in data — the kind —
//! and in a few small rules read from it (`state.rs`): a mutex holds at most one lease and
//! attempts only while it holds nothing; a released mutex may pass to a local waiter under
//! its reserved tokens, a shared place goes back through the store.
//!
//! Two parts move side by side, one `step` per message (`actor.rs`):
//!
//! | part | states | moves on |
//! |---|---|---|
//! | acquisition (`acquisition.rs`) | `Idle` → `Attempting` → `BackingOff` | a waiter, a grant (next waiter at once, unless a mutex is held), busy (backoff), a release seen here or on the store (attempt now) |
//! | each hold (`holds.rs`) | held → renewing → released (`release.rs`) or lost | its timer, its renewal's answer, its guard |
//!
//! Store calls never run on the message loop: each is spawned (see `store_call`) and
//! reports back as a message, so a deadline timer is handled on time even while a call
//! hangs. What to do with a grant nobody will use lives in `orphan`, when local waiters
//! step back for other processes in `starvation`.
//!
//! | file | holds |
//! |---|---|
//! | `actor.rs` | the actor, what it is started with, and its one `step` per message |
//! | `state.rs` | what the actor owns, the kind and its rules, idling and shutdown |
//! | `admission.rs` | whether a request is served, refused, or waits for the record's kind |
//! | `acquisition.rs` | the local waiters' acquisition: its phases, each owning its attempt, backoff or timer |
//! | `holds.rs` | the held leases: grant, renewal, loss |
//! | `release.rs` | a released place: local pass, hand-over, plain release, detach |

mod acquisition;
mod actor;
mod admission;
mod holds;
mod release;
mod state;

pub(crate) use actor::{ManagerContext, NameActor, NameActorArgs, Retire};

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::oneshot;
    use tokio::time::Instant;

    use crate::lock::message::LockMsg;
    use crate::lock::runtime::Runtime;
    use crate::name::LockName;
    use crate::options::LockOptions;
    use crate::store::memory::MemoryStore;
    use crate::store::request::HolderId;
    use crate::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};

    /// The manager shuts down while an acquisition's answer is queued behind the shutdown
    /// (a store that answers at once queues it at the attempt): the stopping actor never
    /// handles it, and the grant it carries is released, not left held by nobody until it
    /// expires.
    #[tokio::test(start_paused = true)]
    async fn a_grant_queued_behind_shutdown_is_released() {
        let store = MemoryStore::new();
        let runtime = Runtime::start(
            Arc::new(store.clone()),
            HolderId::generate(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        let name = LockName::new("queued").unwrap();
        let options = Arc::new(LockOptions::default());
        let lock = runtime.lock(name.clone(), options.clone());
        lock.acquire().await.unwrap().release().await.unwrap();
        let route = lock.cached_route().unwrap();

        // Both messages wait in the mailbox before the actor runs.
        let (reply, answer) = oneshot::channel();
        let acquire = LockMsg::Acquire {
            access: crate::kind::Access::Exclusive,
            options,
            requested_at: Instant::now(),
            reply,
        };
        assert!(route.send_request(acquire).is_ok());
        let (stopped, _) = oneshot::channel();
        route
            .actor
            .send_message(LockMsg::Shutdown { reply: stopped })
            .unwrap();
        assert!(
            answer.await.unwrap().is_err(),
            "the waiter is failed by the shutdown"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;

        let other = AcquireRequest::new(
            name,
            LeaseId::new(),
            HolderId::generate(),
            Duration::from_secs(30),
        );
        assert!(
            matches!(
                store.try_acquire(&other).await.unwrap(),
                AcquireOutcome::Acquired { .. }
            ),
            "a grant nobody owns is still held after the shutdown"
        );
    }
}
