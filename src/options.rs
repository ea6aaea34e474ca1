//! [`LockOptions`]: how a lock is held and waited for, and [`LockNameLabel`], which locks
//! carry their name on metrics.
//!
//! The settings have two scopes, so that nothing depends on which handle of a name happened
//! to come first:
//!
//! - **Per acquisition** — everything but the idle timeout: expiry, cadence, renew deadline,
//!   the busy-wait range and strategy, and the metric label policy belong to each `acquire`
//!   and the hold it produces. Handles of one name may use different values; each waiter's
//!   attempts, hold and metrics follow its own handle's options.
//! - **Per manager** — [`idle_actor_timeout`](LockOptions::idle_actor_timeout) governs the
//!   actors of every name and is taken from the defaults given to
//!   [`LockManager::start`](crate::LockManager::start); `lock_with` options that name a
//!   different one are refused with [`LockError::InvalidOptions`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::name::LockName;

/// The longest lease accepted: a year. Leases are computed by the store's clock (for
/// MongoDB, `$dateAdd` on `$$NOW`), and a bound keeps every deadline representable there and
/// in the local monotonic clock.
pub const MAX_EXPIRY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The shortest lease accepted: 100 ms. A lease must outlast an acquisition's round trip
/// to the store, a renewal and the margin the holder is given to stop; shorter leases
/// never work against a real server.
pub const MIN_EXPIRY: Duration = Duration::from_millis(100);

/// The finest time step any setting may use, and the least room between the cadence, the
/// renew deadline and the expiry: 1 ms, the resolution of MongoDB's clock (`$$NOW`) and of
/// the runtime's timers.
pub const MIN_STEP: Duration = Duration::from_millis(1);

/// How a lock is held and waited for. Build it by chaining `with_*` setters on the default;
/// the combination is checked by [`LockManager::start`](crate::LockManager::start) and
/// [`LockManager::lock_with`](crate::LockManager::lock_with), never at first use.
///
/// | setting | scope | default | meaning |
/// |---|---|---|---|
/// | [`expiry`](Self::expiry) | acquisition | 30 s | lease length on the store; a crashed holder blocks others at most this long |
/// | [`extension_cadence`](Self::extension_cadence) | acquisition | expiry / 3 | how often a held lease is renewed |
/// | [`renew_deadline`](Self::renew_deadline) | acquisition | (expiry + cadence) / 2 | without a confirmed renewal *sent* within this, the holder is told it lost the lock |
/// | [`busy_wait`](Self::busy_wait) | acquisition | 10 ms ..= 800 ms | sleep between attempts while another process holds the lock |
/// | [`adaptive_backoff`](Self::adaptive_backoff) | acquisition | on | sleep `min·1.5^n` ±20 % (off: uniformly random in the busy-wait range) |
/// | [`lock_name_label`](Self::lock_name_label) | acquisition | off | which locks carry a `lock` label with their name on metrics (off / on / allow-list) |
/// | [`idle_actor_timeout`](Self::idle_actor_timeout) | manager | 60 s | how long a per-name actor lingers after its lock goes idle |
///
/// Rules: [`MIN_EXPIRY`] `<= expiry <=` [`MAX_EXPIRY`]; every other duration at least
/// [`MIN_STEP`] (1 ms) and at most a year; `extension_cadence < renew_deadline < expiry`, each
/// at least [`MIN_STEP`] apart; and busy-wait `min <= max`. An invalid combination is
/// refused with the bound it breaks named, never accepted to fail at run time. The idle
/// timeout is the manager's: only the defaults given to
/// [`LockManager::start`](crate::LockManager::start) decide it.
///
/// ```
/// use mongolock::LockOptions;
/// use std::time::Duration;
///
/// let options = LockOptions::default()
///     .with_expiry(Duration::from_secs(10))
///     .with_extension_cadence(Duration::from_secs(2))
///     .with_busy_wait(Duration::from_millis(20), Duration::from_millis(500))
///     .with_adaptive_backoff(false);
/// assert!(options.validate().is_ok());
/// assert_eq!(options.renew_deadline(), Duration::from_secs(6));
/// assert!(options.clone().with_renew_deadline(Duration::from_secs(10)).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    expiry: Duration,
    extension_cadence: Option<Duration>,
    renew_deadline: Option<Duration>,
    busy_wait_min: Duration,
    busy_wait_max: Duration,
    adaptive_backoff: bool,
    idle_actor_timeout: Duration,
    lock_name_label: LockNameLabel,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(30),
            extension_cadence: None,
            renew_deadline: None,
            busy_wait_min: Duration::from_millis(10),
            busy_wait_max: Duration::from_millis(800),
            adaptive_backoff: true,
            idle_actor_timeout: Duration::from_secs(60),
            lock_name_label: LockNameLabel::Off,
        }
    }
}

