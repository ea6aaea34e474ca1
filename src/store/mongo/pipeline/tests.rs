use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};

use super::acquire::{Waits, acquire, shared_acquire};
use super::extend::{LeasesByRecord, shared_extend};
use super::filter::{by_holder, by_name, shared_by_kind};
use super::hand_over::{hand_over, shared_hand_over};
use super::release::{Released, release, shared_release};
use crate::kind::Access;
use crate::name::LockName;
use crate::store::mongo::fields::{
    ACCESS, GRANTED_HOLDER, HOLDER, HOLDERS, OTHERS_IN_LINE, OWN_LEASES, READERS_TURN_FROM,
    READERS_WAITING_UNTIL, TURN_BEGINS, WAKE,
};
use crate::store::mongo::line;
use crate::store::request::LeaseKey;

#[test]
fn names_are_only_values() {
    let name = LockName::new("$gt").unwrap();
    assert_eq!(by_name(&name), doc! { "_id": "$gt" });
    let pipeline = acquire(
        &Bson::Null,
        "$holder",
        Duration::from_secs(1),
        (Duration::ZERO, Waits::Unlisted),
    );
    let holder = pipeline[1]
        .get_document("$set")
        .and_then(|set| set.get_document(HOLDER))
        .and_then(|holder| holder.get_array("$cond"))
        .unwrap();
    assert_eq!(holder[1], Bson::Document(doc! { "$literal": "$holder" }));
}

#[test]
fn shared_names_and_holders_are_only_values() {
    let name = LockName::new("$gt").unwrap();
    assert_eq!(
        shared_by_kind(&name, Access::Permit { permits: 3 }),
        doc! {
            "_id": "$gt",
            "kind": "semaphore",
            "$or": [{ "permits": 3_i64 }, { "recountedFrom": 3_i64 }],
        }
    );
    assert_eq!(
        shared_by_kind(&name, Access::Read),
        doc! { "_id": "$gt", "kind": "rwlock" }
    );
    assert_eq!(
        by_holder(&name, &Bson::Null),
        doc! { "_id": "$gt", "holders.lease": Bson::Null }
    );
    let pipeline = shared_acquire(
        Access::Write,
        &Bson::Null,
        "$holder",
        Duration::from_secs(1),
        (Duration::ZERO, Duration::ZERO, false),
    );
    let decided = pipeline[2].get_document("$set").unwrap();
    let granted = decided.get_document(GRANTED_HOLDER).unwrap();
    assert_eq!(
        granted.get_array("$cond").unwrap()[1],
        Bson::Document(doc! { "$literal": "$holder" })
    );
    let appended = decided
        .get_document(HOLDERS)
        .and_then(|holders| holders.get_array("$cond"))
        .unwrap()[1]
        .as_document()
        .and_then(|concat| concat.get_array("$concatArrays").ok())
        .and_then(|parts| parts[1].as_array())
        .and_then(|entries| entries[0].as_document())
        .cloned()
        .unwrap();
    assert_eq!(
        appended.get(HOLDER),
        Some(&Bson::Document(doc! { "$literal": "$holder" }))
    );
    assert_eq!(
        appended.get(ACCESS),
        Some(&Bson::Document(doc! { "$literal": "write" }))
    );
}

#[test]
fn a_renewal_batch_groups_leases_by_record_and_names_stay_values() {
    let batch = LeasesByRecord::group([
        ("$gt", Bson::Int32(1)),
        ("b.c", Bson::Int32(2)),
        ("$gt", Bson::Int32(3)),
    ]);
    assert_eq!(batch.records(), 2);
    assert_eq!(
        batch.filter(),
        doc! { "_id": { "$in": ["$gt", "b.c"] }, "kind": { "$exists": true } }
    );
    let pipeline = shared_extend(&batch, Duration::from_secs(1), true);
    assert_eq!(
        pipeline[0],
        doc! { "$set": { OWN_LEASES: { "$arrayElemAt": [
            { "$literal": [[1, 3], [2]] },
            { "$indexOfArray": [{ "$literal": ["$gt", "b.c"] }, "$_id"] },
        ] } } }
    );
}

