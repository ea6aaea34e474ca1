//! The simulated world of one schedule: managers over one shared memory store (each behind
//! its own fault switch and recorder), tasks acquiring and releasing mutexes, semaphore
//! permits, read and write locks and multi-locks (over mutex names, in any caller order,
//! now and then with a name of another kind that must fail them cleanly), an intruder
//! process that takes expired places with raw store calls, an operator deleting records and
//! changing a semaphore's count, elections with slow bound actors, holders paused past
//! their deadline with their release on the way, in half the schedules bulk renewals small
//! enough to fall behind, and in half five or eight managers at once — driven one random
//! step at a time from a seed, under Tokio's paused clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use mongolock::store::{AcquireOutcome, AcquireRequest, LeaseId, LeaseKey};
use mongolock::testing::FaultyStore;
use mongolock::{Access, Fairness, HolderId, LockError, LockGuard, MultiLock, MultiLockGuard};
use mongolock::{
    Election, ElectionEvent, ElectionOptions, LockManager, LockOptions, MemoryStore, RwLock,
    Semaphore, store::LockStore,
};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::history::{History, LineWaiter, Timings, Who};
use super::recorder::{self, Ledger, Recorder, Witness};

type Shared = Arc<Mutex<History>>;

fn history(shared: &Shared) -> MutexGuard<'_, History> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Mutex names; multi-locks take two or three of them.
const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
/// The semaphore (its count drawn per schedule, 2 to 4) and the reader/writer lock.
const SEMAPHORE: &str = "pool";
const RW_LOCK: &str = "schema";
/// Every name the checks look at.
const ALL_NAMES: [&str; 6] = ["alpha", "beta", "gamma", SEMAPHORE, RW_LOCK, ELECTION];
/// Names a task or the intruder may hold.
const HELD_NAMES: [&str; 5] = ["alpha", "beta", "gamma", SEMAPHORE, RW_LOCK];
const ELECTION: &str = "leader";
/// The most managers a schedule runs at once (a fleet on a few names).
const MAX_SLOTS: usize = 8;
const STEPS: usize = 60;
/// The longest a stalled store call waits before it is applied.
const MAX_STALL: Duration = Duration::from_millis(2_000);

/// The lock options of every manager of a schedule, with the schedule's fairness bound
/// (`None`: the default, 5 ms for this lease).
fn options(fairness_bound: Option<Duration>) -> LockOptions {
    let options = LockOptions::default()
        .with_lease_duration(Duration::from_millis(1_500))
        .with_renew_interval(Duration::from_millis(300))
        .with_renew_deadline(Duration::from_millis(900))
        .with_retry_backoff(Duration::from_millis(5), Duration::from_millis(50));
    match fairness_bound {
        Some(bound) => options.with_fairness_bound(bound),
        None => options,
    }
}

fn election_options() -> ElectionOptions {
    ElectionOptions::default()
        .with_lease_duration(Duration::from_millis(1_500))
        .with_renew_deadline(Duration::from_millis(900))
        .with_retry_period(Duration::from_millis(250))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    Pass,
    Hang,
    Fail,
    Stall,
}

type Store = Witness<MemoryStore>;

struct ManagerEntry {
    manager: LockManager,
    faulty: FaultyStore<Store>,
    fault: Fault,
    /// Set when its shutdown returned.
    shut_down_at: Arc<Mutex<Option<Instant>>>,
    shutting_down: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientPhase {
    Waiting,
    Holding,
    Done,
}

struct ClientEntry {
    task: JoinHandle<()>,
    phase: Arc<Mutex<ClientPhase>>,
    /// Lets the holder go now: `true` releases even where its plan would drop the guard.
    release_now: Option<oneshot::Sender<bool>>,
    /// A multi-lock's task (its release detaches its members).
    multi: bool,
}

struct Candidate {
    manager: usize,
    election: Option<Election>,
    events: JoinHandle<()>,
}

/// How a client asks.
#[derive(Clone, Copy, Debug)]
enum Ask {
    Blocking,
    Timeout(Duration),
    Try,
}

/// What a client asks for.
enum Target {
    Mutex(mongolock::Lock),
    Permit(Semaphore),
    Read(RwLock),
    Write(RwLock),
    All(MultiLock),
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Self::Mutex(lock) => lock.name().to_string(),
            Self::Permit(semaphore) => {
                format!("a permit of {} ({})", semaphore.name(), semaphore.permits())
            }
            Self::Read(lock) => format!("reading {}", lock.name()),
            Self::Write(lock) => format!("writing {}", lock.name()),
            Self::All(all) => {
                let names: Vec<&str> = all.names().map(mongolock::LockName::as_str).collect();
                format!("all of {names:?}")
            }
        }
    }

    /// The access each held name is granted with.
    fn access(&self) -> Access {
        match self {
            Self::Mutex(_) | Self::All(_) => Access::Exclusive,
            Self::Permit(semaphore) => Access::Permit {
                permits: semaphore.permits(),
            },
            Self::Read(_) => Access::Read,
            Self::Write(_) => Access::Write,
        }
    }

    async fn acquire(&self) -> Result<Held, LockError> {
        Ok(match self {
            Self::Mutex(lock) => Held::One(lock.acquire().await?),
            Self::Permit(semaphore) => Held::One(semaphore.acquire().await?),
            Self::Read(lock) => Held::One(lock.read().await?),
            Self::Write(lock) => Held::One(lock.write().await?),
            Self::All(all) => Held::All(all.acquire().await?),
        })
    }

    async fn acquire_timeout(&self, timeout: Duration) -> Result<Held, LockError> {
        Ok(match self {
            Self::Mutex(lock) => Held::One(lock.acquire_timeout(timeout).await?),
            Self::Permit(semaphore) => Held::One(semaphore.acquire_timeout(timeout).await?),
            Self::Read(lock) => Held::One(lock.read_timeout(timeout).await?),
            Self::Write(lock) => Held::One(lock.write_timeout(timeout).await?),
            Self::All(all) => Held::All(all.acquire_timeout(timeout).await?),
        })
    }

    async fn try_acquire(&self) -> Result<Option<Held>, LockError> {
        Ok(match self {
            Self::Mutex(lock) => lock.try_acquire().await?.map(Held::One),
            Self::Permit(semaphore) => semaphore.try_acquire().await?.map(Held::One),
            Self::Read(lock) => lock.try_read().await?.map(Held::One),
            Self::Write(lock) => lock.try_write().await?.map(Held::One),
            Self::All(all) => all.try_acquire().await?.map(Held::All),
        })
    }
}

