//! `mongolock doctor` on the test server, a standalone one and a wrongly sharded collection.

use std::process::{Command, Output};

use mongodb::bson::{Document, doc};

use crate::fixture::{
    BIN, DATABASE, Fixture, assert_contains_all, block_on, client, code, stderr, stdout,
};
use crate::support;

/// `mongolock doctor --json` on the test server: each finding's status, pinned, and the
/// scratch lock gone afterwards.
fn doctor_statuses(output: &Output) -> Vec<(String, String)> {
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {}", stderr(output)));
    json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|finding| {
            (
                finding["check"].as_str().unwrap_or_default().to_owned(),
                finding["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pinned(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(check, status)| ((*check).to_owned(), (*status).to_owned()))
        .collect()
}

#[test]
fn doctor_pins_its_findings_on_the_test_server() {
    let fixture = Fixture::new();
    // As an application should connect, with a lease long enough to ride failovers out: only
    // the one-member replica set is a warning.
    let uri = fixture.uri_with("heartbeatFrequencyMS=500");
    let output = fixture
        .mongolock_at("doctor", &uri)
        .args(["--json", "--lease", "60s"])
        .output()
        .expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_eq!(
        doctor_statuses(&output),
        pinned(&[
            ("server version", "ok"),
            ("topology", "warning"),
            ("change streams", "ok"),
            ("write concern", "ok"),
            ("journaling", "ok"),
            ("indexes", "ok"),
            ("shard key", "ok"),
            ("manager start", "ok"),
            ("clock offsets", "ok"),
            ("driver heartbeat", "ok"),
            ("failover", "ok"),
            ("renewal headroom", "ok"),
        ])
    );
    // The defaults (a 15 s lease) and no heartbeat setting: a failover outlasts the renewal
    // window, and the driver's heartbeat is slow. The table says so, with the fixes.
    let output = fixture.mongolock("doctor").output().expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_contains_all(
        &stdout(&output),
        &[
            "driver heartbeat  warning  heartbeatFrequencyMS not set",
            "failover          warning  a failover takes up to about 20s",
            "fix: add heartbeatFrequencyMS=500",
            "verdict: fit for locks, with 3 warning(s)",
        ],
    );
    let scratch = block_on(async {
        client(&fixture.uri)
            .await
            .database(DATABASE)
            .collection::<Document>(&fixture.collection)
            .count_documents(doc! { "_id": { "$regex": "^mongolock-doctor-" } })
            .await
            .expect("count")
    });
    assert_eq!(scratch, 0, "the scratch lock was left behind");
}

#[test]
fn doctor_on_a_standalone_server_warns_of_no_change_streams_and_no_failover() {
    let fixture = Fixture::new();
    let uri = format!("{}&heartbeatFrequencyMS=500", support::standalone_uri());
    let output = fixture
        .mongolock_at("doctor", &uri)
        .args(["--json", "--lease", "60s"])
        .output()
        .expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let statuses = doctor_statuses(&output);
    for (check, status) in [
        ("topology", "warning"),
        ("change streams", "warning"),
        ("failover", "ok"),
        ("renewal headroom", "ok"),
    ] {
        assert!(
            statuses.contains(&(check.to_owned(), status.to_owned())),
            "{check}: {status} expected in {statuses:?}"
        );
    }
}

/// A lock collection sharded on another key (its sharding record planted, as `mongos`
/// keeps it) is a problem: exit 2, with the reason and the fix.
#[test]
fn doctor_finds_a_collection_sharded_on_the_wrong_key_a_problem() {
    let fixture = Fixture::new();
    let namespace = format!("{DATABASE}.{}", fixture.collection);
    let plant = |planted: bool| {
        block_on(async {
            let sharding = client(&fixture.uri)
                .await
                .database("config")
                .collection::<Document>("collections");
            if planted {
                let record = doc! { "_id": &namespace, "key": { "tenant": 1 } };
                sharding.insert_one(record).await.map(drop)
            } else {
                sharding
                    .delete_one(doc! { "_id": &namespace })
                    .await
                    .map(drop)
            }
        })
        .expect("plant or remove a sharding record in config.collections");
    };
    plant(true);
    let output = fixture.mongolock("doctor").output().expect("doctor");
    let strict = fixture
        .mongolock("doctor")
        .arg("--strict")
        .output()
        .expect("doctor --strict");
    plant(false);
    assert_eq!(code(strict.status), Some(2), "{}", stderr(&strict));
    assert_eq!(code(output.status), Some(2), "{}", stderr(&output));
    assert_contains_all(
        &stdout(&output),
        &[
            "shard key         problem  sharded on { \"tenant\": 1 }",
            "reshardCollection",
            "manager start     problem",
            "verdict: NOT fit for locks: 2 problem(s)",
        ],
    );
}

/// `doctor` as a deploy gate: on the test server (warnings only: one member, the default
/// lease against failover timing, no heartbeat setting) it exits 0, and 1 with `--strict`;
/// its help says so.
#[test]
fn doctor_exits_0_with_only_warnings_and_1_with_strict() {
    let fixture = Fixture::new();
    let output = fixture.mongolock("doctor").output().expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("\nverdict: fit for locks, with "),
        "{}",
        stdout(&output)
    );
    let output = fixture
        .mongolock("doctor")
        .args(["--strict", "--json"])
        .output()
        .expect("doctor --strict");
    assert_eq!(code(output.status), Some(1), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["worst"], "warning", "{json}");

    let help = Command::new(BIN)
        .args(["doctor", "--help"])
        .output()
        .expect("help");
    assert_contains_all(
        &stdout(&help),
        &[
            "--strict",
            "0            every finding is ok, or the worst is a warning",
            "1            --strict only: the worst finding is a warning",
        ],
    );
}
