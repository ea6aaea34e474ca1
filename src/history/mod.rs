//! The rules every recorded history of a lock's holders obeys, stated once (feature
//! `history`), for checkers of such histories: the crate's deterministic simulator, its
//! multi-process fault checker, `mongolock check`, and your own.
//!
//! A history is what a checker recorded of one lock: when each holder entered its critical
//! section and with which fencing token, when it stopped counting as a holder, and the
//! fenced writes made with the tokens. Whatever recorded it, it obeys three rules:
//!
//! 1. **No overlap among holders not told of a loss** ([`overlaps`],
//!    [`Section::holds_untold_at`]). A holder counts from its entry until it is told it lost
//!    the lock or lets go, whichever comes first; no holder enters while another counts.
//! 2. **Tokens increase in entry order** ([`tokens_out_of_entry_order`],
//!    [`token_increases`]). Entry order is by the instant of entry, ties by token.
//! 3. **Every stale write refused** ([`stale_writes_applied`], [`is_stale`]). A write is
//!    stale when a write with a larger token was acknowledged as applied before it was sent;
//!    no stale write is applied.
//!
//! Instants are whatever the checker measures with (`T: Ord + Copy`): nanoseconds of a clock
//! its processes share, or `tokio::time::Instant` under a paused clock. When a holder stopped
//! counting (told of a loss, let go, killed, past a deadline the checker knows exactly) is the
//! checker's to decide, and so are what it allows beyond the rules (a margin after a loss, a
//! holder paused by a fault) and how it reports: the rules take the instants and name the
//! sections or writes that break them.
//!
//! ```
//! use mongolock::history::{Pair, Section, overlaps, tokens_out_of_entry_order};
//!
//! let sections = [
//!     // Entered at 0 and let go at 10.
//!     Section { token: 7, entered: 0_u64, counted_until: Some(10) },
//!     // Entered at 5, while the first still counted.
//!     Section { token: 8, entered: 5, counted_until: Some(12) },
//! ];
//! assert_eq!(overlaps(&sections), [Pair { earlier: 0, later: 1 }]);
//! assert!(tokens_out_of_entry_order(&sections).is_empty());
//! ```

/// One holder's critical section on a lock, as a history recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section<T> {
    /// The fencing token it held.
    pub token: u64,
    /// When it entered (its acquisition returned).
    pub entered: T,
    /// When it stopped counting as a holder not told of a loss: the first of being told of a
    /// loss and letting go. `None` when neither happened before the history ended.
    pub counted_until: Option<T>,
}

impl<T: Ord + Copy> Section<T> {
    /// Rule 1's test: whether this holder, having entered, still holds without having been
    /// told of a loss at `instant`. Nobody else may enter then.
    ///
    /// ```
    /// use mongolock::history::Section;
    ///
    /// let told_at_10 = Section { token: 1, entered: 0_u64, counted_until: Some(10) };
    /// assert!(told_at_10.holds_untold_at(9));
    /// assert!(!told_at_10.holds_untold_at(10));
    /// ```
    #[must_use]
    pub fn holds_untold_at(&self, instant: T) -> bool {
        self.counted_until.is_none_or(|end| instant < end)
    }
}

/// Two sections of one lock, by their indices in the slice a rule was given; `earlier`
/// entered first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The section that entered first.
    pub earlier: usize,
    /// The section that entered after it.
    pub later: usize,
}

/// The indices of `sections` in entry order: by the instant of entry, ties by token.
///
/// ```
/// use mongolock::history::{Section, entry_order};
///
/// let at = |token, entered| Section { token, entered, counted_until: None };
/// assert_eq!(entry_order(&[at(3, 20_u64), at(2, 10), at(1, 10)]), [2, 1, 0]);
/// ```
#[must_use]
pub fn entry_order<T: Ord + Copy>(sections: &[Section<T>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&index| (sections[index].entered, sections[index].token));
    order
}

/// Rule 1 over one lock's sections, in any order: every pair where the later entered while
/// the earlier held untold.
///
/// ```
/// use mongolock::history::{Section, overlaps};
///
/// // The first was told of its loss at 5; the second entered at 6: no overlap.
/// let sections = [
///     Section { token: 1, entered: 0_u64, counted_until: Some(5) },
///     Section { token: 2, entered: 6, counted_until: None },
/// ];
/// assert!(overlaps(&sections).is_empty());
/// ```
#[must_use]
pub fn overlaps<T: Ord + Copy>(sections: &[Section<T>]) -> Vec<Pair> {
    let order = entry_order(sections);
    let mut found = Vec::new();
    for (place, &earlier) in order.iter().enumerate() {
        for &later in &order[place + 1..] {
            // In entry order: once one entered after the earlier stopped counting, so did
            // every one after it.
            if !sections[earlier].holds_untold_at(sections[later].entered) {
                break;
            }
            found.push(Pair { earlier, later });
        }
    }
    found
}

