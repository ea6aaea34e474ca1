//! Metrics emitted through the [`metrics`] facade; the application installs the exporter
//! (for example `metrics-exporter-prometheus`).
//!
//! Every metric carries the labels listed below; a lock whose options'
//! [`LockNameLabel`] policy selects it (see
//! [`LockOptions::with_lock_name_label`](crate::LockOptions::with_lock_name_label)) also carries
//! `lock="<name>"` — off by default, so many lock names cannot explode cardinality. Counters end in `_total`, durations are histograms in seconds.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `mongolock_acquire_attempts_total` | counter | `result` = acquired, contended, error | store acquisition attempts |
//! | `mongolock_acquire_wait_seconds` | histogram | | from `acquire()` call to lock held |
//! | `mongolock_hold_seconds` | histogram | | from lock held to release or loss |
//! | `mongolock_waiters` | gauge | | local tasks waiting for a lock (`sum by (lock)` across processes: everyone waiting for it) |
//! | `mongolock_oldest_waiter_start_time_seconds` | gauge | | a timestamp, not an age: the Unix time at which this process's longest-waiting task for a lock began to wait, 0 while none waits: `time() - min by (lock) (mongolock_oldest_waiter_start_time_seconds > 0)` is the age of the oldest waiter across processes |
//! | `mongolock_others_waited_seconds` | histogram | | how long waiters in other processes had waited when a hold here let go (the store keeps the earliest wait per grant) |
//! | `mongolock_step_backs_total` | counter | | times this process's waiters stepped back because waiters elsewhere had waited the fairness bound (see [`guide::fairness`](crate::guide::fairness)) |
//! | `mongolock_held_locks` | gauge | | locks this process holds |
//! | `mongolock_at_risk_locks` | gauge | | held locks whose renewals are failing, deadline still ahead (see [`AtRisk`](crate::AtRisk)) |
//! | `mongolock_renewals_total` | counter | `result` = extended, lost, error | lease renewals |
//! | `mongolock_losses_total` | counter | `reason` (see [`LossReason::as_str`](crate::LossReason::as_str)) | held locks lost |
//! | `mongolock_store_operation_seconds` | histogram | `op` = acquire, extend, release, hand_over, inspect | store call latency |
//! | `mongolock_store_errors_total` | counter | `op` | store calls that failed or timed out |
//! | `mongolock_leader` | gauge | `election` | 1 while this process leads the election, else 0 |

mod oldest_waiter;
#[cfg(feature = "prometheus")]
mod prometheus;

use std::time::Duration;

use metrics::Label;

use crate::error::LossReason;
use crate::kind::Access;
use crate::name::LockName;

use crate::options::LockNameLabel;

#[cfg(feature = "prometheus")]
pub use prometheus::{STORE_BUCKETS, WAIT_AND_HOLD_BUCKETS, install_prometheus_exporter};

/// Gauge: a timestamp, not an age — the Unix time (seconds) at which this process's
/// longest-waiting task for a lock began to wait, named like Prometheus's
/// `process_start_time_seconds`; 0 while none waits. The age of the oldest waiter across
/// processes is `time() - min by (lock) (mongolock_oldest_waiter_start_time_seconds > 0)`.
pub const OLDEST_WAITER_START_TIME: &str = "mongolock_oldest_waiter_start_time_seconds";

