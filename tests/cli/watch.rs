//! `mongolock watch`.

use nix::sys::signal::Signal;

use crate::fixture::{Fixture, SHORT, code, stderr, stdout};
use crate::process::{Running, Stream};

#[test]
fn watch_prints_what_happens_to_a_lock_from_any_process() {
    let fixture = Fixture::new();
    let watch = Running::spawn(fixture.mongolock("watch").args(["--json", "watched"]));
    watch.wait_for(Stream::Stdout, "\"change\":\"current\"", SHORT);

    // Another process takes the lock and lets it go.
    let (holder, token) = fixture.hold("watched", &[]);
    watch.wait_for(Stream::Stdout, "\"change\":\"acquired\"", SHORT);
    // An operator frees it under its holder.
    let output = fixture
        .mongolock("release")
        .args(["--force", "watched"])
        .output()
        .expect("release --force");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    watch.wait_for(Stream::Stdout, "\"change\":\"force_released\"", SHORT);
    drop(holder);

    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let changes: Vec<&str> = lines
        .iter()
        .map(|line| line["change"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        changes[..3],
        ["current", "acquired", "force_released"],
        "{lines:?}"
    );
    let acquired = &lines[1];
    assert_eq!(acquired["name"], "watched");
    assert_eq!(acquired["token"], token);
    assert!(
        acquired["holder"]
            .as_str()
            .is_some_and(|holder| !holder.is_empty()),
        "{acquired}"
    );
    assert_eq!(lines[2]["holder"], acquired["holder"], "{lines:?}");
    assert_eq!(lines[2]["token"], token);
}