/// Rule 2's test: whether `later`, a token given after `earlier` on the same lock, follows
/// it.
///
/// ```
/// assert!(mongolock::history::token_increases(16, 17));
/// assert!(!mongolock::history::token_increases(17, 17));
/// ```
#[must_use]
pub fn token_increases(earlier: u64, later: u64) -> bool {
    later > earlier
}

/// Rule 2 over one lock's sections, in any order: every two sections, one entering right
/// after the other, whose tokens do not increase.
///
/// ```
/// use mongolock::history::{Pair, Section, tokens_out_of_entry_order};
///
/// let sections = [
///     Section { token: 9, entered: 0_u64, counted_until: Some(5) },
///     Section { token: 8, entered: 6, counted_until: Some(7) },
/// ];
/// assert_eq!(tokens_out_of_entry_order(&sections), [Pair { earlier: 0, later: 1 }]);
/// ```
#[must_use]
pub fn tokens_out_of_entry_order<T: Ord + Copy>(sections: &[Section<T>]) -> Vec<Pair> {
    entry_order(sections)
        .windows(2)
        .filter(|pair| !token_increases(sections[pair[0]].token, sections[pair[1]].token))
        .map(|pair| Pair {
            earlier: pair[0],
            later: pair[1],
        })
        .collect()
}

/// One fenced write to the data a lock protects, as a history recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FencedWrite<T> {
    /// The fencing token it carried.
    pub token: u64,
    /// When it was sent.
    pub sent: T,
    /// When its answer came.
    pub answered: T,
    /// Whether the answer said it was applied (not refused, not failed).
    pub applied: bool,
}

/// The writes acknowledged as applied, to ask which token was the largest acknowledged at
/// an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged<T> {
    /// (answered, the largest token acknowledged until then), by answer.
    largest: Vec<(T, u64)>,
}

impl<T: Ord + Copy> Acknowledged<T> {
    /// The applied writes among `writes`, in any order.
    #[must_use]
    pub fn new(writes: &[FencedWrite<T>]) -> Self {
        let mut applied: Vec<(T, u64)> = writes
            .iter()
            .filter(|write| write.applied)
            .map(|write| (write.answered, write.token))
            .collect();
        applied.sort_unstable();
        let mut largest = 0;
        for (_, token) in &mut applied {
            largest = largest.max(*token);
            *token = largest;
        }
        Self { largest: applied }
    }

    /// The largest token of a write acknowledged as applied strictly before `instant`.
    ///
    /// ```
    /// use mongolock::history::{Acknowledged, FencedWrite};
    ///
    /// let applied = |token, answered| FencedWrite { token, sent: 0_u64, answered, applied: true };
    /// let acknowledged = Acknowledged::new(&[applied(2, 10), applied(1, 20)]);
    /// assert_eq!(acknowledged.newest_before(10), None);
    /// assert_eq!(acknowledged.newest_before(25), Some(2));
    /// ```
    #[must_use]
    pub fn newest_before(&self, instant: T) -> Option<u64> {
        let before = self
            .largest
            .partition_point(|(answered, _)| *answered < instant);
        before.checked_sub(1).map(|last| self.largest[last].1)
    }
}

/// Rule 3's test: whether a write with `token`, sent when `newest` was the largest token
/// acknowledged as applied, is stale (and so must be refused).
///
/// ```
/// assert!(mongolock::history::is_stale(6, Some(7)));
/// assert!(!mongolock::history::is_stale(7, Some(7)));
/// assert!(!mongolock::history::is_stale(6, None));
/// ```
#[must_use]
pub fn is_stale(token: u64, newest: Option<u64>) -> bool {
    newest.is_some_and(|newest| newest > token)
}

/// A stale write that was applied: rule 3 broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleApplied {
    /// Its index in the slice the rule was given.
    pub write: usize,
    /// The larger token acknowledged before it was sent.
    pub newer: u64,
}

/// Rule 3 over the fenced writes to one lock's data, in any order: every stale write that
/// was applied.
///
/// ```
/// use mongolock::history::{FencedWrite, StaleApplied, stale_writes_applied};
///
/// let writes = [
///     FencedWrite { token: 8, sent: 0_u64, answered: 1, applied: true },
///     // Sent after token 8 was acknowledged, with token 7, and applied.
///     FencedWrite { token: 7, sent: 2, answered: 3, applied: true },
/// ];
/// assert_eq!(stale_writes_applied(&writes), [StaleApplied { write: 1, newer: 8 }]);
/// ```
#[must_use]
pub fn stale_writes_applied<T: Ord + Copy>(writes: &[FencedWrite<T>]) -> Vec<StaleApplied> {
    let acknowledged = Acknowledged::new(writes);
    writes
        .iter()
        .enumerate()
        .filter(|(_, write)| write.applied)
        .filter_map(|(write, fenced)| {
            let newer = acknowledged.newest_before(fenced.sent);
            is_stale(fenced.token, newer).then(|| StaleApplied {
                write,
                newer: newer.unwrap_or_default(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
