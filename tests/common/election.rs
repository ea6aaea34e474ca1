//! Leader-election scenarios, generic over the [`Backend`]: candidates on separate managers
//! (separate connections on MongoDB), as separate processes would be.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use mongolock::{Election, ElectionEvent, ElectionOptions, LockManager};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::{Instant, sleep, timeout};

use super::{Backend, SLACK, fast_options};
use mongolock::testing::FaultyStore;

pub(crate) fn fast_election() -> ElectionOptions {
    ElectionOptions::default()
        .with_lease_duration(Duration::from_millis(1500))
        .with_renew_deadline(Duration::from_millis(900))
        .with_retry_period(Duration::from_millis(300))
}

/// Worst case from a leader going silent to a successor: its lease, plus one jittered retry.
fn failover_bound() -> Duration {
    Duration::from_millis(1500) + Duration::from_millis(360) + SLACK
}

async fn candidates<B: Backend>(
    backend: &B,
    count: usize,
) -> (Vec<(LockManager, FaultyStore<B::Store>)>, B::Store) {
    let store = backend.fresh().await;
    let mut all = Vec::new();
    for _ in 0..count {
        let faulty = FaultyStore::new(backend.peer(&store).await);
        let manager = LockManager::start(faulty.clone(), fast_options())
            .await
            .unwrap();
        all.push((manager, faulty));
    }
    (all, store)
}

/// Waits for the next event matching `pick`, skipping others.
async fn next_matching<T>(
    events: &mut tokio::sync::broadcast::Receiver<ElectionEvent>,
    within: Duration,
    mut pick: impl FnMut(&ElectionEvent) -> Option<T>,
) -> Option<T> {
    let until = Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match timeout(left, events.recv()).await {
            Ok(Ok(event)) => {
                if let Some(found) = pick(&event) {
                    return Some(found);
                }
            }
            Ok(Err(RecvError::Lagged(_))) => {}
            Ok(Err(RecvError::Closed)) | Err(_) => return None,
        }
    }
}

/// Counts leaders from the candidates' own events; fails if two ever overlap.
fn track_leaders(elections: &[Election]) -> Arc<AtomicI64> {
    let leaders = Arc::new(AtomicI64::new(0));
    for election in elections {
        let (mut events, leaders) = (election.subscribe(), leaders.clone());
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(ElectionEvent::Elected { .. }) => {
                        let now = leaders.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 1, "two leaders at once");
                    }
                    Ok(ElectionEvent::Deposed { .. } | ElectionEvent::Resigned { .. }) => {
                        leaders.fetch_sub(1, Ordering::SeqCst);
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                }
            }
        });
    }
    leaders
}

pub(crate) async fn election_has_one_leader_and_fails_over<B: Backend>(backend: &B) {
    let (nodes, _) = candidates(backend, 3).await;
    let elections: Vec<Election> = nodes
        .iter()
        .map(|(m, _)| m.election("leader", fast_election()).unwrap())
        .collect();
    let leaders = track_leaders(&elections);
    let mut events: Vec<_> = elections.iter().map(Election::subscribe).collect();
    for election in &elections {
        election.campaign_in_background().unwrap();
    }
    // Exactly one is elected.
    sleep(Duration::from_millis(1000)).await;
    assert_eq!(leaders.load(Ordering::SeqCst), 1);
    let first = elections[0].leader().await.unwrap().expect("a leader");
    let index = nodes
        .iter()
        .position(|(m, _)| m.holder_id() == &first.holder)
        .expect("leader is a candidate");

    // The leader goes silent (crash, partition): it is deposed, then another takes over.
    let silent_at = Instant::now();
    nodes[index].1.hang();
    let deposed = next_matching(&mut events[index], failover_bound(), |e| {
        matches!(e, ElectionEvent::Deposed { .. }).then_some(Instant::now())
    });
    let deposed = deposed
        .await
        .expect("the silent leader is told it was deposed");
    let others: Vec<usize> = (0..3).filter(|i| *i != index).collect();
    let mut successor = None;
    let until = silent_at + failover_bound();
    while successor.is_none() && Instant::now() < until {
        for &i in &others {
            if let Ok(Some(info)) = elections[i].leader().await
                && info.token > first.token
            {
                successor = Some((info, Instant::now()));
            }
        }
        sleep(Duration::from_millis(20)).await;
    }
    let (info, elected_at) =
        successor.unwrap_or_else(|| panic!("no failover within {:?}", failover_bound()));
    assert!(deposed < elected_at, "the old leader must learn first");
    assert_ne!(info.holder, first.holder);
    sleep(Duration::from_millis(500)).await;
    assert_eq!(
        leaders.load(Ordering::SeqCst),
        1,
        "exactly one leader after failover"
    );
}

pub(crate) async fn election_resign_hands_over_promptly<B: Backend>(backend: &B) {
    let (nodes, _) = candidates(backend, 2).await;
    let a = nodes[0].0.election("handover", fast_election()).unwrap();
    let b = nodes[1].0.election("handover", fast_election()).unwrap();
    let first = a.campaign().await.unwrap();
    let mut b_events = b.subscribe();
    b.campaign_in_background().unwrap();
    sleep(Duration::from_millis(400)).await;
    let resigned_at = Instant::now();
    a.resign().await.unwrap();
    let bound = Duration::from_millis(360) + SLACK;
    let token = next_matching(&mut b_events, bound, |e| match e {
        ElectionEvent::Elected { token } => Some(*token),
        _ => None,
    });
    let token = token
        .await
        .unwrap_or_else(|| panic!("no handover within {bound:?} of resign"));
    assert!(token > first);
    assert!(resigned_at.elapsed() < bound);
    assert!(
        a.leader()
            .await
            .unwrap()
            .is_some_and(|l| &l.holder == nodes[1].0.holder_id())
    );
}

