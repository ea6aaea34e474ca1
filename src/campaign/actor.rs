//! The campaign actor: keeps trying to hold one lock for as long as it campaigns, publishes
//! what happens (held, lost, released), and can run a bound user actor only while the lock
//! is held.
//!
//! Renewal stays in the lock actor: nothing here (slow subscribers, a bound actor, a
//! panicking event callback) can delay it.

use std::marker::PhantomData;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::{broadcast, oneshot};

use super::binding::Binding;
use super::event::CampaignEvent;
use super::message::{CampaignMsg, TermState};
use super::sinks::EventSinks;
use crate::error::LockError;
use crate::lock::{HoldChange, Lock, LockGuard};

pub(crate) struct CampaignActor<E>(PhantomData<fn() -> E>);

impl<E> Default for CampaignActor<E> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

pub(crate) struct CampaignArgs<E> {
    pub(crate) lock: Lock,
    pub(crate) channel: broadcast::Sender<E>,
    /// Wait before retrying after an acquisition error.
    pub(crate) retry_after: Duration,
}

/// A lost term whose guard the campaign keeps (see `CampaignState::lost`).
struct LostTerm {
    _guard: LockGuard,
    /// The bound actor stopped when the term was lost; its end frees the guard.
    actor: Option<ractor::ActorCell>,
}

impl LostTerm {
    /// Whether `ended` is this term's bound actor.
    fn ran_on(&self, ended: ractor::ActorId) -> bool {
        self.actor.as_ref().map(ractor::ActorCell::get_id) == Some(ended)
    }

    /// Keeps the guard past the campaign's own end (a shutdown, the last handle dropped):
    /// until the bound actor is gone, or for `margin` (the loss margin, after which the
    /// runtime frees the lease whatever the guard) if there is none or it does not stop.
    /// Dropped with the campaign, the guard would free the lease at once, and the next
    /// leader could start while this term's work (or its event subscribers') still ran.
    fn outlive_campaign(self, margin: Duration) {
        tokio::spawn(async move {
            match &self.actor {
                Some(actor) => {
                    let _ = actor.wait(Some(margin)).await;
                }
                None => tokio::time::sleep(margin).await,
            }
            drop(self);
        });
    }
}

/// The actor's state.
pub(crate) struct CampaignState<E> {
    lock: Lock,
    campaigning: bool,
    guard: Option<LockGuard>,
    /// The guard of a lost term, kept while that term's bound actor may still be working: its lease
    /// stays on the store until the guard is dropped or the loss margin has passed, so the next
    /// holder cannot start before this term's work has stopped (see
    /// `lock::engine::held_lease::LostLease`). Dropped when that actor is gone, or when the next
    /// term begins.
    lost: Option<LostTerm>,
    /// Id of the current acquisition task; results of older ones are stale.
    attempt: u64,
    acquiring: Option<tokio::task::AbortHandle>,
    waiting: Vec<oneshot::Sender<Result<u64, LockError>>>,
    sinks: EventSinks<E>,
    binding: Option<Binding>,
    retry_after: Duration,
}

impl<E: CampaignEvent> Actor for CampaignActor<E> {
    type Msg = CampaignMsg<E>;
    type State = CampaignState<E>;
    type Arguments = CampaignArgs<E>;

