//! Lifecycle binding: a user actor that runs only while the campaign holds the lock.
//!
//! The actor starts on its own task: its `pre_start` may take as long as it likes (connect,
//! load state) without holding up the campaign, which must stay free to report a loss the
//! moment it happens. An actor that finishes starting after its term has ended is stopped
//! at once.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ractor::{ActorCell, SpawnErr};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Spawns the bound actor for a term: `(token, supervisor) -> the actor's cell`.
pub(crate) type SpawnBound = Box<
    dyn Fn(u64, ActorCell) -> Pin<Box<dyn Future<Output = Result<ActorCell, SpawnErr>> + Send>>
        + Send
        + Sync,
>;

type Started = oneshot::Receiver<Result<ActorCell, SpawnErr>>;

pub(crate) struct Binding {
    spawn: SpawnBound,
    /// The actor of the current term, if one is running.
    pub(crate) running: Option<ActorCell>,
    /// An actor still starting, for the term with this token.
    starting: Option<(u64, Started)>,
    /// The last actor stopped, which may still be stopping: the next one starts once it is
    /// gone. A term can begin before the last term's actor has stopped when an operator
    /// deleted the last term's record (otherwise its lease outlives the actor or its loss
    /// margin); two terms' work never runs side by side in one process all the same.
    stopped: Option<ActorCell>,
}

impl Binding {
    pub(crate) fn new(spawn: SpawnBound) -> Self {
        Self {
            spawn,
            running: None,
            starting: None,
            stopped: None,
        }
    }

    /// Whether an actor runs or is starting.
    pub(crate) fn is_active(&self) -> bool {
        self.running.is_some() || self.starting.is_some()
    }

    /// Starts the actor of the term with `token`, linked to `supervisor`, on its own task,
    /// once the last actor stopped is gone (or after `at_most`); `started()` is called once
    /// it has (then [`started`](Self::started) takes it).
    pub(crate) fn start(
        &mut self,
        (token, supervisor): (u64, ActorCell),
        at_most: Duration,
        started: impl FnOnce() + Send + 'static,
    ) {
        let spawning = (self.spawn)(token, supervisor);
        let (deliver, receive) = oneshot::channel();
        self.starting = Some((token, receive));
        let stopping = self.stopped.take();
        tokio::spawn(async move {
            if let Some(stopping) = stopping {
                let _ = stopping.wait(Some(at_most)).await;
            }
            let result = spawning.await;
            if let Err(Ok(actor)) = deliver.send(result) {
                // Nobody waits for it any more (the campaign stopped): it must not run.
                actor.stop(Some("its lock term is over".to_owned()));
                return;
            }
            started();
        });
    }

    /// The start of the term with `token`'s actor has finished: its result, unless that
    /// start was already taken (by a drain) or belongs to another term.
    pub(crate) async fn started(&mut self, token: u64) -> Option<Result<ActorCell, SpawnErr>> {
        let (starting, _) = self.starting.as_ref()?;
        if *starting != token {
            return None;
        }
        let (_, receive) = self.starting.take()?;
        // Sent before the task reported: ready (or a moment away).
        receive.await.ok()
    }

    /// Stops the term's actor without waiting: for a lost term, whose lease the campaign
    /// keeps until the actor is gone (or the loss margin has passed). Returns the stopped
    /// actor, so its end can be recognised or waited for. An actor still starting is
    /// stopped once started.
    pub(crate) fn stop(&mut self) -> Option<ActorCell> {
        let actor = self.running.take()?;
        self.stop_late(&actor, "lock no longer held");
        Some(actor)
    }

    /// Stops `actor`, of a term that is over, without waiting: the next actor starts once
    /// it is gone.
    pub(crate) fn stop_late(&mut self, actor: &ActorCell, why: &str) {
        actor.stop(Some(why.to_owned()));
        self.stopped = Some(actor.clone());
    }

    /// Stops the term's actor — waiting for one still starting — and waits until it is
    /// gone (its current message handled, `post_stop` run), for at most `within`: a
    /// voluntary hand-over must not let the old term's work overlap the next holder's.
    pub(crate) async fn drain(&mut self, within: Duration) {
        let until = Instant::now() + within;
        if let Some((_, starting)) = self.starting.take() {
            match tokio::time::timeout_at(until, starting).await {
                Ok(Ok(Ok(actor))) => self.running = Some(actor),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(
                        "the bound actor did not finish starting in time; handing the lock over anyway"
                    );
                    return;
                }
            }
        }
        let Some(actor) = self.running.take() else {
            return;
        };
        let left = until.saturating_duration_since(Instant::now());
        let stopped = actor
            .stop_and_wait(Some("handing the lock over".to_owned()), Some(left))
            .await;
        if let Err(error) = stopped {
            tracing::warn!(actor = %actor.get_id(), %error, "the bound actor did not stop in time; handing the lock over anyway");
        }
    }
}