pub(crate) async fn election_observers_see_leader_changes<B: Backend>(backend: &B) {
    let (nodes, _) = candidates(backend, 3).await;
    let a = nodes[0].0.election("observed", fast_election()).unwrap();
    let b = nodes[1].0.election("observed", fast_election()).unwrap();
    let observer = nodes[2].0.election("observed", fast_election()).unwrap();
    let mut seen = observer.subscribe();
    assert!(observer.leader().await.unwrap().is_none());
    a.campaign().await.unwrap();
    let leader_is = |who: mongolock::HolderId| {
        move |e: &ElectionEvent| match e {
            ElectionEvent::LeaderChanged { leader: Some(l) } if l.holder == who => Some(l.token),
            _ => None,
        }
    };
    let within = Duration::from_millis(300) + SLACK;
    let first = next_matching(&mut seen, within, leader_is(nodes[0].0.holder_id().clone())).await;
    let first = first.expect("observer sees the first leader");
    b.campaign_in_background().unwrap();
    a.resign().await.unwrap();
    let second = next_matching(
        &mut seen,
        within * 2,
        leader_is(nodes[1].0.holder_id().clone()),
    )
    .await;
    assert!(second.expect("observer sees the new leader") > first);
}

pub(crate) async fn election_survives_bad_subscribers<B: Backend>(backend: &B) {
    let (nodes, _) = candidates(backend, 2).await;
    let leader = nodes[0].0.election("steady", fast_election()).unwrap();
    let _never_read = leader.subscribe(); // falls behind; must not slow anything
    let (sink, _received) = super::embedding::probe().await;
    leader
        .subscribe_actor(&sink, |event| -> super::embedding::Recorded {
            if matches!(event, ElectionEvent::Elected { .. }) {
                panic!("a subscriber's mapping panics");
            }
            super::embedding::Recorded::Election(event)
        })
        .unwrap();
    let token = leader.campaign().await.unwrap();
    let rival = nodes[1].0.election("steady", fast_election()).unwrap();
    rival.campaign_in_background().unwrap();
    let mut events = leader.subscribe();
    sleep(Duration::from_millis(1500) * 3).await;
    let still = leader.leader().await.unwrap().expect("a leader");
    assert_eq!(&still.holder, nodes[0].0.holder_id(), "renewal kept going");
    assert_eq!(still.token, token);
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, ElectionEvent::Deposed { .. }),
            "deposed: {event:?}"
        );
    }
}

/// A term whose record was taken over or deleted ends with `Deposed` and its reason, even
/// when the leader resigns before a renewal noticed: it was lost, not handed over.
pub(crate) async fn superseded_term_ends_deposed_not_resigned<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let manager = LockManager::start(store.clone(), fast_options())
        .await
        .unwrap();
    let election = manager.election("superseded", fast_election()).unwrap();
    let mut events = election.subscribe();
    let token = election.campaign().await.unwrap();
    backend
        .delete_record(&store, &mongolock::LockName::new("superseded").unwrap())
        .await;
    let resigned = election.resign().await;
    assert!(
        matches!(resigned, Err(mongolock::LockError::Lost(_)) | Ok(())),
        "{resigned:?}"
    );
    let ended = next_matching(&mut events, Duration::from_secs(2), |e| match e {
        ElectionEvent::Deposed { token: t, reason } if *t == token => Some(Ok(reason.clone())),
        ElectionEvent::Resigned { token: t } if *t == token => Some(Err(())),
        _ => None,
    })
    .await;
    assert_eq!(
        ended,
        Some(Ok(mongolock::LossReason::Superseded)),
        "a lost term must end Deposed(superseded), not Resigned"
    );
}

/// A leader whose renewals keep failing reports unhealthy once they fall behind by more
/// than the tolerance, before the renew deadline deposes it; a healthy leader and a
/// non-leader report healthy.
pub(crate) async fn failing_leader_reports_unhealthy<B: Backend>(backend: &B) {
    let (nodes, _) = candidates(backend, 1).await;
    let (manager, faulty) = &nodes[0];
    let election = manager.election("health", fast_election()).unwrap();
    let tolerance = Duration::from_millis(100);
    assert!(election.health(tolerance).await.unwrap().is_healthy());
    election.campaign().await.unwrap();
    sleep(Duration::from_millis(700)).await; // renewals keep succeeding
    assert!(matches!(
        election.health(tolerance).await.unwrap(),
        mongolock::ElectionHealth::Leading { .. }
    ));
    faulty.fail();
    // One retry period (300 ms) plus the tolerance without a confirmed renewal.
    sleep(Duration::from_millis(450)).await;
    let health = election.health(tolerance).await.unwrap();
    assert!(
        matches!(health, mongolock::ElectionHealth::Unhealthy { .. }),
        "{health:?}"
    );
    faulty.heal();
}
