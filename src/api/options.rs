use std::time::Duration;

use crate::metrics::LockNameLabel;
use crate::LockError;

/// How a lock is held and waited for. Build it by chaining setters on the default; the
/// combination is checked by [`LockManager::start`](crate::LockManager::start) and
/// [`LockManager::lock_with`](crate::LockManager::lock_with), never at first use.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | [`expiry`](Self::expiry) | 30 s | lease length on the store; a crashed holder blocks others at most this long |
/// | [`extension_cadence`](Self::extension_cadence) | expiry / 3 | how often a held lease is renewed |
/// | [`renew_deadline`](Self::renew_deadline) | (expiry + cadence) / 2 | without a confirmed renewal *sent* within this, the holder is told it lost the lock |
/// | [`busy_wait`](Self::busy_wait) | 10 ms ..= 800 ms | sleep between attempts while another process holds the lock |
/// | [`adaptive_backoff`](Self::adaptive_backoff) | off | sleep `min·1.5^n` ±20 % instead of uniformly random |
/// | [`idle_actor_timeout`](Self::idle_actor_timeout) | 60 s | how long the per-name actor lingers after the lock goes idle |
/// | [`lock_name_label`](Self::lock_name_label) | off | which locks carry a `lock` label with their name on metrics (off / on / allow-list) |
///
/// Rules: every duration is non-zero, `extension_cadence < renew_deadline < expiry`, and
/// busy-wait `min <= max`.
///
/// ```
/// use mongolock::LockOptions;
/// use std::time::Duration;
///
/// let options = LockOptions::default()
///     .expiry(Duration::from_secs(10))
///     .extension_cadence(Duration::from_secs(2))
///     .busy_wait(Duration::from_millis(20), Duration::from_millis(500))
///     .adaptive_backoff(true);
/// assert!(options.validate().is_ok());
/// assert!(options.clone().renew_deadline(Duration::from_secs(10)).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub(crate) expiry: Duration,
    extension_cadence: Option<Duration>,
    renew_deadline: Option<Duration>,
    pub(crate) busy_wait_min: Duration,
    pub(crate) busy_wait_max: Duration,
    pub(crate) adaptive_backoff: bool,
    pub(crate) idle_actor_timeout: Duration,
    pub(crate) lock_name_label: LockNameLabel,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(30),
            extension_cadence: None,
            renew_deadline: None,
            busy_wait_min: Duration::from_millis(10),
            busy_wait_max: Duration::from_millis(800),
            adaptive_backoff: false,
            idle_actor_timeout: Duration::from_secs(60),
            lock_name_label: LockNameLabel::Off,
        }
    }
}

impl LockOptions {
    /// Lease length on the store (measured by the store's clock).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().expiry(Duration::from_secs(5));
    /// assert_eq!(options.extension_cadence_value(), Duration::from_secs(5) / 3);
    /// ```
    pub fn expiry(mut self, expiry: Duration) -> Self {
        self.expiry = expiry;
        self
    }

    /// How often a held lease is renewed (default: a third of the expiry).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().extension_cadence(Duration::from_secs(1));
    /// assert_eq!(options.extension_cadence_value(), Duration::from_secs(1));
    /// ```
    pub fn extension_cadence(mut self, cadence: Duration) -> Self {
        self.extension_cadence = Some(cadence);
        self
    }

