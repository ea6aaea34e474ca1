use std::time::Duration;

use crate::error::LockError;
use crate::options::{LockNameLabel, LockOptions, MAX_LEASE_DURATION};

/// Jitter on the candidates' retry period, as client-go's `JitterFactor` 1.2.
const RETRY_JITTER: f64 = 1.2;

/// Timings of a leader election, in the spirit of Kubernetes client-go's leader election.
/// The words are those of [`LockOptions`]: an election runs on a lock whose
/// `lease_duration` and `renew_deadline` are these, whose renew interval is the retry
/// period, and whose retry backoff is `retry_period ..= 1.2 × retry_period`.
///
/// | setter | default | meaning |
/// |---|---|---|
/// | [`lease_duration`](Self::lease_duration) | 15 s | how long a leader's lease lasts on the store; a crashed leader is replaced within lease + retry |
/// | [`renew_deadline`](Self::renew_deadline) | 10 s | a leader that cannot confirm a renewal (counted from its send time) within this steps down |
/// | [`retry_period`](Self::retry_period) | 2 s | leaders renew and candidates retry this often (candidates with up to ×1.2 jitter) |
/// | [`lock_name_label`](Self::lock_name_label) | on | whether the election's metrics carry its name |
///
/// Rule: `lease_duration > renew_deadline > 1.2 × retry_period`, within the bounds of
/// [`LockOptions`].
///
/// ```
/// use mongolock::ElectionOptions;
/// use std::time::Duration;
///
/// let options = ElectionOptions::default()
///     .with_lease_duration(Duration::from_secs(6))
///     .with_renew_deadline(Duration::from_secs(4))
///     .with_retry_period(Duration::from_secs(1));
/// assert!(options.validate().is_ok());
/// assert!(options.with_retry_period(Duration::from_secs(4)).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionOptions {
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    lock_name_label: LockNameLabel,
}

impl Default for ElectionOptions {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lock_name_label: LockNameLabel::On,
        }
    }
}

impl ElectionOptions {
    /// Lease length on the store.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::ElectionOptions::default().with_lease_duration(Duration::from_secs(30));
    /// assert_eq!(options.lease_duration(), Duration::from_secs(30));
    /// assert!(options.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long a leader may go without a confirmed renewal before it is deposed locally.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::ElectionOptions::default().with_renew_deadline(Duration::from_secs(12));
    /// assert_eq!(options.renew_deadline(), Duration::from_secs(12));
    /// assert!(options.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// Renewal cadence of the leader and retry interval of the candidates.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::ElectionOptions::default().with_retry_period(Duration::from_secs(1));
    /// assert_eq!(options.retry_period(), Duration::from_secs(1));
    /// assert!(options.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// Whether the election's metrics carry its name as the `lock` label, as
    /// [`LockOptions::with_lock_name_label`] (default on: elections are few, and operators
    /// want to see each).
    ///
    /// ```
    /// use mongolock::{ElectionOptions, LockNameLabel};
    /// let options = ElectionOptions::default().with_lock_name_label(false);
    /// assert_eq!(options.lock_name_label(), &LockNameLabel::Off);
    /// assert!(options.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_lock_name_label(mut self, policy: impl Into<LockNameLabel>) -> Self {
        self.lock_name_label = policy.into();
        self
    }

    /// The lease length.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::ElectionOptions::default().lease_duration(), Duration::from_secs(15));
    /// ```
    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// The renew deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::ElectionOptions::default().renew_deadline(), Duration::from_secs(10));
    /// ```
    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline
    }

    /// The retry period.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::ElectionOptions::default().retry_period(), Duration::from_secs(2));
    /// ```
    pub fn retry_period(&self) -> Duration {
        self.retry_period
    }

    /// The election's metric label policy.
    ///
    /// ```
    /// use mongolock::LockNameLabel;
    /// assert_eq!(mongolock::ElectionOptions::default().lock_name_label(), &LockNameLabel::On);
    /// ```
    pub fn lock_name_label(&self) -> &LockNameLabel {
        &self.lock_name_label
    }

    /// The longest a candidate sleeps between attempts: the retry period with its jitter.
    fn jittered_retry(&self) -> Result<Duration, LockError> {
        Duration::try_from_secs_f64(self.retry_period.as_secs_f64() * RETRY_JITTER)
            .ok()
            .filter(|jittered| *jittered <= MAX_LEASE_DURATION)
            .ok_or_else(|| {
                LockError::InvalidOptions(format!(
                    "retry_period ({:?}) must not exceed {MAX_LEASE_DURATION:?}",
                    self.retry_period
                ))
            })
    }

    /// Checks `lease_duration > renew_deadline > 1.2 × retry_period > 0`, and the bounds of
    /// the lock options these timings become ([`LockOptions::validate`]: a lease of at least
    /// [`MIN_LEASE_DURATION`](crate::MIN_LEASE_DURATION), other durations and the gaps
    /// between them of at least [`MIN_SETTING_DURATION`](crate::MIN_SETTING_DURATION)).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] naming the rule that is broken.
    ///
    /// ```
    /// use mongolock::{ElectionOptions, LockError};
    /// use std::time::Duration;
    /// let bad = ElectionOptions::default().with_renew_deadline(Duration::from_secs(20));
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
        let jittered = self.jittered_retry()?;
        if self.renew_deadline <= jittered {
            return invalid(format!(
                "renew_deadline ({:?}) must be longer than 1.2 × retry_period ({jittered:?})",
                self.renew_deadline
            ));
        }
        self.derived(&LockOptions::default())?.validate()
    }

    /// The lock options that implement these timings on top of the manager's `defaults`
    /// (which keep deciding the idle actor timeout).
    pub(crate) fn lock_options(&self, defaults: &LockOptions) -> Result<LockOptions, LockError> {
        self.validate()?;
        let options = self.derived(defaults)?;
        options.validate()?;
        Ok(options)
    }

    /// These timings as lock options on top of `defaults`, unchecked.
    fn derived(&self, defaults: &LockOptions) -> Result<LockOptions, LockError> {
        Ok(defaults
            .clone()
            .with_lease_duration(self.lease_duration)
            .with_renew_deadline(self.renew_deadline)
            .with_renew_interval(self.retry_period)
            .with_retry_backoff(self.retry_period, self.jittered_retry()?)
            .with_adaptive_backoff(false)
            .with_lock_name_label(self.lock_name_label.clone()))
    }
}