/// The plain cycle (a first attempt, a default-mode hand-over, shared kinds out of
/// line) neither reads nor writes the line; a waiter of the default mode is listed in
/// it, and a mutex's release reads it to name whom it wakes.
#[test]
fn the_plain_cycle_never_reads_or_writes_the_line() {
    let mentions_line = |stages: &[Document]| {
        let text = format!("{stages:?}");
        text.contains(line::LINE) || text.contains(OTHERS_IN_LINE)
    };
    let expiry = Duration::from_secs(1);
    let plain = acquire(&Bson::Null, "h", expiry, (Duration::ZERO, Waits::Unlisted));
    assert!(!mentions_line(&plain), "{plain:?}");
    assert_eq!(
        plain.len(),
        3,
        "the plain cycle's acquire keeps its three stages"
    );
    assert!(!mentions_line(&hand_over(&Bson::Null, "h", expiry, None)));
    let shared = shared_acquire(
        Access::Read,
        &Bson::Null,
        "h",
        expiry,
        (Duration::ZERO, Duration::ZERO, false),
    );
    assert!(!mentions_line(&shared));
    assert!(!mentions_line(&shared_release(
        &[Bson::Null],
        None,
        false,
        Released::MaybeAWrite
    )));
    let in_line = acquire(
        &Bson::Null,
        "h",
        expiry,
        (Duration::ZERO, Waits::InLine(expiry)),
    );
    assert!(mentions_line(&in_line));
    let listed = acquire(
        &Bson::Null,
        "h",
        expiry,
        (Duration::ZERO, Waits::Listed(expiry)),
    );
    assert!(mentions_line(&listed));
    assert_eq!(listed.len(), 3, "listing a waiter adds no stage");
    assert!(
        format!("{listed:?}").contains("ordered"),
        "a default-mode waiter's place orders nobody"
    );
    assert!(
        !format!("{in_line:?}").contains("ordered: false"),
        "{in_line:?}"
    );
    assert!(
        mentions_line(&release(false)),
        "a release wakes the earliest listed"
    );
    // A lease of arrival order keeps its released record while its line lasts.
    assert!(mentions_line(&release(true)));
    assert!(mentions_line(&shared_release(
        &[Bson::Null],
        None,
        true,
        Released::MaybeAWrite
    )));
}

/// Only a write's release can begin a readers' turn: a release of reads or permits
/// known as such leaves the turn out; one that may free a write, or whose access is
/// not known, keeps it.
#[test]
fn only_a_release_that_may_free_a_write_carries_the_readers_turn() {
    let key = |access: Option<Access>| {
        let key = LeaseKey::shared(LockName::new("n").unwrap(), crate::store::LeaseId::new());
        match access {
            Some(access) => key.with_access(access),
            None => key,
        }
    };
    let (read, permit) = (
        key(Some(Access::Read)),
        key(Some(Access::Permit { permits: 3 })),
    );
    let (write, unknown) = (key(Some(Access::Write)), key(None));
    assert_eq!(Released::of([&read, &permit]), Released::NoWrite);
    assert_eq!(Released::of([&read, &write]), Released::MaybeAWrite);
    assert_eq!(Released::of([&permit, &unknown]), Released::MaybeAWrite);
    let mentions_turn = |stages: &[Document]| {
        let text = format!("{stages:?}");
        text.contains(TURN_BEGINS) || text.contains(READERS_TURN_FROM)
    };
    for (released, turn) in [(Released::NoWrite, false), (Released::MaybeAWrite, true)] {
        let release = shared_release(&[Bson::Null], None, false, released);
        assert_eq!(mentions_turn(&release), turn, "{release:?}");
        let hand_over = shared_hand_over((&Bson::Null, released), &Bson::Null, Vec::new(), false);
        assert_eq!(mentions_turn(&hand_over), turn, "{hand_over:?}");
    }
}

#[test]
fn a_zero_retry_leaves_the_waiting_mark_as_it_is() {
    let pipeline = |retry| {
        shared_acquire(
            Access::Read,
            &Bson::Null,
            "h",
            Duration::from_secs(1),
            (Duration::ZERO, retry, false),
        )
    };
    let refused = |pipeline: &[Document]| {
        pipeline[2]
            .get_document("$set")
            .and_then(|set| set.get_document(READERS_WAITING_UNTIL))
            .and_then(|mark| mark.get_array("$cond"))
            .map(|branches| branches[2].clone())
            .unwrap()
    };
    assert_eq!(
        refused(&pipeline(Duration::ZERO)),
        Bson::from(format!("${READERS_WAITING_UNTIL}"))
    );
    assert!(
        refused(&pipeline(Duration::from_millis(300)))
            .as_document()
            .is_some_and(|mark| mark.contains_key("$max"))
    );
}

/// A shared release of arrival order names in `wake` whom it wakes, after the stage that
/// removed the released entries (it reads the holders left), and so does a shared
/// hand-over in line; the default mode's leave `wake` alone, so their `releasedAt` wakes
/// every feed and the plain cycle stays as small as it was.
#[test]
fn only_a_shared_release_in_line_names_whom_it_wakes() {
    let writes_wake = |stages: &[Document]| {
        stages.iter().position(|stage| {
            stage
                .get_document("$set")
                .is_ok_and(|set| set.contains_key(WAKE))
        })
    };
    let removes = |stages: &[Document]| {
        stages.iter().position(|stage| {
            stage
                .get_document("$set")
                .is_ok_and(|set| set.contains_key(HOLDERS))
        })
    };
    for released in [Released::NoWrite, Released::MaybeAWrite] {
        let in_line = shared_release(&[Bson::Null], None, true, released);
        assert!(writes_wake(&in_line) > removes(&in_line), "{in_line:?}");
        assert_eq!(
            writes_wake(&shared_release(&[Bson::Null], None, false, released)),
            None
        );
        let handed =
            |in_line| shared_hand_over((&Bson::Null, released), &Bson::Null, Vec::new(), in_line);
        assert!(writes_wake(&handed(true)) > removes(&handed(true)));
        assert_eq!(writes_wake(&handed(false)), None);
    }
}
