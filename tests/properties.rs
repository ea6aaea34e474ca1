//! Bad input never panics, only typed errors come back, and invalid input writes nothing:
//! property tests over lock names, every `LockOptions` and `ElectionOptions` setting,
//! semaphore counts, multi-lock name lists, and (with the `mongodb` feature) database and
//! collection names of the `MongoStore` builder. Over random sequences of acquisitions and
//! releases, a semaphore never has more holders than permits and its tokens only grow.
//!
//! No server needed: the memory store runs under Tokio's paused clock, and the MongoDB
//! checks stop before any I/O (a command monitor proves it).

use std::time::Duration;

use mongolock::store::LockStore;
use mongolock::{
    Access, ElectionOptions, LockError, LockGuard, LockKind, LockManager, LockName, LockOptions,
    MAX_LEASE_DURATION, MAX_LOCK_NAME_BYTES, MAX_PERMITS, MIN_LEASE_DURATION, MIN_SETTING_DURATION,
    MemoryStore,
};
use mongolock::{LockNameLabel, StoreError};
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
    prop_assert!(cadence >= MIN_SETTING_DURATION);
    prop_assert!(
        cadence + MIN_SETTING_DURATION <= deadline && deadline + MIN_SETTING_DURATION <= expiry
    );
    prop_assert!((MIN_LEASE_DURATION..=MAX_LEASE_DURATION).contains(&expiry));
    prop_assert!(min >= MIN_SETTING_DURATION && min <= max && max <= MAX_LEASE_DURATION);
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
            let usable = (MIN_SETTING_DURATION..=MAX_LEASE_DURATION).contains(&idle);
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

/// Counts a semaphore may have, dense at the edges.
fn valid_permits() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => prop::sample::select(vec![1, 2, 3, MAX_PERMITS - 1, MAX_PERMITS]),
        3 => 1..=MAX_PERMITS,
    ]
}

/// Counts no semaphore may have.
fn invalid_permits() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => prop::sample::select(vec![0, MAX_PERMITS + 1, u32::MAX]),
        1 => (MAX_PERMITS + 1)..=u32::MAX,
    ]
}

/// Names that look like query operators, paths or documents: plain values for every kind.
fn operator_like_names() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "$gt", "$ne", "$where", "$set", "$expr", "a.b", ".a", "a.", "a..b", "{}", "{\"$ne\": 1}",
            "{\"$gt\": \"\"}", "_id", "holders", "holders.0", "kind", "$", ".", "a/b", "a\\\\b",
            "[]", "null",
        ])
        .prop_map(str::to_owned),
        1 => "[$.{}\\[\\]a-c]{1,8}",
    ]
}

/// One step of a semaphore workout: an acquisition on either manager (one store attempt,
/// waiting a while, or a task queued to wait in the background), a release or drop of a
/// held permit, or time passing.
#[derive(Debug, Clone)]
enum Step {
    Try(usize),
    Wait(usize, u64),
    Queue(usize, u64),
    Release(usize),
    Drop(usize),
    Pass(u64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0usize..2).prop_map(Step::Try),
            2 => (0usize..2, 1u64..3_000).prop_map(|(m, ms)| Step::Wait(m, ms)),
            2 => (0usize..2, 1u64..3_000).prop_map(|(m, ms)| Step::Queue(m, ms)),
            3 => any::<usize>().prop_map(Step::Release),
            1 => any::<usize>().prop_map(Step::Drop),
            1 => (1u64..5_000).prop_map(Step::Pass),
        ],
        1..40,
    )
}

/// A permit asked for in the background, with the largest token delivered before it asked.
type Queued = (tokio::task::JoinHandle<Result<LockGuard, LockError>>, u64);

