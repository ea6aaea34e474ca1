//! `mongolock status`: the table, `--watch`, `--json`, named locks.

use mongodb::bson::doc;
use nix::sys::signal::Signal;

use crate::fixture::{
    DATABASE, Fixture, SHORT, app_name, code, holder_part, lock_in, stderr, stdout,
};
use crate::process::{Running, Stream};
use crate::support::eventually;
use crate::support::fail_point::FailPoint;

#[test]
fn status_lists_held_and_free_locks() {
    let fixture = Fixture::new();
    // (A released lock's own document may be deleted by the TTL monitor at any moment.)
    fixture.insert_free_lock("free-lock", 3);
    let (holder, token) = fixture.hold("held-lock", &[]);
    let token = token.to_string();

    let output = fixture.mongolock("status").output().expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let (place, table) = text.split_once('\n').expect("a first line");
    assert_eq!(place, format!("locks in {}", fixture.namespace()), "{text}");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "STATE",
            "HOLDER",
            "TOKEN",
            "EXPIRES",
            "IN",
            "CONTENDED"
        ],
        "{table}"
    );
    assert_eq!(rows.len(), 3, "{table}");
    // Sorted by name.
    let (free, held) = (&rows[1], &rows[2]);
    assert_eq!(free[..3], ["free-lock", "free", "-"], "{table}");
    assert_eq!(free[4], "-", "{table}");
    assert_eq!(held[..2], ["held-lock", "held"], "{table}");
    assert!(
        held[2].contains(&format!(":{}:", holder.pid())),
        "holder: {table}"
    );
    assert_eq!(held[3], token, "{table}");
    assert!(held[4].ends_with('s'), "expires in: {table}");
    assert_eq!(held[5], "-", "nobody else tried yet: {table}");

    // A failed attempt by someone else shows as contention.
    let output = fixture
        .run("held-lock", &["--wait", "0"], "true")
        .output()
        .expect("run");
    assert_eq!(code(output.status), Some(75), "{}", stderr(&output));
    let output = fixture.mongolock("status").output().expect("status");
    let table = String::from_utf8(output.stdout).expect("utf-8");
    let held: Vec<&str> = table
        .lines()
        .nth(3)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(
        held.last().is_some_and(|cell| cell.ends_with('s')),
        "contended: {table}"
    );
}

#[test]
fn status_watch_into_a_pipe_appends_dated_frames_without_escape_codes() {
    let fixture = Fixture::new();
    let _holder = Running::spawn(&mut fixture.run("watched", &[], "touch ready; exec sleep 30"));
    eventually(SHORT, "the holder's command", || {
        fixture.path("ready").exists()
    });
    // `--watch 0.2`, not only `--watch=0.2`.
    let watch = Running::spawn(fixture.mongolock("status").args(["--watch", "0.2"]));
    watch.wait_until(Stream::Stdout, SHORT, "two refreshes", |text| {
        text.matches("\nupdated ").count() >= 2
    });
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(!text.contains('\x1b'), "escape codes in a pipe: {text:?}");
    let frames: Vec<&str> = text.split("mongolock status: ").skip(1).collect();
    assert!(frames.len() >= 2, "{text}");
    for frame in frames {
        let updated = frame.lines().nth(1).unwrap_or_default();
        assert!(
            updated.starts_with("updated 20") && updated.ends_with('Z'),
            "{frame}"
        );
        assert!(frame.contains("\nwatched "), "{frame}");
    }
}