/// What a client holds.
enum Held {
    One(LockGuard),
    All(MultiLockGuard),
}

impl Held {
    /// Every held name with its token.
    fn tokens(&self) -> Vec<(String, u64)> {
        match self {
            Self::One(guard) => vec![(guard.name().as_str().to_owned(), guard.token())],
            Self::All(all) => all
                .tokens()
                .map(|(name, token)| (name.as_str().to_owned(), token))
                .collect(),
        }
    }

    async fn lost(&self) -> mongolock::LossReason {
        match self {
            Self::One(guard) => guard.lost().await,
            Self::All(all) => all.lost().await,
        }
    }

    async fn release(self) -> Result<(), LockError> {
        match self {
            Self::One(guard) => guard.release().await,
            Self::All(all) => all.release().await,
        }
    }
}

/// What a client does once it holds the lock.
#[derive(Clone, Copy)]
struct Plan {
    hold: Duration,
    /// Release with `release().await` (else drop the guard).
    release: bool,
    /// After being told of a loss, keep the guard this long.
    acknowledge_after: Duration,
}

pub(crate) struct World {
    rng: StdRng,
    store: MemoryStore,
    ledger: Arc<Mutex<Ledger>>,
    history: Shared,
    managers: Vec<ManagerEntry>,
    /// Which manager each slot runs (`None` once shut down, until restarted).
    slots: Vec<Option<usize>>,
    clients: Vec<ClientEntry>,
    candidates: Vec<Candidate>,
    /// The intruder process: raw store calls with its own identity.
    intruder: HolderId,
    intruder_holds: BTreeMap<&'static str, (LeaseId, u64, bool)>,
    intruder_grants: u64,
    holders: BTreeMap<String, Option<usize>>,
    /// The semaphore's count as last set (new handles ask for it).
    permits: u32,
    /// Every manager's default lock options (the schedule's fairness bound in them).
    options: LockOptions,
    /// Every manager's store and the intruder's: the shared store under the witness.
    witnessed: Store,
    /// How the schedule's tasks take turns across processes (multi-locks excepted).
    fairness: Fairness,
    /// The most leases each manager's store takes in one bulk renewal, when the schedule
    /// makes it small: with a few leases held, renewals then fall behind (a bulk command
    /// leaves some queued), which acquisition attempts wait out and the loss timers must
    /// still cover. The store's own limit (unbounded) otherwise.
    bulk_limit: Option<usize>,
}

/// Half the schedules renew in bulk commands of two or three leases. Read from the seed,
/// not drawn from the schedule's generator, so that every other choice of a seed is the
/// same with and without it.
fn bulk_limit_of(seed: u64) -> Option<usize> {
    match seed % 4 {
        0 => Some(2),
        1 => Some(3),
        _ => None,
    }
}

/// How many managers a schedule runs at once: three, or in a quarter of the schedules five
/// and in another quarter eight, so that a release finds many managers waiting for it
/// (whom it wakes is rule 11). Read from the seed, as `bulk_limit_of` is.
fn slots_of(seed: u64) -> usize {
    match (seed >> 2) % 4 {
        0 => MAX_SLOTS,
        1 => 5,
        _ => 3,
    }
}

