//! The oldest-waiter gauge: when the longest-waiting local task of a lock began to wait.
//!
//! Several lock actors may share one series (the `lock` label off, or two managers in one
//! process), and a gauge keeps one value, so the process keeps every actor's oldest start
//! per series and shows the earliest; 0 once nobody in the series waits.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics::Label;
use tokio::time::Instant;

use super::{LockMetrics, OLDEST_WAITER_START_TIME};

/// Each actor's oldest waiting start (Unix seconds), by actor key.
type ActorStarts = HashMap<u64, f64>;

/// Per series (its labels), the starts of its actors.
static STARTS: Mutex<Option<HashMap<Vec<Label>, ActorStarts>>> = Mutex::new(None);

/// `instant` (a moment of this process's monotonic clock, in the past) as Unix seconds:
/// what dashboards subtract from `time()`. Wall-clock time is fine for a gauge; nothing
/// decides anything by it.
pub(super) fn unix_seconds(instant: Instant) -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    (now.saturating_sub(instant.elapsed())).as_secs_f64()
}

impl LockMetrics {
    /// Actor `actor`'s longest-waiting task began to wait at `since` (`None`: none waits
    /// under these labels any more).
    pub(crate) fn oldest_waiter(&self, actor: u64, since: Option<Instant>) {
        record_start(&self.base, actor, since.map(unix_seconds));
    }
}

/// Notes actor `actor`'s oldest start (Unix seconds) in the series `labels` and sets the
/// gauge to the earliest start any actor of the series has, 0 when none has one.
fn record_start(labels: &[Label], actor: u64, start: Option<f64>) {
    let mut starts = STARTS.lock().unwrap_or_else(PoisonError::into_inner);
    let series = starts
        .get_or_insert_with(HashMap::new)
        .entry(labels.to_vec())
        .or_default();
    match start {
        Some(start) => series.insert(actor, start),
        None => series.remove(&actor),
    };
    let earliest = series.values().copied().reduce(f64::min).unwrap_or(0.0);
    metrics::gauge!(OLDEST_WAITER_START_TIME, labels.to_vec()).set(earliest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn a_series_shows_the_earliest_start_of_its_actors() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let labels = vec![Label::new("lock", "oldest-waiter-unit-test")];
        // Each step sets the gauge right before it is read (the recorder's reads reset it).
        let after = |actor, start| {
            metrics::with_local_recorder(&recorder, || record_start(&labels, actor, start));
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .find_map(|(key, _, _, value)| match value {
                    DebugValue::Gauge(value) if key.key().name() == OLDEST_WAITER_START_TIME => {
                        Some(value.into_inner())
                    }
                    _ => None,
                })
        };
        assert_eq!(after(1, Some(200.0)), Some(200.0));
        assert_eq!(
            after(2, Some(100.0)),
            Some(100.0),
            "the earlier start shows"
        );
        assert_eq!(after(1, Some(300.0)), Some(100.0));
        assert_eq!(
            after(2, None),
            Some(300.0),
            "a gone actor's start goes with it"
        );
        assert_eq!(after(1, None), Some(0.0));
    }
}
