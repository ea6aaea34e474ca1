//! Medians, percentiles and spreads of repeated measurements.

use std::time::Duration;

/// The `q`-quantile (0..=1) of `values` by nearest rank; `None` when empty.
pub(crate) fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let last = sorted.len() - 1;
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((last as f64) * q.clamp(0.0, 1.0)).round() as usize;
    sorted.get(rank.min(last)).copied()
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => sorted.get(middle).copied(),
        _ => Some(f64::midpoint(sorted[middle - 1], sorted[middle])),
    }
}

/// Several repetitions of one figure: median and range.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) count: usize,
}

impl Summary {
    /// `None` when there is nothing to summarise.
    pub(crate) fn of(values: &[f64]) -> Option<Self> {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        Some(Self {
            median: median(&finite)?,
            min: finite.iter().copied().fold(f64::INFINITY, f64::min),
            max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            count: finite.len(),
        })
    }

    /// The range around the median as a percentage of it (`±x %` of the widest side).
    pub(crate) fn spread_percent(&self) -> f64 {
        if self.median == 0.0 {
            return 0.0;
        }
        let wider = (self.max - self.median).max(self.median - self.min);
        100.0 * wider / self.median.abs()
    }
}

/// Microseconds of a duration, as a float.
pub(crate) fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Milliseconds of a duration, as a float.
pub(crate) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
