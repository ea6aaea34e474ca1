use std::time::Duration;

use crate::{LockError, LockOptions};

/// Jitter on the candidates' retry period, as client-go's `JitterFactor` 1.2.
const RETRY_JITTER: f64 = 1.2;

/// Timings of a leader election, in the spirit of Kubernetes client-go's leader election.
///
/// | setter | default | meaning |
/// |---|---|---|
/// | [`lease_duration`](Self::lease_duration) | 15 s | how long a leader's lease lasts on the store; a crashed leader is replaced within lease + retry |
/// | [`renew_deadline`](Self::renew_deadline) | 10 s | a leader that cannot confirm a renewal (counted from its send time) within this steps down |
/// | [`retry_period`](Self::retry_period) | 2 s | leaders renew and candidates retry this often (candidates with up to ×1.2 jitter) |
///
/// Rule: `lease_duration > renew_deadline > 1.2 × retry_period`, all non-zero.
///
/// ```
/// use mongolock::ElectionOptions;
/// use std::time::Duration;
///
/// let options = ElectionOptions::default()
///     .lease_duration(Duration::from_secs(6))
///     .renew_deadline(Duration::from_secs(4))
///     .retry_period(Duration::from_secs(1));
/// assert!(options.validate().is_ok());
/// assert!(options.retry_period(Duration::from_secs(4)).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionOptions {
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    lock_name_label: bool,
}

impl Default for ElectionOptions {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lock_name_label: true,
        }
    }
}

impl ElectionOptions {
    /// Lease length on the store.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::ElectionOptions::default().lease_duration(Duration::from_secs(30));
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long a leader may go without a confirmed renewal before it is deposed locally.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::ElectionOptions::default().renew_deadline(Duration::from_secs(12));
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// Renewal cadence of the leader and retry interval of the candidates.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::ElectionOptions::default().retry_period(Duration::from_secs(1));
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// Whether the election's metrics carry its name as the `lock` label (default on:
    /// elections are few, and operators want to see each).
    ///
    /// ```
    /// let options = mongolock::ElectionOptions::default().lock_name_label(false);
    /// assert!(options.validate().is_ok());
    /// ```
    pub fn lock_name_label(mut self, enabled: bool) -> Self {
        self.lock_name_label = enabled;
        self
    }

    /// The retry period in effect.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::ElectionOptions::default().retry_period_value(), Duration::from_secs(2));
    /// ```
    pub fn retry_period_value(&self) -> Duration {
        self.retry_period
    }

    /// Checks `lease_duration > renew_deadline > 1.2 × retry_period > 0`.
    ///
    /// ```
    /// use mongolock::{ElectionOptions, LockError};
    /// use std::time::Duration;
    /// let bad = ElectionOptions::default().renew_deadline(Duration::from_secs(20));
    /// assert!(matches!(bad.validate(), Err(LockError::InvalidOptions(_))));
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        let invalid = |message: String| Err(LockError::InvalidOptions(message));
        if self.retry_period.is_zero() {
            return invalid("retry_period must be greater than zero".to_owned());
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid(format!(
                "lease_duration ({:?}) must be longer than renew_deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        let jittered = self.retry_period.mul_f64(RETRY_JITTER);
        if self.renew_deadline <= jittered {
            return invalid(format!(
                "renew_deadline ({:?}) must be longer than 1.2 × retry_period ({jittered:?})",
                self.renew_deadline
            ));
        }
        Ok(())
    }

    /// The lock options that implement these timings.
    pub(crate) fn lock_options(&self) -> Result<LockOptions, LockError> {
        self.validate()?;
        let options = LockOptions::default()
            .expiry(self.lease_duration)
            .renew_deadline(self.renew_deadline)
            .extension_cadence(self.retry_period)
            .busy_wait(self.retry_period, self.retry_period.mul_f64(RETRY_JITTER))
            .lock_name_label(self.lock_name_label);
        options.validate()?;
        Ok(options)
    }
}
