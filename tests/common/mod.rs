//! The backend-agnostic conformance suite. A test file implements [`Backend`] for its store
//! and invokes `conformance_suite!`, which generates one test per scenario in
//! [`scenarios`]. Every backend runs the same scenarios unchanged.
#![allow(dead_code)]

pub mod faulty;
pub mod scenarios;

use std::time::Duration;

use async_trait::async_trait;
use mongolock::{LockName, LockOptions, LockStore};

/// What a scenario needs from a storage backend beyond the [`LockStore`] trait.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The store type under test.
    type Store: LockStore + Clone;

    /// A store on a fresh namespace (nothing from other tests visible).
    async fn fresh(&self) -> Self::Store;

    /// Another "process" on the same namespace as `store` (its own connection where the
    /// backend has connections).
    async fn peer(&self, store: &Self::Store) -> Self::Store;

    /// Deletes the record of `name` behind the runtime's back, as an operator or a TTL
    /// monitor would.
    async fn delete_record(&self, store: &Self::Store, name: &LockName);
}

/// Short timings so the real-time (MongoDB) run stays quick; under paused time they are free.
pub fn fast_options() -> LockOptions {
    LockOptions::default()
        .expiry(Duration::from_millis(1500))
        .extension_cadence(Duration::from_millis(300))
        .renew_deadline(Duration::from_millis(900))
        .busy_wait(Duration::from_millis(5), Duration::from_millis(25))
}

/// Slack allowed on time bounds for scheduling and a store round trip.
pub const SLACK: Duration = Duration::from_millis(400);

/// Generates one `#[tokio::test]` per conformance scenario for `$backend`.
/// `$($flavor)*` are the arguments of `#[tokio::test(...)]` (for example `start_paused = true`).
#[macro_export]
macro_rules! conformance_suite {
    ($backend:expr, $($flavor:tt)*) => {
        $crate::conformance_tests!(($backend) ($($flavor)*)
            acquire_release_not_reentrant,
            different_names_are_independent,
            reacquire_right_after_release_ten_times,
            try_acquire_makes_one_attempt,
            short_timeout_returns_promptly,
            cancelled_before_waiting_leaves_nothing_held,
            cancelled_while_waiting_leaves_no_phantom_hold,
            hundred_contenders_never_overlap,
            local_waiters_share_one_poller_in_fifo_order,
            expired_holder_is_taken_over,
            extension_keeps_the_lock_past_expiry,
            external_takeover_is_reported_within_one_cadence,
            hung_store_is_reported_by_local_deadline,
            failing_store_is_reported_as_store_errors,
            late_release_does_not_free_successor,
            fencing_tokens_strictly_increase,
            shutdown_releases_everything,
            bad_names_and_options_are_rejected,
            operator_like_names_are_plain_values,
            panicking_lock_actor_is_isolated,
            idle_lock_actors_are_stopped,
        );
    };
}

/// Implementation detail of `conformance_suite!`.
#[macro_export]
macro_rules! conformance_tests {
    (($backend:expr) $flavor:tt $($scenario:ident),* $(,)?) => {
        $(
            #[tokio::test $flavor]
            async fn $scenario() {
                common::scenarios::$scenario(&$backend).await;
            }
        )*
    };
}
