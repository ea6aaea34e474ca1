//! The supervisor: owns the store handle and the registry lock name → lock actor.
//!
//! It spawns lock actors linked to itself on first use, forwards requests to them, replaces
//! them when they fail (a panicking lock actor never takes the supervisor or other locks
//! down: its callers get an error), and stops them when idle so memory stays bounded by the
//! number of active locks.

use std::collections::BTreeMap;
use std::sync::Arc;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;

use super::engine::{ManagerContext, NameActor, NameActorArgs, Retire};
use super::message::LockMsg;
use super::route::{CachedRoute, Route, RouteGate};
use crate::name::LockName;

/// Messages of the supervisor.
pub(crate) enum SupervisorMsg {
    /// Deliver the request `message` to the actor of `name`, spawning it if needed, and
    /// leave the route to it in `route` for the handle's next requests.
    Forward {
        name: LockName,
        message: LockMsg,
        route: Arc<CachedRoute>,
    },
    /// A lock actor retired after its idle timeout (see `route`) and is stopping.
    ChildIdle { name: LockName, actor: ActorId },
    /// The store says `name` became free: wake its actor, if this manager has one.
    Released { name: LockName },
    /// The store's release feed (re)started watching: wake every actor once, for releases
    /// it did not see.
    WakeAll,
    /// How many lock actors are alive.
    ActiveLocks { reply: oneshot::Sender<usize> },
    /// Release every held lock, stop every lock actor, then stop.
    Shutdown { reply: oneshot::Sender<()> },
}

pub(crate) struct Supervisor;

pub(crate) struct SupervisorState {
    /// What every lock actor is started with.
    context: ManagerContext,
    /// Dropped with the state when the supervisor stops: tells the release forwarder.
    _alive: oneshot::Sender<()>,
    /// Each live lock actor by name, with the route requests take to it. Ordered, so that
    /// messages to every child (wake-ups, shutdown) go out in one order on every run.
    children: BTreeMap<LockName, Route>,
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = (ManagerContext, oneshot::Sender<()>);

    async fn pre_start(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        (context, _alive): Self::Arguments,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let children = BTreeMap::new();
        Ok(SupervisorState {
            context,
            _alive,
            children,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Forward {
                name,
                message,
                route,
            } => state.forward(&myself, name, message, &route).await,
            SupervisorMsg::ChildIdle { name, actor } => {
                if state
                    .children
                    .get(&name)
                    .is_some_and(|child| child.actor.get_id() == actor)
                {
                    state.children.remove(&name);
                }
            }
            SupervisorMsg::Released { name } => wake(state.children.get(&name)),
            SupervisorMsg::WakeAll => wake(state.children.values()),
            SupervisorMsg::ActiveLocks { reply } => {
                let _ = reply.send(state.children.len());
            }
            SupervisorMsg::Shutdown { reply } => {
                let children = std::mem::take(&mut state.children).into_values();
                let stopped = children.filter_map(|child| {
                    let (reply, stopped) = oneshot::channel();
                    let sent = child.actor.send_message(LockMsg::Shutdown { reply });
                    sent.is_ok().then_some(stopped)
                });
                // Every child is told before any is waited for; each bounds its own release
                // by a timeout, and a dead child's channel closes at once.
                futures::future::join_all(stopped).await;
                let _ = reply.send(());
                myself.stop(Some("shut down".to_owned()));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Unlike ractor's default, a child's end never stops the supervisor: forget that
        // child; the next request for its name spawns a fresh one.
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                tracing::error!(actor = %cell.get_id(), %error, "lock actor failed; it will be replaced on next use");
                state.forget(cell.get_id());
            }
            // Today a lock actor ends only by retiring (its `ChildIdle` already removed it),
            // by the shutdown (every entry taken) or by failing: this arm is for any other
            // end, so a stopped actor is never routed to again (its mutant survives).
            SupervisionEvent::ActorTerminated(cell, _, _) => state.forget(cell.get_id()),
            _ => {}
        }
        Ok(())
    }
}

impl SupervisorState {
    async fn forward(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        name: LockName,
        mut message: LockMsg,
        cache: &CachedRoute,
    ) {
        // Two tries: a child that retired or died but whose end the supervisor has not heard
        // of yet refuses the request, and a fresh child takes it.
        for _ in 0..2 {
            let Some(child) = self.child(myself, &name).await else {
                return; // spawn failed: the caller's reply channel closes, it gets an error
            };
            match child.send_request(message) {
                Ok(()) => {
                    cache.set(child.clone());
                    return;
                }
                Err(refused) => {
                    message = refused;
                    self.children.remove(&name);
                }
            }
        }
    }

