//! [`LockOptions`]: how one lock is held and waited for, and [`LockNameLabel`], which locks
//! carry their name on metrics.
//!
//! Every setting here belongs to an acquisition: the lease length, renewal interval, renew
//! deadline, retry backoff and metric label policy of each `acquire` and the hold it
//! produces. Handles of one name may use different values; each waiter's attempts, hold and
//! metrics follow its own handle's options. What governs a whole manager (its holder id, how
//! long idle per-name actors linger) is set on its builder,
//! [`LockManagerBuilder`](crate::LockManagerBuilder), and cannot conflict per lock.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::name::LockName;

/// The longest lease accepted: a year. Leases are computed by the store's clock (for
/// MongoDB, `$dateAdd` on `$$NOW`), and a bound keeps every deadline representable there and
/// in the local monotonic clock.
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The shortest lease accepted: 100 ms. A lease must outlast an acquisition's round trip
/// to the store, a renewal and the margin the holder is given to stop; shorter leases
/// never work against a real server.
pub const MIN_LEASE_DURATION: Duration = Duration::from_millis(100);

/// The shortest duration every timing setting but the lease may take — the renew interval
/// and deadline, the retry backoff, an election's retry period, a manager's idle actor
/// timeout — and the least room between the renew interval, the renew deadline and the lease
/// duration: 1 ms, the resolution of MongoDB's clock (`$$NOW`) and of the runtime's timers.
/// A shorter setting could not be told apart from zero. The lease has its own, larger floor,
/// [`MIN_LEASE_DURATION`].
///
/// ```
/// use mongolock::{LockOptions, MIN_SETTING_DURATION};
/// use std::time::Duration;
///
/// let lease = Duration::from_secs(30);
/// let options = LockOptions::default().with_lease_duration(lease);
/// // The renew deadline must end at least this much before the lease does.
/// assert!(options.clone().with_renew_deadline(lease - MIN_SETTING_DURATION).validate().is_ok());
/// assert!(options.with_renew_deadline(lease).validate().is_err());
/// ```
pub const MIN_SETTING_DURATION: Duration = Duration::from_millis(1);

/// How a lock is held and waited for. Build it by chaining `with_*` setters on the default;
/// the combination is checked by [`LockManager::start`](crate::LockManager::start) and
/// [`LockManager::lock_with`](crate::LockManager::lock_with), never at first use.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | [`lease_duration`](Self::lease_duration) | 30 s | lease length on the store; a crashed holder blocks others at most this long |
/// | [`renew_interval`](Self::renew_interval) | lease / 3 | how often a held lease is renewed |
/// | [`renew_deadline`](Self::renew_deadline) | (lease + interval) / 2 | without a confirmed renewal *sent* within this, the holder is told it lost the lock |
/// | [`retry_backoff`](Self::retry_backoff) | 10 ms ..= 800 ms | sleep between attempts while another process holds the lock |
/// | [`adaptive_backoff`](Self::adaptive_backoff) | on | sleep `min·1.5^n` ±20 % (off: uniformly random in the backoff range) |
/// | [`fairness_bound`](Self::fairness_bound) | lease / 300 (100 ms) | a released lock passes to a local waiter only while no waiter in another process has waited longer than this |
/// | [`lock_name_label`](Self::lock_name_label) | off | which locks carry a `lock` label with their name on metrics (off / on / allow-list) |
///
/// The same words as [`ElectionOptions`](crate::ElectionOptions): an election's
/// `lease_duration` and `renew_deadline` are these, and its `retry_period` is both the
/// renew interval and the backoff (`retry_period ..= 1.2 × retry_period`).
///
/// Rules: [`MIN_LEASE_DURATION`] `<= lease_duration <=` [`MAX_LEASE_DURATION`]; every other
/// duration at least [`MIN_SETTING_DURATION`] (1 ms) and at most a year; `renew_interval <
/// renew_deadline < lease_duration`, each at least [`MIN_SETTING_DURATION`] apart; and
/// backoff `min <= max`; the fairness bound at least [`MIN_SETTING_DURATION`] and at most a
/// year. An invalid combination is refused with the bound it breaks named,
/// never accepted to fail at run time.
///
/// ```
/// use mongolock::LockOptions;
/// use std::time::Duration;
///
/// let options = LockOptions::default()
///     .with_lease_duration(Duration::from_secs(10))
///     .with_renew_interval(Duration::from_secs(2))
///     .with_retry_backoff(Duration::from_millis(20), Duration::from_millis(500))
///     .with_adaptive_backoff(false);
/// assert!(options.validate().is_ok());
/// assert_eq!(options.renew_deadline(), Duration::from_secs(6));
/// assert!(options.clone().with_renew_deadline(Duration::from_secs(10)).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    lease_duration: Duration,
    renew_interval: Option<Duration>,
    renew_deadline: Option<Duration>,
    retry_backoff_min: Duration,
    retry_backoff_max: Duration,
    adaptive_backoff: bool,
    fairness_bound: Option<Duration>,
    fairness: Fairness,
    lock_name_label: LockNameLabel,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(30),
            renew_interval: None,
            renew_deadline: None,
            retry_backoff_min: Duration::from_millis(10),
            retry_backoff_max: Duration::from_millis(800),
            adaptive_backoff: true,
            fairness_bound: None,
            fairness: Fairness::Bounded,
            lock_name_label: LockNameLabel::Off,
        }
    }
}