    async fn pre_start(
        &self,
        _myself: ActorRef<CampaignMsg<E>>,
        args: CampaignArgs<E>,
    ) -> Result<CampaignState<E>, ActorProcessingErr> {
        Ok(CampaignState {
            sinks: EventSinks::new(args.lock.name().clone(), args.channel),
            lock: args.lock,
            campaigning: false,
            guard: None,
            lost: None,
            attempt: 0,
            acquiring: None,
            waiting: Vec::new(),
            binding: None,
            retry_after: args.retry_after,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<CampaignMsg<E>>,
        message: CampaignMsg<E>,
        state: &mut CampaignState<E>,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            CampaignMsg::Start { reply } => {
                state.campaigning = true;
                match (&state.guard, reply) {
                    (Some(guard), Some(reply)) => {
                        let _ = reply.send(Ok(guard.token()));
                    }
                    (None, Some(reply)) => state.waiting.push(reply),
                    (_, None) => {}
                }
                state.ensure_acquiring(&myself);
            }
            CampaignMsg::Stop { reply } => {
                let result = state.stop_campaigning(|| LockError::CampaignStopped).await;
                match reply {
                    Some(reply) => {
                        let _ = reply.send(result);
                    }
                    // The last handle is gone: nobody can restart this campaign.
                    None => myself.stop(Some("handle dropped".to_owned())),
                }
            }
            CampaignMsg::Shutdown { reply } => {
                if let Err(error) = state.stop_campaigning(|| LockError::Shutdown).await {
                    tracing::debug!(lock = %state.lock.name(), %error, "the campaign's last term ended in a loss at shutdown");
                }
                let _ = reply.send(());
                myself.stop(Some("lock manager shut down".to_owned()));
            }
            CampaignMsg::Subscribe(sink) => state.sinks.add_actor(sink),
            CampaignMsg::Bind(spawn) => {
                if let Some(mut replaced) = state.binding.replace(Binding::new(spawn)) {
                    replaced.stop();
                }
                state.start_bound(&myself);
                state.campaigning = true;
                state.ensure_acquiring(&myself);
            }
            CampaignMsg::BoundStarted { token } => state.on_bound_started(&myself, token).await,
            CampaignMsg::AcquireDone { attempt, result } => {
                if attempt == state.attempt {
                    state.acquiring = None;
                    state.on_acquired(&myself, result);
                }
                // A stale result's guard drops here, which releases it.
            }
            CampaignMsg::HoldChanged { token, change } => {
                if state.guard.as_ref().map(LockGuard::token) != Some(token) {
                    return Ok(()); // an older term's
                }
                match change {
                    HoldChange::AtRisk(risk) => {
                        state.sinks.publish(E::at_risk(token, risk.time_left()));
                    }
                    HoldChange::Recovered => state.sinks.publish(E::recovered(token)),
                    HoldChange::Lost(reason) => {
                        state.sinks.publish(E::lost(token, reason));
                        state.keep_lost_term();
                        state.ensure_acquiring(&myself);
                    }
                }
            }
            CampaignMsg::RetryDue => state.ensure_acquiring(&myself),
            CampaignMsg::Publish(event) => state.sinks.publish(event),
            CampaignMsg::Probe { reply } => {
                let term = state.guard.as_ref().map(|guard| TermState {
                    token: guard.token(),
                    renewed_at: guard.last_renewed(),
                    risk: guard.risk(),
                });
                let _ = reply.send(term);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<CampaignMsg<E>>,
        state: &mut CampaignState<E>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(lost) = state.lost.take() {
            let options = state.lock.options();
            lost.outlive_campaign(
                options
                    .lease_duration()
                    .saturating_sub(options.renew_deadline()),
            );
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<CampaignMsg<E>>,
        event: SupervisionEvent,
        state: &mut CampaignState<E>,
    ) -> Result<(), ActorProcessingErr> {
        let ended = match &event {
            SupervisionEvent::ActorTerminated(cell, ..)
            | SupervisionEvent::ActorFailed(cell, _) => cell.get_id(),
            _ => return Ok(()),
        };
        if state.lost.as_ref().is_some_and(|lost| lost.ran_on(ended)) {
            // The lost term's work has stopped: its lease may go now.
            state.lost = None;
            return Ok(());
        }
        let Some(binding) = &mut state.binding else {
            return Ok(());
        };
        if binding.running.as_ref().map(ractor::ActorCell::get_id) != Some(ended) {
            return Ok(()); // one we stopped ourselves, already forgotten
        }
        binding.running = None;
        if let SupervisionEvent::ActorFailed(_, error) = &event {
            tracing::warn!(lock = %state.lock.name(), %error, "bound actor failed; releasing the lock and campaigning again");
        }
        state.bound_ended(&myself).await;
        Ok(())
    }
}

/// Whether `actor` has stopped or is stopping.
fn has_stopped(actor: &ractor::ActorCell) -> bool {
    matches!(
        actor.get_status(),
        ractor::ActorStatus::Stopping | ractor::ActorStatus::Stopped
    )
}

impl<E: CampaignEvent> CampaignState<E> {
    fn ensure_acquiring(&mut self, myself: &ActorRef<CampaignMsg<E>>) {
        if !self.campaigning || self.guard.is_some() || self.acquiring.is_some() {
            return;
        }
        self.attempt += 1;
        let (attempt, lock, me) = (self.attempt, self.lock.clone(), myself.clone());
        let task = tokio::spawn(async move {
            let result = lock.acquire().await;
            // If the campaign is gone, the guard drops with the message and is released.
            let _ = me.send_message(CampaignMsg::AcquireDone { attempt, result });
        });
        self.acquiring = Some(task.abort_handle());
    }

    fn on_acquired(
        &mut self,
        myself: &ActorRef<CampaignMsg<E>>,
        result: Result<LockGuard, LockError>,
    ) {
        let guard = match result {
            Ok(guard) if self.campaigning => guard,
            Ok(_) => return, // stopped meanwhile: the guard drops and releases
            Err(LockError::Shutdown) => {
                self.campaigning = false;
                for reply in self.waiting.drain(..) {
                    let _ = reply.send(Err(LockError::Shutdown));
                }
                myself.stop(Some("lock manager shut down".to_owned()));
                return;
            }
            Err(error) => {
                tracing::warn!(lock = %self.lock.name(), %error, "campaign acquisition failed; retrying");
                myself.send_after(self.retry_after, || CampaignMsg::RetryDue);
                return;
            }
        };
        let token = guard.token();
        guard
            .loss_signal()
            .forward_changes(myself, move |change| CampaignMsg::HoldChanged {
                token,
                change,
            });
        // A new term: whatever an older lost term still held is past its margin, or its
        // record was deleted (its actor, if still stopping, is waited for by the next).
        self.lost = None;
        self.guard = Some(guard);
        self.sinks.publish(E::acquired(token));
        for reply in self.waiting.drain(..) {
            let _ = reply.send(Ok(token));
        }
        self.start_bound(myself);
    }

    /// The current term was lost: stop its bound actor and keep its guard until that actor
    /// is gone. Without a bound actor the guard is kept until the next term: its lease is
    /// freed by the runtime once the loss margin has passed, giving the event subscribers,
    /// who cannot say when they have stopped, that margin.
    fn keep_lost_term(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let actor = self.binding.as_mut().and_then(Binding::stop);
        self.lost = Some(LostTerm {
            _guard: guard,
            actor,
        });
    }

    /// Starts the bound actor if the lock is held and none runs or starts. It starts on its
    /// own task, so that a slow start never holds up this actor: a loss meanwhile is
    /// reported at once, and the late actor stopped when it arrives.
    fn start_bound(&mut self, myself: &ActorRef<CampaignMsg<E>>) {
        let (Some(binding), Some(guard)) = (&mut self.binding, &self.guard) else {
            return;
        };
        if binding.is_active() {
            return;
        }
        let (token, me) = (guard.token(), myself.clone());
        let at_most = self.lock.options().loss_margin();
        binding.start((token, myself.get_cell()), at_most, move || {
            let _ = me.send_message(CampaignMsg::BoundStarted { token });
        });
    }

    /// The bound actor of the term with `token` finished starting: keep it if that term is
    /// still on, stop it if the term ended meanwhile.
    async fn on_bound_started(&mut self, myself: &ActorRef<CampaignMsg<E>>, token: u64) {
        let Some(binding) = &mut self.binding else {
            return;
        };
        let Some(started) = binding.started(token).await else {
            return;
        };
        let current = self.guard.as_ref().map(LockGuard::token) == Some(token);
        match started {
            // Ended already (in its `post_start` or first message): its end was reported
            // before this, while it was not yet the term's, and would be missed.
            Ok(actor) if current && has_stopped(&actor) => self.bound_ended(myself).await,
            Ok(actor) if current => binding.running = Some(actor),
            Ok(actor) => {
                binding.stop_late(&actor, "its lock term is over");
                // A term begun while it started has no actor yet.
                self.start_bound(myself);
            }
            Err(error) if current => {
                tracing::error!(lock = %self.lock.name(), %error, "could not start the bound actor; releasing the lock");
                let _ = self.end_term().await;
                myself.send_after(self.retry_after, || CampaignMsg::RetryDue);
            }
            Err(error) => {
                tracing::debug!(lock = %self.lock.name(), %error, "the bound actor of an ended term failed to start");
                self.start_bound(myself);
            }
        }
    }

    /// The current term's bound actor ended on its own. Like Curator's `LeaderSelector`: the
    /// work ending ends the term. Hand the lock over and campaign again.
    async fn bound_ended(&mut self, myself: &ActorRef<CampaignMsg<E>>) {
        if let Err(error) = self.end_term().await {
            tracing::warn!(lock = %self.lock.name(), %error, "release after the bound actor ended failed");
        }
        self.ensure_acquiring(myself);
    }

    /// Stops campaigning and ends the current term; callers still waiting for a term are
    /// answered `why()` (stopped by a handle, or the manager's shutdown).
    async fn stop_campaigning(&mut self, why: fn() -> LockError) -> Result<(), LockError> {
        self.campaigning = false;
        self.attempt += 1; // a result still in flight is stale and gets released
        if let Some(task) = self.acquiring.take() {
            task.abort(); // dropping an acquire is cancel-safe
        }
        for reply in self.waiting.drain(..) {
            let _ = reply.send(Err(why()));
        }
        self.end_term().await
    }

    /// Ends the current term on purpose: stops the bound actor and waits for it to be gone
    /// (work of this term must not overlap the next holder's), then releases. The wait is
    /// bounded by the loss signal — renewals go on meanwhile, and if they fail the holder
    /// is told before the lease can expire — and by one lease length at most. A term whose
    /// lock turns out to have been lost (taken over, deleted, deadline) ends with a loss
    /// event and its reason, never as a release.
    async fn end_term(&mut self) -> Result<(), LockError> {
        let Some(guard) = self.guard.take() else {
            if let Some(binding) = &mut self.binding {
                binding.stop();
            }
            return Ok(());
        };
        let token = guard.token();
        if let Some(binding) = &mut self.binding {
            let longest = self.lock.options().lease_duration();
            tokio::select! {
                biased;
                reason = guard.lost() => {
                    let actor = binding.stop();
                    self.sinks.publish(E::lost(token, reason.clone()));
                    self.lost = Some(LostTerm { _guard: guard, actor });
                    return Err(LockError::Lost(reason));
                }
                () = binding.drain(longest) => {}
            }
        }
        let result = guard.release().await;
        match &result {
            Err(LockError::Lost(reason)) => self.sinks.publish(E::lost(token, reason.clone())),
            _ => self.sinks.publish(E::released(token)),
        }
        result
    }
}