    /// The actor of `name`, started if there is none (it takes up the kind of the first
    /// request it serves).
    async fn child(&mut self, myself: &ActorRef<SupervisorMsg>, name: &LockName) -> Option<&Route> {
        if !self.children.contains_key(name) {
            let gate = Arc::new(RouteGate::default());
            let supervisor = myself.clone();
            let retire: Retire = Arc::new(move |name: &LockName, actor| {
                let _ = supervisor.send_message(SupervisorMsg::ChildIdle {
                    name: name.clone(),
                    actor,
                });
            });
            let args = NameActorArgs {
                name: name.clone(),
                context: self.context.clone(),
                gate: gate.clone(),
                retire,
            };
            let spawned = Actor::spawn_linked(None, NameActor, args, myself.get_cell()).await;
            let (actor, _) = spawned
                .inspect_err(
                    |error| tracing::error!(lock = %name, %error, "could not start lock actor"),
                )
                .ok()?;
            self.children.insert(name.clone(), Route { actor, gate });
        }
        self.children.get(name)
    }

    fn forget(&mut self, actor: ActorId) {
        self.children
            .retain(|_, child| child.actor.get_id() != actor);
    }
}

fn wake<'a>(children: impl IntoIterator<Item = &'a Route>) {
    for child in children {
        let _ = child.actor.send_message(LockMsg::Wake);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::SupervisorMsg;
    use crate::lock::runtime::Runtime;
    use crate::name::LockName;
    use crate::options::LockOptions;
    use crate::store::memory::MemoryStore;
    use crate::store::request::HolderId;

    async fn runtime_with_one_actor() -> (Arc<Runtime>, crate::lock::Lock) {
        let runtime = Runtime::start(
            Arc::new(MemoryStore::new()),
            HolderId::generate(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        let lock = runtime.lock(
            LockName::new("child").unwrap(),
            Arc::new(LockOptions::default()),
        );
        lock.acquire().await.unwrap().release().await.unwrap();
        assert_eq!(runtime.active_locks().await, 1);
        (runtime, lock)
    }

    /// A retirement the supervisor hears of after the name's actor was replaced (the old
    /// one's end came first, and a request spawned the new one) leaves the new one alone:
    /// forgetting it would let the next request start a second actor for the name.
    #[tokio::test(start_paused = true)]
    async fn a_late_retirement_of_a_replaced_actor_keeps_the_new_one() {
        let (runtime, _lock) = runtime_with_one_actor().await;
        let replaced = ractor::ActorId::Local(u64::MAX);
        let name = LockName::new("child").unwrap();
        runtime
            .supervisor
            .send_message(SupervisorMsg::ChildIdle {
                name,
                actor: replaced,
            })
            .unwrap();
        assert_eq!(runtime.active_locks().await, 1);
    }

    /// A lock actor that fails is forgotten at once (its memory with it), and its name
    /// gets a fresh actor on next use.
    #[cfg(feature = "testing")]
    #[tokio::test(start_paused = true)]
    async fn a_failed_actor_is_forgotten_and_replaced() {
        let (runtime, lock) = runtime_with_one_actor().await;
        let route = lock.cached_route().unwrap();
        let panic = crate::lock::message::LockMsg::InjectPanic;
        route.actor.send_message(panic).unwrap();
        for _ in 0..1_000 {
            if runtime.active_locks().await == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(
            runtime.active_locks().await,
            0,
            "the failed actor is remembered"
        );
        lock.acquire().await.unwrap().release().await.unwrap();
        assert_eq!(runtime.active_locks().await, 1);
    }
}
