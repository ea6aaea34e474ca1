//! `FencedCollection` against a real MongoDB-compatible server: writes carrying an older
//! token than the document records are refused with `LockError::Fenced` and never applied,
//! also when a stale holder races a new one.
//!
//! Needs `MONGODB_URI` (`scripts/test.sh` starts a throw-away SecantusDB server and sets it).

mod support;

use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};
use mongodb::{Client, Collection};
use mongolock::fence::FencedCollection;
use mongolock::testing::FaultyStore;
use mongolock::{LockError, LockManager, LockOptions, LossReason, MongoStore, StoreError};
use serde::{Deserialize, Serialize};

const DATABASE: &str = "mongolock_fence_tests";

async fn client() -> Client {
    support::client_for(&support::uri(), None, None).await
}

/// A fresh collection of protected documents.
async fn protected() -> Collection<Document> {
    let name = format!("protected_{}", uuid::Uuid::new_v4().simple());
    client().await.database(DATABASE).collection(&name)
}

async fn read(collection: &Collection<Document>, id: &str) -> Document {
    collection
        .find_one(doc! { "_id": id })
        .await
        .expect("find")
        .expect("the document")
}

fn fenced_off(result: Result<mongodb::results::UpdateResult, LockError>) -> (u64, u64) {
    match result {
        Err(LockError::Fenced { token, recorded }) => (token, recorded),
        other => panic!("expected LockError::Fenced, got {other:?}"),
    }
}

