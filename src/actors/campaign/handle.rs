//! The shared handle behind [`BackgroundLock`](crate::BackgroundLock) and
//! [`Election`](crate::Election).

use std::future::Future;

use ractor::{ActorCell, ActorRef, ActorRuntime, Message, SpawnErr};
use tokio::sync::{broadcast, oneshot};

use super::message::CampaignMsg;
use super::sinks::CHANNEL_CAPACITY;
use super::{CampaignActor, CampaignArgs, CampaignEvent};
use crate::LockError;

pub(crate) struct CampaignHandle<E: CampaignEvent> {
    actor: ActorRef<CampaignMsg<E>>,
    channel: broadcast::Sender<E>,
}

impl<E: CampaignEvent> CampaignHandle<E> {
    /// Creates the campaign actor without waiting for it to start (callable from sync code
    /// inside a Tokio runtime); messages sent meanwhile queue up.
    pub(crate) fn spawn(
        lock: crate::Lock,
        observe_every: Option<std::time::Duration>,
        retry_after: std::time::Duration,
    ) -> Result<Self, LockError> {
        let (channel, _) = broadcast::channel(CHANNEL_CAPACITY);
        let args = CampaignArgs {
            lock: lock.clone(),
            channel: channel.clone(),
            observe_every,
            retry_after,
        };
        let (actor, _) =
            ActorRuntime::spawn_instant(None, CampaignActor::<E>(Default::default()), args)
                .map_err(|_| LockError::ActorFailed(lock.name().to_string()))?;
        Ok(Self { actor, channel })
    }

    pub(crate) async fn start(&self) -> Result<u64, LockError> {
        let (reply, answer) = oneshot::channel();
        self.send(CampaignMsg::Start { reply: Some(reply) })?;
        answer.await.map_err(|_| LockError::ShutDown)?
    }

    pub(crate) fn start_in_background(&self) -> Result<(), LockError> {
        self.send(CampaignMsg::Start { reply: None })
    }

    pub(crate) async fn stop(&self) -> Result<(), LockError> {
        let (reply, answer) = oneshot::channel();
        self.send(CampaignMsg::Stop { reply: Some(reply) })?;
        answer.await.map_err(|_| LockError::ShutDown)?
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<E> {
        self.channel.subscribe()
    }

    pub(crate) fn subscribe_actor<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl Fn(E) -> M + Send + 'static,
    ) -> Result<(), LockError> {
        let actor = actor.clone();
        self.send(CampaignMsg::Subscribe(Box::new(move |event| {
            actor.send_message(to_message(event)).is_ok()
        })))
    }

    pub(crate) fn bind<F, Fut>(&self, spawn: F) -> Result<(), LockError>
    where
        F: Fn(u64, ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        self.send(CampaignMsg::Bind(Box::new(move |token, supervisor| {
            Box::pin(spawn(token, supervisor))
        })))
    }

    fn send(&self, message: CampaignMsg<E>) -> Result<(), LockError> {
        self.actor
            .send_message(message)
            .map_err(|_| LockError::ShutDown)
    }
}

impl<E: CampaignEvent> Drop for CampaignHandle<E> {
    fn drop(&mut self) {
        // The last handle is gone: release and stop (nobody could observe or steer it).
        let _ = self.actor.send_message(CampaignMsg::Stop { reply: None });
    }
}
