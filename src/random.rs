//! The runtime's randomness — backoff jitter and lease ids — from one generator per thread,
//! seeded from the operating system. The crate's deterministic simulation seeds it instead
//! (`testing::seed_random`), so that one seed replays one schedule exactly.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

thread_local! {
    static GENERATOR: RefCell<StdRng> = RefCell::new(StdRng::from_rng(&mut rand::rng()));
}

/// Runs `use_it` with this thread's generator.
pub(crate) fn with_rng<T>(use_it: impl FnOnce(&mut StdRng) -> T) -> T {
    GENERATOR.with_borrow_mut(use_it)
}

/// 16 random bytes (a lease id's).
pub(crate) fn bytes16() -> [u8; 16] {
    with_rng(Rng::random)
}

/// Re-seeds this thread's generator: every backoff delay and lease id drawn on this thread
/// from now on follows from `seed`.
#[cfg(feature = "testing")]
pub(crate) fn seed_thread(seed: u64) {
    GENERATOR.with_borrow_mut(|rng| *rng = StdRng::seed_from_u64(seed));
}
