//! `mongolock release --force`.

use std::time::{Duration, Instant};

use crate::fixture::{Fixture, SHORT, code, holder_part, lock_in, stderr, stdout};
use crate::process::Stream;

#[test]
fn release_force_frees_a_stuck_lock_and_its_holder_stops_within_a_cadence() {
    let fixture = Fixture::new();
    // A 3 s lease is renewed every second: the holder must learn of the release within that.
    let cadence = Duration::from_secs(1);
    let (holder, token) = fixture.hold("stuck", &["--lease", "3s", "--grace", "300ms"]);

    // Without --force: refused, saying who holds it; nothing changes.
    let refused = fixture
        .mongolock("release")
        .arg("stuck")
        .output()
        .expect("release");
    assert_eq!(code(refused.status), Some(64), "{}", stderr(&refused));
    let message = stderr(&refused);
    let place = fixture.namespace();
    assert!(
        message.contains(&format!("\"stuck\" in {place} is held by ")),
        "{message}"
    );
    assert!(message.contains(&holder_part(holder.pid())), "{message}");
    assert!(message.contains("--force"), "{message}");

    let released = fixture
        .mongolock("release")
        .args(["--force", "stuck"])
        .output()
        .expect("release --force");
    let at = Instant::now();
    assert_eq!(code(released.status), Some(0), "{}", stderr(&released));
    let said = stdout(&released);
    assert!(
        said.starts_with(&format!(
            "released lock \"stuck\" in {place}, which was held by "
        )),
        "{said}"
    );
    assert!(said.contains(&holder_part(holder.pid())), "{said}");
    assert!(said.contains(&format!("(token {token}, ")), "{said}");

    holder.wait_for(Stream::Stderr, "lost lock \"stuck\"", SHORT);
    let told = at.elapsed();
    assert!(
        told < cadence + Duration::from_millis(800),
        "the holder learnt {told:?} after the release"
    );
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    assert!(stderr(&output).contains("an operator force-released the lock"));

    // Tokens keep rising; a lock nobody holds is left alone.
    let next = fixture
        .run("stuck", &["--wait", "0"], "echo $MONGOLOCK_TOKEN")
        .output()
        .expect("run");
    assert_eq!(code(next.status), Some(0), "{}", stderr(&next));
    let next: u64 = stdout(&next).trim().parse().expect("a token");
    assert!(next > token, "{next} after {token}");
    let again = fixture
        .mongolock("release")
        .args(["--force", "stuck"])
        .output()
        .expect("release --force");
    assert_eq!(code(again.status), Some(0), "{}", stderr(&again));
    assert_eq!(
        stdout(&again),
        format!("lock \"stuck\" in {place} was not held; nothing changed\n")
    );
    // Without --force, a lock nobody holds is not a reason to reach for it.
    let idle = fixture
        .mongolock("release")
        .arg("stuck")
        .output()
        .expect("release");
    assert_eq!(code(idle.status), Some(0), "{}", stderr(&idle));
    assert_eq!(
        stdout(&idle),
        format!("lock \"stuck\" in {place} is not held; nothing to release\n")
    );
    assert!(!stderr(&idle).contains("--force"), "{}", stderr(&idle));
}

/// A name with no record where `release` looks is not "not held": it exits with 66, names
/// the database and collection it looked in and the other database that has the lock, and
/// changes nothing there.
#[test]
fn release_of_a_name_with_no_record_exits_66_and_points_at_the_database_that_has_it() {
    let fixture = Fixture::new();
    let other = fixture.other_database();
    let holder = fixture.hold_in(&other, "nightly-report");
    let place = fixture.namespace();
    for force in [true, false] {
        let mut release = fixture.mongolock("release");
        if force {
            release.arg("--force");
        }
        let output = release.arg("nightly-report").output().expect("release");
        assert_eq!(code(output.status), Some(66), "{}", stderr(&output));
        assert!(stdout(&output).is_empty(), "{}", stdout(&output));
        assert_eq!(
            stderr(&output),
            format!(
                "mongolock: no record of \"nightly-report\" in {place}; nothing changed. \
                 {}.{} has one: pass --database {}\n",
                other.name, fixture.collection, other.name
            ),
            "--force: {force}"
        );
    }
    assert_eq!(
        fixture.documents(),
        0,
        "nothing was written where it looked"
    );
    // Nowhere else either: only the place it looked.
    let output = fixture
        .mongolock("release")
        .args(["--force", "typo"])
        .output()
        .expect("release");
    assert_eq!(code(output.status), Some(66), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        format!("mongolock: no record of \"typo\" in {place}; nothing changed\n")
    );
    // The lock in the other database was left alone.
    holder.terminate_still_holding(SHORT);
}

/// `release --force` on a semaphore frees every permit, naming each holder with its own
/// token, and every holder stops its command.
#[test]
fn release_force_frees_every_holder_of_a_semaphore() {
    let fixture = Fixture::new();
    let permits = ["--permits", "2", "--lease", "3s", "--grace", "300ms"];
    let (first, first_token) = fixture.hold_as("first", "pool", &permits);
    let (second, second_token) = fixture.hold_as("second", "pool", &permits);
    let released = fixture
        .mongolock("release")
        .args(["--force", "pool"])
        .output()
        .expect("release --force");
    assert_eq!(code(released.status), Some(0), "{}", stderr(&released));
    let said = stdout(&released);
    assert!(
        said.starts_with(&format!(
            "released semaphore \"pool\" in {}, which was held by ",
            fixture.namespace()
        )),
        "{said}"
    );
    for (holder, token) in [(&first, first_token), (&second, second_token)] {
        let named = said
            .split("), ")
            .find(|part| part.contains(&format!(" (token {token}, ")));
        assert!(
            named.is_some_and(|part| part.contains(&holder_part(holder.pid()))),
            "each holder with its own token: {said}"
        );
    }
    assert!(
        said.ends_with("; each holder learns it at its next renewal\n"),
        "{said}"
    );
    for holder in [first, second] {
        let output = holder.finish(SHORT);
        assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    }
    let json = fixture.status_json(&["pool"]);
    assert_eq!(lock_in(&json, "pool")["state"], "free", "{json}");
}