    /// How long a holder may go without a confirmed renewal before it is told the lock is lost,
    /// measured from when the last successful acquire or renewal was sent. Must be shorter than
    /// the expiry, so the holder always learns first. Default: halfway between the cadence and
    /// the expiry (20 s with the defaults), which leaves room for one failed renewal.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default();
    /// assert_eq!(options.renew_deadline_value(), Duration::from_secs(20));
    /// ```
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = Some(deadline);
        self
    }

    /// Range of the sleep between acquisition attempts while the lock is held elsewhere.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default()
    ///     .busy_wait(Duration::from_millis(1), Duration::from_millis(50));
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn busy_wait(mut self, min: Duration, max: Duration) -> Self {
        self.busy_wait_min = min;
        self.busy_wait_max = max;
        self
    }

    /// With `true`, the n-th consecutive failed attempt sleeps `min·1.5^n` with ±20 % jitter,
    /// clamped to the busy-wait range, reset after a success: fewer store calls under long
    /// contention, quick retries when contention is brief.
    ///
    /// ```
    /// let options = mongolock::LockOptions::default().adaptive_backoff(true);
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn adaptive_backoff(mut self, enabled: bool) -> Self {
        self.adaptive_backoff = enabled;
        self
    }

    /// How long the per-name actor stays alive with no holder and no waiter before the
    /// supervisor stops it, bounding memory by the number of active locks.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().idle_actor_timeout(Duration::from_secs(5));
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn idle_actor_timeout(mut self, timeout: Duration) -> Self {
        self.idle_actor_timeout = timeout;
        self
    }

    /// Which locks using these options carry a `lock` label with their name on their
    /// metrics: `false`/[`LockNameLabel::Off`] (default, so many lock names cannot explode
    /// metric cardinality), `true`/[`LockNameLabel::On`], or
    /// [`LockNameLabel::allow_list`] of the names worth watching one by one.
    ///
    /// ```
    /// use mongolock::{metrics::LockNameLabel, LockOptions};
    /// let all = LockOptions::default().lock_name_label(true);
    /// let some = LockOptions::default().lock_name_label(LockNameLabel::allow_list(["billing"]));
    /// assert!(some.validate().is_ok());
    /// ```
    pub fn lock_name_label(mut self, policy: impl Into<LockNameLabel>) -> Self {
        self.lock_name_label = policy.into();
        self
    }

    /// The lease length.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().expiry_value(), Duration::from_secs(30));
    /// ```
    pub fn expiry_value(&self) -> Duration {
        self.expiry
    }

    /// The renewal cadence in effect (explicit or derived).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().extension_cadence_value(), Duration::from_secs(10));
    /// ```
    pub fn extension_cadence_value(&self) -> Duration {
        self.extension_cadence.unwrap_or(self.expiry / 3)
    }

    /// The renew deadline in effect (explicit or derived).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().renew_deadline_value(), Duration::from_secs(20));
    /// ```
    pub fn renew_deadline_value(&self) -> Duration {
        self.renew_deadline
            .unwrap_or((self.expiry + self.extension_cadence_value()) / 2)
    }

    /// Checks that the settings can work together.
    ///
    /// ```
    /// use mongolock::{LockError, LockOptions};
    /// use std::time::Duration;
    ///
    /// let bad = LockOptions::default()
    ///     .expiry(Duration::from_secs(10))
    ///     .extension_cadence(Duration::from_secs(10));
    /// assert!(matches!(bad.validate(), Err(LockError::InvalidOptions(_))));
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        let invalid = |message: String| Err(LockError::InvalidOptions(message));
        let cadence = self.extension_cadence_value();
        let deadline = self.renew_deadline_value();
        for (setting, value) in [
            ("expiry", self.expiry),
            ("extension_cadence", cadence),
            ("renew_deadline", deadline),
            ("busy_wait min", self.busy_wait_min),
            ("busy_wait max", self.busy_wait_max),
            ("idle_actor_timeout", self.idle_actor_timeout),
        ] {
            if value.is_zero() {
                return invalid(format!("{setting} must be greater than zero"));
            }
        }
        if cadence >= self.expiry {
            return invalid(format!(
                "extension_cadence ({cadence:?}) must be shorter than expiry ({:?})",
                self.expiry
            ));
        }
        if deadline >= self.expiry {
            return invalid(format!(
                "renew_deadline ({deadline:?}) must be shorter than expiry ({:?}) so the holder learns of a loss before anyone else can take the lock",
                self.expiry
            ));
        }
        if deadline <= cadence {
            return invalid(format!(
                "renew_deadline ({deadline:?}) must be longer than extension_cadence ({cadence:?}), or the lock is lost before its first renewal"
            ));
        }
        if self.busy_wait_min > self.busy_wait_max {
            return invalid(format!(
                "busy_wait min ({:?}) must not exceed max ({:?})",
                self.busy_wait_min, self.busy_wait_max
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_derived() {
        let options = LockOptions::default();
        assert!(options.validate().is_ok());
        assert_eq!(options.extension_cadence_value(), Duration::from_secs(10));
        assert_eq!(options.renew_deadline_value(), Duration::from_secs(20));
    }

    #[test]
    fn invalid_combinations_are_rejected() {
        let ms = Duration::from_millis;
        let cases = [
            LockOptions::default().expiry(Duration::ZERO),
            LockOptions::default().extension_cadence(Duration::ZERO),
            LockOptions::default().extension_cadence(Duration::from_secs(30)),
            LockOptions::default().extension_cadence(Duration::from_secs(31)),
            LockOptions::default().renew_deadline(Duration::from_secs(30)),
            LockOptions::default().renew_deadline(Duration::from_secs(5)),
            LockOptions::default().busy_wait(ms(100), ms(10)),
            LockOptions::default().busy_wait(Duration::ZERO, ms(10)),
            LockOptions::default().idle_actor_timeout(Duration::ZERO),
        ];
        for options in cases {
            assert!(
                matches!(options.validate(), Err(LockError::InvalidOptions(_))),
                "{options:?} should be rejected"
            );
        }
    }
}