impl World {
    pub(crate) async fn new(seed: u64) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let mut rng = StdRng::seed_from_u64(seed);
        let permits = rng.random_range(2..=4);
        // The last is longer than the renew deadline: nothing but the hold's own deadline
        // check then stops a release past that deadline passing the lease on locally.
        let fairness_bound = [
            None,
            Some(Duration::from_millis(40)),
            Some(Duration::from_millis(400)),
            Some(Duration::from_millis(2_000)),
        ][rng.random_range(0..4)];
        let options = options(fairness_bound);
        // Tasks wait in line in a third of the schedules (multi-locks are left out then).
        let fairness = if rng.random_bool(0.33) {
            Fairness::ArrivalOrder
        } else {
            Fairness::Bounded
        };
        let timings = Timings {
            expiry: options.lease_duration(),
            renew_deadline: options.renew_deadline(),
            max_stall: MAX_STALL,
            block: MemoryStore::new().tokens_per_grant(),
            fairness_bound: options.fairness_bound(),
        };
        let history = Arc::new(Mutex::new(History::new(timings, ledger.clone())));
        let intruder = HolderId::from_string("intruder".to_owned());
        let mut holders = BTreeMap::new();
        holders.insert(intruder.as_str().to_owned(), None);
        let store = MemoryStore::new();
        let witnessed = Witness::new(store.clone(), ledger.clone());
        let mut world = Self {
            rng,
            store,
            witnessed,
            permits,
            options,
            ledger,
            history,
            managers: Vec::new(),
            slots: vec![None; slots_of(seed)],
            clients: Vec::new(),
            candidates: Vec::new(),
            intruder,
            intruder_holds: BTreeMap::new(),
            intruder_grants: 0,
            holders,
            fairness,
            bulk_limit: bulk_limit_of(seed),
        };
        self::history(&world.history).note(format!(
            "{SEMAPHORE} has {permits} permits; fairness bound {:?}; mutex tasks {:?}; bulk renewals of at most {:?} leases; {} managers at once",
            world.options.fairness_bound(),
            world.fairness,
            world.bulk_limit,
            world.slots.len()
        ));
        for slot in 0..world.slots.len() {
            world.start_manager(slot).await;
        }
        world
    }

    async fn start_manager(&mut self, slot: usize) {
        let id = self.managers.len();
        let faulty = FaultyStore::new(self.witnessed.clone());
        let recorded = Recorder::new(faulty.clone(), id, self.ledger.clone(), self.bulk_limit);
        let holder = HolderId::from_string(format!("manager-{id}"));
        self.holders.insert(holder.as_str().to_owned(), Some(id));
        let started = LockManager::builder(recorded)
            .with_default_lock_options(self.options.clone())
            .with_holder_id(holder)
            .with_idle_actor_timeout(Duration::from_secs(2))
            .start()
            .await;
        let manager = match started {
            Ok(manager) => manager,
            Err(error) => panic!("a manager did not start: {error}"),
        };
        self.managers.push(ManagerEntry {
            manager,
            faulty,
            fault: Fault::Pass,
            shut_down_at: Arc::default(),
            shutting_down: false,
        });
        self.slots[slot] = Some(id);
        history(&self.history).note(format!("manager {id} starts in slot {slot}"));
    }

    pub(crate) fn history(&self) -> MutexGuard<'_, History> {
        history(&self.history)
    }

    fn live_manager(&mut self) -> Option<usize> {
        let live: Vec<usize> = self.slots.iter().flatten().copied().collect();
        (!live.is_empty()).then(|| live[self.rng.random_range(0..live.len())])
    }

    fn name(&mut self) -> &'static str {
        NAMES[self.rng.random_range(0..NAMES.len())]
    }

    fn held_name(&mut self) -> &'static str {
        HELD_NAMES[self.rng.random_range(0..HELD_NAMES.len())]
    }

    fn duration(&mut self, max_ms: u64) -> Duration {
        Duration::from_millis(self.rng.random_range(0..=max_ms))
    }

    /// Runs the schedule: `STEPS` bursts of random steps, each followed by a random pause
    /// and the checks, then the end of the world (faults healed, everything shut down) and
    /// the quiescence checks.
    pub(crate) async fn run(mut self) -> Self {
        for _ in 0..STEPS {
            // A burst: a few actions at one instant, with the other tasks run a random
            // number of times in between (a shutdown lands amid an acquisition, a fault
            // between a grant and its delivery).
            for _ in 0..self.rng.random_range(1..=3) {
                self.step().await;
                for _ in 0..self.rng.random_range(0..4) {
                    tokio::task::yield_now().await;
                }
            }
            // At least a millisecond: the clock moves only once every task is idle, so
            // whatever fell due during a burst (a deadline after a pause) is handled first.
            let pause = self.duration(400).max(Duration::from_millis(1));
            tokio::time::sleep(pause).await;
            self.check().await;
        }
        self.finish().await;
        self
    }

    async fn step(&mut self) {
        match self.rng.random_range(0..102) {
            0..=23 => self.spawn_mutex_client(),
            24..=31 => self.spawn_semaphore_client(),
            32..=39 => self.spawn_rw_client(),
            40..=45 => self.spawn_multi_client(),
            46..=50 => self.cancel_client(),
            51..=53 => self.release_now(),
            54..=65 => self.fault(),
            66..=68 => self.operator_frees().await,
            69..=72 => self.pause().await,
            73..=75 => self.intruder_grabs().await,
            76..=78 => self.intruder_releases().await,
            79..=80 => self.shutdown(),
            81..=83 => self.restart().await,
            84..=88 => self.candidate(),
            89..=91 => self.resign(),
            92..=93 => self.drop_candidate(),
            94 => self.inject_panic(),
            95 => self.operator_sets_permits().await,
            96..=97 => self.spawn_readers(),
            98 => self.spawn_mutex_crowd(),
            99..=101 => self.pause_holder().await,
            _ => {}
        }
    }

    /// A task for a mutex; now and then for a name of another kind (refused with a typed
    /// error while that name's record exists).
    fn spawn_mutex_client(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let name = if self.rng.random_bool(0.05) {
            [SEMAPHORE, RW_LOCK][self.rng.random_range(0..2)]
        } else {
            self.name()
        };
        let options = self.options.clone().with_fairness(self.fairness);
        if let Ok(lock) = self.managers[manager].manager.lock_with(name, options) {
            self.spawn_client(manager, Target::Mutex(lock));
        }
    }

    fn spawn_semaphore_client(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let options = self.options.clone().with_fairness(self.fairness);
        if let Ok(semaphore) =
            self.managers[manager]
                .manager
                .semaphore_with(SEMAPHORE, self.permits, options)
        {
            self.spawn_client(manager, Target::Permit(semaphore));
        }
    }

    /// A reader (two in three) or a writer.
    fn spawn_rw_client(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let options = self.options.clone().with_fairness(self.fairness);
        if let Ok(lock) = self.managers[manager]
            .manager
            .rw_lock_with(RW_LOCK, options)
        {
            let target = if self.rng.random_bool(0.65) {
                Target::Read(lock)
            } else {
                Target::Write(lock)
            };
            self.spawn_client(manager, target);
        }
    }

    /// Two to five readers of one manager at once: they wait together, so a read granted
    /// to the first is joined by the others.
    fn spawn_readers(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let options = self.options.clone().with_fairness(self.fairness);
        for _ in 0..self.rng.random_range(2..=5) {
            if let Ok(lock) = self.managers[manager]
                .manager
                .rw_lock_with(RW_LOCK, options.clone())
            {
                self.spawn_client(manager, Target::Read(lock));
            }
        }
    }

    /// Two or three mutex names in a random order, maybe one twice; now and then with a
    /// name of another kind, which must fail the whole and leave no member held.
    fn spawn_multi_client(&mut self) {
        // A multi-lock's members do not wait in line: beside mutex tasks that do, its grants
        // would serve them out of order (every user of a name is to use the same mode).
        if self.fairness == Fairness::ArrivalOrder {
            return self.spawn_mutex_client();
        }
        let Some(manager) = self.live_manager() else {
            return;
        };
        let mut names: Vec<&str> = NAMES.to_vec();
        let count = self.rng.random_range(2..=3);
        for at in 0..names.len() {
            let other = self.rng.random_range(at..names.len());
            names.swap(at, other);
        }
        names.truncate(count);
        if self.rng.random_bool(0.2) {
            let again = names[self.rng.random_range(0..names.len())];
            names.insert(self.rng.random_range(0..=names.len()), again);
        }
        if self.rng.random_bool(0.1) {
            let odd = [SEMAPHORE, RW_LOCK][self.rng.random_range(0..2)];
            names.insert(self.rng.random_range(0..=names.len()), odd);
        }
        if let Ok(all) = self.managers[manager].manager.multi_lock(&names) {
            self.spawn_client(manager, Target::All(all));
        }
    }

    /// More tasks of one manager than a grant reserves tokens for, all asking for one
    /// mutex at once and each holding it a few milliseconds: a chain of local passes that
    /// runs to the end of the grant's block when the fairness bound lets it (the next
    /// holder must then come from the store, under a token past the block).
    fn spawn_mutex_crowd(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let name = self.name();
        let options = self.options.clone().with_fairness(self.fairness);
        let block = usize::try_from(self.store.tokens_per_grant()).unwrap_or(16);
        for _ in 0..block + self.rng.random_range(1..=4) {
            if let Ok(lock) = self.managers[manager]
                .manager
                .lock_with(name, options.clone())
            {
                let plan = Plan {
                    hold: self.duration(5),
                    ..self.plan()
                };
                self.spawn_client_with(manager, Target::Mutex(lock), Ask::Blocking, plan);
            }
        }
    }

    /// A random plan: a hold of up to 1.5 s, released or dropped, a loss acknowledged at
    /// once or after a while.
    fn plan(&mut self) -> Plan {
        Plan {
            hold: self.duration(1_500),
            release: self.rng.random_bool(0.6),
            acknowledge_after: match self.rng.random_range(0..3) {
                0 => Duration::ZERO,
                1 => self.duration(300),
                _ => self.duration(1_500),
            },
        }
    }

    fn spawn_client(&mut self, manager: usize, target: Target) {
        let ask = match self.rng.random_range(0..3) {
            0 => Ask::Blocking,
            1 => Ask::Timeout(self.duration(2_000)),
            _ => Ask::Try,
        };
        let plan = self.plan();
        self.spawn_client_with(manager, target, ask, plan);
    }

    fn spawn_client_with(&mut self, manager: usize, target: Target, ask: Ask, plan: Plan) {
        let id = self.clients.len();
        let phase = Arc::new(Mutex::new(ClientPhase::Waiting));
        let (release_now, release_signal) = oneshot::channel();
        let history = self.history.clone();
        {
            let mut history = self::history(&history);
            history.note(format!(
                "client {id} asks manager {manager} for {}: {ask:?}",
                target.describe()
            ));
            if let Target::All(all) = &target {
                let names = all.names().map(|name| name.as_str().to_owned()).collect();
                history.multi_acquiring(id, manager, names);
            }
        }
        let renew_deadline = self.options.renew_deadline();
        let multi = matches!(target, Target::All(_));
        let in_line = self.fairness == Fairness::ArrivalOrder && !multi;
        let task = tokio::spawn(client(ClientRun {
            id,
            manager,
            in_line,
            target,
            ask,
            plan,
            history,
            phase: phase.clone(),
            release_signal,
            renew_deadline,
        }));
        self.clients.push(ClientEntry {
            task,
            phase,
            release_now: Some(release_now),
            multi,
        });
    }

    fn pick_client(&mut self, phase: ClientPhase) -> Option<usize> {
        let matching: Vec<usize> = (0..self.clients.len())
            .filter(|&id| *lock_phase(&self.clients[id].phase) == phase)
            .collect();
        (!matching.is_empty()).then(|| matching[self.rng.random_range(0..matching.len())])
    }

    /// Cancels a waiting acquisition, or kills a holding task (its guard drops).
    fn cancel_client(&mut self) {
        let phase = if self.rng.random_bool(0.7) {
            ClientPhase::Waiting
        } else {
            ClientPhase::Holding
        };
        let Some(id) = self.pick_client(phase) else {
            return;
        };
        let mut history = self.history();
        if phase == ClientPhase::Holding {
            history.letting_go(Who::Client(id));
        }
        history.multi_ended(id, false);
        history.stopped_waiting(id);
        history.note(format!("client {id} cancelled"));
        drop(history);
        *lock_phase(&self.clients[id].phase) = ClientPhase::Done;
        self.clients[id].task.abort();
    }

    /// A holder lets go now.
    fn release_now(&mut self) {
        if let Some(id) = self.pick_client(ClientPhase::Holding)
            && let Some(signal) = self.clients[id].release_now.take()
        {
            let _ = signal.send(false);
        }
    }

    fn fault(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let fault = match self.rng.random_range(0..4) {
            0 => Fault::Hang,
            1 => Fault::Fail,
            2 => Fault::Stall,
            _ => Fault::Pass,
        };
        let stall = Duration::from_millis(self.rng.random_range(10..=2_000));
        let entry = &mut self.managers[manager];
        match fault {
            Fault::Pass => entry.faulty.heal(),
            Fault::Hang => entry.faulty.hang(),
            Fault::Fail => entry.faulty.fail(),
            Fault::Stall => entry.faulty.stall(stall),
        }
        self.managers[manager].fault = fault;
        self.history().store_faulty(manager, fault != Fault::Pass);
    }

    /// An operator deletes a record (or force-releases it): its leases are gone behind
    /// their holders' backs.
    async fn operator_frees(&mut self) {
        let name = self.held_name();
        let leases = self.leases_in_record(name).await;
        let removed = self.store.remove(&lock_name(name));
        // The deletion woke every manager: their feeds hear of it now.
        self.witnessed.hand_on();
        if removed {
            // The deleted record took its line with it: nobody is ahead of a newcomer.
            recorder::lock(&self.ledger).line_deleted(name);
            self.history().operator_freed(name, &leases);
        }
    }

    /// The leases a record carries (every holding of a shared one).
    async fn leases_in_record(&self, name: &str) -> Vec<LeaseId> {
        let Ok(Some(record)) = self.store.inspect(&lock_name(name)).await else {
            return Vec::new();
        };
        let block = self.store.tokens_per_grant();
        let ledger = recorder::lock(&self.ledger);
        record
            .holders
            .iter()
            .filter_map(|holding| {
                if holding.holder == self.intruder {
                    self.intruder_holds.get(name).map(|(lease, _, _)| *lease)
                } else {
                    ledger.lease_of(name, holding.token, block)
                }
            })
            .collect()
    }

    /// An operator changes the semaphore's count: holders keep their permits, handles
    /// asking for a count the record had before are held to the new one.
    async fn operator_sets_permits(&mut self) {
        let permits = self.rng.random_range(2..=4);
        if let Ok(old) = self
            .witnessed
            .set_permits(&lock_name(SEMAPHORE), permits)
            .await
        {
            self.permits = permits;
            self.history().note(format!(
                "operator sets {SEMAPHORE} to {permits} permits (was {old:?})"
            ));
        }
    }

    /// Every process stops for a while: a holder's release may be queued (not handled),
    /// some tasks half way; the clock jumps; the intruder, which was not paused, takes every
    /// expired lock before anything of ours runs again.
    async fn pause(&mut self) {
        if self.rng.random_bool(0.7) {
            self.release_now();
        }
        for _ in 0..self.rng.random_range(0..4) {
            tokio::task::yield_now().await;
        }
        let jump = Duration::from_millis(self.rng.random_range(200..=3_000));
        let _ = tokio::time::advance(jump).now_or_never();
        self.history().paused(jump);
        for name in HELD_NAMES {
            self.intruder_grab(name).await;
        }
    }

    /// A holder's process stops right after its task asked to release (a multi-lock's:
    /// to detach its members and release them together), until past the hold's loss
    /// deadline; the other processes may meanwhile take what expired. When it runs again,
    /// the release reaches its actor before the deadline's own timer is handled, and must
    /// be answered as a loss (rule 10), whether or not anyone took the lock.
    ///
    /// Half the time a multi-lock's task, if one holds (fewer hold than single locks). The
    /// jump is at most 600 ms past the longest the deadline can be ahead, so that a release
    /// still comes within a long fairness bound of its grant (rule 10's second half).
    async fn pause_holder(&mut self) {
        let multis: Vec<usize> = (0..self.clients.len())
            .filter(|&id| {
                self.clients[id].multi
                    && *lock_phase(&self.clients[id].phase) == ClientPhase::Holding
            })
            .collect();
        let id = if !multis.is_empty() && self.rng.random_bool(0.5) {
            multis[self.rng.random_range(0..multis.len())]
        } else if let Some(id) = self.pick_client(ClientPhase::Holding) {
            id
        } else {
            return;
        };
        let Some(signal) = self.clients[id].release_now.take() else {
            return;
        };
        let _ = signal.send(true);
        let jump = self.options.renew_deadline() + Duration::from_millis(1) + self.duration(600);
        let _ = tokio::time::advance(jump).now_or_never();
        self.history()
            .note(format!("client {id} releases; its process is paused"));
        self.history().paused(jump);
        if self.rng.random_bool(0.5) {
            for name in HELD_NAMES {
                self.intruder_grab(name).await;
            }
        }
    }

    async fn intruder_grabs(&mut self) {
        let name = self.held_name();
        self.intruder_grab(name).await;
    }

    async fn intruder_grab(&mut self, name: &'static str) {
        if self.intruder_holds.contains_key(name) {
            return;
        }
        let lease = LeaseId::new();
        let expiry = Duration::from_millis(self.rng.random_range(100..=1_500));
        let access = match name {
            SEMAPHORE => Access::Permit {
                permits: self.permits,
            },
            RW_LOCK if self.rng.random_bool(0.5) => Access::Read,
            RW_LOCK => Access::Write,
            _ => Access::Exclusive,
        };
        let request = AcquireRequest::new(lock_name(name), lease, self.intruder.clone(), expiry)
            .with_access(access);
        if let Ok(AcquireOutcome::Acquired { token, .. }) =
            self.witnessed.try_acquire(&request).await
        {
            self.intruder_grants += 1;
            let who = Who::Intruder(self.intruder_grants);
            let shared = access.kind().is_shared();
            self.intruder_holds
                .insert(name, (lease, self.intruder_grants, shared));
            self.history().granted(
                who,
                name,
                access,
                None,
                token,
                Some(lease),
                Some(Instant::now() + expiry),
            );
        }
    }

    /// The intruder lets go of `name`, if it holds it.
    async fn intruder_release(&mut self, name: &'static str) {
        let Some((lease, grant, shared)) = self.intruder_holds.remove(name) else {
            return;
        };
        self.history().letting_go(Who::Intruder(grant));
        let key = if shared {
            LeaseKey::shared(lock_name(name), lease)
        } else {
            LeaseKey::new(lock_name(name), lease)
        };
        let _ = self.witnessed.release(&key).await;
    }

    async fn intruder_releases(&mut self) {
        let name = self.held_name();
        self.intruder_release(name).await;
    }

    fn shutdown(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        if let Some(slot) = self.slots.iter_mut().find(|slot| **slot == Some(manager)) {
            *slot = None;
        }
        self.shut_down(manager);
    }

    fn shut_down(&mut self, manager: usize) {
        let entry = &mut self.managers[manager];
        if entry.shutting_down {
            return;
        }
        entry.shutting_down = true;
        let mut shared = history(&self.history);
        shared.note(format!("manager {manager} shuts down"));
        for (id, candidate) in self.candidates.iter().enumerate() {
            if candidate.manager == manager {
                shared.resigning(id);
            }
        }
        drop(shared);
        let (handle, done, history) = (
            entry.manager.clone(),
            entry.shut_down_at.clone(),
            self.history.clone(),
        );
        tokio::spawn(async move {
            handle.shutdown().await;
            *done
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
            self::history(&history).note(format!("manager {manager} has shut down"));
        });
    }

    async fn restart(&mut self) {
        if let Some(slot) = self.slots.iter().position(Option::is_none) {
            self.start_manager(slot).await;
        }
    }

    /// A candidate joins the election; its bound actor may take long to start.
    fn candidate(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        if self
            .candidates
            .iter()
            .any(|c| c.manager == manager && c.election.is_some())
        {
            return;
        }
        let Ok(election) = self.managers[manager]
            .manager
            .election(ELECTION, election_options())
        else {
            return;
        };
        let id = self.candidates.len();
        let events = tokio::spawn(follow(
            id,
            manager,
            election.subscribe(),
            self.history.clone(),
        ));
        let start_delay = self.duration(3_000);
        let bound = self.rng.random_bool(0.7);
        self.history().note(format!(
            "candidate {id} joins on manager {manager} (bound actor: {bound}, starts in {start_delay:?})"
        ));
        let joined = if bound {
            election.run_while_leader(move |token, supervisor| async move {
                let (actor, _) =
                    Actor::spawn_linked(None, SlowStart, (token, start_delay), supervisor).await?;
                Ok(actor.get_cell())
            })
        } else {
            election.campaign_in_background()
        };
        if joined.is_ok() {
            self.candidates.push(Candidate {
                manager,
                election: Some(election),
                events,
            });
        } else {
            events.abort();
        }
    }

    /// A candidate whose handle is still held, if any.
    fn live_candidate(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.candidates.len())
            .filter(|&c| self.candidates[c].election.is_some())
            .collect();
        (!live.is_empty()).then(|| live[self.rng.random_range(0..live.len())])
    }

    fn resign(&mut self) {
        let Some(id) = self.live_candidate() else {
            return;
        };
        if let Some(election) = self.candidates[id].election.clone() {
            let mut history = self.history();
            history.note(format!("candidate {id} resigns"));
            history.resigning(id);
            drop(history);
            tokio::spawn(async move {
                let _ = election.resign().await;
            });
        }
    }

    fn drop_candidate(&mut self) {
        let Some(id) = self.live_candidate() else {
            return;
        };
        let mut history = self.history();
        history.note(format!("candidate {id}'s handle is dropped"));
        history.resigning(id);
        drop(history);
        self.candidates[id].election = None;
    }

    /// A lock actor panics: its holders are told `RuntimeFailed`, and their leases expire on
    /// the store (the runtime that would release them is gone), so the loose orphan bound
    /// applies.
    fn inject_panic(&mut self) {
        let Some(manager) = self.live_manager() else {
            return;
        };
        let name = self.held_name();
        if let Ok(lock) = self.managers[manager].manager.lock(name)
            && mongolock::testing::inject_actor_panic(&lock).is_ok()
        {
            let mut history = self.history();
            history.note(format!("manager {manager}'s actor for {name} panics"));
            history.store_faulty(manager, true);
            history.store_faulty(manager, self.managers[manager].fault != Fault::Pass);
        }
    }

    /// The periodic checks.
    async fn check(&mut self) {
        let mut records = Vec::new();
        for name in ALL_NAMES {
            if let Ok(Some(record)) = self.store.inspect(&lock_name(name)).await {
                for holding in record.holders {
                    let manager = self.holders.get(holding.holder.as_str()).copied().flatten();
                    records.push((name.to_owned(), manager, holding.token));
                }
            }
        }
        let mut history = self.history();
        history.check_store();
        history.check_told_in_time();
        history.check_orphans(records);
        history.check_terms();
    }

    /// Heals every fault, lets the holders finish, shuts every manager down, and checks that
    /// the world falls quiet: every acquisition answered, no store call from a shut-down
    /// manager, no task left.
    async fn finish(&mut self) {
        for manager in 0..self.managers.len() {
            self.managers[manager].faulty.heal();
            self.history().store_faulty(manager, false);
        }
        for name in HELD_NAMES {
            self.intruder_release(name).await;
        }
        let (releases, wakeups) = {
            let ledger = recorder::lock(&self.ledger);
            (ledger.wakes.releases, ledger.wakes.wakeups)
        };
        self.history().note(format!(
            "the end: faults healed; {releases} releases woke {wakeups} managers"
        ));
        tokio::time::sleep(Duration::from_secs(5)).await;
        self.check().await;
        for manager in 0..self.managers.len() {
            self.shut_down(manager);
        }
        self.slots.fill(None);
        // Everything still waiting is answered by the shutdown.
        tokio::time::sleep(Duration::from_secs(5)).await;
        self.check().await;
        let unanswered: Vec<usize> = (0..self.clients.len())
            .filter(|&id| !self.clients[id].task.is_finished())
            .collect();
        for manager in 0..self.managers.len() {
            if self.managers[manager]
                .shut_down_at
                .lock()
                .map(|at| at.is_none())
                .unwrap_or(true)
            {
                self.history()
                    .violation(format!("manager {manager}'s shutdown did not return"));
            }
        }
        if !unanswered.is_empty() {
            self.history().violation(format!(
                "clients {unanswered:?} still wait 5 s after every manager shut down"
            ));
        }
        // Long enough for every late answer the runtime still waits for (ten leases, at
        // least a minute) and every lost lease's margin. Election handles stay alive.
        tokio::time::sleep(Duration::from_secs(600)).await;
        self.check().await;
        for manager in 0..self.managers.len() {
            let since = self.managers[manager]
                .shut_down_at
                .lock()
                .ok()
                .and_then(|at| *at);
            let Some(since) = since else { continue };
            let calls =
                recorder::lock(&self.ledger).calls_since(manager, since + Duration::from_millis(1));
            if !calls.is_empty() {
                let (first, kind) = calls[0];
                self.history().violation(format!(
                    "manager {manager} made {} store calls after its shutdown returned (the first, {kind:?}, {:?} after)",
                    calls.len(),
                    first - since
                ));
            }
        }
        for candidate in &self.candidates {
            candidate.events.abort();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        // A manager's timers fire only through its timer service, a task that runs while
        // an actor or the supervisor keeps a handle on it: a timer that could still fire
        // after shutdown shows here as a task still alive.
        self.check_only_the_sweeper_runs(
            "10 minutes after every manager shut down, election handles still alive",
        );
        for candidate in &mut self.candidates {
            candidate.election = None;
        }
        self.managers.clear();
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.check_only_the_sweeper_runs("after every handle was dropped");
    }

    /// The only task left is the memory store's sweeper (the world still holds the store).
    fn check_only_the_sweeper_runs(&self, when: &str) {
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        if alive > 1 {
            self.history().violation(format!(
                "{alive} tasks alive {when} (expected 1: the memory store's sweeper)"
            ));
        }
    }
}

