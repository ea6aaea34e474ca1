//! Bad input never panics, only typed errors come back, and invalid input writes nothing:
//! property tests over lock names, every `LockOptions` and `ElectionOptions` setting, and
//! (with the `mongodb` feature) database and collection names of the `MongoStore` builder.
//!
//! No server needed: the memory store runs under Tokio's paused clock, and the MongoDB
//! checks stop before any I/O (a command monitor proves it).

use std::time::Duration;

use mongolock::LockNameLabel;
use mongolock::store::LockStore;
use mongolock::{
    ElectionOptions, LockError, LockManager, LockName, LockOptions, MAX_LEASE_DURATION,
    MAX_LOCK_NAME_BYTES, MIN_LEASE_DURATION, MIN_STEP, MemoryStore,
};
use proptest::prelude::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

/// Names users type and names attackers type: any Unicode, NUL, operator and path
/// look-alikes, around the length limit.
fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        2 => "\\PC{0,24}",
        2 => prop::sample::select(vec![
            "", "\0", "a\0b", "$gt", "{\"$ne\": 1}", "a.b", "$where", "_id", ".", "..", " ",
            "注文", "\u{feff}", "\u{202e}evil",
        ])
        .prop_map(str::to_owned),
        1 => (1010usize..1040).prop_map(|n| "x".repeat(n)),
        1 => (340usize..350).prop_map(|n| "€".repeat(n)),
    ]
}

fn label_policy(which: u8) -> LockNameLabel {
    match which {
        0 => LockNameLabel::Off,
        1 => LockNameLabel::On,
        _ => LockNameLabel::allow_list(["per-lock", "defaults"]),
    }
}

fn name_is_valid(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_LOCK_NAME_BYTES && !name.contains('\0')
}

/// Durations at and around every boundary the options know, and anything in between.
fn durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        3 => prop::sample::select(vec![
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1),
            Duration::from_millis(10),
            Duration::from_millis(800),
            Duration::from_secs(10),
            Duration::from_secs(30),
            MAX_LEASE_DURATION - Duration::from_nanos(1),
            MAX_LEASE_DURATION,
            MAX_LEASE_DURATION + Duration::from_nanos(1),
            Duration::from_secs(1_000_000_000_000),
            Duration::MAX,
        ]),
        2 => (0u64..120_000).prop_map(Duration::from_millis),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn lock_options() -> impl Strategy<Value = LockOptions> {
    (
        durations(),
        proptest::option::of(durations()),
        proptest::option::of(durations()),
        (durations(), durations()),
        any::<bool>(),
        0u8..3,
    )
        .prop_map(|(lease, interval, deadline, (min, max), adaptive, label)| {
            let mut options = LockOptions::default()
                .with_lease_duration(lease)
                .with_retry_backoff(min, max)
                .with_adaptive_backoff(adaptive)
                .with_lock_name_label(label_policy(label));
            if let Some(interval) = interval {
                options = options.with_renew_interval(interval);
            }
            if let Some(deadline) = deadline {
                options = options.with_renew_deadline(deadline);
            }
            options
        })
}

fn election_options() -> impl Strategy<Value = ElectionOptions> {
    (durations(), durations(), durations(), any::<bool>()).prop_map(
        |(lease, deadline, retry, label)| {
            ElectionOptions::default()
                .with_lease_duration(lease)
                .with_renew_deadline(deadline)
                .with_retry_period(retry)
                .with_lock_name_label(label)
        },
    )
}