#[tokio::test]
async fn older_tokens_are_refused_and_nothing_is_written() {
    let raw = protected().await;
    let fenced = FencedCollection::new(raw.clone());
    let id = doc! { "_id": "account" };

    let first = fenced
        .update_one(5, id.clone(), doc! { "$inc": { "balance": 10 } })
        .upsert(true)
        .await
        .expect("the first write creates the document");
    assert!(first.upserted_id.is_some());
    // The same token again (one holder writing several times) and a newer one pass.
    for token in [5, 6] {
        let result = fenced
            .update_one(token, id.clone(), doc! { "$inc": { "balance": 1 } })
            .await
            .expect("a current token");
        assert_eq!(result.matched_count, 1);
    }
    let stale = fenced
        .update_one(5, id.clone(), doc! { "$inc": { "balance": 1000 } })
        .await;
    assert_eq!(fenced_off(stale), (5, 6));
    let stale_upsert = fenced
        .update_one(4, id.clone(), doc! { "$set": { "owner": "stale" } })
        .upsert(true)
        .await;
    assert_eq!(fenced_off(stale_upsert), (4, 6));

    let stored = read(&raw, "account").await;
    assert_eq!(stored.get_i32("balance").ok(), Some(12));
    assert_eq!(stored.get_i64("fencingToken").ok(), Some(6));
    assert!(!stored.contains_key("owner"));
    assert_eq!(raw.count_documents(doc! {}).await.expect("count"), 1);

    // No matching document is not a fence: nothing written, matched 0.
    let missing = fenced
        .update_one(9, doc! { "_id": "nobody" }, doc! { "$set": { "x": 1 } })
        .await
        .expect("no document is not an error");
    assert_eq!(missing.matched_count, 0);
    let error = LockError::Fenced {
        token: 5,
        recorded: 6,
    };
    assert!(error.to_string().contains("token 5"), "{error}");
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Report {
    _id: String,
    rows: u32,
    #[serde(rename = "fencingToken", default)]
    token: i64,
}

#[tokio::test]
async fn replacements_pipelines_claims_and_custom_fields() {
    let raw = protected().await;
    let reports = FencedCollection::new(raw.clone_with_type::<Report>());
    let report = |rows| Report {
        _id: "nightly".into(),
        rows,
        token: 0,
    };
    reports
        .replace_one(10, doc! { "_id": "nightly" }, report(1))
        .upsert(true)
        .await
        .expect("upserted");
    let stored = reports
        .collection()
        .find_one(doc! { "_id": "nightly" })
        .await
        .expect("find")
        .expect("the report");
    assert_eq!((stored.rows, stored.token), (1, 10));
    let stale = reports
        .replace_one(9, doc! { "_id": "nightly" }, report(666))
        .await;
    assert_eq!(fenced_off(stale), (9, 10));

    // A pipeline update gets the token as its last stage.
    let documents = FencedCollection::new(raw.clone());
    documents
        .update_one(
            11,
            doc! { "_id": "nightly" },
            vec![doc! { "$set": { "rows": { "$add": ["$rows", 1] } } }],
        )
        .await
        .expect("pipeline");
    let stored = read(&raw, "nightly").await;
    assert_eq!(
        stored
            .get_i64("rows")
            .ok()
            .or(stored.get_i32("rows").ok().map(i64::from)),
        Some(2)
    );
    assert_eq!(stored.get_i64("fencingToken").ok(), Some(11));

    // A claim records the token and nothing else; older writers are refused from then on.
    documents
        .claim(12, doc! { "_id": "nightly" })
        .await
        .expect("claim");
    let stale = documents
        .update_one(
            11,
            doc! { "_id": "nightly" },
            doc! { "$set": { "rows": 0 } },
        )
        .await;
    assert_eq!(fenced_off(stale), (11, 12));

    // One document protected by two locks: a field per lock, independent sequences.
    let per_lock = FencedCollection::new(raw.clone())
        .with_token_field("fence.billing")
        .expect("a valid path");
    per_lock
        .update_one(3, doc! { "_id": "shared" }, doc! { "$set": { "a": 1 } })
        .upsert(true)
        .await
        .expect("billing writes");
    let other = FencedCollection::new(raw.clone())
        .with_token_field("fence.shipping")
        .expect("a valid path");
    other
        .update_one(1, doc! { "_id": "shared" }, doc! { "$set": { "b": 1 } })
        .await
        .expect("shipping has its own sequence");
    assert_eq!(
        fenced_off(
            per_lock
                .update_one(2, doc! { "_id": "shared" }, doc! { "$set": { "a": 2 } })
                .await
        ),
        (2, 3)
    );
    let shared = read(&raw, "shared").await;
    assert_eq!(
        shared.get_document("fence").expect("fence"),
        &doc! { "billing": 3_i64, "shipping": 1_i64 }
    );
}

#[tokio::test]
async fn bad_writes_fail_before_any_io() {
    let raw = protected().await;
    let fenced = FencedCollection::new(raw.clone());
    let cases = [
        fenced
            .update_one(
                1,
                doc! { "_id": 1 },
                doc! { "$set": { "fencingToken": 99 } },
            )
            .upsert(true)
            .await,
        fenced
            .update_one(1, doc! { "_id": 1 }, doc! { "plain": "document" })
            .upsert(true)
            .await,
        fenced
            .update_one(1, doc! { "name": "x" }, doc! { "$set": { "a": 1 } })
            .upsert(true)
            .await,
        fenced
            .update_one(u64::MAX, doc! { "_id": 1 }, doc! { "$set": { "a": 1 } })
            .upsert(true)
            .await,
        // `_id` as an operator: a stale writer's upsert would insert a second document.
        fenced
            .update_one(
                1,
                doc! { "_id": { "$gte": 42 } },
                doc! { "$set": { "a": 1 } },
            )
            .upsert(true)
            .await,
        // A malformed operator is refused, not rewritten into a valid write.
        fenced
            .update_one(1, doc! { "_id": 1 }, doc! { "$set": 5, "$inc": { "n": 1 } })
            .upsert(true)
            .await,
    ];
    for case in cases {
        assert!(
            matches!(case, Err(LockError::Store(StoreError::InvalidConfig(_)))),
            "{case:?}"
        );
    }
    assert_eq!(raw.count_documents(doc! {}).await.expect("count"), 0);
    for field in ["", "$t", "a..b"] {
        assert!(
            FencedCollection::new(raw.clone())
                .with_token_field(field)
                .is_err()
        );
    }
}

/// A document whose token field holds something other than a number cannot tell a stale
/// writer from a current one: every fenced write to it is refused with a typed error and
/// nothing is written, until the field is repaired.
#[tokio::test]
async fn a_token_field_that_is_not_a_number_refuses_every_write() {
    let raw = protected().await;
    let fenced = FencedCollection::new(raw.clone());
    for (id, odd) in [
        ("text", Bson::String("abc".into())),
        ("nan", Bson::Double(f64::NAN)),
        ("doc", Bson::Document(doc! { "t": 1 })),
    ] {
        raw.insert_one(doc! { "_id": id, "fencingToken": odd.clone(), "n": 0 })
            .await
            .expect("insert");
        for token in [1, u64::try_from(i64::MAX).expect("fits")] {
            let written = fenced
                .update_one(token, doc! { "_id": id }, doc! { "$inc": { "n": 1 } })
                .upsert(true)
                .await;
            assert!(
                matches!(written, Err(LockError::Store(StoreError::Rejected { .. }))),
                "{id}: {written:?}"
            );
        }
        let claimed = fenced.claim(5, doc! { "_id": id }).await;
        assert!(matches!(
            claimed,
            Err(LockError::Store(StoreError::Rejected { .. }))
        ));
        let after = read(&raw, id).await;
        assert_eq!(after.get("n"), Some(&Bson::Int32(0)), "{id}: written");
    }
}

/// Concurrent first writes with upsert: all land on one document, none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_first_upserts_make_one_document() {
    let raw = protected().await;
    let fenced = Arc::new(FencedCollection::new(raw.clone()));
    let writers: Vec<_> = (0..16_u64)
        .map(|i| {
            let fenced = fenced.clone();
            tokio::spawn(async move {
                fenced
                    .update_one(100, doc! { "_id": "new" }, doc! { "$inc": { "n": 1 } })
                    .upsert(true)
                    .await
                    .map(|_| i)
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("joined").expect("every writer applies");
    }
    assert_eq!(raw.count_documents(doc! {}).await.expect("count"), 1);
    assert_eq!(read(&raw, "new").await.get_i32("n").ok(), Some(16));
}

/// A holder whose store hangs (as if it were paused) keeps writing after its lease expired;
/// a new holder takes the lock and writes. From the new holder's first acknowledged write
/// on, every write of the stale holder is refused, and the document's log only ever sees
/// tokens in increasing order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_writer_racing_a_new_holder_is_fenced_off() {
    let raw = protected().await;
    let locks = format!("locks_{}", uuid::Uuid::new_v4().simple());
    let options = LockOptions::default()
        .with_lease_duration(Duration::from_millis(1200))
        .with_renew_interval(Duration::from_millis(200))
        .with_renew_deadline(Duration::from_millis(700))
        .with_retry_backoff(Duration::from_millis(5), Duration::from_millis(20));
    let store = |client: Client| {
        MongoStore::builder(client.database(DATABASE))
            .with_collection(&locks)
            .build()
            .expect("valid names")
    };
    let stale_store = FaultyStore::new(store(client().await));
    let stale = LockManager::start(stale_store.clone(), options.clone())
        .await
        .expect("stale manager");
    let fresh = LockManager::start(store(client().await), options)
        .await
        .expect("fresh manager");

    let old_guard = stale.lock("account").unwrap().acquire().await.unwrap();
    let old_token = old_guard.token();
    let fenced = Arc::new(FencedCollection::new(raw.clone()));
    let entry =
        |token: u64, who: &str| doc! { "$push": { "log": { "t": token as i64, "who": who } } };
    fenced
        .update_one(
            old_token,
            doc! { "_id": "account" },
            entry(old_token, "old"),
        )
        .upsert(true)
        .await
        .expect("the holder writes");

    // The old holder is cut off from the lock store but not from the protected data, and
    // its user task ignores the loss (a paused process would not have seen it either).
    stale_store.hang();
    let stale_writer = {
        let fenced = fenced.clone();
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..400 {
                let sent = std::time::Instant::now();
                let result = fenced
                    .update_one(
                        old_token,
                        doc! { "_id": "account" },
                        entry(old_token, "old"),
                    )
                    .await;
                outcomes.push((sent, result.map(|_| ())));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            outcomes
        })
    };
    let new_guard = fresh
        .lock("account")
        .unwrap()
        .acquire_timeout(Duration::from_secs(10))
        .await
        .expect("the new holder takes over after expiry");
    let new_token = new_guard.token();
    assert!(new_token > old_token);
    assert!(
        matches!(
            old_guard.loss(),
            Some(LossReason::DeadlineExceeded | LossReason::StoreErrors { .. })
        ),
        "the old holder was told before the takeover"
    );
    fenced
        .claim(new_token, doc! { "_id": "account" })
        .await
        .expect("the new holder claims the document");
    let claimed = std::time::Instant::now();
    for _ in 0..20 {
        fenced
            .update_one(
                new_token,
                doc! { "_id": "account" },
                entry(new_token, "new"),
            )
            .await
            .expect("the new holder writes");
    }
    let outcomes = stale_writer.await.expect("joined");

    let mut refused = 0;
    for (sent, outcome) in &outcomes {
        if *sent > claimed {
            match outcome {
                Err(LockError::Fenced { token, recorded }) => {
                    assert_eq!((*token, *recorded), (old_token, new_token));
                    refused += 1;
                }
                other => panic!("a stale write sent after the claim was not refused: {other:?}"),
            }
        }
    }
    assert!(refused > 0, "the stale writer kept writing after the claim");
    let log: Vec<i64> = read(&raw, "account")
        .await
        .get_array("log")
        .expect("log")
        .iter()
        .filter_map(|entry| match entry {
            Bson::Document(entry) => entry.get_i64("t").ok(),
            _ => None,
        })
        .collect();
    assert!(
        log.windows(2).all(|pair| pair[0] <= pair[1]),
        "applied tokens went backwards: {log:?}"
    );
    assert_eq!(log.last().copied(), Some(new_token as i64));
    println!(
        "stale writes refused after the new holder's claim: {refused} of {}",
        outcomes.len()
    );
    new_guard.release().await.expect("release");
    stale_store.heal();
    stale.shutdown().await;
    fresh.shutdown().await;
}
