//! The per-name actor: what it is started with, and its one `step` per message.

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::state::{NameActorArgs, NameState, Request};
use crate::lock::message::LockMsg;

/// The actor behaviour; all state lives in [`NameState`].
pub(crate) struct NameActor;

impl Actor for NameActor {
    type Msg = LockMsg;
    type State = NameState;
    type Arguments = NameActorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<LockMsg>,
        args: NameActorArgs,
    ) -> Result<NameState, ActorProcessingErr> {
        Ok(NameState::new(args))
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<LockMsg>,
        state: &mut NameState,
    ) -> Result<(), ActorProcessingErr> {
        state.stopped();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<LockMsg>,
        message: LockMsg,
        state: &mut NameState,
    ) -> Result<(), ActorProcessingErr> {
        state.step(&myself, message);
        Ok(())
    }
}

impl NameState {
    /// One transition per message.
    fn step(&mut self, myself: &ActorRef<LockMsg>, message: LockMsg) {
        if message.is_counted_request() {
            self.requests_seen += 1;
        }
        match message {
            LockMsg::Acquire {
                access,
                options,
                requested_at,
                reply,
            } => self.on_request(
                myself,
                Request::Acquire {
                    access,
                    options,
                    requested_at,
                    reply,
                },
            ),
            LockMsg::TryAcquire {
                access,
                options,
                reply,
            } => self.on_request(
                myself,
                Request::Try {
                    access,
                    options,
                    reply,
                },
            ),
            #[cfg(feature = "testing")]
            LockMsg::InjectPanic => panic!("lock actor {:?}: injected panic", self.name),
            LockMsg::Release {
                lease,
                token,
                reply,
            } => self.on_release(myself, lease, token, reply),
            LockMsg::Detach {
                lease,
                token,
                reply,
            } => self.on_detach(myself, lease, token, reply),
            LockMsg::Shutdown { reply } => {
                self.shut_down();
                let _ = reply.send(());
                myself.stop(Some("manager shut down".to_owned()));
            }
            LockMsg::AttemptDone {
                lease,
                sent_at,
                result,
                claim,
            } => self.on_attempt_done(myself, lease, sent_at, result, claim),
            LockMsg::RetryDue { timer } => self.on_retry_due(myself, timer),
            LockMsg::Wake => self.on_wake(myself),
            LockMsg::WaiterLeft => self.on_waiter_left(myself),
            LockMsg::HoldDue { lease } => self.on_hold_due(myself, lease),
            LockMsg::RenewDone {
                lease,
                number,
                sent_at,
                result,
            } => self.on_renew_done(myself, lease, (number, sent_at), result),
            LockMsg::ReleaseDone {
                lease,
                sent_at,
                result,
            } => self.on_release_done(myself, lease, sent_at, result),
            LockMsg::HandOverDone {
                to,
                sent_at,
                result,
                claim,
            } => self.on_hand_over_done(myself, to, sent_at, result, claim),
            LockMsg::IdleDue { timer } => self.on_idle_due(myself, timer),
        }
        self.admit_waiting(myself);
    }
}