/// Names for a multi-lock, repeats and any order included.
fn name_lists() -> impl Strategy<Value = Vec<String>> {
    let pool = prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "c", "B", "a.b", "$gt", "é", "z", "ab", "a b"])
            .prop_map(str::to_owned),
        1 => "\\PC{1,6}",
    ];
    prop::collection::vec(pool, 1..7)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any valid name with any valid count gives a semaphore whose record says that count
    /// and holds what was granted; an invalid name is refused for every kind, writing nothing.
    #[test]
    fn semaphore_names_and_counts_round_trip(name in names(), permits in valid_permits()) {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
            match manager.semaphore(&name, permits) {
                Ok(semaphore) => {
                    prop_assert!(name_is_valid(&name));
                    prop_assert_eq!(semaphore.permits(), permits);
                    prop_assert_eq!(semaphore.name().as_str(), name.as_str());
                    let permit = semaphore.try_acquire().await?.expect("a free permit");
                    let record = semaphore.inspect().await?.expect("a record");
                    prop_assert_eq!(record.kind, LockKind::Semaphore { permits });
                    prop_assert_eq!(record.holders.len(), 1);
                    prop_assert_eq!(record.holders[0].token, permit.token());
                    prop_assert_eq!(record.holders[0].access, Access::Permit { permits });
                    prop_assert_eq!(store.len(), 1);
                    permit.release().await?;
                }
                Err(LockError::InvalidName { .. }) => {
                    prop_assert!(!name_is_valid(&name));
                    let rw_refused = matches!(manager.rw_lock(&name), Err(LockError::InvalidName { .. }));
                    prop_assert!(rw_refused, "rw_lock accepted an invalid name");
                    let all = manager.multi_lock([name.as_str(), "valid"]);
                    let all_refused = matches!(all, Err(LockError::InvalidName { .. }));
                    prop_assert!(all_refused, "multi_lock accepted an invalid name");
                    prop_assert!(store.is_empty(), "an invalid name wrote a record");
                }
                Err(other) => prop_assert!(false, "not InvalidName: {other:?}"),
            }
            manager.shutdown().await;
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// A count of 0 or above `MAX_PERMITS` is refused with a typed error, by the runtime
    /// and by the store alike, and nothing is written.
    #[test]
    fn semaphore_counts_out_of_range_are_invalid_and_write_nothing(permits in invalid_permits()) {
        runtime().block_on(async {
            use mongolock::store::{AcquireRequest, LeaseId};
            use mongolock::HolderId;
            let store = MemoryStore::new();
            let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
            let refused = |result: Result<mongolock::Semaphore, LockError>| {
                matches!(result, Err(LockError::InvalidOptions(message)) if message.contains("permits"))
            };
            prop_assert!(refused(manager.semaphore("imports", permits)));
            prop_assert!(refused(manager.semaphore_with("imports", permits, LockOptions::default())));
            // Changing a live semaphore to such a count is refused too, and changes nothing.
            let semaphore = manager.semaphore("imports", 2)?;
            let permit = semaphore.acquire().await?;
            let changed = semaphore.set_permits(permits).await;
            prop_assert!(matches!(changed, Err(LockError::InvalidOptions(_))), "{:?}", changed);
            prop_assert_eq!(semaphore.permits(), 2);
            let record = semaphore.inspect().await?.expect("a record");
            prop_assert_eq!(record.kind, LockKind::Semaphore { permits: 2 });
            permit.release().await?;
            // The store refuses it as well, writing nothing.
            let name = LockName::new("raw")?;
            let request = AcquireRequest::new(name.clone(), LeaseId::new(), HolderId::generate(), Duration::from_secs(5))
                .with_access(Access::Permit { permits });
            let acquired = store.try_acquire(&request).await;
            let acquire_refused = matches!(acquired, Err(StoreError::Rejected { .. }));
            prop_assert!(acquire_refused, "{:?}", acquired);
            let set = store.set_permits(&name, permits).await;
            let set_refused = matches!(set, Err(StoreError::Rejected { .. }));
            prop_assert!(set_refused, "{:?}", set);
            prop_assert!(store.inspect(&name).await?.is_none(), "a refused count wrote a record");
            manager.shutdown().await;
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// Two managers on one memory store (paused time) run a random sequence of
    /// acquisitions (some queued in the background), releases, drops and waits on a
    /// semaphore of N: the holders the store lists and the permits held never exceed N, and
    /// every grant's token is above every token delivered before it was asked for.
    #[test]
    fn a_semaphore_never_holds_more_than_its_count(permits in 1u32..=4, steps in steps()) {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let managers = [
                LockManager::start(store.clone(), LockOptions::default()).await?,
                LockManager::start(store.clone(), LockOptions::default()).await?,
            ];
            let semaphores = [
                managers[0].semaphore("pool", permits)?,
                managers[1].semaphore("pool", permits)?,
            ];
            let name = LockName::new("pool")?;
            let mut held: Vec<LockGuard> = Vec::new();
            let mut queued: Vec<Queued> = Vec::new();
            let mut delivered = std::collections::BTreeSet::new();
            for step in steps {
                // The largest token delivered so far: any grant from now on is above it.
                let floor = delivered.last().copied().unwrap_or(0);
                let granted = match step {
                    Step::Try(m) => semaphores[m].try_acquire().await?,
                    Step::Wait(m, ms) => {
                        match semaphores[m].acquire_timeout(Duration::from_millis(ms)).await {
                            Ok(permit) => Some(permit),
                            Err(LockError::Timeout(_)) => None,
                            Err(other) => return Err(other.into()),
                        }
                    }
                    Step::Queue(m, ms) => {
                        let semaphore = semaphores[m].clone();
                        let waiting = Duration::from_millis(ms);
                        let task = tokio::spawn(async move { semaphore.acquire_timeout(waiting).await });
                        queued.push((task, floor));
                        None
                    }
                    Step::Release(at) if !held.is_empty() => {
                        let len = held.len();
                        held.swap_remove(at % len).release().await?;
                        None
                    }
                    Step::Drop(at) if !held.is_empty() => {
                        let len = held.len();
                        drop(held.swap_remove(at % len));
                        None
                    }
                    Step::Pass(ms) => {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        None
                    }
                    Step::Release(_) | Step::Drop(_) => None,
                };
                let mut arrived: Vec<(LockGuard, u64)> = granted.map(|permit| (permit, floor)).into_iter().collect();
                // Let the background tasks and the actors run, then take what came.
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
                let mut still = Vec::new();
                for (task, asked_above) in queued.drain(..) {
                    if !task.is_finished() {
                        still.push((task, asked_above));
                        continue;
                    }
                    match task.await.expect("the waiting task") {
                        Ok(permit) => arrived.push((permit, asked_above)),
                        Err(LockError::Timeout(_)) => {}
                        Err(other) => return Err(other.into()),
                    }
                }
                queued = still;
                for (permit, asked_above) in arrived {
                    let token = permit.token();
                    prop_assert!(token > asked_above, "token {} not above {} delivered before it asked", token, asked_above);
                    prop_assert!(delivered.insert(token), "token {} delivered twice", token);
                    held.push(permit);
                }
                prop_assert!(held.len() <= permits as usize, "{} permits held of {}", held.len(), permits);
                prop_assert!(held.iter().all(|permit| permit.loss().is_none()), "a permit was lost");
                let listed = store.inspect(&name).await?.map_or(0, |record| record.holders.len());
                prop_assert!(listed <= permits as usize, "the store lists {} holders of {}", listed, permits);
                prop_assert!(listed >= held.len(), "the store lists {} holders, {} held", listed, held.len());
                if held.len() == permits as usize {
                    prop_assert!(semaphores[0].try_acquire().await?.is_none(), "a permit beyond a full count");
                    prop_assert!(semaphores[1].try_acquire().await?.is_none(), "a permit beyond a full count");
                }
            }
            drop(held);
            for (task, _) in queued {
                task.abort();
            }
            for manager in managers {
                manager.shutdown().await;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// `multi_lock` over any list of names — repeats, any order — takes each distinct name
    /// exactly once, in byte order, with a token each, or (one name held elsewhere) none of
    /// them; an empty list is refused.
    #[test]
    fn multi_lock_takes_each_distinct_name_once_in_byte_order(
        names in name_lists(),
        blocker in any::<prop::sample::Index>(),
    ) {
        runtime().block_on(async {
            let store = MemoryStore::new();
            let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
            let mut distinct: Vec<&str> = names.iter().map(String::as_str).collect();
            distinct.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            distinct.dedup();
            let all = manager.multi_lock(&names)?;
            let order: Vec<&str> = all.names().map(LockName::as_str).collect();
            prop_assert_eq!(&order, &distinct);
            let guard = all.try_acquire().await?.expect("every name is free");
            prop_assert_eq!(guard.len(), distinct.len());
            let taken: Vec<&str> = guard.tokens().map(|(name, _)| name.as_str()).collect();
            prop_assert_eq!(&taken, &distinct);
            prop_assert_eq!(store.len(), distinct.len());
            for name in &distinct {
                let token = guard.token(name).expect("a member's token");
                let record = store.inspect(&LockName::new(*name)?).await?.expect("a record");
                prop_assert_eq!(record.token, token);
                prop_assert!(manager.lock(name)?.try_acquire().await?.is_none(), "{} is not held", name);
            }
            guard.release().await?;
            for name in &distinct {
                prop_assert!(manager.lock(name)?.try_acquire().await?.is_some(), "{} was not released", name);
            }
            prop_assert!(matches!(manager.multi_lock(Vec::<String>::new()), Err(LockError::InvalidOptions(_))));
            // With one name held by another process, a try takes nothing, and gives back at
            // once what it took meanwhile.
            let other = LockManager::start(store.clone(), LockOptions::default()).await?;
            let blocked = distinct[blocker.index(distinct.len())];
            let held = other.lock(blocked)?.try_acquire().await?.expect("free");
            prop_assert!(all.try_acquire().await?.is_none(), "{} is held elsewhere", blocked);
            for name in &distinct {
                let taken = other.lock(name)?.try_acquire().await?;
                prop_assert_eq!(taken.is_some(), *name != blocked, "{} after a refused try", name);
            }
            drop(held);
            other.shutdown().await;
            manager.shutdown().await;
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// Operator-like names are plain values for every kind: held as given, exclusive (or
    /// shared) as the kind says, and blind to look-alike names. Each kind on a store and
    /// manager of its own (a name keeps the kind it was first used as).
    #[test]
    fn operator_like_names_are_plain_values_for_every_kind(name in operator_like_names()) {
        runtime().block_on(async {
            let lookalike = format!("{name}x");
            let value = LockName::new(&name)?;
            let start = || async {
                let store = MemoryStore::new();
                let manager = LockManager::start(store.clone(), LockOptions::default()).await;
                manager.map(|manager| (store, manager))
            };
            // A mutex.
            let (store, manager) = start().await?;
            let held = manager.lock(&name)?.try_acquire().await?.expect("free");
            prop_assert_eq!(held.name().as_str(), name.as_str());
            prop_assert!(manager.lock(&name)?.try_acquire().await?.is_none());
            let other = manager.lock(&lookalike)?.try_acquire().await?;
            prop_assert!(other.is_some(), "a look-alike was held");
            let token = store.inspect(&value).await?.map(|record| record.token);
            prop_assert_eq!(token, Some(held.token()));
            held.release().await?;
            manager.shutdown().await;
            // A semaphore of two.
            let (store, manager) = start().await?;
            let semaphore = manager.semaphore(&name, 2)?;
            let first = semaphore.try_acquire().await?;
            let second = semaphore.try_acquire().await?;
            prop_assert!(first.is_some() && second.is_some());
            prop_assert!(semaphore.try_acquire().await?.is_none());
            let other = manager.semaphore(&lookalike, 2)?.try_acquire().await?;
            prop_assert!(other.is_some(), "a look-alike was held");
            let record = store.inspect(&value).await?.expect("a record");
            prop_assert_eq!(record.kind, LockKind::Semaphore { permits: 2 });
            prop_assert_eq!(record.holders.len(), 2);
            manager.shutdown().await;
            // A reader/writer lock.
            let (store, manager) = start().await?;
            let rw = manager.rw_lock(&name)?;
            let reading = rw.try_read().await?.expect("free");
            prop_assert!(rw.try_read().await?.is_some(), "readers share");
            prop_assert!(rw.try_write().await?.is_none(), "a reader excludes the writer");
            let other = manager.rw_lock(&lookalike)?.try_write().await?;
            prop_assert!(other.is_some(), "a look-alike was held");
            let kind = store.inspect(&value).await?.map(|record| record.kind);
            prop_assert_eq!(kind, Some(LockKind::ReadWrite));
            drop(reading);
            tokio::time::sleep(Duration::from_millis(10)).await;
            let writing = rw.try_write().await?;
            prop_assert!(writing.is_some(), "the readers left");
            prop_assert!(rw.try_read().await?.is_none(), "the writer excludes readers");
            manager.shutdown().await;
            // A multi-lock over the name and its look-alike, in either order.
            let (store, manager) = start().await?;
            let all = manager.multi_lock([lookalike.as_str(), name.as_str()])?;
            let both = all.try_acquire().await?.expect("free");
            prop_assert_eq!(both.len(), 2);
            prop_assert!(both.token(&name).is_some() && both.token(&lookalike).is_some());
            prop_assert!(manager.lock(&name)?.try_acquire().await?.is_none());
            prop_assert_eq!(store.len(), 2);
            both.release().await?;
            prop_assert!(manager.lock(&name)?.try_acquire().await?.is_some());
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
