//! The loss protocol's tests: several holds (a multi-lock's) warned of and lost as one, and the
//! changes a campaign is forwarded.

use std::future::Future;

use super::*;

fn risk_until(deadline: Instant) -> AtRisk {
    let last_error = Some("failing".to_owned());
    AtRisk {
        since: Instant::now(),
        deadline,
        last_error,
    }
}

/// What `wait` resolves with within a second, if it does.
async fn soon<T>(wait: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(Duration::from_secs(1), wait)
        .await
        .ok()
}

/// Waits until the combined status is at risk until `deadline`.
async fn at_risk_until(signal: &LossSignal, deadline: Instant) {
    let mut receiver = signal.receiver.clone();
    let wanted = |status: &HoldStatus| matches!(status, HoldStatus::AtRisk(risk) if risk.deadline == deadline);
    let reached = soon(receiver.wait_for(wanted)).await;
    assert!(
        matches!(reached, Some(Ok(_))),
        "the combined status stayed {:?}",
        *signal.receiver.borrow()
    );
}

/// Members `count` live holds and their combination, followed on a task.
fn follow(count: usize) -> (Vec<HoldStatusSender>, Arc<HoldStatusSender>, LossSignal) {
    let members: Vec<_> = (0..count)
        .map(|_| HoldStatusSender::new(Instant::now()))
        .collect();
    let combined = Arc::new(HoldStatusSender::new(Instant::now()));
    let signal = combined.subscribe();
    let signals = members.iter().map(HoldStatusSender::subscribe).collect();
    let following = combined.clone();
    tokio::spawn(async move { following.follow_all(signals).await });
    (members, combined, signal)
}

/// At risk while any member is, with the earliest deadline; recovered once none is;
/// lost with the first member lost.
#[tokio::test(start_paused = true)]
async fn the_combination_warns_with_the_most_urgent_member() {
    let (members, _combined, signal) = follow(2);
    let later = Instant::now() + Duration::from_secs(10);
    let sooner = Instant::now() + Duration::from_secs(5);
    members[0].at_risk(risk_until(later));
    let risk = soon(signal.at_risk()).await.map(|risk| risk.deadline());
    assert_eq!(
        risk,
        Some(later),
        "a member at risk is the combination at risk"
    );
    members[1].at_risk(risk_until(sooner));
    at_risk_until(&signal, sooner).await;
    members[1].recovered();
    at_risk_until(&signal, later).await;
    members[0].recovered();
    let recovered = soon(signal.recovered()).await;
    assert!(
        recovered.is_some(),
        "still at risk with every member recovered"
    );
    assert_eq!(signal.risk(), None);

    members[1].at_risk(risk_until(sooner));
    at_risk_until(&signal, sooner).await;
    members[0].lost(LossReason::Superseded);
    assert_eq!(soon(signal.lost()).await, Some(LossReason::Superseded));
    members[1].lost(LossReason::DeadlineExceeded);
    tokio::task::yield_now().await;
    assert_eq!(
        signal.loss(),
        Some(LossReason::Superseded),
        "the first loss stays"
    );
}

/// A released member says nothing more; a member whose sender is dropped while live
/// (its actor failed) is a loss; a release of the combination is never one.
#[tokio::test(start_paused = true)]
async fn released_and_failed_members_are_told_as_a_single_hold_would_be() {
    let (mut members, combined, signal) = follow(3);
    let deadline = Instant::now() + Duration::from_secs(5);
    members[2].at_risk(risk_until(deadline));
    at_risk_until(&signal, deadline).await;
    if let Some(member) = members.pop() {
        member.released();
    }
    let recovered = soon(signal.recovered()).await;
    assert!(
        recovered.is_some(),
        "a released member kept the combination at risk"
    );
    drop(members.pop()); // its actor failed with the hold live
    assert_eq!(soon(signal.lost()).await, Some(LossReason::RuntimeFailed));

    let (members, combined_again, signal) = follow(1);
    drop(combined);
    combined_again.release_shared();
    members[0].lost(LossReason::Superseded);
    tokio::task::yield_now().await;
    assert_eq!(
        soon(signal.lost()).await,
        None,
        "a released combination was lost"
    );
}

/// What a campaign is told of a hold: at risk, recovered, lost — each once, and
/// recovered only after at risk was told; an actor that fails with the hold live is a
/// loss.
#[tokio::test(start_paused = true)]
async fn forwarded_changes_are_the_ones_a_campaign_can_act_on() {
    use crate::lock::timer::tests::probe;

    let (campaign, mut told) = probe::<HoldChange>().await;
    let sender = HoldStatusSender::new(Instant::now());
    sender
        .subscribe()
        .forward_changes(&campaign, |change| change);
    let deadline = Instant::now() + Duration::from_secs(5);
    // At risk and recovered before the forwarder looks: nothing to tell.
    sender.at_risk(risk_until(deadline));
    sender.recovered();
    tokio::task::yield_now().await;
    sender.at_risk(risk_until(deadline));
    assert!(matches!(
        soon(told.recv()).await,
        Some(Some(HoldChange::AtRisk(_)))
    ));
    sender.recovered();
    assert!(matches!(
        soon(told.recv()).await,
        Some(Some(HoldChange::Recovered))
    ));
    drop(sender);
    assert!(matches!(
        soon(told.recv()).await,
        Some(Some(HoldChange::Lost(LossReason::RuntimeFailed)))
    ));
    assert!(told.try_recv().is_err(), "more was told");
    campaign.stop(None);
}
