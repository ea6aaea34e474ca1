//! `MongoStore` against a real MongoDB-compatible server: the whole conformance suite, then
//! the MongoDB-specific behaviour (separate clients, upsert races, external deletion, the TTL
//! index, name handling, a stalled server, a `SIGKILLed` holder process, round trips).
//!
//! Needs `MONGODB_URI`. `scripts/test.sh` starts a throw-away SecantusDB server and sets it;
//! without a reachable server every test here fails (on purpose: never skipped silently).

mod common;
mod mongo;
#[cfg(unix)]
#[allow(dead_code)]
#[path = "../examples/fault_check/server.rs"]
mod server;
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{SLACK, fast_options, start, start_with};
use mongo::{DATABASE, MongoBackend, raw, store_on, unique_collection};
use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongodb::options::ClientOptions;
use mongolock::HolderId;
use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId};
use mongolock::{
    Access, LockKind, LockManager, LockName, LockOptions, LossReason, MongoStore, StoreError,
    store::LockStore,
};
use support::commands::CommandLog;
use support::fail_point::FailPoint;
use support::uri;
use tokio::time::{Instant, sleep, timeout};

/// Set (to a collection name) when this test binary runs as the child holder process.
const CHILD_ENV: &str = "MONGOLOCK_TEST_CHILD_COLLECTION";

/// A new client (a new connection pool, as a separate process would have), checked reachable.
async fn client_with(
    app_name: Option<String>,
    commands: Option<EventHandler<CommandEvent>>,
) -> Client {
    support::client_for(&uri(), app_name, commands).await
}

async fn client() -> Client {
    client_with(None, None).await
}

/// Another process on `store`'s collection: its own client.
async fn peer_of(store: &MongoStore) -> MongoStore {
    store_on(&client().await, store.collection_name())
}

conformance_suite!(
    MongoBackend {
        uri,
        standalone: false
    },
    flavor = "multi_thread",
    worker_threads = 2
);

/// A manager on a fresh collection whose commands are logged, once its background index
/// build (not part of any count) is done.
async fn counted_manager(options: LockOptions) -> (CommandLog, LockManager) {
    let log = CommandLog::default();
    let store = store_on(
        &client_with(None, Some(log.handler())).await,
        &unique_collection(),
    );
    let manager = start_with(store.clone(), options).await;
    wait_for_ttl_index(&store).await;
    (log, manager)
}

async fn ttl_index(store: &MongoStore) -> Option<Document> {
    // Raw `listIndexes`, to see `expireAfterSeconds` exactly as the server stores it. Fails
    // (NamespaceNotFound) until the collection exists.
    let reply = store
        .database()
        .run_command(doc! { "listIndexes": store.collection_name() })
        .await
        .ok()?;
    let batch = reply
        .get_document("cursor")
        .ok()?
        .get_array("firstBatch")
        .ok()?;
    batch
        .iter()
        .filter_map(Bson::as_document)
        .find(|index| index.get_str("name") == Ok("expiresAt_ttl"))
        .cloned()
}

async fn wait_for_ttl_index(store: &MongoStore) -> Document {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(index) = ttl_index(store).await {
            return index;
        }
        assert!(Instant::now() < until, "the TTL index was never created");
        sleep(Duration::from_millis(20)).await;
    }
}

