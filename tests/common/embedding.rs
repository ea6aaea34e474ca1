//! Embedding scenarios: loss notification to an actor, background acquisition with events,
//! and a user actor bound to a held lock / leadership.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongolock::{ElectionEvent, LockEvent, LockManager, LockName, LossReason};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use tokio::time::{sleep, timeout};

use super::election::fast_election;
use super::{Backend, SLACK, fast_options};

/// What the recording actor received.
#[derive(Debug)]
pub(crate) enum Recorded {
    Loss(LossReason),
    Lock(LockEvent),
    Election(ElectionEvent),
}

/// An actor that forwards what it receives to a channel the test reads.
pub(crate) struct Probe;

impl Actor for Probe {
    type Msg = Recorded;
    type State = mpsc::UnboundedSender<Recorded>;
    type Arguments = mpsc::UnboundedSender<Recorded>;

    async fn pre_start(
        &self,
        _: ActorRef<Recorded>,
        out: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(out)
    }

    async fn handle(
        &self,
        _: ActorRef<Recorded>,
        message: Recorded,
        out: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = out.send(message);
        Ok(())
    }
}

pub(crate) async fn probe() -> (ActorRef<Recorded>, mpsc::UnboundedReceiver<Recorded>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (actor, _) = Actor::spawn(None, Probe, tx).await.unwrap();
    (actor, rx)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Recorded>, within: Duration) -> Recorded {
    timeout(within, rx.recv())
        .await
        .expect("message in time")
        .expect("probe alive")
}

pub(crate) async fn loss_is_notified_to_an_actor<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let manager = LockManager::start(store.clone(), fast_options())
        .await
        .unwrap();
    let (actor, mut rx) = probe().await;
    let guard = manager.lock("notified").unwrap().acquire().await.unwrap();
    guard.notify(&actor, Recorded::Loss);
    backend
        .delete_record(&store, &LockName::new("notified").unwrap())
        .await;
    let bound = fast_options().renew_interval() + SLACK;
    assert!(matches!(
        next(&mut rx, bound).await,
        Recorded::Loss(LossReason::Superseded)
    ));
    // A release is not a loss: nothing is sent.
    let guard = manager.lock("quiet").unwrap().acquire().await.unwrap();
    guard.notify(&actor, Recorded::Loss);
    guard.release().await.unwrap();
    assert!(
        timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err()
    );
}

pub(crate) async fn background_lock_reports_and_reacquires<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let manager = LockManager::start(store.clone(), fast_options())
        .await
        .unwrap();
    let (actor, mut rx) = probe().await;
    let background = manager.lock("bg").unwrap().background().unwrap();
    background.subscribe_actor(&actor, Recorded::Lock).unwrap();
    background.start().unwrap();
    let within = Duration::from_secs(2);
    let Recorded::Lock(LockEvent::Acquired { token: first }) = next(&mut rx, within).await else {
        panic!("expected Acquired")
    };
    backend
        .delete_record(&store, &LockName::new("bg").unwrap())
        .await;
    let lost = next(&mut rx, within).await;
    assert!(
        matches!(lost, Recorded::Lock(LockEvent::Lost { token, reason: LossReason::Superseded }) if token == first),
        "{lost:?}"
    );
    let Recorded::Lock(LockEvent::Acquired { token: second }) = next(&mut rx, within).await else {
        panic!("expected re-acquisition")
    };
    assert!(second > first);
    background.stop().await.unwrap();
    assert!(
        matches!(next(&mut rx, within).await, Recorded::Lock(LockEvent::Released { token }) if token == second)
    );
    assert!(!background.lock().is_held_by_this_manager().await.unwrap());
}

/// A bound actor that reports its start and stop (a moment after it is told to stop), and
/// stops itself on request.
struct Worker;

impl Actor for Worker {
    type Msg = ();
    type State = (u64, Arc<Mutex<Vec<String>>>);
    type Arguments = (u64, Arc<Mutex<Vec<String>>>);

    async fn pre_start(
        &self,
        _: ActorRef<()>,
        (token, log): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        log.lock().unwrap().push(format!("start {token}"));
        Ok((token, log))
    }

    async fn handle(
        &self,
        me: ActorRef<()>,
        _: (),
        _: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        me.stop(Some("work done".into()));
        Ok(())
    }

    /// Takes a moment to stop (its work winding down): a next term begun meanwhile (its
    /// record deleted) must not start its actor beside this one.
    async fn post_stop(
        &self,
        _: ActorRef<()>,
        (token, log): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        sleep(Duration::from_millis(20)).await;
        log.lock().unwrap().push(format!("stop {token}"));
        Ok(())
    }
}