/// Counter: store acquisition attempts, by `result`.
pub const ACQUIRE_ATTEMPTS: &str = "mongolock_acquire_attempts_total";
/// Histogram (seconds): time from an `acquire` call until the lock is held.
pub const ACQUIRE_WAIT: &str = "mongolock_acquire_wait_seconds";
/// Histogram (seconds): how long locks were held.
pub const HOLD_TIME: &str = "mongolock_hold_seconds";
/// Gauge: local tasks currently waiting for a lock.
pub const WAITERS: &str = "mongolock_waiters";
/// Histogram (seconds): how long waiters in other processes had waited for the lock when a
/// hold of this process let go of it, as the store reported with the release or hand-over.
pub const OTHERS_WAITED: &str = "mongolock_others_waited_seconds";
/// Counter: times this process's waiters stepped back for a contended lock because waiters
/// in other processes had waited the fairness bound.
pub const STEP_BACKS: &str = "mongolock_step_backs_total";
/// Gauge: locks currently held by this process.
pub const HELD_LOCKS: &str = "mongolock_held_locks";
/// Gauge: held locks whose renewals are failing while the loss deadline is still ahead.
pub const AT_RISK_LOCKS: &str = "mongolock_at_risk_locks";
/// Counter: lease renewals, by `result`.
pub const RENEWALS: &str = "mongolock_renewals_total";
/// Counter: held locks lost, by `reason`.
pub const LOSSES: &str = "mongolock_losses_total";
/// Histogram (seconds): store call latency, by `op`.
pub const STORE_OPERATION: &str = "mongolock_store_operation_seconds";
/// Counter: failed or timed-out store calls, by `op`.
pub const STORE_ERRORS: &str = "mongolock_store_errors_total";

/// Gauge: 1 while this process leads the election named by the `election` label, else 0
/// (like client-go's `leader_election_master_status`). Election names are few by design,
/// so the label is always present.
pub const LEADER: &str = "mongolock_leader";

/// Registers units and help texts for every metric with the installed recorder. Call it once
/// after installing an exporter so scrapes show `# HELP` lines.
///
/// ```
/// mongolock::metrics::describe();
/// ```
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        ACQUIRE_ATTEMPTS,
        "Lock acquisition attempts against the store, by result."
    );
    describe_histogram!(
        ACQUIRE_WAIT,
        Unit::Seconds,
        "Time from an acquire call until the lock was held."
    );
    describe_histogram!(
        HOLD_TIME,
        Unit::Seconds,
        "How long locks were held, until release or loss."
    );
    describe_gauge!(WAITERS, "Local tasks waiting for a lock.");
    describe_gauge!(
        OLDEST_WAITER_START_TIME,
        Unit::Seconds,
        "Unix time at which this process's longest-waiting task for a lock began to wait (a timestamp, not an age); 0 while none waits."
    );
    describe_histogram!(
        OTHERS_WAITED,
        Unit::Seconds,
        "How long waiters in other processes had waited when a hold here let go."
    );
    describe_counter!(
        STEP_BACKS,
        "Times local waiters stepped back because waiters elsewhere had waited the fairness bound."
    );
    describe_gauge!(
        HELD_LOCKS,
        "Locks held by this process (semaphore permits, reads and writes by `access`)."
    );
    describe_gauge!(
        SEMAPHORE_PERMITS,
        "Permits of the semaphores this process uses: the capacity permits in use fill."
    );
    describe_gauge!(
        AT_RISK_LOCKS,
        "Held locks whose renewals are failing, loss deadline still ahead."
    );
    describe_counter!(RENEWALS, "Lease renewals, by result.");
    describe_counter!(LOSSES, "Held locks lost, by reason.");
    describe_histogram!(
        STORE_OPERATION,
        Unit::Seconds,
        "Store call latency, by operation."
    );
    describe_counter!(
        STORE_ERRORS,
        "Store calls that failed or timed out, by operation."
    );
}

/// Result label of an acquisition attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AttemptResult {
    Acquired,
    Contended,
    Error,
}

/// Result label of a renewal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RenewalResult {
    Extended,
    Lost,
    Error,
}

/// A store operation, as the `op` label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StoreOp {
    Acquire,
    Extend,
    Release,
    HandOver,
    Inspect,
}

impl StoreOp {
    fn as_str(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Extend => "extend",
            Self::Release => "release",
            Self::HandOver => "hand_over",
            Self::Inspect => "inspect",
        }
    }
}

/// The permits of the semaphores this process uses (gauge; with the `lock` label per
/// semaphore, else their sum): the capacity `mongolock_held_locks{access="permit"}` fills.
pub const SEMAPHORE_PERMITS: &str = "mongolock_semaphore_permits";