impl LockOptions {
    /// Sets the lease length on the store (measured by the store's clock).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_expiry(Duration::from_secs(6));
    /// assert_eq!(options.extension_cadence(), Duration::from_secs(2));
    /// ```
    pub fn with_expiry(mut self, expiry: Duration) -> Self {
        self.expiry = expiry;
        self
    }

    /// Sets how often a held lease is renewed (default: a third of the expiry).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_extension_cadence(Duration::from_secs(1));
    /// assert_eq!(options.extension_cadence(), Duration::from_secs(1));
    /// ```
    pub fn with_extension_cadence(mut self, cadence: Duration) -> Self {
        self.extension_cadence = Some(cadence);
        self
    }

    /// Sets how long a holder may go without a confirmed renewal before it is told the lock
    /// is lost, measured from when the last successful acquire or renewal was sent. Must be
    /// shorter than the expiry, so the holder always learns first. Default: halfway between
    /// the cadence and the expiry (20 s with the defaults), which leaves room for one failed
    /// renewal.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_renew_deadline(Duration::from_secs(25));
    /// assert_eq!(options.renew_deadline(), Duration::from_secs(25));
    /// ```
    pub fn with_renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = Some(deadline);
        self
    }

    /// Sets the range of the sleep between acquisition attempts while the lock is held
    /// elsewhere.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default()
    ///     .with_busy_wait(Duration::from_millis(1), Duration::from_millis(50));
    /// assert_eq!(options.busy_wait(), (Duration::from_millis(1), Duration::from_millis(50)));
    /// ```
    pub fn with_busy_wait(mut self, min: Duration, max: Duration) -> Self {
        self.busy_wait_min = min;
        self.busy_wait_max = max;
        self
    }

    /// With `true` (the default), the n-th consecutive failed attempt sleeps `min·1.5^n` with
    /// ±20 % jitter, clamped to the busy-wait range, reset after a success: fewer store calls
    /// under long contention, quick retries when contention is brief. With `false`, every
    /// sleep is uniformly random in the busy-wait range (DistributedLock's policy). Either
    /// way a release reported by the store's release feed ends the sleep at once.
    ///
    /// ```
    /// let options = mongolock::LockOptions::default().with_adaptive_backoff(false);
    /// assert!(!options.adaptive_backoff());
    /// ```
    pub fn with_adaptive_backoff(mut self, enabled: bool) -> Self {
        self.adaptive_backoff = enabled;
        self
    }

    /// Sets how long the per-name actor stays alive with no holder and no waiter before the
    /// supervisor stops it, bounding memory by the number of active locks. A manager
    /// setting: only the defaults given to [`LockManager::start`](crate::LockManager::start)
    /// decide it.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_idle_actor_timeout(Duration::from_secs(5));
    /// assert_eq!(options.idle_actor_timeout(), Duration::from_secs(5));
    /// ```
    pub fn with_idle_actor_timeout(mut self, timeout: Duration) -> Self {
        self.idle_actor_timeout = timeout;
        self
    }

    /// Sets which locks carry a `lock` label with their name on their metrics:
    /// `false`/[`LockNameLabel::Off`] (default, so many lock names cannot explode metric
    /// cardinality), `true`/[`LockNameLabel::On`], or [`LockNameLabel::allow_list`] of the
    /// names worth watching one by one.
    ///
    /// ```
    /// use mongolock::{metrics::LockNameLabel, LockOptions};
    /// let all = LockOptions::default().with_lock_name_label(true);
    /// let some = LockOptions::default().with_lock_name_label(LockNameLabel::allow_list(["billing"]));
    /// assert_eq!(all.lock_name_label(), &LockNameLabel::On);
    /// ```
    pub fn with_lock_name_label(mut self, policy: impl Into<LockNameLabel>) -> Self {
        self.lock_name_label = policy.into();
        self
    }

    /// The lease length.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().expiry(), Duration::from_secs(30));
    /// ```
    pub fn expiry(&self) -> Duration {
        self.expiry
    }

    /// The renewal cadence in effect (explicit, or a third of the expiry).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().extension_cadence(), Duration::from_secs(10));
    /// ```
    pub fn extension_cadence(&self) -> Duration {
        self.extension_cadence.unwrap_or(self.expiry / 3)
    }

    /// The renew deadline in effect (explicit, or halfway between cadence and expiry).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().renew_deadline(), Duration::from_secs(20));
    /// // Computed without overflow, whatever the durations.
    /// let huge = mongolock::LockOptions::default().with_expiry(Duration::MAX);
    /// assert!(huge.renew_deadline() > Duration::from_secs(1 << 62));
    /// ```
    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline.unwrap_or_else(|| {
            let cadence = self.extension_cadence();
            // Halves first when the sum would overflow (a nanosecond of rounding at most).
            self.expiry
                .checked_add(cadence)
                .map_or(self.expiry / 2 + cadence / 2, |sum| sum / 2)
        })
    }

    /// The busy-wait range `(min, max)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (min, max) = mongolock::LockOptions::default().busy_wait();
    /// assert_eq!((min, max), (Duration::from_millis(10), Duration::from_millis(800)));
    /// ```
    pub fn busy_wait(&self) -> (Duration, Duration) {
        (self.busy_wait_min, self.busy_wait_max)
    }

    /// Whether adaptive backoff is on.
    ///
    /// ```
    /// assert!(mongolock::LockOptions::default().adaptive_backoff());
    /// ```
    pub fn adaptive_backoff(&self) -> bool {
        self.adaptive_backoff
    }

    /// How long an idle per-name actor lingers.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().idle_actor_timeout(), Duration::from_secs(60));
    /// ```
    pub fn idle_actor_timeout(&self) -> Duration {
        self.idle_actor_timeout
    }

    /// The metric label policy.
    ///
    /// ```
    /// use mongolock::metrics::LockNameLabel;
    /// assert_eq!(mongolock::LockOptions::default().lock_name_label(), &LockNameLabel::Off);
    /// ```
    pub fn lock_name_label(&self) -> &LockNameLabel {
        &self.lock_name_label
    }

    /// Checks that the settings can work together.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidOptions`] naming the first setting that breaks a rule.
    ///
    /// ```
    /// use mongolock::{LockError, LockOptions};
    /// use std::time::Duration;
    ///
    /// let bad = LockOptions::default()
    ///     .with_expiry(Duration::from_secs(10))
    ///     .with_extension_cadence(Duration::from_secs(10));
    /// assert!(matches!(bad.validate(), Err(LockError::InvalidOptions(_))));
    /// let huge = LockOptions::default().with_expiry(Duration::MAX);
    /// assert!(matches!(huge.validate(), Err(LockError::InvalidOptions(_))));
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        let invalid = |message: String| Err(LockError::InvalidOptions(message));
        let cadence = self.extension_cadence();
        let deadline = self.renew_deadline();
        if self.expiry < MIN_EXPIRY {
            return invalid(format!(
                "expiry ({:?}) must be at least {MIN_EXPIRY:?}: a lease must outlast an acquisition's round trip, a renewal and the holder's margin to stop",
                self.expiry
            ));
        }
        for (setting, value) in [
            ("expiry", self.expiry),
            ("extension_cadence", cadence),
            ("renew_deadline", deadline),
            ("busy_wait min", self.busy_wait_min),
            ("busy_wait max", self.busy_wait_max),
            ("idle_actor_timeout", self.idle_actor_timeout),
        ] {
            if value < MIN_STEP {
                return invalid(format!(
                    "{setting} ({value:?}) must be at least {MIN_STEP:?}, the resolution of the store's clock and of the runtime's timers"
                ));
            }
            if value > MAX_EXPIRY {
                return invalid(format!(
                    "{setting} ({value:?}) must not exceed {MAX_EXPIRY:?} (a year)"
                ));
            }
        }
        if cadence >= self.expiry {
            return invalid(format!(
                "extension_cadence ({cadence:?}) must be shorter than expiry ({:?})",
                self.expiry
            ));
        }
        if deadline + MIN_STEP > self.expiry {
            return invalid(format!(
                "renew_deadline ({deadline:?}) must be at least {MIN_STEP:?} shorter than expiry ({:?}) so the holder learns of a loss before anyone else can take the lock",
                self.expiry
            ));
        }
        if cadence + MIN_STEP > deadline {
            return invalid(format!(
                "renew_deadline ({deadline:?}) must be at least {MIN_STEP:?} longer than extension_cadence ({cadence:?}), or the lock is lost before its first renewal"
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

/// Which locks carry their name as a `lock` label on their metrics.
///
/// Labels multiply series: a service with 100 000 lock names must not create 100 000 series
/// per metric. The default is [`Off`](Self::Off); turn it [`On`](Self::On) when the names
/// are few, or list the names worth watching one by one.
///
/// ```
/// use mongolock::metrics::LockNameLabel;
/// use mongolock::{LockName, LockOptions};
///
/// let watched = LockNameLabel::allow_list(["billing", "scheduler"]);
/// assert!(watched.labels(&LockName::new("billing")?));
/// assert!(!watched.labels(&LockName::new("order-8812")?));
/// let options = LockOptions::default().with_lock_name_label(watched);
/// let everywhere = LockOptions::default().with_lock_name_label(true); // same as LockNameLabel::On
/// # Ok::<(), mongolock::LockError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum LockNameLabel {
    /// No `lock` label (all locks' series are aggregated).
    #[default]
    Off,
    /// Every lock using these options is labelled.
    On,
    /// Only these names are labelled; others are aggregated without the label.
    AllowList(Arc<BTreeSet<String>>),
}

impl LockNameLabel {
    /// Labels exactly the given names.
    ///
    /// ```
    /// let policy = mongolock::metrics::LockNameLabel::allow_list(["billing"]);
    /// # let _ = policy;
    /// ```
    pub fn allow_list<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::AllowList(Arc::new(names.into_iter().map(Into::into).collect()))
    }

    /// Whether `name` gets the label under this policy.
    ///
    /// ```
    /// use mongolock::{metrics::LockNameLabel, LockName};
    /// assert!(LockNameLabel::On.labels(&LockName::new("x")?));
    /// assert!(!LockNameLabel::Off.labels(&LockName::new("x")?));
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn labels(&self, name: &LockName) -> bool {
        match self {
            Self::Off => false,
            Self::On => true,
            Self::AllowList(names) => names.contains(name.as_str()),
        }
    }
}

impl From<bool> for LockNameLabel {
    fn from(enabled: bool) -> Self {
        if enabled { Self::On } else { Self::Off }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_derived() {
        let options = LockOptions::default();
        assert!(options.validate().is_ok());
        assert_eq!(options.extension_cadence(), Duration::from_secs(10));
        assert_eq!(options.renew_deadline(), Duration::from_secs(20));
    }

    #[test]
    fn invalid_combinations_are_rejected() {
        let ms = Duration::from_millis;
        let cases = [
            LockOptions::default().with_expiry(Duration::ZERO),
            LockOptions::default().with_extension_cadence(Duration::ZERO),
            LockOptions::default().with_extension_cadence(Duration::from_secs(30)),
            LockOptions::default().with_extension_cadence(Duration::from_secs(31)),
            LockOptions::default().with_renew_deadline(Duration::from_secs(30)),
            LockOptions::default().with_renew_deadline(Duration::from_secs(5)),
            LockOptions::default().with_busy_wait(ms(100), ms(10)),
            LockOptions::default().with_busy_wait(Duration::ZERO, ms(10)),
            LockOptions::default().with_idle_actor_timeout(Duration::ZERO),
            LockOptions::default().with_expiry(MAX_EXPIRY + Duration::from_secs(1)),
        ];
        for options in cases {
            assert!(
                matches!(options.validate(), Err(LockError::InvalidOptions(_))),
                "{options:?} should be rejected"
            );
        }
    }

    /// Options that pass validation work: durations too short for any store to honour are
    /// refused, with the bound they break named (a 3 ns lease used to pass and then never
    /// be acquired).
    #[test]
    fn settings_below_the_lower_bounds_are_refused_with_the_bound_named() {
        let ns = Duration::from_nanos;
        let ms = Duration::from_millis;
        let cases = [
            (LockOptions::default().with_expiry(ns(3)), "100ms"),
            (
                LockOptions::default()
                    .with_expiry(ns(3))
                    .with_extension_cadence(ns(1))
                    .with_renew_deadline(ns(2)),
                "100ms",
            ),
            (
                LockOptions::default()
                    .with_expiry(ms(1_000))
                    .with_extension_cadence(ns(1))
                    .with_renew_deadline(ms(500)),
                "1ms",
            ),
            (LockOptions::default().with_expiry(ms(99)), "100ms"),
            (LockOptions::default().with_busy_wait(ns(1), ms(10)), "1ms"),
            (
                LockOptions::default().with_idle_actor_timeout(ns(500)),
                "1ms",
            ),
            (
                LockOptions::default()
                    .with_expiry(ms(100))
                    .with_extension_cadence(ms(30))
                    .with_renew_deadline(Duration::from_micros(30_500)),
                "1ms",
            ),
            (
                LockOptions::default()
                    .with_expiry(ms(100))
                    .with_extension_cadence(ms(30))
                    .with_renew_deadline(Duration::from_micros(99_500)),
                "1ms",
            ),
        ];
        for (options, bound) in cases {
            match options.validate() {
                Err(LockError::InvalidOptions(message)) => {
                    assert!(message.contains(bound), "{message:?} should name {bound}");
                }
                other => panic!("{options:?} should be refused, got {other:?}"),
            }
        }
        let shortest = LockOptions::default().with_expiry(MIN_EXPIRY);
        assert!(shortest.validate().is_ok(), "{shortest:?}");
    }

    #[test]
    fn extreme_durations_never_panic() {
        let extremes = [
            Duration::ZERO,
            Duration::from_nanos(1),
            MAX_EXPIRY,
            Duration::MAX,
        ];
        for expiry in extremes {
            for cadence in extremes {
                for deadline in extremes {
                    let options = LockOptions::default()
                        .with_expiry(expiry)
                        .with_extension_cadence(cadence)
                        .with_renew_deadline(deadline);
                    let _ = options.validate();
                    let _ = LockOptions::default().with_expiry(expiry).validate();
                }
            }
        }
    }
}