pub(crate) async fn bound_actor_runs_only_while_leading<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let manager = LockManager::start(store.clone(), fast_options())
        .await
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let election = manager.election("bound", fast_election()).unwrap();
    let mut events = election.subscribe();
    let worker_log = log.clone();
    let workers: Arc<Mutex<Vec<ActorRef<()>>>> = Arc::default();
    let spawned = workers.clone();
    election
        .run_while_leader(move |token, supervisor| {
            let (log, spawned) = (worker_log.clone(), spawned.clone());
            async move {
                let (actor, _) =
                    Actor::spawn_linked(None, Worker, (token, log), supervisor).await?;
                spawned.lock().unwrap().push(actor.clone());
                Ok(actor.get_cell())
            }
        })
        .unwrap();
    let elected = |e: &ElectionEvent| match e {
        ElectionEvent::Elected { token } => Some(*token),
        _ => None,
    };
    let within = Duration::from_secs(3);
    let first = wait_event(&mut events, within, elected).await;
    sleep(Duration::from_millis(50)).await;
    assert_eq!(*log.lock().unwrap(), vec![format!("start {first}")]);

    // Losing leadership stops the actor; winning again restarts it.
    backend
        .delete_record(&store, &LockName::new("bound").unwrap())
        .await;
    let second = wait_event(&mut events, within, elected).await;
    sleep(Duration::from_millis(50)).await;
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            format!("start {first}"),
            format!("stop {first}"),
            format!("start {second}")
        ]
    );

    // The actor finishing its work ends the term (LeaderSelector): step down, campaign again.
    let current = workers.lock().unwrap().last().cloned().unwrap();
    current.send_message(()).unwrap();
    wait_event(&mut events, within, |e| {
        matches!(e, ElectionEvent::Resigned { .. }).then_some(())
    })
    .await;
    let third = wait_event(&mut events, within, elected).await;
    assert!(third > second);
    election.resign().await.unwrap();
    sleep(Duration::from_millis(50)).await;
    assert_eq!(
        log.lock().unwrap().last().cloned(),
        Some(format!("stop {third}"))
    );
}

async fn wait_event<T>(
    events: &mut tokio::sync::broadcast::Receiver<ElectionEvent>,
    within: Duration,
    mut pick: impl FnMut(&ElectionEvent) -> Option<T>,
) -> T {
    let result = timeout(within, async {
        loop {
            if let Ok(event) = events.recv().await
                && let Some(found) = pick(&event)
            {
                return found;
            }
        }
    });
    result.await.expect("event in time")
}

/// A bound actor busy with one long write when its term ends voluntarily.
struct SlowWriter;

impl Actor for SlowWriter {
    type Msg = ();
    type State = Arc<Mutex<Vec<String>>>;
    type Arguments = Arc<Mutex<Vec<String>>>;

    async fn pre_start(
        &self,
        me: ActorRef<()>,
        log: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        me.send_message(())?;
        Ok(log)
    }

    async fn handle(
        &self,
        _: ActorRef<()>,
        _: (),
        log: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        log.lock().unwrap().push("write started".to_owned());
        sleep(Duration::from_millis(500)).await;
        log.lock().unwrap().push("write done".to_owned());
        Ok(())
    }

    async fn post_stop(
        &self,
        _: ActorRef<()>,
        log: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        log.lock().unwrap().push("stopped".to_owned());
        Ok(())
    }
}

/// `resign()` hands over only after the bound actor has finished its in-flight work and
/// stopped: the old leader's write never overlaps the next leader's.
pub(crate) async fn resign_waits_for_bound_work_to_stop<B: Backend>(backend: &B) {
    bound_work_drains_before(backend, HandOver::Resign).await;
}

/// A manager's shutdown is a voluntary hand-over too: bound work first, then the release.
pub(crate) async fn shutdown_waits_for_bound_work_to_stop<B: Backend>(backend: &B) {
    bound_work_drains_before(backend, HandOver::Shutdown).await;
}

enum HandOver {
    Resign,
    Shutdown,
}

async fn bound_work_drains_before<B: Backend>(backend: &B, how: HandOver) {
    let store = backend.fresh().await;
    let manager = LockManager::start(store.clone(), fast_options())
        .await
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let election = manager.election("drained", fast_election()).unwrap();
    let mut events = election.subscribe();
    let writer_log = log.clone();
    election
        .run_while_leader(move |_, supervisor| {
            let log = writer_log.clone();
            async move {
                let (actor, _) = Actor::spawn_linked(None, SlowWriter, log, supervisor).await?;
                Ok(actor.get_cell())
            }
        })
        .unwrap();
    wait_event(&mut events, Duration::from_secs(3), |e| {
        matches!(e, ElectionEvent::Elected { .. }).then_some(())
    })
    .await;
    while !log.lock().unwrap().iter().any(|l| l == "write started") {
        sleep(Duration::from_millis(10)).await;
    }
    let observer = LockManager::start(backend.peer(&store).await, fast_options())
        .await
        .unwrap();
    match how {
        HandOver::Resign => election.resign().await.unwrap(),
        HandOver::Shutdown => manager.shutdown().await,
    }
    assert_eq!(
        *log.lock().unwrap(),
        ["write started", "write done", "stopped"],
        "the lock was handed over before the bound actor's work was done"
    );
    let holder = observer.lock("drained").unwrap().inspect().await.unwrap();
    assert!(
        holder
            .as_ref()
            .is_none_or(|record| record.holder().is_none()),
        "{holder:?}"
    );
}
