//! Each rule on a history that breaks it and on one that keeps it.

use super::*;

fn section(token: u64, entered: u64, counted_until: Option<u64>) -> Section<u64> {
    Section {
        token,
        entered,
        counted_until,
    }
}

fn pair(earlier: usize, later: usize) -> Pair {
    Pair { earlier, later }
}

fn write(token: u64, sent: u64, answered: u64, applied: bool) -> FencedWrite<u64> {
    FencedWrite {
        token,
        sent,
        answered,
        applied,
    }
}

#[test]
fn a_holder_entering_while_another_holds_untold_is_an_overlap() {
    // Given in a shuffled order: the rule orders by entry itself.
    let history = [
        section(3, 30, None),
        section(1, 0, Some(20)),
        section(2, 10, Some(35)),
    ];
    assert_eq!(overlaps(&history), [pair(1, 2), pair(2, 0)]);
}

#[test]
fn a_holder_entering_once_the_other_was_told_or_let_go_is_no_overlap() {
    let history = [
        section(1, 0, Some(10)),
        // At the very instant the first stopped counting.
        section(2, 10, Some(15)),
        section(3, 20, None),
    ];
    assert_eq!(overlaps(&history), []);
    assert!(history[2].holds_untold_at(u64::MAX), "never told nor gone");
}

#[test]
fn tokens_falling_or_repeated_in_entry_order_are_flagged() {
    let history = [
        section(5, 20, None),
        section(5, 10, None),
        section(4, 30, None),
    ];
    assert_eq!(
        tokens_out_of_entry_order(&history),
        [pair(1, 0), pair(0, 2)]
    );
}

#[test]
fn tokens_increasing_in_entry_order_pass_and_ties_in_time_order_by_token() {
    let history = [
        section(7, 10, None),
        section(6, 10, None),
        section(9, 11, None),
    ];
    assert_eq!(entry_order(&history), [1, 0, 2]);
    assert_eq!(tokens_out_of_entry_order(&history), []);
}

#[test]
fn a_write_applied_after_a_larger_token_was_acknowledged_is_flagged() {
    let writes = [
        write(2, 0, 5, true),
        write(3, 6, 8, true),
        // Sent after token 3 was acknowledged.
        write(2, 9, 10, true),
    ];
    assert_eq!(
        stale_writes_applied(&writes),
        [StaleApplied { write: 2, newer: 3 }]
    );
}

#[test]
fn writes_refused_failed_or_sent_before_the_acknowledgement_are_not_flagged() {
    let writes = [
        write(3, 0, 5, true),
        // Sent before token 3's acknowledgement came: not stale.
        write(2, 4, 6, true),
        // Stale, but refused or failed.
        write(2, 7, 8, false),
        // Not applied: no acknowledgement to be stale against.
        write(9, 1, 2, false),
        // The same token again after its own acknowledgement: not stale.
        write(3, 9, 10, true),
    ];
    assert_eq!(stale_writes_applied(&writes), []);
    let acknowledged = Acknowledged::new(&writes);
    assert_eq!(acknowledged.newest_before(5), None, "strictly before");
    assert_eq!(acknowledged.newest_before(6), Some(3));
    assert!(is_stale(2, acknowledged.newest_before(7)));
}