impl LockOptions {
    /// Sets the lease length on the store (measured by the store's clock).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_lease_duration(Duration::from_secs(6));
    /// assert_eq!(options.renew_interval(), Duration::from_secs(2));
    /// ```
    #[must_use]
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// Sets how often a held lease is renewed (default: a third of the lease duration).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_renew_interval(Duration::from_secs(1));
    /// assert_eq!(options.renew_interval(), Duration::from_secs(1));
    /// ```
    #[must_use]
    pub fn with_renew_interval(mut self, interval: Duration) -> Self {
        self.renew_interval = Some(interval);
        self
    }

    /// Sets how long a holder may go without a confirmed renewal before it is told the lock
    /// is lost, measured from when the last successful acquire or renewal was sent. Must be
    /// shorter than the lease duration, so the holder always learns first. Default: halfway
    /// between the renew interval and the lease duration (20 s with the defaults), which
    /// leaves room for one failed renewal.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_renew_deadline(Duration::from_secs(25));
    /// assert_eq!(options.renew_deadline(), Duration::from_secs(25));
    /// ```
    #[must_use]
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
    ///     .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(50));
    /// assert_eq!(options.retry_backoff(), (Duration::from_millis(1), Duration::from_millis(50)));
    /// ```
    #[must_use]
    pub fn with_retry_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.retry_backoff_min = min;
        self.retry_backoff_max = max;
        self
    }

    /// With `true` (the default), the n-th consecutive failed attempt sleeps `min·1.5^n` with
    /// ±20 % jitter, clamped to the backoff range, reset after a success: fewer store calls
    /// under long contention, quick retries when contention is brief. With `false`, every
    /// sleep is uniformly random in the backoff range (DistributedLock's policy). Either
    /// way a release reported by the store's release feed ends the sleep at once.
    ///
    /// ```
    /// let options = mongolock::LockOptions::default().with_adaptive_backoff(false);
    /// assert!(!options.adaptive_backoff());
    /// ```
    #[must_use]
    pub fn with_adaptive_backoff(mut self, enabled: bool) -> Self {
        self.adaptive_backoff = enabled;
        self
    }

    /// Sets how long a waiter in another process may wait while this process keeps the lock
    /// among its own tasks (default: a 300th of the lease duration, 100 ms with the
    /// defaults — dozens of short critical sections in a row, short against the lease a
    /// crashed holder may block others for).
    ///
    /// A released lock passes to a local waiter with no store call only while the store
    /// was heard from less than this ago; otherwise the release hands over through the
    /// store, which says how long the other processes' waiters have waited. Once that is
    /// this long, the lock is released instead, the release wakes them, and this process's
    /// own waiters step back for this long (at most the backoff's maximum) so they get in.
    /// See [`guide::fairness`](crate::guide::fairness) for the exact rule and its bound.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = mongolock::LockOptions::default().with_fairness_bound(Duration::from_millis(20));
    /// assert_eq!(options.fairness_bound(), Duration::from_millis(20));
    /// ```
    #[must_use]
    pub fn with_fairness_bound(mut self, bound: Duration) -> Self {
        self.fairness_bound = Some(bound);
        self
    }

    /// Sets how waiters in different processes take turns: [`Fairness::Bounded`] (the
    /// default: fast, and nobody elsewhere waits much longer than the
    /// [fairness bound](Self::with_fairness_bound)) or [`Fairness::ArrivalOrder`] (grants in
    /// the order the waiters asked, across processes, at about one store call per
    /// acquisition; not for multi-locks). Every process using a name should use the same.
    ///
    /// ```
    /// use mongolock::{Fairness, LockOptions};
    /// let options = LockOptions::default().with_fairness(Fairness::ArrivalOrder);
    /// assert_eq!(options.fairness(), Fairness::ArrivalOrder);
    /// ```
    #[must_use]
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.fairness = fairness;
        self
    }

    /// Sets which locks carry a `lock` label with their name on their metrics:
    /// `false`/[`LockNameLabel::Off`] (default, so many lock names cannot explode metric
    /// cardinality), `true`/[`LockNameLabel::On`], or [`LockNameLabel::allow_list`] of the
    /// names worth watching one by one.
    ///
    /// ```
    /// use mongolock::{LockNameLabel, LockOptions};
    /// let all = LockOptions::default().with_lock_name_label(true);
    /// let some = LockOptions::default().with_lock_name_label(LockNameLabel::allow_list(["billing"]));
    /// assert_eq!(all.lock_name_label(), &LockNameLabel::On);
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
    /// assert_eq!(mongolock::LockOptions::default().lease_duration(), Duration::from_secs(30));
    /// ```
    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// The renew interval in effect (explicit, or a third of the lease duration).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().renew_interval(), Duration::from_secs(10));
    /// ```
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval.unwrap_or(self.lease_duration / 3)
    }

    /// The renew deadline in effect (explicit, or halfway between the renew interval and
    /// the lease duration).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().renew_deadline(), Duration::from_secs(20));
    /// // Computed without overflow, whatever the durations.
    /// let huge = mongolock::LockOptions::default().with_lease_duration(Duration::MAX);
    /// assert!(huge.renew_deadline() > Duration::from_secs(1 << 62));
    /// ```
    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline.unwrap_or_else(|| {
            let interval = self.renew_interval();
            // Halves first when the sum would overflow (a nanosecond of rounding at most).
            self.lease_duration
                .checked_add(interval)
                .map_or(self.lease_duration / 2 + interval / 2, |sum| sum / 2)
        })
    }

    /// The backoff range `(min, max)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (min, max) = mongolock::LockOptions::default().retry_backoff();
    /// assert_eq!((min, max), (Duration::from_millis(10), Duration::from_millis(800)));
    /// ```
    pub fn retry_backoff(&self) -> (Duration, Duration) {
        (self.retry_backoff_min, self.retry_backoff_max)
    }

    /// Whether adaptive backoff is on.
    ///
    /// ```
    /// assert!(mongolock::LockOptions::default().adaptive_backoff());
    /// ```
    pub fn adaptive_backoff(&self) -> bool {
        self.adaptive_backoff
    }

    /// The fairness bound in effect (explicit, or a 300th of the lease duration, at least
    /// [`MIN_SETTING_DURATION`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().fairness_bound(), Duration::from_millis(100));
    /// ```
    pub fn fairness_bound(&self) -> Duration {
        self.fairness_bound
            .unwrap_or_else(|| (self.lease_duration / 300).max(MIN_SETTING_DURATION))
    }

    /// How waiters in different processes take turns.
    ///
    /// ```
    /// use mongolock::Fairness;
    /// assert_eq!(mongolock::LockOptions::default().fairness(), Fairness::Bounded);
    /// ```
    pub fn fairness(&self) -> Fairness {
        self.fairness
    }

    /// Whether grants go in arrival order across processes ([`Fairness::ArrivalOrder`]).
    pub(crate) fn in_arrival_order(&self) -> bool {
        self.fairness == Fairness::ArrivalOrder
    }

    /// Whether a lease taken on `other`'s terms keeps this handle's promises: the same
    /// lease length, renewal cadence and renew deadline (so the same loss margin).
    pub(crate) fn same_lease_terms(&self, other: &LockOptions) -> bool {
        self.lease_duration() == other.lease_duration()
            && self.renew_interval() == other.renew_interval()
            && self.renew_deadline() == other.renew_deadline()
    }

    /// The metric label policy.
    ///
    /// ```
    /// use mongolock::LockNameLabel;
    /// assert_eq!(mongolock::LockOptions::default().lock_name_label(), &LockNameLabel::Off);
    /// ```
    pub fn lock_name_label(&self) -> &LockNameLabel {
        &self.lock_name_label
    }

    /// The margin a holder told of a loss has to stop in before anyone else can be granted
    /// the lock: `lease_duration − renew_deadline`.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(mongolock::LockOptions::default().loss_margin(), Duration::from_secs(10));
    /// ```
    pub fn loss_margin(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline())
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
    ///     .with_lease_duration(Duration::from_secs(10))
    ///     .with_renew_interval(Duration::from_secs(10));
    /// assert!(matches!(bad.validate(), Err(LockError::InvalidOptions(_))));
    /// let huge = LockOptions::default().with_lease_duration(Duration::MAX);
    /// assert!(matches!(huge.validate(), Err(LockError::InvalidOptions(_))));
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        let invalid = |message: String| Err(LockError::InvalidOptions(message));
        let interval = self.renew_interval();
        let deadline = self.renew_deadline();
        if self.lease_duration < MIN_LEASE_DURATION {
            return invalid(format!(
                "lease_duration ({:?}) must be at least {MIN_LEASE_DURATION:?}: a lease must outlast an acquisition's round trip, a renewal and the holder's margin to stop",
                self.lease_duration
            ));
        }
        for (setting, value) in [
            ("lease_duration", self.lease_duration),
            ("renew_interval", interval),
            ("renew_deadline", deadline),
            ("retry_backoff min", self.retry_backoff_min),
            ("retry_backoff max", self.retry_backoff_max),
            ("fairness_bound", self.fairness_bound()),
        ] {
            if value < MIN_SETTING_DURATION {
                return invalid(format!(
                    "{setting} ({value:?}) must be at least {MIN_SETTING_DURATION:?}, the resolution of the store's clock and of the runtime's timers"
                ));
            }
            if value > MAX_LEASE_DURATION {
                return invalid(format!(
                    "{setting} ({value:?}) must not exceed {MAX_LEASE_DURATION:?} (a year)"
                ));
            }
        }
        if interval >= self.lease_duration {
            return invalid(format!(
                "renew_interval ({interval:?}) must be shorter than lease_duration ({:?})",
                self.lease_duration
            ));
        }
        if deadline + MIN_SETTING_DURATION > self.lease_duration {
            return invalid(format!(
                "renew_deadline ({deadline:?}) must be at least {MIN_SETTING_DURATION:?} shorter than lease_duration ({:?}) so the holder learns of a loss before anyone else can take the lock",
                self.lease_duration
            ));
        }
        if interval + MIN_SETTING_DURATION > deadline {
            return invalid(format!(
                "renew_deadline ({deadline:?}) must be at least {MIN_SETTING_DURATION:?} longer than renew_interval ({interval:?}), or the lock is lost before its first renewal"
            ));
        }
        if self.retry_backoff_min > self.retry_backoff_max {
            return invalid(format!(
                "retry_backoff min ({:?}) must not exceed max ({:?})",
                self.retry_backoff_min, self.retry_backoff_max
            ));
        }
        Ok(())
    }
}

