//! How long what a refused waiter leaves on the name's record lasts: this manager's place
//! in line (arrival order), or its writers' mark.

use std::time::Duration;

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
