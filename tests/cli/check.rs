//! `mongolock check`.

use mongodb::bson::{Document, doc};

use crate::fixture::{DATABASE, Fixture, block_on, client, code, stderr};

/// `mongolock check` on the test server: every check passes with real contention (hand-overs
/// between processes, stale writes refused), the figures are reported, and nothing of the
/// run is left behind.
#[test]
fn check_verifies_the_test_server_and_cleans_up() {
    let fixture = Fixture::new();
    let output = fixture
        .mongolock("check")
        .args(["--processes", "2", "--tasks", "3", "--locks", "2"])
        .args(["--duration", "3s", "--json"])
        .output()
        .expect("check");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check --json printed no JSON ({e}): {}", stderr(&output)));
    assert_eq!(json["passed"], true, "{json}");
    let checks = json["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 4, "{json}");
    for check in checks {
        assert_eq!(check["passed"], true, "{check}");
        assert!(check["cases"].as_u64().is_some_and(|n| n > 0), "{check}");
    }
    let positive = |field: &str| json[field].as_f64().is_some_and(|n| n > 0.0);
    for field in [
        "acquisitions",
        "acquisitions_per_second",
        "commands_per_acquisition",
        "stale_writes_refused",
    ] {
        assert!(positive(field), "{field}: {json}");
    }
    assert!(
        json["remote_hand_overs"]["count"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "no hand-over between processes: {json}"
    );
    assert_eq!(json["losses"], 0, "{json}");
    let (scratch_locks, check_collections) = block_on(async {
        let database = client(&fixture.uri).await.database(DATABASE);
        let locks = database
            .collection::<Document>(&fixture.collection)
            .count_documents(doc! { "_id": { "$regex": "^mongolock-check-" } })
            .await
            .expect("count");
        let collections = database
            .list_collection_names()
            .await
            .expect("list collections");
        (
            locks,
            collections
                .into_iter()
                .filter(|name| name.starts_with("mongolock_check_"))
                .count(),
        )
    });
    assert_eq!(
        (scratch_locks, check_collections),
        (0, 0),
        "the check left data behind"
    );
}
