//! How many renewals go in one store call, from how long the calls take.
//!
//! The renewer sends everything that is due at once, up to this size, so the size bounds
//! what one command costs, not how many renewals go out. Two limits, both measured:
//!
//! - **Deadlines.** A renewal must come back well before the loss deadline it is racing:
//!   a batch holds no more leases than the measured time per lease says can be renewed
//!   within a [`LATENCY_SHARE`] of the time left of the lease it is sized for (a bulk
//!   batch's last, an urgent one's first). A batch that took longer
//!   than that (a timeout counts as its whole time) replaces what was measured before: the
//!   server has changed, and the next batches shrink at once.
//! - **Cost.** A batch takes about `a + b·n + c·n²` for `n` leases: a round trip, a cost
//!   per lease, and on some servers a cost per lease that grows with the list (the test
//!   server matches lease ids against the whole list for each document; MongoDB looks each
//!   up in a sorted set). The three are fitted to recent batches by least squares, and where
//!   the time per lease, `a/n + b + c·n`, is lowest (`√(a/c)`) caps the size: past it,
//!   bigger batches renew fewer leases per second. It caps only where the fit says it is
//!   clearly cheaper per lease than the size the deadlines allow; where the fit finds no
//!   such minimum (MongoDB: `c` about 0), a flat curve, or too few distinct sizes to go
//!   on, only the deadlines cap.
//!
//! Recent batches count for more: each new one keeps [`DECAY`] of what was measured.

use std::time::Duration;

/// The size before anything has been measured.
const START: usize = 1_000;
/// The smallest size: below it the round trip, not the leases, is what a command costs.
const MIN: usize = 16;
/// The smallest size the cost fit may ask for: a fit that puts the cheapest size below it
/// is more likely noise than a server that renews a hundred leases faster one by one.
const COST_FLOOR: usize = 128;
/// The share of its leases' time left that one batch may take.
const LATENCY_SHARE: u32 = 4;
/// How much of the measurements so far survive each new one.
const DECAY: f64 = 0.95;
/// How much cheaper per lease a smaller size must be, by the fit, to be chosen over the
/// size the deadlines allow: less, and noise on a flat curve would decide.
const CLEARLY_CHEAPER: f64 = 1.25;
/// Sizes are fitted in thousands of leases, which keeps the sums of the fit well scaled.
const SCALE: f64 = 1_000.0;

/// What the manager has measured of its renewal commands.
#[derive(Debug, Clone)]
pub(crate) struct BatchSize {
    max: usize,
    /// Decayed sums of leases renewed and seconds taken: the mean time per lease.
    leases: f64,
    seconds: f64,
    /// Decayed sums for the least-squares fit of seconds against `x` = leases / [`SCALE`]:
    /// `Σxᵏ` for k = 0..=4 and `Σt·xᵏ` for k = 0..=2.
    x_powers: [f64; 5],
    t_x_powers: [f64; 3],
}

impl BatchSize {
    /// Sizes between [`MIN`] and `max` (the store's largest batch; at least 1).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            leases: 0.0,
            seconds: 0.0,
            x_powers: [0.0; 5],
            t_x_powers: [0.0; 3],
        }
    }

    /// The most renewals to put in a store call whose leases have `time_left` before
    /// their loss deadlines.
    pub(crate) fn limit(&self, time_left: Duration) -> usize {
        let floor = MIN.min(self.max);
        if self.leases <= 0.0 || self.seconds <= 0.0 {
            return START.clamp(floor, self.max);
        }
        let per_lease = self.seconds / self.leases;
        let budget = (time_left / LATENCY_SHARE).as_secs_f64();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let in_time = ((budget / per_lease).min(usize::MAX as f64) as usize).clamp(floor, self.max);
        self.cheaper_than(in_time)
            .unwrap_or(in_time)
            .clamp(floor, self.max)
    }

    /// A smaller size than `size` at which the fitted time per lease is clearly lower (by
    /// [`CLEARLY_CHEAPER`]): on a curve that is flat within the noise, more leases per
    /// command is better.
    fn cheaper_than(&self, size: usize) -> Option<usize> {
        let [a, b, c] = self.fit()?;
        // (With `&&` instead, a fit with one of them negative reaches `√(a/c)`, a NaN, which
        // `min` turns into `usize::MAX`: never below `size`, so the answer is `None` all the
        // same; only `a` exactly 0 would differ. The mutant survives as equivalent.)
        if a <= 0.0 || c <= 0.0 {
            return None;
        }
        let per_lease = |n: usize| {
            #[allow(clippy::cast_precision_loss)]
            let x = n as f64 / SCALE;
            a / x + b + c * x
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let cheapest = (((a / c).sqrt() * SCALE).min(usize::MAX as f64) as usize)
            .max(COST_FLOOR.min(self.max));
        // (`<=` for either `<` changes only exact ties: at `cheapest == size` the second
        // test fails anyway, and a float tie in the second is never met; both mutants
        // survive as equivalent.)
        (cheapest < size && per_lease(cheapest) * CLEARLY_CHEAPER < per_lease(size))
            .then_some(cheapest)
    }

    /// `[a, b, c]` of `t ≈ a + b·x + c·x²` by least squares, if the sizes measured are
    /// spread enough to say.
    fn fit(&self) -> Option<[f64; 3]> {
        let s = &self.x_powers;
        let matrix = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]];
        let det = determinant(&matrix);
        // Relative to the scale of its entries: near zero when the sizes barely differ
        // (and NaN, never a usable fit, fails the comparison too). (`>=` differs only where
        // the two are exactly equal, which measured sizes never make: the mutant survives
        // as equivalent.)
        let spread = det.abs() > 1e-9 * s[0] * s[2] * s[4];
        // Cramer's rule: each coefficient is the determinant with its column replaced by
        // the right-hand side, over the matrix's.
        spread.then(|| {
            std::array::from_fn(|column| {
                let mut replaced = matrix;
                for (row, t) in replaced.iter_mut().zip(self.t_x_powers) {
                    row[column] = t;
                }
                determinant(&replaced) / det
            })
        })
    }

    /// A batch of `leases` renewals, sent with `time_left` before the last of their loss
    /// deadlines (the one its size was chosen for), was answered (or timed out) after `took`.
    pub(crate) fn record(&mut self, leases: usize, took: Duration, time_left: Duration) {
        if leases == 0 {
            return;
        }
        let late = took > time_left / LATENCY_SHARE;
        let kept = if late { 0.0 } else { DECAY };
        let seconds = took.as_secs_f64();
        #[allow(clippy::cast_precision_loss)]
        let count = leases as f64;
        self.leases = self.leases * kept + count;
        self.seconds = self.seconds * kept + seconds;
        // A late batch says the server changed, but one point fits no curve: the fit keeps
        // its history and learns from the late batch like any other.
        let x = count / SCALE;
        let mut power = 1.0;
        for (k, sum) in self.x_powers.iter_mut().enumerate() {
            *sum = *sum * DECAY + power;
            if let Some(t_sum) = self.t_x_powers.get_mut(k) {
                *t_sum = *t_sum * DECAY + seconds * power;
            }
            power *= x;
        }
        tracing::trace!(
            leases,
            ?took,
            ?time_left,
            micros_per_lease = self.seconds / self.leases * 1e6,
            limit_for_time_left = self.limit(time_left),
            "renewal batch measured"
        );
    }
}

fn determinant(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

#[cfg(test)]
#[allow(clippy::cast_precision_loss)]
mod tests;