/// What a valid `LockOptions` promises.
fn assert_consistent(options: &LockOptions) -> Result<(), TestCaseError> {
    let (min, max) = options.retry_backoff();
    let (expiry, cadence, deadline) = (
        options.lease_duration(),
        options.renew_interval(),
        options.renew_deadline(),
    );
    prop_assert!(cadence >= MIN_STEP);
    prop_assert!(cadence + MIN_STEP <= deadline && deadline + MIN_STEP <= expiry);
    prop_assert!((MIN_LEASE_DURATION..=MAX_LEASE_DURATION).contains(&expiry));
    prop_assert!(min >= MIN_STEP && min <= max && max <= MAX_LEASE_DURATION);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lock_names_are_accepted_exactly_when_usable(name in names()) {
        let parsed = LockName::new(&name).map_err(LockError::from);
        prop_assert_eq!(parsed.is_ok(), name_is_valid(&name), "{:?}", name);
        match parsed {
            Ok(parsed) => prop_assert_eq!(parsed.as_str(), name.as_str()),
            Err(LockError::InvalidName { name: shown, reason }) => {
                prop_assert!(!reason.is_empty());
                prop_assert!(shown.len() <= 64 * 4 + "…".len(), "the error repeats a huge name");
            }
            Err(other) => prop_assert!(false, "not InvalidName: {other:?}"),
        }
    }

    #[test]
    fn the_runtime_stores_valid_names_as_given_and_writes_nothing_for_invalid_ones(name in names()) {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let manager = LockManager::start(store.clone(), LockOptions::default()).await.expect("start");
            match manager.lock(&name) {
                Ok(lock) => {
                    prop_assert!(name_is_valid(&name));
                    let guard = lock.try_acquire().await.expect("no store error").expect("free");
                    let record = lock.inspect().await.expect("inspect").expect("a record");
                    prop_assert_eq!(record.token, guard.token());
                    prop_assert_eq!(store.len(), 1);
                    guard.release().await.expect("release");
                }
                Err(LockError::InvalidName { .. }) => {
                    prop_assert!(!name_is_valid(&name));
                    prop_assert!(store.is_empty(), "an invalid name wrote a record");
                    let election = manager.election(&name, ElectionOptions::default());
                    let refused = matches!(election, Err(LockError::InvalidName { .. }));
                    prop_assert!(refused, "election accepted an invalid name");
                    prop_assert!(store.is_empty());
                }
                Err(other) => prop_assert!(false, "not InvalidName: {other:?}"),
            }
            manager.shutdown().await;
            Ok(())
        })?;
    }

    #[test]
    fn every_lock_option_combination_is_ok_or_a_typed_error(options in lock_options()) {
        let verdict = options.validate();
        match &verdict {
            Ok(()) => assert_consistent(&options)?,
            Err(LockError::InvalidOptions(message)) => prop_assert!(!message.is_empty()),
            Err(other) => prop_assert!(false, "not InvalidOptions: {other:?}"),
        }
        runtime().block_on(async {
            let store = MemoryStore::new();
            // As the manager's defaults…
            let started = LockManager::start(store.clone(), options.clone()).await;
            prop_assert_eq!(started.is_ok(), verdict.is_ok());
            if let Ok(manager) = started {
                let guard = manager.lock("defaults")?.try_acquire().await?.expect("free");
                guard.release().await?;
                manager.shutdown().await;
            }
            // …and per lock.
            let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
            match manager.lock_with("per-lock", options.clone()) {
                Ok(lock) => {
                    prop_assert!(verdict.is_ok());
                    let guard = lock.try_acquire().await?.expect("free");
                    prop_assert!(guard.loss().is_none());
                    guard.release().await?;
                }
                Err(LockError::InvalidOptions(_)) => {
                    prop_assert!(verdict.is_err());
                    let name = LockName::new("per-lock")?;
                    prop_assert!(store.inspect(&name).await?.is_none(), "invalid options wrote a record");
                }
                Err(other) => prop_assert!(false, "not InvalidOptions: {other:?}"),
            }
            manager.shutdown().await;
            Ok(())
        })?;
    }

    #[test]
    fn every_election_option_combination_is_ok_or_a_typed_error(options in election_options()) {
        let verdict = options.validate();
        if verdict.is_ok() {
            prop_assert!(options.lease_duration() > options.renew_deadline());
            prop_assert!(options.renew_deadline().as_secs_f64() > options.retry_period().as_secs_f64() * 1.2 - 1e-9);
        }
        runtime().block_on(async {
            let store = MemoryStore::new();
            let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
            match manager.election("leader", options.clone()) {
                Ok(election) => {
                    prop_assert!(verdict.is_ok());
                    // Nothing is written before campaigning.
                    prop_assert!(store.is_empty());
                    let token = election.campaign().await?;
                    prop_assert!(token > 0);
                    election.resign().await?;
                }
                Err(LockError::InvalidOptions(message)) => {
                    prop_assert!(!message.is_empty());
                    prop_assert!(store.is_empty(), "invalid election options wrote a record");
                }
                Err(other) => prop_assert!(false, "not InvalidOptions: {other:?}"),
            }
            manager.shutdown().await;
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The store API takes any lease length: a usable one is granted, any other refused with
    /// a typed error and nothing written — never a panic.
    #[test]
    fn the_memory_store_grants_or_refuses_any_lease_length(expiry in durations()) {
        runtime().block_on(async {
            use mongolock::store::{AcquireOutcome, AcquireRequest, ExtendRequest, LeaseId, LeaseKey};
use mongolock::HolderId;
            let store = MemoryStore::new();
            let name = LockName::new("any")?;
            let lease = LeaseId::new();
            let request = AcquireRequest::new(name.clone(), lease, HolderId::generate(), expiry);
            let usable = !expiry.is_zero() && expiry <= MAX_LEASE_DURATION;
            match store.try_acquire(&request).await {
                Ok(AcquireOutcome::Acquired { .. }) => prop_assert!(usable),
                Err(mongolock::StoreError::Rejected { .. }) => {
                    prop_assert!(!usable);
                    prop_assert!(store.is_empty(), "a refused lease wrote a record");
                }
                other => prop_assert!(false, "{other:?}"),
            }
            let extend = ExtendRequest::new(LeaseKey::new(name, lease), expiry);
            prop_assert_eq!(store.extend(&extend).await.is_ok(), usable);
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// The manager's idle actor timeout: accepted from 1 ms to a year, refused with a typed
    /// error otherwise, before the store is touched.
    #[test]
    fn any_idle_actor_timeout_starts_a_manager_or_is_refused(idle in durations()) {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let started = LockManager::builder(store.clone())
                .with_idle_actor_timeout(idle)
                .start()
                .await;
            let usable = (MIN_STEP..=MAX_LEASE_DURATION).contains(&idle);
            match started {
                Ok(manager) => {
                    prop_assert!(usable);
                    manager.lock("idle")?.acquire().await?.release().await?;
                    manager.shutdown().await;
                }
                Err(LockError::InvalidOptions(message)) => {
                    prop_assert!(!usable);
                    prop_assert!(message.contains("idle_actor_timeout"));
                }
                Err(other) => prop_assert!(false, "not InvalidOptions: {other:?}"),
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// Any sweep interval gives a store whose sweeper runs (its task alive, as with the
    /// default interval; a year at most).
    #[test]
    fn any_sweep_interval_gives_a_working_store(interval in durations()) {
        let tasks_with = |store: MemoryStore| {
            runtime().block_on(async {
                let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
                let guard = manager.lock("swept")?.try_acquire().await?.expect("free");
                guard.release().await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
                let alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
                manager.shutdown().await;
                Ok::<usize, TestCaseError>(alive)
            })
        };
        let alive = tasks_with(MemoryStore::with_sweep_interval(interval))?;
        prop_assert_eq!(alive, tasks_with(MemoryStore::new())?, "the sweeper task died");
    }

    /// `Election::health` takes any tolerance.
    #[test]
    fn election_health_takes_any_tolerance(tolerance in durations()) {
        runtime().block_on(async {
            let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
            let election = manager.election("healthy", ElectionOptions::default())?;
            election.campaign().await?;
            prop_assert!(election.health(tolerance).await?.is_healthy());
            manager.shutdown().await;
            Ok::<(), TestCaseError>(())
        })?;
    }
}

#[cfg(feature = "mongodb")]
mod mongo {
    //! The `MongoStore` builder and `LockManager::start` on bad database and collection
    //! names: typed errors, decided before any command is sent.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use mongodb::Client;
    use mongodb::event::EventHandler;
    use mongodb::event::command::CommandEvent;
    use mongodb::options::ClientOptions;
    use mongolock::{LockError, LockManager, LockOptions, MongoStore, StoreError};
    use proptest::prelude::*;

    /// A client for a port nobody listens on, counting the commands it starts.
    async fn unreachable_client() -> (Client, Arc<AtomicUsize>) {
        let mut options =
            ClientOptions::parse("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200")
                .await
                .expect("a valid URI");
        let commands = Arc::new(AtomicUsize::new(0));
        let counter = commands.clone();
        options.command_event_handler = Some(EventHandler::callback(move |event| {
            if let CommandEvent::Started(_) = event {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }));
        (Client::with_options(options).expect("a client"), commands)
    }

    fn database_is_valid(name: &str) -> bool {
        const FORBIDDEN: &[char] = &[
            '/', '\\', '.', ' ', '"', '$', '*', '<', '>', ':', '|', '?', '\0',
        ];
        !name.is_empty() && name.len() <= 63 && !name.contains(FORBIDDEN)
    }

    fn collection_is_valid(database: &str, name: &str) -> bool {
        !name.is_empty()
            && !name.contains('$')
            && !name.contains('\0')
            && !name.starts_with("system.")
            && !name.starts_with('.')
            && !name.ends_with('.')
            && !name.contains("..")
            && database.len() + 1 + name.len() <= 120
    }

    fn database_names() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-z_]{1,12}",
            2 => any::<String>(),
            2 => prop::sample::select(vec!["", "a$b", "a.b", "a b", "a/b", "a\0b", "admin", "注文"])
                .prop_map(str::to_owned),
            1 => (60usize..70).prop_map(|n| "d".repeat(n)),
        ]
    }

    fn collection_names() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-z_.]{1,16}",
            2 => any::<String>(),
            2 => prop::sample::select(vec![
                "", ".locks", "locks.", "a..b", "$cmd", "system.locks", "a\0b", "locks.v2", "注文",
            ])
            .prop_map(str::to_owned),
            1 => (100usize..125).prop_map(|n| "c".repeat(n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn store_names_are_checked_before_any_io(database in database_names(), collection in collection_names()) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                let (client, commands) = unreachable_client().await;
                let built = MongoStore::builder(client.database(&database)).with_collection(&collection).build();
                let valid = database_is_valid(&database) && collection_is_valid(&database, &collection);
                match built {
                    Ok(store) => {
                        prop_assert!(valid, "{database:?}.{collection:?} accepted");
                        prop_assert_eq!(store.collection_name(), collection.as_str());
                    }
                    Err(StoreError::InvalidConfig(message)) => {
                        prop_assert!(!valid, "{database:?}.{collection:?} refused: {message}");
                        prop_assert!(message.len() < 400, "the error repeats a huge name");
                    }
                    Err(other) => prop_assert!(false, "not InvalidConfig: {other:?}"),
                }
                // `MongoStore::new` cannot fail; a bad database name is refused by `start`,
                // before any command.
                if !database_is_valid(&database) {
                    let started = LockManager::start(MongoStore::new(client.database(&database)), LockOptions::default()).await;
                    let refused = matches!(started, Err(LockError::Store(StoreError::InvalidConfig(_))));
                    prop_assert!(refused, "{:?}: {:?}", database, started);
                }
                prop_assert_eq!(commands.load(Ordering::SeqCst), 0, "a command was sent");
                Ok(())
            })?;
        }
    }
}