fn lock_phase(phase: &Mutex<ClientPhase>) -> MutexGuard<'_, ClientPhase> {
    phase
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_name(name: &str) -> mongolock::LockName {
    match mongolock::LockName::new(name) {
        Ok(name) => name,
        Err(error) => panic!("{error}"),
    }
}

struct ClientRun {
    id: usize,
    manager: usize,
    /// The task waits in line (arrival order): rule 8 applies to its grant.
    in_line: bool,
    target: Target,
    ask: Ask,
    plan: Plan,
    history: Shared,
    phase: Arc<Mutex<ClientPhase>>,
    release_signal: oneshot::Receiver<bool>,
    renew_deadline: Duration,
}

/// One simulated task: asks for its lock(s), holds them for a while (or until told of a
/// loss), and lets go by release or by drop.
async fn client(run: ClientRun) {
    let ClientRun {
        id,
        manager,
        in_line,
        target,
        ask,
        plan,
        history: shared,
        phase,
        mut release_signal,
        renew_deadline,
    } = run;
    let who = Who::Client(id);
    let asked = Instant::now();
    let multi = matches!(target, Target::All(_));
    let in_line_name = match &target {
        _ if !in_line || matches!(ask, Ask::Try) => None,
        Target::Read(lock) | Target::Write(lock) => Some(lock.name().as_str().to_owned()),
        Target::Mutex(lock) => Some(lock.name().as_str().to_owned()),
        Target::Permit(semaphore) => Some(semaphore.name().as_str().to_owned()),
        Target::All(_) => None,
    };
    if let Some(name) = &in_line_name {
        history(&shared).waits_in_line(
            id,
            LineWaiter {
                manager,
                name: name.clone(),
                access: target.access(),
                asked,
                gives_up: match ask {
                    Ask::Timeout(timeout) => Some(asked + timeout),
                    _ => None,
                },
            },
        );
    }
    let (answer, bound) = match ask {
        Ask::Blocking => (target.acquire().await.map(Some), None),
        Ask::Timeout(timeout) => (
            target.acquire_timeout(timeout).await.map(Some),
            Some(timeout),
        ),
        // A multi-lock's try gives back what it took after its tries: two calls.
        Ask::Try if multi => (target.try_acquire().await, Some(renew_deadline * 2)),
        Ask::Try => (target.try_acquire().await, Some(renew_deadline)),
    };
    let took = asked.elapsed();
    {
        let mut history = history(&shared);
        history.stopped_waiting(id);
        if let Some(bound) = bound
            && took
                > bound + history.paused_between(asked, Instant::now()) + Duration::from_millis(1)
        {
            history.violation(format!(
                "client {id}'s {ask:?} answered after {took:?} (bound {bound:?})"
            ));
        }
        match &answer {
            Ok(Some(_)) => {}
            Ok(None) => history.note(format!("client {id}: not acquired")),
            Err(error) => history.note(format!("client {id}: {error}")),
        }
        if multi {
            history.multi_ended(id, matches!(answer, Ok(Some(_))));
        }
    }
    let Ok(Some(held)) = answer else {
        *lock_phase(&phase) = ClientPhase::Done;
        return;
    };
    let access = target.access();
    let mut tokens = held.tokens();
    if let Held::All(all) = &held {
        // Every member is held when the guard comes: one lost while waiting for the next
        // may be somebody else's already.
        let mut history = history(&shared);
        for member in all.guards() {
            if let Some(reason) = member.loss() {
                history.violation(format!(
                    "client {id}'s multi-lock was acquired with member {} (token {}) already lost: {reason}",
                    member.name(),
                    member.token()
                ));
                tokens.retain(|(name, _)| name != member.name().as_str());
                history.held_lost(
                    who,
                    member.name().as_str(),
                    Access::Exclusive,
                    Some(manager),
                    member.token(),
                );
            }
        }
    }
    let places: Vec<usize> = {
        let mut history = history(&shared);
        let members = matches!(held, Held::All(_));
        history.members_taken_earlier(members);
        let places = tokens
            .iter()
            .map(|(name, token)| {
                history.granted(who, name, access, Some(manager), *token, None, None)
            })
            .collect();
        history.members_taken_earlier(false);
        if in_line {
            for (name, token) in &tokens {
                history.served_in_arrival_order(who, name, *token, asked);
                if in_line_name.is_some() {
                    history.served_in_process_order(who, (manager, name), access, asked);
                }
            }
        }
        places
    };
    *lock_phase(&phase) = ClientPhase::Holding;
    tokio::select! {
        biased;
        reason = held.lost() => {
            let until = Instant::now() + plan.acknowledge_after;
            match &held {
                Held::One(_) => history(&shared).told(who, &reason.to_string()),
                Held::All(all) => {
                    told_members(&shared, who, all, &reason.to_string());
                    // The members not lost yet stay held until the guard goes: their losses
                    // are told meanwhile.
                    watch_members(&shared, who, all, until).await;
                }
            }
            tokio::time::sleep_until(until).await;
            history(&shared).letting_go(who);
            *lock_phase(&phase) = ClientPhase::Done;
            drop(held);
        }
        forced = async {
            tokio::select! {
                _ = tokio::time::sleep(plan.hold) => false,
                forced = &mut release_signal => forced.unwrap_or(false),
            }
        } => {
            let overdue = {
                let mut history = history(&shared);
                let overdue = history.past_deadline(who);
                history.letting_go(who);
                overdue
            };
            *lock_phase(&phase) = ClientPhase::Done;
            if plan.release || forced {
                match held.release().await {
                    Ok(()) => {
                        let mut history = history(&shared);
                        history.released_ok_past_deadline(who, &overdue);
                        for ((name, token), place) in tokens.iter().zip(places) {
                            history.released_ok(who, name, *token, place);
                        }
                    }
                    Err(error) => history(&shared).note(format!("client {id} release: {error}")),
                }
            } else {
                drop(held);
            }
        }
    }
}

