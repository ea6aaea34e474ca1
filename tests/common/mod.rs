//! The backend-agnostic conformance suite. A test file implements [`Backend`] for its store
//! and invokes `conformance_suite!`, which generates one test per scenario in
//! [`scenarios`]. Every backend runs the same scenarios unchanged.
//!
//! A scenario named `rule_N_…` checks rule N of the `LockStore` contract (the rules are
//! numbered in its documentation, `src/store/mod.rs`), so each store can be checked rule by
//! rule; `rule_9_10_…` checks two.
#![allow(dead_code)]

pub(crate) mod arrival_order;
pub(crate) mod election;
pub(crate) mod embedding;
pub(crate) mod guarantees;
pub(crate) mod primitives;
pub(crate) mod scenarios;
pub(crate) mod shared_records;
pub(crate) mod waking;
pub(crate) mod watching;

use std::time::Duration;

use async_trait::async_trait;
use mongolock::{LockManager, LockName, LockOptions, store::LockStore};

/// Waits until `condition` holds or `within` passes: for what is seen from outside, with no
/// signal to wait on (a store's records, a manager's count of live actors).
pub(crate) async fn eventually(within: Duration, mut condition: impl AsyncFnMut() -> bool) -> bool {
    let until = tokio::time::Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a scenario needs from a storage backend beyond the [`LockStore`] trait.
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
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

    /// Whether watches on this store read the records periodically instead of following a
    /// feed of changes (a MongoDB server without change streams): they then see less.
    fn watches_by_polling(&self) -> bool {
        false
    }
}

/// Short timings so the real-time (MongoDB) run stays quick; under paused time they are free.
pub(crate) fn fast_options() -> LockOptions {
    LockOptions::default()
        .with_lease_duration(Duration::from_millis(1500))
        .with_renew_interval(Duration::from_millis(300))
        .with_renew_deadline(Duration::from_millis(900))
        .with_retry_backoff(Duration::from_millis(5), Duration::from_millis(25))
}

/// A manager on `store` with [`fast_options`].
pub(crate) async fn start(store: impl LockStore) -> LockManager {
    start_with(store, fast_options()).await
}

/// A manager on `store` with `options`; a failure to start fails the test.
pub(crate) async fn start_with(store: impl LockStore, options: LockOptions) -> LockManager {
    match LockManager::start(store, options).await {
        Ok(manager) => manager,
        Err(error) => panic!("starting a manager failed: {error}"),
    }
}

/// Slack allowed on time bounds for scheduling and a store round trip.
pub(crate) const SLACK: Duration = Duration::from_millis(400);