/// The metric handles of one lock actor: the base labels are computed once, not per event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LockMetrics {
    base: Vec<Label>,
}

impl LockMetrics {
    pub(crate) fn new(name: &LockName, policy: &LockNameLabel) -> Self {
        let base = if policy.labels(name) {
            vec![Label::new("lock", name.as_str().to_owned())]
        } else {
            Vec::new()
        };
        Self { base }
    }

    /// The handles for acquisitions of `access`: a shared kind's series also carry an
    /// `access` label (`permit`, `read`, `write`), so permits in use, readers and writers
    /// show apart; a mutex's series keep exactly the labels they always had.
    pub(crate) fn for_access(name: &LockName, policy: &LockNameLabel, access: Access) -> Self {
        let mut metrics = Self::new(name, policy);
        if access.kind().is_shared() {
            metrics
                .base
                .push(Label::from_static_parts("access", access.as_str()));
        }
        metrics
    }

    /// This process started (positive) or stopped (negative) using a semaphore of
    /// `permits`.
    pub(crate) fn semaphore_permits(name: &LockName, policy: &LockNameLabel, permits: f64) {
        metrics::gauge!(SEMAPHORE_PERMITS, Self::new(name, policy).base).increment(permits);
    }

    fn with(&self, key: &'static str, value: &'static str) -> Vec<Label> {
        let mut labels = self.base.clone();
        labels.push(Label::from_static_parts(key, value));
        labels
    }

    pub(crate) fn attempt(&self, result: AttemptResult) {
        let value = match result {
            AttemptResult::Acquired => "acquired",
            AttemptResult::Contended => "contended",
            AttemptResult::Error => "error",
        };
        metrics::counter!(ACQUIRE_ATTEMPTS, self.with("result", value)).increment(1);
    }

    pub(crate) fn acquire_wait(&self, waited: Duration) {
        metrics::histogram!(ACQUIRE_WAIT, self.base.clone()).record(waited.as_secs_f64());
    }

    pub(crate) fn held(&self, delta: f64) {
        metrics::gauge!(HELD_LOCKS, self.base.clone()).increment(delta);
    }

    pub(crate) fn at_risk(&self, delta: f64) {
        metrics::gauge!(AT_RISK_LOCKS, self.base.clone()).increment(delta);
    }

    pub(crate) fn hold_ended(&self, held_for: Duration) {
        metrics::histogram!(HOLD_TIME, self.base.clone()).record(held_for.as_secs_f64());
        self.held(-1.0);
    }

    pub(crate) fn waiters(&self, delta: f64) {
        if delta != 0.0 {
            metrics::gauge!(WAITERS, self.base.clone()).increment(delta);
        }
    }

    /// A hold here let go while waiters in other processes had waited `waited`.
    pub(crate) fn others_waited(&self, waited: Duration) {
        metrics::histogram!(OTHERS_WAITED, self.base.clone()).record(waited.as_secs_f64());
    }

    /// Local waiters stepped back for waiters elsewhere.
    pub(crate) fn stepped_back(&self) {
        metrics::counter!(STEP_BACKS, self.base.clone()).increment(1);
    }

    pub(crate) fn renewal(&self, result: RenewalResult) {
        let value = match result {
            RenewalResult::Extended => "extended",
            RenewalResult::Lost => "lost",
            RenewalResult::Error => "error",
        };
        metrics::counter!(RENEWALS, self.with("result", value)).increment(1);
    }

    pub(crate) fn loss(&self, reason: &LossReason) {
        metrics::counter!(LOSSES, self.with("reason", reason.as_str())).increment(1);
    }

    pub(crate) fn store_call(&self, op: StoreOp, took: Duration, failed: bool) {
        metrics::histogram!(STORE_OPERATION, self.with("op", op.as_str()))
            .record(took.as_secs_f64());
        if failed {
            metrics::counter!(STORE_ERRORS, self.with("op", op.as_str())).increment(1);
        }
    }
}
