use std::collections::BTreeSet;
use std::sync::Arc;

use crate::LockName;

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
/// let options = LockOptions::default().lock_name_label(watched);
/// let everywhere = LockOptions::default().lock_name_label(true); // same as LockNameLabel::On
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
        if enabled {
            Self::On
        } else {
            Self::Off
        }
    }
}
