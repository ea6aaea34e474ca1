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
    assert!(message.contains("\"stuck\" is held by "), "{message}");
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
        said.starts_with("released lock \"stuck\", which was held by "),
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
        "lock \"stuck\" was not held; nothing changed\n"
    );
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
        said.starts_with("released semaphore \"pool\", which was held by "),
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