#[test]
fn status_watch_shows_failures_in_words_and_keeps_the_dated_last_data() {
    let fixture = Fixture::new();
    let _holder = Running::spawn(&mut fixture.run("kept", &[], "touch ready; exec sleep 30"));
    eventually(SHORT, "the holder's command", || {
        fixture.path("ready").exists()
    });
    let app = app_name(&fixture, "watch");
    let uri = fixture.uri_with(&format!("appName={app}"));
    let watch = Running::spawn(
        fixture
            .mongolock_at("status", &uri)
            .args(["--watch", "0.2"]),
    );
    watch.wait_for(Stream::Stdout, "\nupdated ", SHORT);
    let fail = FailPoint::on(
        &fixture.uri,
        "alwaysOn".into(),
        doc! { "failCommands": ["aggregate"], "errorCode": 13, "appName": &app },
    );
    watch.wait_for(Stream::Stdout, "showing the last data", SHORT);
    drop(fail);
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let failed = text
        .split("mongolock status: ")
        .find(|frame| frame.contains("refresh failed at "))
        .expect("a failed refresh");
    let reason = failed.lines().nth(1).unwrap_or_default();
    assert!(reason.contains("Unauthorized"), "{reason}");
    for raw in [
        "Kind:",
        "labels:",
        "source:",
        "server response",
        "RawDocument",
    ] {
        assert!(!reason.contains(raw), "driver internals in {reason:?}");
    }
    assert!(failed.contains(" old):\n\nNAME"), "{failed}");
    assert!(failed.contains("\nkept "), "{failed}");
}

#[test]
fn status_json_is_for_scripts() {
    let fixture = Fixture::new();
    fixture.insert_free_lock("a-free", 5);
    let (holder, token) = fixture.hold("b-held", &[]);

    let check = |json: &serde_json::Value| {
        assert_eq!(json["database"], DATABASE, "{json}");
        assert_eq!(json["collection"], fixture.collection.as_str(), "{json}");
        assert!(
            json["time"]
                .as_str()
                .is_some_and(|time| time.ends_with('Z')),
            "{json}"
        );
        let locks = json["locks"].as_array().expect("locks");
        assert_eq!(locks.len(), 2, "{json}");
        let (free, held) = (&locks[0], &locks[1]);
        assert_eq!(free["name"], "a-free", "{json}");
        assert_eq!(free["state"], "free", "{json}");
        assert_eq!(free["token"], 5, "{json}");
        assert!(
            free["holder"].is_null() && free["expires_in_ms"].is_null(),
            "{json}"
        );
        assert_eq!(held["name"], "b-held", "{json}");
        assert_eq!(held["state"], "held", "{json}");
        assert_eq!(held["token"], token, "{json}");
        let holder_id = held["holder"].as_str().expect("a holder");
        assert!(holder_id.contains(&holder_part(holder.pid())), "{json}");
        assert!(
            held["expires_in_ms"].as_u64().is_some_and(|ms| ms > 0),
            "{json}"
        );
        assert!(held["contended_for_ms"].is_null(), "{json}");
    };
    let output = fixture
        .mongolock("status")
        .arg("--json")
        .output()
        .expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    check(&serde_json::from_slice(&output.stdout).expect("JSON"));

    // With --watch: one object per line.
    let watch = Running::spawn(
        fixture
            .mongolock("status")
            .args(["--json", "--watch", "0.2"]),
    );
    watch.wait_until(Stream::Stdout, SHORT, "two lines", |text| {
        text.matches('\n').count() >= 2
    });
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    for line in stdout(&output).lines() {
        check(&serde_json::from_str(line).expect("a JSON line"));
    }
}

/// `status NAME…` shows just those locks, in that order, a name without a record as such.
#[test]
fn status_of_named_locks_shows_those_in_order() {
    let fixture = Fixture::new();
    fixture.insert_free_lock("a-free", 5);
    let (holder, token) = fixture.hold("b-held", &[]);
    let json = fixture.status_json(&["b-held", "nobody", "a-free", "b-held"]);
    let locks = json["locks"].as_array().expect("locks");
    let names: Vec<&str> = locks
        .iter()
        .filter_map(|lock| lock["name"].as_str())
        .collect();
    assert_eq!(names, ["b-held", "nobody", "a-free"], "{json}");
    assert_eq!(locks[0]["token"], token, "{json}");
    assert_eq!(locks[0]["kind"], "mutex", "{json}");
    let holders = locks[0]["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 1, "{json}");
    assert_eq!(holders[0]["access"], "exclusive", "{json}");
    assert!(
        holders[0]["holder"]
            .as_str()
            .is_some_and(|id| id.contains(&holder_part(holder.pid()))),
        "{json}"
    );
    assert_eq!(locks[1]["state"], "no_record", "{json}");
    assert!(
        locks[1]["kind"].is_null() && locks[1]["token"].is_null(),
        "{json}"
    );
    assert_eq!(locks[2]["token"], 5, "{json}");

    let table = stdout(
        &fixture
            .mongolock("status")
            .args(["nobody", "b-held"])
            .output()
            .expect("status"),
    );
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0][..3],
        ["NAME", "STATE", "HOLDER"],
        "mutexes only: no KIND: {table}"
    );
    assert_eq!(
        rows[1][..5],
        ["nobody", "no", "record", "-", "-"],
        "{table}"
    );
    assert_eq!(rows[2][..2], ["b-held", "held"], "{table}");
    let invalid = fixture
        .mongolock("status")
        .arg("")
        .output()
        .expect("status");
    assert_eq!(code(invalid.status), Some(64), "{}", stderr(&invalid));
}