/// Marks as told each member of `all` whose own guard reports a loss.
fn told_members(shared: &Shared, who: Who, all: &MultiLockGuard, reason: &str) {
    let mut history = history(shared);
    for member in all.guards() {
        if let Some(lost) = member.loss() {
            history.told_of(who, member.name().as_str(), &format!("{lost} ({reason})"));
        }
    }
}

/// Until `until`, tells the history of each further member loss as it comes.
async fn watch_members(shared: &Shared, who: Who, all: &MultiLockGuard, until: Instant) {
    loop {
        let pending: Vec<_> = all
            .guards()
            .iter()
            .filter(|member| member.loss().is_none())
            .map(|member| Box::pin(member.lost()))
            .collect();
        if pending.is_empty() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(until) => return,
            (reason, _, _) = futures::future::select_all(pending) => {
                told_members(shared, who, all, &reason.to_string());
            }
        }
    }
}

/// Records a candidate's terms from its events.
async fn follow(
    candidate: usize,
    manager: usize,
    mut events: broadcast::Receiver<ElectionEvent>,
    shared: Shared,
) {
    loop {
        match events.recv().await {
            Ok(ElectionEvent::Elected { token }) => {
                history(&shared).term_began(ELECTION, candidate, manager, token);
            }
            Ok(ElectionEvent::Deposed { token, reason }) => {
                history(&shared).term_ended(
                    ELECTION,
                    candidate,
                    token,
                    false,
                    &format!("deposed: {reason}"),
                );
            }
            Ok(ElectionEvent::Resigned { token }) => {
                history(&shared).term_ended(ELECTION, candidate, token, true, "resigned");
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                history(&shared)
                    .violation(format!("candidate {candidate}'s events lagged by {missed}"));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// A bound actor whose start takes a while (connecting, loading state).
struct SlowStart;

impl Actor for SlowStart {
    type Msg = ();
    type State = ();
    type Arguments = (u64, Duration);

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        (_token, delay): (u64, Duration),
    ) -> Result<(), ActorProcessingErr> {
        tokio::time::sleep(delay).await;
        Ok(())
    }
}
