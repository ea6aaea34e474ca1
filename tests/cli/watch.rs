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

/// `watch` starts with each lock's state where it looks, naming the database and
/// collection: a name with no record there has no token to show (not `free (last token 0)`),
/// and another database that has a record of it is pointed at.
#[test]
fn watch_names_where_it_looks_and_never_a_token_it_does_not_know() {
    let fixture = Fixture::new();
    let other = fixture.other_database();
    let _elsewhere = fixture.hold_in(&other, "nightly-report");
    fixture.insert_free_lock("idle", 7);
    let place = fixture.namespace();

    let watch = Running::spawn(fixture.mongolock("watch").args(["nightly-report", "idle"]));
    watch.wait_until(Stream::Stdout, SHORT, "both current states", |text| {
        text.lines().count() >= 2
    });
    let text = watch.text(Stream::Stdout);
    let line = |name: &str| {
        text.lines()
            .find(|line| line.split(' ').nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no line for {name}: {text}"))
            .split_once(' ')
            .map_or("", |(_, rest)| rest)
            .to_owned()
    };
    assert_eq!(
        line("nightly-report"),
        format!(
            "nightly-report has no record in {place}; {}.{} has one: pass --database {}",
            other.name, fixture.collection, other.name
        )
    );
    assert_eq!(
        line("idle"),
        format!("idle in {place} is free (last token 7)")
    );
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));

    let watch = Running::spawn(
        fixture
            .mongolock("watch")
            .args(["--json", "nightly-report"]),
    );
    watch.wait_for(Stream::Stdout, "\n", SHORT);
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let first: serde_json::Value = stdout(&output)
        .lines()
        .next()
        .and_then(|line| serde_json::from_str(line).ok())
        .expect("a JSON line");
    assert_eq!(first["change"], "current", "{first}");
    assert!(
        first["token"].is_null() && first["holder"].is_null(),
        "{first}"
    );
    assert_eq!(first["database"], crate::fixture::DATABASE, "{first}");
    assert_eq!(first["collection"], fixture.collection.as_str(), "{first}");
    assert!(
        stderr(&output).contains(&format!("pass --database {}", other.name)),
        "the pointer goes to stderr with --json: {}",
        stderr(&output)
    );
}