/// How waiters in different processes take turns for one lock (see
/// [`guide::fairness`](crate::guide::fairness) for the exact rules and their bounds).
///
/// ```
/// use mongolock::{Fairness, LockOptions};
/// let fifo = LockOptions::default().with_fairness(Fairness::ArrivalOrder);
/// assert_ne!(fifo.fairness(), LockOptions::default().fairness());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Fairness {
    /// Fast first: a released lock passes to a waiter of the same process with no store
    /// call while nobody elsewhere has waited the fairness bound; after that, the others
    /// go first.
    #[default]
    Bounded,
    /// First come, first served across processes: a lock, a permit or a reader/writer
    /// lock's side goes to the waiter that asked first, by the store's clock, wherever it
    /// runs (consecutive readers go in together). Each process's waiting is written on the
    /// record (one place per process, leased so a killed waiter drops out), and every
    /// hand-over asks the store. Multi-locks refuse it.
    ArrivalOrder,
}

/// Which locks carry their name as a `lock` label on their metrics.
///
/// Labels multiply series: a service with 100 000 lock names must not create 100 000 series
/// per metric. The default is [`Off`](Self::Off); turn it [`On`](Self::On) when the names
/// are few, or list the names worth watching one by one.
///
/// ```
/// use mongolock::LockNameLabel;
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
#[non_exhaustive]
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
    /// let policy = mongolock::LockNameLabel::allow_list(["billing"]);
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
    /// use mongolock::{LockName, LockNameLabel};
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
        assert_eq!(options.renew_interval(), Duration::from_secs(10));
        assert_eq!(options.renew_deadline(), Duration::from_secs(20));
    }

    #[test]
    fn invalid_combinations_are_rejected() {
        let ms = Duration::from_millis;
        let cases = [
            LockOptions::default().with_lease_duration(Duration::ZERO),
            LockOptions::default().with_renew_interval(Duration::ZERO),
            LockOptions::default().with_renew_interval(Duration::from_secs(30)),
            LockOptions::default().with_renew_interval(Duration::from_secs(31)),
            LockOptions::default().with_renew_deadline(Duration::from_secs(30)),
            LockOptions::default().with_renew_deadline(Duration::from_secs(5)),
            LockOptions::default().with_retry_backoff(ms(100), ms(10)),
            LockOptions::default().with_retry_backoff(Duration::ZERO, ms(10)),
            LockOptions::default().with_lease_duration(MAX_LEASE_DURATION + Duration::from_secs(1)),
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
            (LockOptions::default().with_lease_duration(ns(3)), "100ms"),
            (
                LockOptions::default()
                    .with_lease_duration(ns(3))
                    .with_renew_interval(ns(1))
                    .with_renew_deadline(ns(2)),
                "100ms",
            ),
            (
                LockOptions::default()
                    .with_lease_duration(ms(1_000))
                    .with_renew_interval(ns(1))
                    .with_renew_deadline(ms(500)),
                "1ms",
            ),
            (LockOptions::default().with_lease_duration(ms(99)), "100ms"),
            (
                LockOptions::default().with_retry_backoff(ns(1), ms(10)),
                "1ms",
            ),
            (
                LockOptions::default()
                    .with_lease_duration(ms(100))
                    .with_renew_interval(ms(30))
                    .with_renew_deadline(Duration::from_micros(30_500)),
                "1ms",
            ),
            (
                LockOptions::default()
                    .with_lease_duration(ms(100))
                    .with_renew_interval(ms(30))
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
        let shortest = LockOptions::default().with_lease_duration(MIN_LEASE_DURATION);
        assert!(shortest.validate().is_ok(), "{shortest:?}");
    }

    #[test]
    fn extreme_durations_never_panic() {
        let extremes = [
            Duration::ZERO,
            Duration::from_nanos(1),
            MAX_LEASE_DURATION,
            Duration::MAX,
        ];
        for expiry in extremes {
            for cadence in extremes {
                for deadline in extremes {
                    let options = LockOptions::default()
                        .with_lease_duration(expiry)
                        .with_renew_interval(cadence)
                        .with_renew_deadline(deadline);
                    let _ = options.validate();
                    let _ = LockOptions::default()
                        .with_lease_duration(expiry)
                        .validate();
                }
            }
        }
    }
}
