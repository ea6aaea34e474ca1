//! Waiters when the release change stream is not there or not well: a standalone server (no
//! change streams; the whole conformance suite runs on it unchanged), a stream invalidated by
//! dropping the lock collection, `getMore` failing once and failing for good, and a stream
//! that must come back after its server restarts. In every case a waiter acquires within
//! its backoff bound after a release, and the feed never retries in a busy loop.
//!
//! Needs `MONGODB_URI` (a replica set), `MONGODB_STANDALONE_URI` and the SecantusDB binary
//! (the restart test runs its own server); `scripts/test.sh` provides all three.
#![cfg(unix)]

mod common;
mod mongo;
#[path = "../examples/fault_check/server.rs"]
mod server;
mod support;

use std::time::Duration;

use common::{SLACK, fast_options, start_with};
use mongo::{MongoBackend, raw, store_on, unique_collection};
use mongodb::bson::doc;
use mongolock::{LockGuard, LockManager, LockOptions, MongoStore};
use support::commands::CommandLog;
use support::fail_point::FailPoint;
use support::{standalone_uri, uri};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

conformance_suite!(
    MongoBackend {
        uri: standalone_uri,
        standalone: true,
    },
    flavor = "multi_thread",
    worker_threads = 2
);

/// Waiters that only a release feed could wake quickly: their first retry is 5 s away.
fn slow_polls() -> LockOptions {
    fast_options()
        .with_retry_backoff(Duration::from_secs(5), Duration::from_secs(6))
        .with_adaptive_backoff(false)
}

/// How soon after a release a waiter woken by the feed must hold the lock.
const WOKEN_WITHIN: Duration = Duration::from_secs(2);

/// Two processes on one collection of the server at `uri`: a holder, and a waiter whose
/// client's commands are logged and named `app` (for fail points).
struct Pair {
    holder: LockManager,
    waiter: LockManager,
    log: CommandLog,
    store: MongoStore,
}

impl Pair {
    async fn on(uri: &str, app: &str, waiter_options: LockOptions) -> Self {
        Self::with_holder_options(uri, app, fast_options(), waiter_options).await
    }

    async fn with_holder_options(
        uri: &str,
        app: &str,
        holder_options: LockOptions,
        waiter_options: LockOptions,
    ) -> Self {
        let collection = unique_collection();
        let store = store_on(&support::client_for(uri, None, None).await, &collection);
        let holder = start_with(store.clone(), holder_options).await;
        let log = CommandLog::default();
        let waiter_client = support::client_for(uri, Some(app.to_owned()), Some(log.handler()));
        let waiter = start_with(store_on(&waiter_client.await, &collection), waiter_options).await;
        Self {
            holder,
            waiter,
            log,
            store,
        }
    }

    /// The holder takes `name` and the waiter starts waiting for it, past its first attempt.
    async fn contend(&self, name: &str) -> (LockGuard, JoinHandle<LockGuard>) {
        let guard = self.holder.lock(name).unwrap().acquire().await.unwrap();
        let attempts = self.log.count("findAndModify");
        let lock = self.waiter.lock(name).unwrap();
        let waiting = tokio::spawn(async move { lock.acquire().await.unwrap() });
        self.eventually("the waiter's first attempt", || {
            self.log.count("findAndModify") > attempts
        })
        .await;
        (guard, waiting)
    }

    /// Waits (polling the command log) until `condition` holds, for at most 10 s.
    async fn eventually(&self, what: &str, condition: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the waiter's release stream is open and polling: a `getMore` sent
    /// since the stream was last opened (an idle `getMore` waits on the server for long,
    /// so "one more than before" could be far off).
    async fn stream_polling(&self) {
        self.eventually("the waiter's release stream to poll", || {
            let commands = self.log.change_stream();
            let opened = commands.iter().rposition(|name| name == "aggregate");
            opened.is_some_and(|at| commands[at..].iter().any(|name| name == "getMore"))
        })
        .await;
    }

    async fn shutdown(self) {
        self.holder.shutdown().await;
        self.waiter.shutdown().await;
    }
}

/// Releases `guard` and returns how long until `waiting` held the lock (bounded by `within`).
async fn hand_over(guard: LockGuard, waiting: JoinHandle<LockGuard>, within: Duration) -> Duration {
    let released_at = Instant::now();
    guard.release().await.unwrap();
    let taken = timeout(within, waiting)
        .await
        .unwrap_or_else(|_| panic!("the waiter did not acquire within {within:?} of the release"))
        .unwrap();
    let after = released_at.elapsed();
    taken.release().await.unwrap();
    after
}

/// Without change streams a waiter polls: it holds the lock within its backoff after a
/// release, and the feed costs one refused `aggregate`, not a retry loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_change_streams_a_waiter_acquires_within_its_backoff() {
    let (min, max) = (Duration::from_millis(400), Duration::from_millis(500));
    let polls = fast_options()
        .with_retry_backoff(min, max)
        .with_adaptive_backoff(false);
    let pair = Pair::on(&standalone_uri(), "standalone-waiter", polls).await;
    let (guard, waiting) = pair.contend("polled").await;
    let held_for = Duration::from_secs(3);
    sleep(held_for).await;
    let attempts = pair.log.count("findAndModify");
    let after = hand_over(guard, waiting, max + SLACK * 2).await;
    let stream = pair.log.change_stream();
    println!(
        "standalone: acquired {after:?} after the release; {attempts} attempts in {held_for:?}; \
         stream commands {stream:?}"
    );
    assert!(after <= max + SLACK, "{after:?}");
    assert_eq!(
        stream,
        ["aggregate"],
        "one refused attempt to open a stream, then none for 30 s"
    );
    assert_eq!(pair.log.failed(), ["aggregate"]);
    let most = held_for.as_millis() / min.as_millis() + 2;
    assert!(attempts as u128 <= most, "{attempts} attempts: a busy loop");
    pair.shutdown().await;
}