/// The store's pipelines leave out `$ifNull` wherever MongoDB's documented evaluation of an
/// unset field already gives the answer (each expression costs the server on every command
/// it is in). A server that evaluates them otherwise fails here, by name, rather than as a
/// lock that grants or marks wrongly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_evaluates_unset_fields_as_the_pipelines_rely_on() {
    let store = store_on(&client().await, &unique_collection());
    let documents = raw(&store);
    documents
        .insert_one(doc! { "_id": "unset", "null": Bson::Null })
        .await
        .unwrap();
    let clock_floor = doc! { "$multiply": [{ "$toLong": "$$NOW" }, 1000] };
    let checks = [
        // `live(mark)`: an unset date is not ahead of now (null and missing sort below dates).
        (
            "missingAfterNow",
            doc! { "$gt": ["$missing", "$$NOW"] },
            false,
        ),
        ("nullAfterNow", doc! { "$gt": ["$null", "$$NOW"] }, false),
        // The readers' turn: no reader's wait began before an unset turn's start.
        (
            "nowBeforeMissing",
            doc! { "$lte": ["$$NOW", "$missing"] },
            false,
        ),
        ("nowBeforeNull", doc! { "$lte": ["$$NOW", "$null"] }, false),
        // The readers' turn served: an unset flag is false to `$or`.
        ("unsetIsFalse", doc! { "$or": ["$missing", "$null"] }, false),
        // The record's expiry and the marks: `$max` and `$min` skip unset values.
        (
            "maxSkipsUnset",
            doc! { "$eq": [{ "$max": ["$null", "$missing", "$$NOW"] }, "$$NOW"] },
            true,
        ),
        (
            "minSkipsUnset",
            doc! { "$eq": [{ "$min": ["$null", "$missing", "$$NOW"] }, "$$NOW"] },
            true,
        ),
        // A new record's next token: the clock's floor.
        (
            "tokenFromTheClock",
            doc! { "$eq": [
                { "$max": [{ "$add": [{ "$toLong": "$missing" }, 1] }, &clock_floor] },
                &clock_floor,
            ] },
            true,
        ),
        // How long others waited, with no contention mark: null.
        (
            "noContention",
            doc! { "$eq": [
                { "$subtract": [{ "$toLong": "$$NOW" }, { "$toLong": "$missing" }] },
                Bson::Null,
            ] },
            true,
        ),
    ];
    let projection: Document = checks
        .iter()
        .map(|(name, expression, _)| (name.to_string(), Bson::from(expression.clone())))
        .collect();
    let mut found = documents
        .aggregate(vec![doc! { "$project": projection }])
        .await
        .unwrap();
    use futures::StreamExt;
    let evaluated = found.next().await.expect("the inserted document").unwrap();
    let wrong: Vec<String> = checks
        .iter()
        .filter(|(name, _, want)| evaluated.get_bool(name) != Ok(*want))
        .map(|(name, _, want)| format!("{name}: {:?}, not {want}", evaluated.get(name)))
        .collect();
    assert!(
        wrong.is_empty(),
        "this server evaluates unset fields unlike MongoDB; the store's pipelines rely on \
         MongoDB's documented behaviour: {wrong:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_contending_never_overlap() {
    let collection = unique_collection();
    let mut managers = Vec::new();
    for _ in 0..5 {
        managers.push(start(store_on(&client().await, &collection)).await);
    }
    let inside = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, manager) in managers.iter().enumerate() {
        for _ in 0..8 {
            let (manager, inside, tokens) = (manager.clone(), inside.clone(), tokens.clone());
            tasks.push(tokio::spawn(async move {
                let guard = manager.lock("contended").unwrap().acquire().await.unwrap();
                assert!(
                    !inside.swap(true, Ordering::SeqCst),
                    "two holders at once (manager {i})"
                );
                tokens.lock().unwrap().push(guard.token());
                sleep(Duration::from_millis(2)).await;
                inside.store(false, Ordering::SeqCst);
                guard.release().await.unwrap();
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 40);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must increase in the order holders entered: {tokens:?}"
    );
    for manager in managers {
        manager.shutdown().await;
    }
}

/// `count` stores on one new collection, each on a client of its own (as processes are).
async fn stores_on_clients_of_their_own(count: usize) -> Vec<MongoStore> {
    let collection = unique_collection();
    let mut stores = Vec::with_capacity(count);
    for _ in 0..count {
        stores.push(store_on(&client().await, &collection));
    }
    stores
}

/// Every store sends its `request` for `name` at once (behind a barrier); their answers.
async fn racing_first_acquires(
    stores: &[MongoStore],
    name: &LockName,
    request: fn(LockName) -> AcquireRequest,
) -> Vec<Result<AcquireOutcome, StoreError>> {
    let barrier = Arc::new(tokio::sync::Barrier::new(stores.len()));
    let tasks: Vec<_> = stores
        .iter()
        .map(|store| {
            let (store, barrier, request) = (store.clone(), barrier.clone(), request(name.clone()));
            tokio::spawn(async move {
                barrier.wait().await;
                store.try_acquire(&request).await
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// A request for `name` by a manager of its own, under a new lease of `lease`.
fn fresh_request(name: LockName, lease: Duration) -> AcquireRequest {
    AcquireRequest::new(name, LeaseId::new(), HolderId::generate(), lease)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_acquire_on_a_missing_document_has_one_winner() {
    let stores = stores_on_clients_of_their_own(8).await;
    for round in 0..20 {
        let name = LockName::new(format!("first-{round}")).unwrap();
        let answers = racing_first_acquires(&stores, &name, |name| {
            fresh_request(name, Duration::from_secs(30))
        })
        .await;
        let mut winners = 0;
        for answer in answers {
            match answer {
                Ok(AcquireOutcome::Acquired { .. }) => winners += 1,
                Ok(AcquireOutcome::Busy { .. }) => {}
                Ok(other) => panic!("round {round}: unexpected outcome {other:?}"),
                Err(error) => panic!("round {round}: a racing first acquire surfaced {error}"),
            }
        }
        assert_eq!(winners, 1, "round {round}: exactly one winner");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_delete_is_reported_within_one_cadence_and_tokens_still_grow() {
    let store = store_on(&client().await, &unique_collection());
    let holder = start(store.clone()).await;
    let other = start(peer_of(&store).await).await;
    let guard = holder.lock("deleted").unwrap().acquire().await.unwrap();
    // An operator with their own connection deletes the document.
    let operator = peer_of(&store).await;
    let deleted = raw(&operator)
        .delete_one(doc! { "_id": "deleted" })
        .await
        .unwrap();
    assert_eq!(deleted.deleted_count, 1);
    let deleted_at = Instant::now();
    let bound = fast_options().renew_interval() + SLACK;
    let reason = timeout(bound, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal within {bound:?} of the deletion"));
    assert_eq!(reason, LossReason::Superseded);
    println!(
        "loss reported {:?} after the external deleteOne",
        deleted_at.elapsed()
    );
    assert_next_token_is_larger(&other, "deleted", guard.token()).await;
    holder.shutdown().await;
    other.shutdown().await;
}

/// The lock is free for `manager`, and its next grant's token is larger than `previous`.
async fn assert_next_token_is_larger(manager: &LockManager, name: &str, previous: u64) {
    let next = manager.lock(name).unwrap().try_acquire().await.unwrap();
    let next = next.unwrap_or_else(|| panic!("{name:?} should be free"));
    assert!(next.token() > previous, "{} after {previous}", next.token());
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_frees_a_held_lock_the_holder_learns_and_tokens_still_grow() {
    let store = store_on(&client().await, &unique_collection());
    let holder = start(store.clone()).await;
    let guard = holder.lock("$wedged").unwrap().acquire().await.unwrap();
    let operator = peer_of(&store).await;
    let name = LockName::new("$wedged").unwrap();

    let cleared = operator
        .force_release(&name)
        .await
        .unwrap()
        .expect("the held grant");
    let released_at = Instant::now();
    assert_eq!(cleared.holder(), Some(holder.holder_id()));
    assert_eq!(cleared.token, guard.token());
    let left = cleared.expires_in().expect("time the grant had left");
    assert!(left <= fast_options().lease_duration(), "{left:?}");
    let after = operator.inspect(&name).await.unwrap().expect("kept");
    assert_eq!((after.holder(), after.token), (None, guard.token()));

    // The holder hears of it at its next renewal, before anyone could rely on it holding.
    let bound = fast_options().renew_interval() + SLACK;
    let reason = timeout(bound, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal within {bound:?} of the forced release"));
    assert_eq!(reason, LossReason::ForceReleased, "told why, not just that");
    println!(
        "loss reported {:?} after the forced release",
        released_at.elapsed()
    );

    // Nothing holds it now: a second forced release writes nothing. (The TTL monitor may
    // delete the released record at any moment, expiresAt being past: gone is unchanged
    // too, and the count below is of the name never used, not of the collection.)
    let before = raw(&operator)
        .find_one(doc! { "_id": "$wedged" })
        .await
        .unwrap();
    assert_eq!(operator.force_release(&name).await.unwrap(), None);
    let unchanged = raw(&operator)
        .find_one(doc! { "_id": "$wedged" })
        .await
        .unwrap();
    assert!(
        unchanged.is_none() || unchanged == before,
        "{before:?} → {unchanged:?}"
    );
    let never_used = LockName::new("{\"$ne\": 1}").unwrap();
    assert_eq!(operator.force_release(&never_used).await.unwrap(), None);
    assert_eq!(
        raw(&operator)
            .count_documents(doc! { "_id": never_used.as_str() })
            .await
            .unwrap(),
        0,
        "a forced release of a name never used writes nothing"
    );

    let other = start(peer_of(&store).await).await;
    assert_next_token_is_larger(&other, "$wedged", guard.token()).await;
    holder.shutdown().await;
    other.shutdown().await;
}

/// Every holder a forced release of a shared record cleared is told it was force-released;
/// a lease lost otherwise while that trace remains is told it was superseded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_of_a_semaphore_tells_each_holder_why() {
    let store = store_on(&client().await, &unique_collection());
    let holder = start(store.clone()).await;
    let semaphore = holder.semaphore("imports", 2).unwrap();
    let first = semaphore.acquire().await.unwrap();
    let second = semaphore.acquire().await.unwrap();
    let operator = peer_of(&store).await;
    let cleared = operator
        .force_release(&LockName::new("imports").unwrap())
        .await
        .unwrap()
        .expect("the held permits");
    assert_eq!(cleared.holders.len(), 2, "{cleared:?}");

    let bound = fast_options().renew_interval() + SLACK;
    for permit in [&first, &second] {
        let reason = timeout(bound, permit.lost())
            .await
            .unwrap_or_else(|_| panic!("no loss signal within {bound:?} of the forced release"));
        assert_eq!(reason, LossReason::ForceReleased);
    }

    // A permit granted after the forced release, then removed from the record by hand, is
    // superseded: the trace, still there, names only the leases the release cleared.
    let third = semaphore.acquire().await.unwrap();
    let emptied = raw(&operator)
        .update_one(
            doc! { "_id": "imports" },
            doc! { "$set": { "holders": [] } },
        )
        .await
        .unwrap();
    assert_eq!(emptied.modified_count, 1);
    let reason = timeout(bound, third.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal within {bound:?} of the removal"));
    assert_eq!(reason, LossReason::Superseded);
    holder.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_index_is_created_once_with_expire_after_zero() {
    let log = CommandLog::default();
    let client = client_with(None, Some(log.handler())).await;
    let store = store_on(&client, &unique_collection());
    store.prepare().await.expect("first prepare");
    store.prepare().await.expect("second prepare is harmless");
    let manager = start(store.clone()).await;
    let index = wait_for_ttl_index(&store).await;
    assert_eq!(index.get_document("key").unwrap(), &doc! { "expiresAt": 1 });
    let expire = index.get("expireAfterSeconds").expect("a TTL index");
    assert!(
        matches!(expire, Bson::Int32(0) | Bson::Int64(0)) || expire == &Bson::Double(0.0),
        "{expire:?}"
    );
    // Another client (same deployment) and more prepares: still created only once.
    let again = store_on(
        &client_with(None, Some(log.handler())).await,
        store.collection_name(),
    );
    again.prepare().await.expect("prepare on another client");
    sleep(Duration::from_millis(300)).await;
    assert_eq!(log.count("createIndexes"), 1, "{:?}", log.take());
    // Locks work with it in place.
    let guard = manager.lock("with-index").unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_names_are_validated_before_any_io() {
    // Nothing listens on port 9: any I/O would fail or hang, so a prompt typed error proves
    // the check needs no server.
    let log = CommandLog::default();
    let mut options = ClientOptions::parse("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=100")
        .await
        .unwrap();
    options.command_event_handler = Some(log.handler());
    let db = Client::with_options(options).unwrap().database("app");
    let long = "x".repeat(200);
    for bad in ["", "$cmd", "locks$", "a\0b", "system.locks", long.as_str()] {
        let started = std::time::Instant::now();
        match MongoStore::builder(db.clone()).with_collection(bad).build() {
            Err(StoreError::InvalidConfig(message)) => {
                assert!(message.contains("collection name"), "{message}");
                assert!(message.len() < 300, "the message repeats a huge name");
            }
            other => panic!("{bad:?} accepted: {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_millis(50));
    }
    let good = MongoStore::builder(db.clone())
        .with_collection("my_locks")
        .build()
        .unwrap();
    assert_eq!(good.collection_name(), "my_locks");
    assert_eq!(MongoStore::new(db).collection_name(), "distributed_locks");
    assert!(log.take().is_empty(), "validation sent commands");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_like_names_are_stored_as_plain_ids() {
    let store = store_on(&client().await, &unique_collection());
    let manager = start(store.clone()).await;
    let other = start(peer_of(&store).await).await;
    let long = "é".repeat(500); // 1000 bytes
    let names = [
        "$gt",
        "{\"$ne\": 1}",
        "a.b",
        "$$NOW",
        "注文-🔒",
        long.as_str(),
    ];
    let bystander = other.lock("bystander").unwrap().acquire().await.unwrap();
    let mut guards = Vec::new();
    for name in names {
        let guard = manager.lock(name).unwrap().try_acquire().await.unwrap();
        guards.push(guard.unwrap_or_else(|| panic!("{name:?} is free")));
    }
    let raw = raw(&store);
    for name in names {
        let found = raw.find_one(doc! { "_id": name }).await.unwrap();
        let found = found.unwrap_or_else(|| panic!("no document with _id {name:?}"));
        assert_eq!(
            found.get_str("holder").unwrap(),
            manager.holder_id().as_str()
        );
        let record = other.lock(name).unwrap().inspect().await.unwrap().unwrap();
        assert_eq!(record.holder(), Some(manager.holder_id()), "{name:?}");
        assert!(
            other
                .lock(name)
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_none()
        );
    }
    assert_eq!(
        raw.count_documents(doc! {}).await.unwrap(),
        names.len() as u64 + 1
    );
    assert_eq!(
        bystander.loss(),
        None,
        "an operator-like name touched another lock"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
    bystander.release().await.unwrap();
    for name in names {
        assert!(
            other
                .lock(name)
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_some()
        );
    }
    manager.shutdown().await;
    other.shutdown().await;
}

/// Makes the server apply `data` to `findAndModify` and `update` (lock operations) from
/// clients named `app`, until the returned fail point is dropped.
fn fail_lock_operations(app: &str, mut data: Document) -> FailPoint {
    data.insert("failCommands", vec!["findAndModify", "update"]);
    data.insert("appName", app);
    FailPoint::on(&uri(), "alwaysOn".into(), data)
}

/// A holder whose client is named `app` (for failpoints), a peer observer, and a held guard.
async fn holder_with_app(app: &str) -> (LockManager, MongoStore, mongolock::LockGuard) {
    let client = client_with(Some(app.to_owned()), None).await;
    let store = store_on(&client, &unique_collection());
    let holder = start(store.clone()).await;
    let observer = peer_of(&store).await;
    let guard = holder.lock("cut-off").unwrap().acquire().await.unwrap();
    (holder, observer, guard)
}

/// After the holder was told of the loss, the server must still show its lease: the holder
/// learnt before anyone else could hold the lock.
async fn assert_lease_still_live(observer: &MongoStore, holder: &LockManager) -> Duration {
    let record = observer
        .inspect(&LockName::new("cut-off").unwrap())
        .await
        .unwrap()
        .expect("the record");
    assert_eq!(record.holder(), Some(holder.holder_id()));
    record
        .expires_in()
        .expect("the lease must be unexpired on the server when the loss is reported")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_server_is_reported_by_local_deadline_before_the_lease_expires() {
    let app = format!("stalled-{}", uuid::Uuid::new_v4().simple());
    let (holder, observer, guard) = holder_with_app(&app).await;
    let options = fast_options();
    let blocked_ms = i64::try_from((options.lease_duration() * 3).as_millis()).unwrap_or(i64::MAX);
    let fail_point = fail_lock_operations(
        &app,
        doc! { "blockConnection": true, "blockTimeMS": blocked_ms },
    );
    let stalled_at = Instant::now();

    let reason = timeout(options.lease_duration(), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal within the expiry of a stalled server"));
    let told_after = stalled_at.elapsed();
    // The property checked here is the timing against the server's lease; the conformance
    // scenario `hung_store_is_reported_by_local_deadline` pins the reason itself. A renewal
    // the runtime timed out just before the deadline may be reported as a store error.
    let timed_out = matches!(&reason, LossReason::StoreErrors { last_error } if last_error.contains("timed out"));
    assert!(
        reason == LossReason::DeadlineExceeded || timed_out,
        "{reason:?}"
    );
    let left = assert_lease_still_live(&observer, &holder).await;
    println!("stalled server: loss after {told_after:?}, lease left on the server {left:?}");
    assert!(
        told_after <= options.renew_deadline() + SLACK,
        "{told_after:?}"
    );
    drop(fail_point);
    holder.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_are_reported_before_the_lease_expires() {
    let app = format!("dropped-{}", uuid::Uuid::new_v4().simple());
    let (holder, observer, guard) = holder_with_app(&app).await;
    let options = fast_options();
    let fail_point = fail_lock_operations(&app, doc! { "closeConnection": true });
    let cut_at = Instant::now();

    let reason = timeout(options.lease_duration(), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal within the expiry while connections drop"));
    let told_after = cut_at.elapsed();
    assert!(
        matches!(
            reason,
            LossReason::DeadlineExceeded | LossReason::StoreErrors { .. }
        ),
        "{reason:?}"
    );
    let left = assert_lease_still_live(&observer, &holder).await;
    println!("dropped connections: {reason:?} after {told_after:?}, lease left {left:?}");
    drop(fail_point);
    holder.shutdown().await;
}

/// The child side of `sigkilled_holder_process_is_taken_over_after_expiry`: only does
/// something when that test runs this binary as a child process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_holder_process() {
    let Ok(collection) = std::env::var(CHILD_ENV) else {
        return; // a normal test run: nothing to do
    };
    let manager = start_with(store_on(&client().await, &collection), child_options()).await;
    let guard = manager.lock("crash").unwrap().acquire().await.unwrap();
    println!("HELD {}", guard.token());
    std::future::pending::<()>().await;
}

fn child_options() -> LockOptions {
    LockOptions::default()
        .with_lease_duration(Duration::from_millis(2000))
        .with_renew_interval(Duration::from_millis(400))
        .with_renew_deadline(Duration::from_millis(1200))
        .with_retry_backoff(Duration::from_millis(10), Duration::from_millis(40))
}

/// Kills the child when dropped, so a failing test leaves no process behind.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_holder_process_is_taken_over_after_expiry() {
    let store = store_on(&client().await, &unique_collection());
    let options = child_options();
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_holder_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, store.collection_name())
            .env("MONGODB_URI", uri())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child holder"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let held = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // libtest prints "test child_holder_process ... " on the same line first.
            .find_map(|line| {
                let (_, token) = line.split_once("HELD ")?;
                token.trim().parse::<u64>().ok()
            })
    });
    let child_token = timeout(Duration::from_secs(30), held)
        .await
        .expect("the child never reported holding the lock")
        .unwrap()
        .expect("the child exited before holding the lock");

    let manager = start_with(peer_of(&store).await, options.clone()).await;
    let lock = manager.lock("crash").unwrap();
    // Let the child renew at least once, then kill it without any chance to release.
    sleep(options.renew_interval() * 2).await;
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "the child holds the lock"
    );
    child.0.kill().expect("SIGKILL the child");
    let killed_at = Instant::now();
    let _ = child.0.wait();

    let guard = lock
        .acquire_timeout(options.lease_duration() * 3)
        .await
        .expect("another manager gets the lock after the killed holder's lease expires");
    let waited = killed_at.elapsed();
    println!("lock of the SIGKILLed holder taken over {waited:?} after the kill");
    assert!(guard.token() > child_token);
    assert!(waited <= options.lease_duration() + SLACK, "{waited:?}");
    assert!(
        waited >= options.lease_duration() - options.renew_interval() - SLACK,
        "taken over before the lease could have expired: {waited:?}"
    );
    guard.release().await.unwrap();
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncontended_acquire_and_release_take_one_round_trip_each() {
    let (log, manager) = counted_manager(LockOptions::default()).await;
    let lock = manager.lock("counted").unwrap();
    let mut per_call: HashMap<&str, Vec<String>> = HashMap::new();
    log.take();
    let guard = lock.acquire().await.unwrap();
    per_call.insert("acquire", log.take());
    guard.release().await.unwrap();
    per_call.insert("release", log.take());
    let guard = lock.try_acquire().await.unwrap().expect("free");
    per_call.insert("try_acquire", log.take());
    drop(guard);
    println!(
        "round trips per uncontended acquire+release: {} ({per_call:?})",
        per_call["acquire"].len() + per_call["release"].len()
    );
    assert_eq!(per_call["acquire"], ["findAndModify"]);
    assert_eq!(per_call["release"], ["findAndModify"]);
    assert_eq!(per_call["try_acquire"], ["findAndModify"]);
    manager.shutdown().await;
}

/// Renewing many leases held by one manager costs a few commands per cadence, not one per
/// lease: renewals due together go out as one batched update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_of_many_leases_are_batched() {
    const LOCKS: usize = 300;
    let options = LockOptions::default()
        .with_lease_duration(Duration::from_secs(6))
        .with_renew_interval(Duration::from_millis(800))
        .with_renew_deadline(Duration::from_secs(3));
    let (log, manager) = counted_manager(options.clone()).await;
    let mut guards = Vec::new();
    for i in 0..LOCKS {
        guards.push(
            manager
                .lock(format!("many-{i}"))
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        );
    }
    log.take();
    let cadences = 3;
    sleep(options.renew_interval() * cadences).await;
    let commands = log.take();
    let updates = commands.iter().filter(|c| *c == "update").count();
    println!(
        "{LOCKS} leases over {cadences} cadences: {updates} update commands ({} commands in all)",
        commands.len()
    );
    assert!(
        guards.iter().all(|g| g.loss().is_none()),
        "a lease was lost"
    );
    // One per lease per cadence would be 900; batches fall on a grid of 8 per cadence.
    assert!(
        updates <= 8 * (cadences as usize + 1),
        "{updates} updates for {LOCKS} leases over {cadences} cadences"
    );
    assert!(
        updates >= cadences as usize,
        "renewals were not sent: {updates}"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
    manager.shutdown().await;
}

/// A batch in which some leases were taken over tells each holder its own outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_renewal_reports_each_lease_separately() {
    let store = store_on(&client().await, &unique_collection());
    let held: Vec<_> = (0..4)
        .map(|i| {
            mongolock::store::LeaseKey::new(
                LockName::new(format!("b-{i}")).unwrap(),
                LeaseId::new(),
            )
        })
        .collect();
    for key in &held {
        let request = AcquireRequest::new(
            key.name.clone(),
            key.lease,
            HolderId::generate(),
            Duration::from_secs(30),
        );
        assert!(matches!(
            store.try_acquire(&request).await.unwrap(),
            AcquireOutcome::Acquired { .. }
        ));
    }
    // The second lease is released behind its holder's back.
    store.release(&held[1]).await.unwrap();
    let requests: Vec<_> = held
        .iter()
        .map(|key| mongolock::store::ExtendRequest::new(key.clone(), Duration::from_secs(30)))
        .collect();
    let results = store.extend_many(&requests).await;
    let outcomes: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    use mongolock::store::ExtendOutcome::{Extended, NotOwner};
    assert_eq!(outcomes, [Extended, NotOwner, Extended, Extended]);
}

/// Renewing several permits of each of many semaphores is one `update` when every one still
/// holds: each record is tested against its own leases, and a record is changed only if all
/// of them hold, so the modified count alone says all were extended. With one permit lost,
/// a second `update` extends the others and one `aggregate` tells them apart (and one more
/// reads whether a forced release took the lost one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_renewal_is_one_update_unless_a_place_was_lost() {
    const SEMAPHORES: usize = 5;
    const PERMITS: usize = 3;
    let log = CommandLog::default();
    let store = store_on(
        &client_with(None, Some(log.handler())).await,
        &unique_collection(),
    );
    let access = mongolock::Access::Permit { permits: 4 };
    let lease = Duration::from_secs(30);
    let mut held = Vec::new();
    for s in 0..SEMAPHORES {
        let name = LockName::new(format!("renewed-{s}")).unwrap();
        for _ in 0..PERMITS {
            let key = mongolock::store::LeaseKey::shared(name.clone(), LeaseId::new());
            let request = AcquireRequest::new(name.clone(), key.lease, HolderId::generate(), lease)
                .with_access(access);
            assert!(matches!(
                store.try_acquire(&request).await.unwrap(),
                AcquireOutcome::Acquired { .. }
            ));
            held.push(key);
        }
    }
    let requests: Vec<_> = held
        .iter()
        .map(|key| mongolock::store::ExtendRequest::new(key.clone(), lease))
        .collect();
    use mongolock::store::ExtendOutcome::{Extended, NotOwner};
    // Let the server's clock move on, so each renewal changes the expiry it writes.
    sleep(Duration::from_millis(5)).await;
    log.take();
    let outcomes: Vec<_> = store
        .extend_many(&requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(outcomes, vec![Extended; held.len()]);
    assert_eq!(log.take(), ["update"], "every place held: one update");

    store.release(&held[4]).await.unwrap();
    sleep(Duration::from_millis(5)).await;
    log.take();
    let outcomes: Vec<_> = store
        .extend_many(&requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let mut expected = vec![Extended; held.len()];
    expected[4] = NotOwner;
    assert_eq!(outcomes, expected);
    // The second aggregate reads the trace of a forced release, for the lost place.
    assert_eq!(log.take(), ["update", "update", "aggregate", "aggregate"]);
    let record = store.inspect(&held[3].name).await.unwrap().unwrap();
    assert_eq!(record.held_count(), PERMITS - 1, "{record:?}");
    assert!(
        record
            .holders
            .iter()
            .all(|holding| holding.expires_in > lease - Duration::from_secs(5)),
        "the other places of the record with the lost one were extended: {record:?}"
    );
}

/// A waiter in another process learns from the store's change stream that the lock was
/// released, and takes it at once instead of at its next poll (here at least 5 s away). The
/// stream is opened only once the manager has such a waiter: uncontended use costs no
/// change-stream commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_remote_waiter_at_once() {
    let collection = unique_collection();
    let holder = start(store_on(&client().await, &collection)).await;
    let slow_polls =
        fast_options().with_retry_backoff(Duration::from_secs(5), Duration::from_secs(6));
    let log = CommandLog::default();
    let waiter = start_with(
        store_on(&client_with(None, Some(log.handler())).await, &collection),
        slow_polls,
    )
    .await;
    for _ in 0..3 {
        let uncontended = waiter.lock("alone").unwrap().acquire().await.unwrap();
        uncontended.release().await.unwrap();
    }
    assert_eq!(
        log.change_stream(),
        Vec::<String>::new(),
        "no stream while nobody waits for another process"
    );
    let guard = holder.lock("woken").unwrap().acquire().await.unwrap();
    let waiting = tokio::spawn({
        let lock = waiter.lock("woken").unwrap();
        async move { lock.acquire().await }
    });
    // Let the waiter fail its first attempt and start a long backoff sleep.
    sleep(Duration::from_millis(500)).await;
    let released_at = Instant::now();
    guard.release().await.unwrap();
    let taken = timeout(Duration::from_secs(3), waiting)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap()
        .unwrap();
    let handed_over = released_at.elapsed();
    println!("hand-over to a remote waiter after release: {handed_over:?}");
    assert!(handed_over < Duration::from_secs(2), "{handed_over:?}");
    assert!(
        log.change_stream().contains(&"aggregate".to_owned()),
        "the waiter opened its release stream"
    );
    taken.release().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
    // Shutting down closes the stream (the driver kills its cursor), though its linger has
    // not run out and the manager value is still alive.
    let closed_by = Instant::now() + Duration::from_secs(5);
    while log.count("killCursors") == 0 {
        assert!(
            Instant::now() < closed_by,
            "the release stream outlived its manager's shutdown"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

/// Passing the lock to local waiters takes no command at all while the tokens its grant
/// reserved last (each holder gets the next one), then one findAndModify hand-over, which
/// reserves the next block — never a release followed by an acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_hand_overs_take_no_command_while_reserved_tokens_last() {
    // A fairness bound longer than the test: the chain passes locally for its whole block.
    let options = LockOptions::default().with_fairness_bound(Duration::from_secs(60));
    let (log, manager) = counted_manager(options).await;
    let block = store_on(&client().await, &unique_collection()).tokens_per_grant();
    assert!(block > 1, "a MongoStore grant reserves tokens");
    let lock = manager.lock("relay").unwrap();
    let mut holder = lock.acquire().await.unwrap();
    let mut tokens = vec![holder.token()];
    for passed in 1..=block {
        let next = tokio::spawn({
            let lock = lock.clone();
            async move { lock.acquire().await }
        });
        sleep(Duration::from_millis(50)).await; // queued behind the holder
        log.take();
        holder.release().await.unwrap();
        holder = next.await.unwrap().unwrap();
        tokens.push(holder.token());
        let commands = log.take();
        if passed < block {
            assert!(commands.is_empty(), "local pass {passed}: {commands:?}");
            assert_eq!(
                holder.token(),
                tokens[0] + passed,
                "the next reserved token"
            );
        } else {
            assert_eq!(commands, ["findAndModify"], "one hand-over, nothing else");
            assert!(
                holder.token() >= tokens[0] + block,
                "past the reserved block"
            );
        }
    }
    holder.release().await.unwrap();
    manager.shutdown().await;
}

/// A lease that expired on the server is not extended, even when nobody took the lock over
/// and the record still carries it — alone or in a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_not_extended() {
    let store = store_on(&client().await, &unique_collection());
    let key =
        |name: &str| mongolock::store::LeaseKey::new(LockName::new(name).unwrap(), LeaseId::new());
    let (expired, held) = (key("short"), key("long"));
    for (key, expiry) in [
        (&expired, Duration::from_millis(300)),
        (&held, Duration::from_secs(30)),
    ] {
        let request =
            AcquireRequest::new(key.name.clone(), key.lease, HolderId::generate(), expiry);
        assert!(matches!(
            store.try_acquire(&request).await.unwrap(),
            AcquireOutcome::Acquired { .. }
        ));
    }
    sleep(Duration::from_millis(600)).await;
    let extend = |key: &mongolock::store::LeaseKey| {
        mongolock::store::ExtendRequest::new(key.clone(), Duration::from_secs(30))
    };
    use mongolock::store::ExtendOutcome::{Extended, NotOwner};
    assert_eq!(store.extend(&extend(&expired)).await.unwrap(), NotOwner);
    let batch = store.extend_many(&[extend(&expired), extend(&held)]).await;
    let outcomes: Vec<_> = batch.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes, [NotOwner, Extended]);
    assert_eq!(store.extend(&extend(&held)).await.unwrap(), Extended);
}

/// A renewal that reaches the server in the millisecond of the lease's last write leaves
/// the expiry as it was (`$$NOW + lease` is unchanged), so the update modifies nothing: that
/// is still an extension, not a loss. Rather than wait for two renewals to land in one
/// millisecond (which a slow machine may never see), the situation is built: one lease named
/// twice in one batch is one `update` statement with one `$$NOW`, which modifies its document
/// once, so the store sees fewer documents modified than leases asked for while every lease
/// still holds, the very answer a same-millisecond renewal gets. One lease and a batch take
/// the same decision in the store, so this covers both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_in_the_millisecond_of_the_last_write_is_not_a_loss() {
    use mongolock::store::ExtendOutcome::{Extended, NotOwner};
    use mongolock::store::{ExtendRequest, LeaseKey};
    let log = CommandLog::default();
    let store = store_on(
        &client_with(None, Some(log.handler())).await,
        &unique_collection(),
    );
    let keys: Vec<LeaseKey> = ["quick-a", "quick-b"]
        .into_iter()
        .map(|name| LeaseKey::new(LockName::new(name).unwrap(), LeaseId::new()))
        .collect();
    let lease = Duration::from_secs(30);
    for key in &keys {
        let request = AcquireRequest::new(key.name.clone(), key.lease, HolderId::generate(), lease);
        assert!(matches!(
            store.try_acquire(&request).await.unwrap(),
            AcquireOutcome::Acquired { .. }
        ));
    }
    let [a, b] = [&keys[0], &keys[1]].map(|key| ExtendRequest::new(key.clone(), lease));
    let stranger = ExtendRequest::new(LeaseKey::new(keys[0].name.clone(), LeaseId::new()), lease);

    let read_backs = log.count("aggregate");
    let batch = store.extend_many(&[a.clone(), a.clone()]).await;
    let outcomes: Vec<_> = batch.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        outcomes,
        [Extended, Extended],
        "one lease twice in one statement"
    );
    assert_eq!(
        log.count("aggregate"),
        read_backs + 1,
        "fewer documents modified than leases asked for is read back, not taken as a loss"
    );

    let batch = store
        .extend_many(&[a.clone(), b.clone(), a.clone(), stranger.clone()])
        .await;
    let outcomes: Vec<_> = batch.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes, [Extended, Extended, Extended, NotOwner]);

    // Alone: a lease this store never granted is refused with no read-back of held leases
    // (no document matched), only the one read every lost lease costs, of the trace of a
    // forced release; a held one is extended (read back or not, as the server's clock falls).
    let read_backs = log.count("aggregate");
    assert_eq!(store.extend(&stranger).await.unwrap(), NotOwner);
    assert_eq!(log.count("aggregate"), read_backs + 1);
    assert_eq!(store.extend(&a).await.unwrap(), Extended);
    let batch = store.extend_many(&[a, b]).await;
    let outcomes: Vec<_> = batch.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes, [Extended, Extended]);
}

/// The reads that decide or report who holds a lock carry the configured read concern —
/// `majority` by default, so a primary cut off from the majority cannot report a holder the
/// majority has replaced; `linearizable` for the read of one document (`inspect`), with
/// `majority` for the reads of many (`list`), which MongoDB allows no stronger. Also prints
/// what each costs against `local` (the cost, for the guide).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_reads_use_the_configured_read_concern() {
    use mongodb::options::ReadConcern;

    // Each aggregate seen: what it reads ("inspect" or "list") and its read concern level.
    type Seen = Vec<(String, Option<String>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let handler = {
        let seen = seen.clone();
        EventHandler::callback(move |event| {
            if let CommandEvent::Started(started) = event
                && started.command_name == "aggregate"
                && !started.command.to_string().contains("$changeStream")
            {
                let level = started
                    .command
                    .get_document("readConcern")
                    .ok()
                    .and_then(|concern| concern.get_str("level").ok())
                    .map(str::to_owned);
                let what = if started.command.to_string().contains("\"$sort\"") {
                    "list"
                } else {
                    "inspect"
                };
                seen.lock().unwrap().push((what.to_owned(), level));
            }
        })
    };
    let client = client_with(None, Some(handler)).await;
    let collection = unique_collection();
    let name = LockName::new("read-concern").unwrap();
    let mut costs = Vec::new();
    for (label, concern, inspect, list) in [
        ("default", None, "majority", "majority"),
        ("local", Some(ReadConcern::local()), "local", "local"),
        (
            "linearizable",
            Some(ReadConcern::linearizable()),
            "linearizable",
            "majority",
        ),
    ] {
        let mut builder =
            MongoStore::builder(client.database(DATABASE)).with_collection(collection.clone());
        if let Some(concern) = concern {
            builder = builder.with_read_concern(concern);
        }
        let store = builder.build().unwrap();
        store.list().await.unwrap();
        seen.lock().unwrap().clear();
        store.inspect(&name).await.unwrap();
        store.list().await.unwrap();
        let levels = seen.lock().unwrap().clone();
        assert_eq!(
            levels,
            [
                ("inspect".to_owned(), Some(inspect.to_owned())),
                ("list".to_owned(), Some(list.to_owned())),
            ],
            "{label}"
        );
        let started = std::time::Instant::now();
        for _ in 0..200 {
            store.inspect(&name).await.unwrap();
        }
        costs.push(format!(
            "{label} {:.0} µs",
            started.elapsed().as_secs_f64() * 1e6 / 200.0
        ));
    }
    eprintln!("inspect, mean of 200: {}", costs.join(", "));
    raw(&store_on(&client, &collection)).drop().await.unwrap();
}

/// A lock collection sharded on another key than `_id` is refused at start with a typed
/// error; one sharded on `_id` (hashed) is accepted. The sharding record is planted in
/// `config.collections` as `mongos` would have it; the test server is no sharded cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_collection_sharded_on_another_key_is_refused() {
    let client = client().await;
    let collection = unique_collection();
    let namespace = format!("{DATABASE}.{collection}");
    let sharding: mongodb::Collection<Document> =
        client.database("config").collection("collections");
    for (key, accepted) in [
        (doc! { "tenant": 1 }, false),
        (doc! { "_id": "hashed" }, true),
    ] {
        sharding
            .replace_one(
                doc! { "_id": &namespace },
                doc! { "_id": &namespace, "key": key.clone() },
            )
            .upsert(true)
            .await
            .expect("plant a sharding record in config.collections");
        let started = LockManager::start(store_on(&client, &collection), fast_options()).await;
        match (started, accepted) {
            (Ok(manager), true) => manager.shutdown().await,
            (Err(mongolock::LockError::Store(StoreError::Unsupported(message))), false) => {
                assert!(message.contains(&namespace), "{message}");
                assert!(message.contains("tenant"), "{message}");
            }
            (Ok(_), false) => panic!("a collection sharded on {key} was accepted"),
            (Err(error), _) => panic!("{key}: {error}"),
        }
    }
    sharding
        .delete_one(doc! { "_id": &namespace })
        .await
        .expect("remove the planted record");
}

/// Every attempt finds its record by `_id` alone, so on a record of another kind (or count)
/// its pipeline is what refuses it: the record must come back exactly as it was, not even
/// stamped with the attempt's wait or a waiting mark (either would hold the record's own
/// processes back), and the answer names the record's kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_of_another_kind_changes_nothing_of_the_record() {
    let store = store_on(&client().await, &unique_collection());
    let lease = Duration::from_secs(30);
    let request = |name: &LockName, access: Access| {
        AcquireRequest::new(name.clone(), LeaseId::new(), HolderId::generate(), lease)
            .with_access(access)
    };
    let two = LockKind::Semaphore { permits: 2 };
    let held = [
        ("a-mutex", Access::Exclusive, LockKind::Mutex),
        ("a-semaphore", Access::Permit { permits: 2 }, two),
        ("a-rwlock", Access::Read, LockKind::ReadWrite),
    ];
    let raw = raw(&store);
    for (name, access, found) in held {
        let name = LockName::new(name).unwrap();
        assert!(matches!(
            store.try_acquire(&request(&name, access)).await,
            Ok(AcquireOutcome::Acquired { .. })
        ));
        let before = raw.find_one(doc! { "_id": name.as_str() }).await.unwrap();
        // Unstamped and unmarked, so a stamp or a mark would show below.
        let record = before.clone().unwrap();
        for mark in ["contendedAt", "writerWaitingUntil", "readersWaitingUntil"] {
            assert!(
                !matches!(record.get(mark), Some(Bson::DateTime(_))),
                "{mark}"
            );
        }
        let others = [
            Access::Exclusive,
            Access::Permit { permits: 3 },
            Access::Read,
            Access::Write,
        ];
        for asked in others.into_iter().filter(|other| other.kind() != found) {
            let attempt = request(&name, asked)
                .with_waited(Duration::from_secs(5))
                .with_retry_within(Duration::from_secs(5));
            match store.try_acquire(&attempt).await {
                Err(StoreError::KindMismatch {
                    found: was,
                    asked: wanted,
                    ..
                }) => assert_eq!((was, wanted), (found, asked.kind())),
                other => panic!("{asked:?} on {name}: {other:?}"),
            }
            let after = raw.find_one(doc! { "_id": name.as_str() }).await.unwrap();
            assert_eq!(after, before, "{asked:?} wrote to {name}");
        }
    }
}

/// A read grant that reaches a process while its readers wait goes to them or back, on a
/// real server: readers of one process wait while another process holds the write lock, and
/// the server is stopped (`SIGSTOP`) for longer than the lease and than an attempt's
/// store-call timeout, then resumed. The readers' attempts sent during the stop timed out
/// here and are applied when the server resumes, each granting a read under a lease no
/// attempt owns any more. Both readers must get in after the resume, and every other read
/// must leave the record by a release, not by expiry: when last seen it still had more than
/// an eighth of its lease left.
///
/// What else the stop does: the driver's monitoring connection is reset when the server
/// resumes, so the driver marks the server unknown, clears its pool, and every command —
/// those releases and the readers' next attempts alike — waits for its next check, about
/// 0.5 s later. That wait, not the lock, is how long such a read stays on the record.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_grants_applied_when_a_stopped_server_resumes_go_to_the_readers_or_back() {
    use mongolock::Access;
    use nix::sys::signal::Signal;

    let dir =
        std::env::temp_dir().join(format!("mongolock-stop-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let server = server::Server::start(&support::secantus_binary(), &dir)
        .unwrap_or_else(|e| panic!("start a SecantusDB server of this test's own: {e}"));
    let uri = format!(
        "mongodb://127.0.0.1:{}/?directConnection=true&heartbeatFrequencyMS=500",
        server.port()
    );
    let options = fast_options();
    let collection = unique_collection();
    let store_for = |client: Client| store_on(&client, &collection);
    let writing = start_with(
        store_for(support::client_for(&uri, None, None).await),
        options.clone(),
    )
    .await;
    let reading = start_with(
        store_for(support::client_for(&uri, None, None).await),
        options.clone(),
    )
    .await;
    let observer = store_for(support::client_for(&uri, None, None).await);
    let name = LockName::new("files").unwrap();

    let writer = writing.rw_lock("files").unwrap().write().await.unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let files = reading.rw_lock("files").unwrap();
            tokio::spawn(async move { files.read_timeout(Duration::from_secs(30)).await })
        })
        .collect();
    // A refused reader marks readers waiting on the record.
    let marked = raw(&observer);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let record = marked
            .find_one(doc! { "_id": "files" })
            .await
            .expect("find the record")
            .expect("the record");
        if matches!(record.get("readersWaitingUntil"), Some(Bson::DateTime(_))) {
            break;
        }
        assert!(Instant::now() < deadline, "the readers were never refused");
        sleep(Duration::from_millis(20)).await;
    }

    // The fault itself, not a wait for anything: the stop outlasts the writer's lease and
    // several of the readers' attempts, each timed out after the renew deadline.
    server
        .signal(Signal::SIGSTOP)
        .expect("stop the server (SIGSTOP)");
    sleep(options.lease_duration() * 2).await;
    server
        .signal(Signal::SIGCONT)
        .expect("resume the server (SIGCONT)");
    assert!(
        writer.loss().is_some(),
        "the writer was told of its loss during the stop"
    );
    drop(writer);

    // Every read holding seen from now on, by token: the time left on it when last seen.
    let mut last_seen: HashMap<u64, Duration> = HashMap::new();
    let mut guards = Vec::new();
    let mut readers = readers;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(record) = observer.inspect(&name).await.expect("inspect") {
            for holding in record.holders.iter().filter(|h| h.access == Access::Read) {
                last_seen.insert(holding.token, holding.expires_in);
            }
        }
        let mut waiting = Vec::new();
        for reader in readers {
            if reader.is_finished() {
                let guard = reader
                    .await
                    .expect("the reader's task")
                    .unwrap_or_else(|e| panic!("a reader waiting through the stop failed: {e}"));
                guards.push(guard);
            } else {
                waiting.push(reader);
            }
        }
        readers = waiting;
        let tokens: Vec<u64> = guards.iter().map(mongolock::LockGuard::token).collect();
        let others_left = observer
            .inspect(&name)
            .await
            .expect("inspect")
            .is_some_and(|record| {
                record
                    .holders
                    .iter()
                    .any(|h| h.access == Access::Read && !tokens.contains(&h.token))
            });
        if readers.is_empty() && !others_left {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "20 s after the resume: {} reader(s) still waiting, other reads held: {others_left}",
            readers.len()
        );
        sleep(Duration::from_millis(20)).await;
    }
    let tokens: Vec<u64> = guards.iter().map(mongolock::LockGuard::token).collect();
    for (token, left) in &last_seen {
        if tokens.contains(token) {
            continue;
        }
        println!("a read granted to nobody (token {token}) was last seen with {left:?} left");
        // A read left to expire is last seen within one poll of its expiry (tens of
        // milliseconds); a released one leaves with most of its lease, even when its release
        // waited for the driver after the resume. An eighth of the lease keeps the two apart
        // with room for a loaded machine.
        assert!(
            *left > options.lease_duration() / 8,
            "the read granted under token {token} nobody uses was left on the record until \
             {left:?} before its expiry, not given back"
        );
    }
    for guard in guards {
        guard.release().await.expect("release a read");
    }
    writing.shutdown().await;
    reading.shutdown().await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The TTL index deletes a document once its `expiresAt` has passed. A released record whose
/// line still has managers waiting in arrival order must outlast their places: deleted with
/// its line, the next asker would go first, ahead of every one of them until each asks again
/// (the fault checker's long run caught this once a minute, at each TTL pass). Every kind's
/// release of a lease granted in arrival order keeps the record at least until the line's
/// last place ends, and so does each later refusal that adds a place outlasting those: an
/// attempt behind an earlier place, and a mutex's hand-over refused for one.
#[tokio::test]
async fn a_released_record_outlasts_the_places_in_its_line() {
    use mongolock::store::{HandOverOutcome, LeaseKey};

    let store = store_on(&client().await, &unique_collection());
    let lease = Duration::from_secs(30);
    let place_lasts = Duration::from_secs(20);
    for (name, access) in [
        ("line-mutex", Access::Exclusive),
        ("line-permit", Access::Permit { permits: 1 }),
        ("line-write", Access::Write),
    ] {
        let name = LockName::new(name).unwrap();
        let request = |lease_id, holder, place_lasts| {
            AcquireRequest::new(name.clone(), lease_id, holder, lease)
                .with_access(access)
                .with_arrival_order(true)
                .with_retry_within(place_lasts)
        };
        let (held, holding) = (LeaseId::new(), HolderId::generate());
        assert!(matches!(
            store
                .try_acquire(&request(held, holding.clone(), place_lasts))
                .await
                .unwrap(),
            AcquireOutcome::Acquired { .. }
        ));
        let expires_at = || async {
            let record = raw(&store).find_one(doc! { "_id": name.as_str() }).await;
            record
                .unwrap()
                .expect("the record")
                .get_datetime("expiresAt")
                .copied()
        };
        let granted_until = expires_at().await.unwrap();
        let first_waiter = request(LeaseId::new(), HolderId::generate(), place_lasts);
        assert!(matches!(
            store.try_acquire(&first_waiter).await.unwrap(),
            AcquireOutcome::Busy { .. }
        ));
        if access.kind().is_shared() {
            // A mutex's attempt on the name writes nothing to the shared record.
            let mutex =
                AcquireRequest::new(name.clone(), LeaseId::new(), HolderId::generate(), lease)
                    .with_arrival_order(true)
                    .with_retry_within(place_lasts);
            assert!(store.try_acquire(&mutex).await.is_err());
        }
        // The lease's end is its own while it is held, whatever the line.
        assert_eq!(
            expires_at().await.unwrap(),
            granted_until,
            "{name}: refused while held"
        );
        let key = if access.kind().is_shared() {
            LeaseKey::shared(name.clone(), held)
        } else {
            LeaseKey::new(name.clone(), held)
        }
        .with_arrival_order(true);
        store.release(&key).await.unwrap();
        expiry_outlasts_the_line(&store, &name, 1, "at the release").await;

        // Asked later than the first waiter, so refused behind it: its place ends later.
        let later = request(LeaseId::new(), HolderId::generate(), place_lasts * 2);
        assert!(matches!(
            store.try_acquire(&later).await.unwrap(),
            AcquireOutcome::Busy { .. }
        ));
        expiry_outlasts_the_line(&store, &name, 2, "after a refused attempt").await;

        if access == Access::Exclusive {
            // The first waiter is granted; its hand-over to a task of its own that asked
            // just now is refused for the later waiter's earlier place, and the place the
            // refusal puts in ends after every other.
            // Its retry says how long it has waited, as the runtime's do: still first.
            let first_waiter = first_waiter.with_waited(Duration::from_secs(10));
            assert!(matches!(
                store.try_acquire(&first_waiter).await.unwrap(),
                AcquireOutcome::Acquired { .. }
            ));
            // The later waiter's retry says how long it has waited too, so its place keeps
            // an arrival before the hand-over's task (which asks just now): stamped with a
            // wait of zero, both could fall in one millisecond, a tie that is not earlier.
            let later = later.with_waited(Duration::from_millis(100));
            assert!(matches!(
                store.try_acquire(&later).await.unwrap(),
                AcquireOutcome::Busy { .. }
            ));
            let own = request(LeaseId::new(), first_waiter.holder.clone(), place_lasts * 3);
            let from = LeaseKey::new(name.clone(), first_waiter.lease).with_arrival_order(true);
            assert!(matches!(
                store.hand_over(&from, &own).await.unwrap(),
                HandOverOutcome::Released { .. }
            ));
            expiry_outlasts_the_line(&store, &name, 2, "after a refused hand-over").await;
        }
    }
}

/// Checks that the record of `name` carries `places` places and expires no earlier than the
/// last of them ends.
async fn expiry_outlasts_the_line(store: &MongoStore, name: &LockName, places: usize, when: &str) {
    let record = raw(store)
        .find_one(doc! { "_id": name.as_str() })
        .await
        .unwrap()
        .expect("the released record");
    let expires_at = record.get_datetime("expiresAt").unwrap();
    let line = record.get_array("line").unwrap();
    assert_eq!(line.len(), places, "{name} {when}: {record:?}");
    let last_place_ends = line
        .iter()
        .filter_map(|place| place.as_document()?.get_datetime("until").ok())
        .max()
        .expect("a place's end");
    assert!(
        expires_at >= last_place_ends,
        "{name} {when}: the released record expires at {expires_at}, before its line's last \
         place ends at {last_place_ends}: the TTL index may delete the line"
    );
}

/// The test server's upsert, when its lookup finds no record and another request inserts one
/// before its write, updates that record and answers with no document; with a lease of
/// 1 ms the other grant has often ended by then, so the update grants. An attempt that took
/// that answer for a refusal left the lock held by a manager that went on waiting (in S7,
/// for the whole 30 s lease). Without the read-back, 4 of 5 runs of 100 rounds failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_first_acquire_granted_by_an_upsert_that_answered_nothing_knows_it() {
    let stores = stores_on_clients_of_their_own(16).await;
    for round in 0..300 {
        let name = LockName::new(format!("first-{round}")).unwrap();
        let answers = racing_first_acquires(&stores, &name, |name| {
            fresh_request(name, Duration::from_millis(1))
                .with_arrival_order(true)
                .with_retry_within(Duration::from_millis(1600))
        })
        .await;
        let mut granted = Vec::new();
        for answer in answers {
            match answer {
                Ok(AcquireOutcome::Acquired { token, .. }) => granted.push(token),
                Ok(_) => {}
                Err(error) => panic!("round {round}: a racing first acquire surfaced {error}"),
            }
        }
        let record = stores[0].inspect(&name).await.unwrap().unwrap();
        assert!(
            granted.contains(&record.token),
            "round {round}: the last grant, token {}, was answered to nobody (grants answered: {granted:?})",
            record.token
        );
    }
}
