use std::fmt;

/// Why a held lock was lost, as reported by [`LockGuard::lost`](crate::LockGuard::lost).
///
/// A manual release never produces a loss. Every other way a hold can end does, so a holder
/// is never left believing it still holds a lock it does not.
///
/// ```
/// use mongolock::LossReason;
/// assert_eq!(LossReason::Superseded.as_str(), "superseded");
/// assert_eq!(LossReason::Superseded.to_string(), "the lock was taken over or its record deleted");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// A renewal found the record no longer carries our lease: another owner took it over
    /// (after our lease expired on the store) or the record was deleted.
    Superseded,
    /// The local renew deadline passed while a renewal was still unanswered (store hung or
    /// unreachable). Measured from when the last successful renewal was *sent*, so it fires
    /// before the lease can expire on the store.
    DeadlineExceeded,
    /// The local renew deadline passed while the store kept answering renewals with errors.
    StoreErrors {
        /// The last error the store returned.
        last_error: String,
    },
    /// The manager was shut down while the lock was held; the lock was released.
    Shutdown,
    /// The runtime actor that renewed this lock failed; renewal has stopped.
    RuntimeFailed,
}

impl LossReason {
    /// A short, stable label (used as the `reason` label of the loss metric).
    ///
    /// ```
    /// assert_eq!(mongolock::LossReason::DeadlineExceeded.as_str(), "deadline_exceeded");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Superseded => "superseded",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::StoreErrors { .. } => "store_errors",
            Self::Shutdown => "shutdown",
            Self::RuntimeFailed => "runtime_failed",
        }
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Superseded => f.write_str("the lock was taken over or its record deleted"),
            Self::DeadlineExceeded => {
                f.write_str("no renewal was confirmed before the local renew deadline")
            }
            Self::StoreErrors { last_error } => write!(
                f,
                "renewals failed until the local renew deadline (last error: {last_error})"
            ),
            Self::Shutdown => f.write_str("the lock manager shut down"),
            Self::RuntimeFailed => f.write_str("the lock's runtime actor failed"),
        }
    }
}
