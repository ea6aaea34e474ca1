//! What a refused waiter leaves on the name's record — this manager's place in line
//! (arrival order), or its writers' mark — and how long it lasts.

use std::time::Duration;

use crate::kind::Access;
use crate::options::LockOptions;

/// The shortest a place in line lasts: a place that ends while its manager's next
/// attempt is on its way (a store call slower than the rest of the place's life) costs
/// that manager its turn, and a second covers a slow round trip on a loaded server.
const PLACE_LIFE_FLOOR: Duration = Duration::from_secs(1);

/// How long a refused reader's or writer's waiting mark lasts: the waiter is back within
/// its longest backoff (sooner when a release wakes it), so its mark outlives that, and no
/// longer.
pub(super) fn mark_lasts(options: &LockOptions) -> Duration {
    options.retry_backoff().1 * 2
}

/// How long a refused manager's place in line lasts (arrival order): as a mark, but at
/// least [`PLACE_LIFE_FLOOR`]. It is also how long a dead or paused waiter holds the line
/// back.
pub(super) fn place_lasts(options: &LockOptions) -> Duration {
    mark_lasts(options).max(PLACE_LIFE_FLOOR)
}

/// How long a mutex's waiter in line (arrival order) waits between attempts while the
/// store's release feed is watching: nothing but its place needs asking for, since a
/// release wakes the head of the line, so it asks only to keep its place, at about half
/// the place's life (the other half covers the round trip). A backoff's ramp from its
/// shortest delay would ask several times a turn for nothing.
pub(super) fn renew_place_after(options: &LockOptions, rng: &mut impl rand::Rng) -> Duration {
    place_lasts(options).mul_f64(rng.random_range(0.4..=0.5))
}

/// What this manager has on the name's record for its refused waiters, each part with how
/// long it lasts at most: its place in the name's line (arrival order: refused since its
/// last grant) and its writers' mark (a writer refused in the default mode: it holds new
/// readers and other managers' writers back). One withdrawal takes both off, so those
/// behind need not wait for them to expire.
#[derive(Default)]
pub(super) struct Listing {
    in_line: Option<Duration>,
    writer_marked: Option<Duration>,
}

impl Listing {
    /// The store refused an attempt for `access` under `options`: it keeps this manager's
    /// place in line in arrival order, its writers' mark for a write otherwise.
    pub(super) fn refused(&mut self, access: Access, options: &LockOptions) {
        if options.in_arrival_order() {
            self.in_line = Some(place_lasts(options));
        } else if access == Access::Write {
            self.writer_marked = Some(mark_lasts(options));
        }
    }

    /// A grant for `access` took this manager's place out of the line; a write's, its
    /// writers' mark.
    pub(super) fn granted(&mut self, access: Access) {
        self.in_line = None;
        if access == Access::Write {
            self.writer_marked = None;
        }
    }

    pub(super) fn is_in_line(&self) -> bool {
        self.in_line.is_some()
    }

    /// Forgets the writers' mark, to withdraw it: how long it would have lasted, if there
    /// was one.
    pub(super) fn take_mark(&mut self) -> Option<Duration> {
        self.writer_marked.take()
    }

    /// Forgets the place and the mark, to withdraw them: how long the longer of them would
    /// have lasted, if there was either.
    pub(super) fn take(&mut self) -> Option<Duration> {
        self.in_line.take().max(self.writer_marked.take())
    }
}