/// The operator's hazard: an application holds a lock in its own database while `status`
/// reads another. The output names the database and collection it read, shows the name as
/// having no record there (never free, never token 0), and points at the database that has
/// it.
#[test]
fn status_names_where_it_looked_and_points_at_the_database_that_has_the_lock() {
    let fixture = Fixture::new();
    let other = fixture.other_database();
    let _holder = fixture.hold_in(&other, "nightly-report");
    let place = fixture.namespace();
    let pointer = format!(
        "{}.{} has one: pass --database {}",
        other.name, fixture.collection, other.name
    );

    let output = fixture
        .mongolock("status")
        .arg("nightly-report")
        .output()
        .expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let table = stdout(&output);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], format!("locks in {place}"), "{table}");
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        row,
        ["nightly-report", "no", "record", "-", "-", "-", "-"],
        "{table}"
    );
    assert_eq!(
        lines[3],
        format!("no record of \"nightly-report\" in {place}; {pointer}"),
        "{table}"
    );
    assert!(!table.contains("free"), "{table}");

    let json = fixture.status_json(&["nightly-report"]);
    let lock = lock_in(&json, "nightly-report");
    assert_eq!(lock["state"], "no_record", "{json}");
    assert!(lock["token"].is_null(), "{json}");
    assert_eq!(lock["elsewhere"], serde_json::json!([other.name]), "{json}");

    // Every lock of an empty collection: none here, and where there are some.
    let output = fixture.mongolock("status").output().expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!(
            "no locks in {place}; {}.{} has records: pass --database {}\n",
            other.name, fixture.collection, other.name
        )
    );

    // Pointed there, it shows the holder.
    let output = fixture
        .mongolock_in("status", &fixture.uri, &other.name)
        .arg("nightly-report")
        .output()
        .expect("status");
    let table = stdout(&output);
    assert!(
        table.starts_with(&format!("locks in {}.{}\n", other.name, fixture.collection)),
        "{table}"
    );
    assert!(table.contains("\nnightly-report  held "), "{table}");
}

/// One long name does not widen every row: it gets a line of its own, the other rows keep
/// their width, and `--json` keeps it whole.
#[test]
fn status_keeps_a_long_name_from_widening_every_row() {
    let fixture = Fixture::new();
    let long = format!("reports/{}", "very-long-segment/".repeat(16));
    let (_short, _) = fixture.hold("orders", &[]);
    let (_long, token) = fixture.hold_as("long", &long, &[]);

    let output = fixture.mongolock("status").output().expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let table = stdout(&output);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    let alone = lines
        .iter()
        .position(|line| *line == long)
        .unwrap_or_else(|| panic!("the name on a line of its own: {table}"));
    let row: Vec<&str> = lines[alone + 1].split_whitespace().collect();
    assert_eq!(row[0], "held", "its row follows with NAME blank: {table}");
    assert_eq!(row[2], token.to_string(), "{table}");
    for line in lines.iter().filter(|line| **line != long) {
        assert!(
            line.chars().count() < 120,
            "{} columns: {line:?}",
            line.chars().count()
        );
    }
    let json = fixture.status_json(&[]);
    assert_eq!(lock_in(&json, &long)["token"], token, "{json}");
}
