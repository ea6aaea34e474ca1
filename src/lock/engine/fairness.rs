//! Bounded unfairness across processes: stay fast while others wait briefly, but once a
//! waiter in another process has waited the fairness bound, give the lock up to it.
//!
//! The store keeps, per grant, since when other processes have waited (each failed attempt
//! reports its process's longest wait as a duration, never a client timestamp), and a
//! release or hand-over returns how long that is. A chain of local passes asks the store
//! at least once per bound (see `HeldLease::can_pass_locally`), so the answer is never older
//! than the bound either.

use std::time::Duration;

use crate::error::StoreError;
use crate::kind::LockKind;
use crate::options::LockOptions;
use crate::store::ReleaseOutcome;

/// Whether others have waited long enough that this process must give the place up:
/// `contended_for` (as a release or hand-over reported it) has reached the bound.
/// In arrival order the store decides every turn, so nobody here steps aside for it.
pub(crate) fn others_starving(contended_for: Option<Duration>, options: &LockOptions) -> bool {
    !options.in_arrival_order()
        && contended_for.is_some_and(|waited| waited >= options.fairness_bound())
}

/// How long local waiters step back after `released`, if at all. The release woke the
/// waiters elsewhere through the store's release feed; the step back keeps this process
/// from re-taking the lock before they get in. It lasts the bound (the longest anyone
/// elsewhere is meant to wait), or a whole backoff interval if that is shorter — by then
/// every waiter elsewhere has made an attempt even without the feed.
///
/// A reader/writer lock never steps back: its store already takes turns between the
/// processes (the earliest-marked manager's writer goes first, and readers waiting when a
/// writer leaves go before the next one), and a step back would ignore the release feed
/// while this process's own writer may be the one whose turn it is, leaving the place empty.
pub(crate) fn step_back(
    released: &Result<ReleaseOutcome, StoreError>,
    options: &LockOptions,
    kind: LockKind,
) -> Option<Duration> {
    if kind == LockKind::ReadWrite {
        return None;
    }
    match released {
        Ok(ReleaseOutcome::Released { contended_for })
            if others_starving(*contended_for, options) =>
        {
            Some(options.fairness_bound().min(options.retry_backoff().1))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_back_only_for_others_who_waited_the_bound() {
        let bound = Duration::from_millis(100);
        let options = LockOptions::default().with_fairness_bound(bound);
        let released = |waited: Option<u64>| {
            Ok(ReleaseOutcome::Released {
                contended_for: waited.map(Duration::from_millis),
            })
        };
        assert_eq!(
            step_back(&released(Some(100)), &options, LockKind::Mutex),
            Some(bound)
        );
        assert_eq!(
            step_back(&released(Some(99)), &options, LockKind::Mutex),
            None
        );
        assert_eq!(step_back(&released(None), &options, LockKind::Mutex), None);
        assert_eq!(
            step_back(&Ok(ReleaseOutcome::NotOwner), &options, LockKind::Mutex),
            None
        );
        assert_eq!(
            step_back(&Err(StoreError::backend("down")), &options, LockKind::Mutex),
            None
        );
        // Never longer than a whole backoff interval.
        let short_backoff = options
            .clone()
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(30));
        assert_eq!(
            step_back(&released(Some(500)), &short_backoff, LockKind::Mutex),
            Some(Duration::from_millis(30))
        );
        // Permits step back as a mutex does; a reader/writer lock's store takes the turns.
        let permits = LockKind::Semaphore { permits: 2 };
        assert_eq!(
            step_back(&released(Some(100)), &options, permits),
            Some(bound)
        );
        assert_eq!(
            step_back(&released(Some(500)), &options, LockKind::ReadWrite),
            None
        );
    }
}
