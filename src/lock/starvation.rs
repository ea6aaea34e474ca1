//! Starvation mode, as in Go's `sync.Mutex`: stay fast while contention is brief, but once
//! other processes have been trying for longer than a backoff interval they have lost at
//! least a round to us, so this process's own waiters step back for one turn.
//!
//! The store keeps the earliest start of the other processes' waits per grant, and a release
//! returns it; the rule only needs that figure and the longest backoff sleep.

use std::time::Duration;

use crate::error::StoreError;
use crate::store::ReleaseOutcome;

/// How long local waiters step back after `released`, if at all. The others are asleep in
/// their backoff: re-taking the lock at once would starve them, so step back for a whole
/// backoff interval — the longest any of them sleeps between attempts — so each gets an
/// attempt in.
pub(crate) fn step_back(
    released: &Result<ReleaseOutcome, StoreError>,
    longest_backoff: Duration,
) -> Option<Duration> {
    match released {
        Ok(ReleaseOutcome::Released {
            contended_for: Some(waited),
        }) if *waited >= longest_backoff => Some(longest_backoff),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_back_only_for_others_who_waited_a_whole_backoff() {
        let max = Duration::from_millis(800);
        let released = |waited: Option<u64>| {
            Ok(ReleaseOutcome::Released {
                contended_for: waited.map(Duration::from_millis),
            })
        };
        assert_eq!(step_back(&released(Some(800)), max), Some(max));
        assert_eq!(step_back(&released(Some(799)), max), None);
        assert_eq!(step_back(&released(None), max), None);
        assert_eq!(step_back(&Ok(ReleaseOutcome::NotOwner), max), None);
        assert_eq!(step_back(&Err(StoreError::backend("down")), max), None);
    }
}