/// Generates one `#[tokio::test]` per conformance scenario for `$backend`.
/// `$($flavor)*` are the arguments of `#[tokio::test(...)]` (for example `start_paused = true`).
#[macro_export]
macro_rules! conformance_suite {
    ($backend:expr, $($flavor:tt)*) => {
        $crate::conformance_tests!(($backend) ($($flavor)*)
            scenarios::acquire_release_not_reentrant,
            scenarios::different_names_are_independent,
            scenarios::reacquire_right_after_release_ten_times,
            scenarios::try_acquire_makes_one_attempt,
            scenarios::short_timeout_returns_promptly,
            scenarios::cancelled_before_waiting_leaves_nothing_held,
            scenarios::cancelled_while_waiting_leaves_no_phantom_hold,
            scenarios::acquire_applied_after_timeout_leaves_no_orphan,
            scenarios::hundred_contenders_never_overlap,
            scenarios::local_waiters_share_one_poller_in_fifo_order,
            scenarios::release_hands_over_to_a_local_waiter,
            scenarios::rule_6_local_hand_overs_keep_tokens_increasing,
            scenarios::rule_1_expired_holder_is_taken_over,
            scenarios::extension_keeps_the_lock_past_expiry,
            scenarios::external_takeover_is_reported_within_one_cadence,
            scenarios::hung_store_is_reported_by_local_deadline,
            scenarios::failing_store_is_reported_as_store_errors,
            scenarios::rule_2_late_release_does_not_free_successor,
            scenarios::rule_1_fencing_tokens_strictly_increase,
            scenarios::shutdown_releases_everything,
            scenarios::bad_names_and_options_are_rejected,
            scenarios::rule_4_operator_like_names_are_plain_values,
            scenarios::panicking_lock_actor_is_isolated,
            scenarios::idle_lock_actors_are_stopped,
            scenarios::contended_lock_is_shared_with_other_processes,
            guarantees::loss_margin_holds_when_the_store_recovers_before_the_deadline,
            election::election_has_one_leader_and_fails_over,
            election::election_resign_hands_over_promptly,
            election::election_observers_see_leader_changes,
            election::election_survives_bad_subscribers,
            election::superseded_term_ends_deposed_not_resigned,
            election::failing_leader_reports_unhealthy,
            embedding::loss_is_notified_to_an_actor,
            embedding::background_lock_reports_and_reacquires,
            embedding::bound_actor_runs_only_while_leading,
            embedding::resign_waits_for_bound_work_to_stop,
            embedding::shutdown_waits_for_bound_work_to_stop,
            watching::watch_reports_grants_releases_expiry_takeover_and_deletion,
            watching::watch_follows_every_holder_of_a_shared_lock,
            primitives::semaphore_admits_its_count_and_gets_crashed_permits_back,
            primitives::semaphore_counts_are_fixed_by_the_record,
            primitives::a_name_is_the_kind_its_record_says,
            primitives::semaphore_raised_count_admits_waiters_of_the_old_count,
            primitives::permit_tokens_increase_across_processes,
            primitives::released_permit_reaches_a_local_waiter_in_one_call,
            primitives::rw_lock_readers_share_and_the_writer_excludes,
            primitives::rw_lock_waiting_writer_holds_new_readers_back,
            primitives::rw_lock_reader_behind_a_local_waiting_writer_takes_the_readers_turn,
            primitives::permit_loss_is_told_before_the_place_is_given,
            primitives::multi_lock_is_all_or_nothing,
            primitives::multi_lock_never_answers_with_a_lost_member,
            primitives::multi_locks_in_opposite_orders_never_deadlock,
            primitives::multi_lock_reports_any_member_loss,
            shared_records::rule_8_semaphore_grants_exactly_its_permits,
            shared_records::rule_2_shared_extend_is_owner_checked,
            shared_records::rule_3_a_shared_release_reports_only_other_managers_waits,
            shared_records::rule_8_expired_permit_comes_back,
            shared_records::rule_7_kind_mismatches_change_nothing,
            shared_records::rule_7_set_permits_changes_the_count,
            shared_records::rule_9_10_readers_share_and_writers_exclude,
            shared_records::rule_10_waiting_writer_holds_back_new_readers,
            shared_records::rule_11_the_earliest_marked_writer_goes_first,
            shared_records::rule_11_a_withdrawn_writers_mark_lets_the_others_in,
            shared_records::rule_13_readers_go_first_after_a_write,
            shared_records::rule_14_shared_tokens_strictly_increase,
            shared_records::shared_records_release_many_spans_names_and_kinds,
            shared_records::shared_records_inspect_shows_shared_holders,
            shared_records::rule_4_operator_like_names_are_values_for_shared_kinds,
            shared_records::rule_8_racing_first_grants_fill_the_semaphore,
            shared_records::shared_records_hand_over_is_a_release_and_an_attempt_in_one,
            shared_records::rule_2_mutex_hand_over_is_owner_checked,
            shared_records::rule_5_requests_at_the_edges_are_answered_not_panicked,
            waking::rule_3_21_a_grant_while_others_are_listed_is_contended_from_the_start,
            waking::rule_22_a_release_wakes_only_the_longest_waiting_manager,
            waking::rule_22_a_request_refused_only_by_the_line_wakes_the_earliest_place,
            waking::rule_22_a_semaphore_release_wakes_the_earliest_places_it_frees,
            waking::rule_22_a_writers_release_wakes_the_readers_batch,
            waking::rule_22_a_readers_release_wakes_nobody_while_readers_hold,
            waking::rule_22_a_shared_hand_over_that_releases_wakes_the_earliest_place,
            waking::rule_4_22_a_holder_id_of_any_text_is_woken_as_written,
            arrival_order::rule_16_the_earliest_place_in_line_goes_first,
            arrival_order::rule_20_places_in_line_end_or_are_withdrawn,
            arrival_order::rule_15_readers_in_line_go_in_together_behind_earlier_writers,
            arrival_order::rule_17_a_read_in_line_says_which_readers_may_share_it,
            arrival_order::rule_16_permits_go_to_the_earliest_place_in_line,
            arrival_order::arrival_order_lock_serves_processes_in_arrival_order,
            arrival_order::arrival_order_waiter_that_gives_up_leaves_the_line,
            arrival_order::rule_3_16_a_refusal_by_the_line_is_contention,
            arrival_order::rule_20_22_withdrawing_an_ended_place_wakes_every_feed,
        );
    };
}

/// Implementation detail of `conformance_suite!`.
#[macro_export]
macro_rules! conformance_tests {
    (($backend:expr) $flavor:tt $($module:ident :: $scenario:ident),* $(,)?) => {
        $(
            #[tokio::test $flavor]
            async fn $scenario() {
                common::$module::$scenario(&$backend).await;
            }
        )*
    };
}