/// Dropping the lock collection frees every lock in it: the stream reports the drop, every
/// waiter retries at once, and the stream is reopened for the releases after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_collection_wakes_every_waiter_and_the_stream_reopens() {
    let pair = Pair::on(&uri(), "dropped-waiter", slow_polls()).await;
    let (guard, waiting) = pair.contend("first").await;
    pair.stream_polling().await;
    let opened = pair.log.change_stream_count("aggregate");
    let dropped_at = Instant::now();
    raw(&pair.store).drop().await.expect("drop the collection");
    let taken = timeout(WOKEN_WITHIN, waiting)
        .await
        .expect("the drop did not wake the waiter")
        .unwrap();
    println!(
        "collection dropped: waiter acquired after {:?}",
        dropped_at.elapsed()
    );
    drop(guard); // lost with the collection
    taken.release().await.unwrap();

    let (guard, waiting) = pair.contend("second").await;
    pair.eventually("the stream to reopen", || {
        pair.log.change_stream_count("aggregate") > opened
    })
    .await;
    pair.stream_polling().await;
    let after = hand_over(guard, waiting, WOKEN_WITHIN).await;
    println!("after the drop: a release woke the waiter in {after:?}");
    pair.shutdown().await;
}

/// One failing `getMore` (an error the driver does not resume from) breaks the stream; it is
/// reopened and a later release still wakes the waiter at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_get_more_reopens_the_stream() {
    let app = format!("getmore-{}", uuid::Uuid::new_v4().simple());
    let pair = Pair::on(&uri(), &app, slow_polls()).await;
    let fail = FailPoint::on(
        &uri(),
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["getMore"], "errorCode": 2, "appName": &app },
    );
    let (guard, waiting) = pair.contend("flaky").await;
    pair.eventually("the stream to be reopened", || {
        pair.log.change_stream_count("aggregate") >= 2
    })
    .await;
    drop(fail);
    assert!(pair.log.failed().contains(&"getMore".to_owned()));
    pair.stream_polling().await;
    let after = hand_over(guard, waiting, WOKEN_WITHIN).await;
    println!("after a failed getMore: a release woke the waiter in {after:?}");
    pair.shutdown().await;
}

/// A stream that keeps failing is reopened with growing pauses (200 ms, doubling), not in a
/// loop; the waiter meanwhile acquires by its backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_keeps_failing_is_not_retried_in_a_loop() {
    let app = format!("broken-{}", uuid::Uuid::new_v4().simple());
    let (min, max) = (Duration::from_millis(400), Duration::from_millis(500));
    let polls = fast_options()
        .with_retry_backoff(min, max)
        .with_adaptive_backoff(false);
    let pair = Pair::on(&uri(), &app, polls).await;
    let _fail = FailPoint::on(
        &uri(),
        "alwaysOn".into(),
        doc! { "failCommands": ["getMore"], "errorCode": 2, "appName": &app },
    );
    let (guard, waiting) = pair.contend("broken").await;
    let watched = Duration::from_secs(4);
    sleep(watched).await;
    let opened = pair.log.change_stream_count("aggregate");
    let after = hand_over(guard, waiting, max + SLACK * 2).await;
    println!(
        "a stream failing for {watched:?}: opened {opened} times; acquired {after:?} after the release"
    );
    // Pauses of 0.2, 0.4, 0.8, 1.6 s fit in 4 s: five opens at most (one more for slack).
    assert!(opened <= 6, "{opened} opens in {watched:?}: a retry loop");
    assert!(after <= max + SLACK, "{after:?}");
    pair.shutdown().await;
}

/// The server restarts (killed, then started again on the same data and port) under a
/// waiting manager: its stream comes back, and a release after the restart wakes it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_comes_back_after_a_server_restart() {
    let dir = std::env::temp_dir().join(format!(
        "mongolock-restart-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let mut server = server::Server::start(&support::secantus_binary(), &dir)
        .unwrap_or_else(|e| panic!("start a SecantusDB server of this test's own: {e}"));
    let uri = format!(
        "mongodb://127.0.0.1:{}/?directConnection=true&heartbeatFrequencyMS=500",
        server.port()
    );
    // A lease (and renewal deadline) that outlives the restart, so the holder still holds
    // when the server is back.
    let lasting = LockOptions::default().with_lease_duration(Duration::from_secs(20));
    let pair = Pair::with_holder_options(&uri, "restart-waiter", lasting, slow_polls()).await;
    let guard = pair.holder.lock("kept").unwrap().acquire().await.unwrap();
    let lock = pair.waiter.lock("kept").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire().await.unwrap() });
    pair.stream_polling().await;
    let opened = pair.log.change_stream_count("aggregate");
    server.restart().expect("restart the server");
    // Resumed by the driver or reopened by the feed: either way a new `aggregate`.
    pair.eventually("the stream to come back", || {
        pair.log.change_stream_count("aggregate") > opened
    })
    .await;
    pair.stream_polling().await;
    assert!(
        guard.loss().is_none(),
        "the holder kept its lease over the restart"
    );
    let after = hand_over(guard, waiting, WOKEN_WITHIN).await;
    println!("after a server restart: a release woke the waiter in {after:?}");
    pair.shutdown().await;
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
