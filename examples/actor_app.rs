//! A small ractor application embedding mongolock.
//!
//! Two nodes (each its own `LockManager`, as two processes would be) run a `Node` actor.
//! Each node's election spawns a `Janitor` actor only while that node leads (lifecycle
//! binding); the node also hears about its terms as plain messages (`subscribe_actor`).
//! Half-way, the leading node resigns and the other node's janitor takes over.
//!
//! `cargo run --example actor_app`

use std::time::Duration;

use mongolock::{Election, ElectionEvent, ElectionOptions, LockManager, LockOptions, MemoryStore};
use ractor::{Actor, ActorProcessingErr, ActorRef};

/// Leader-only work: sweeps every 300 ms under the term's fencing token.
struct Janitor;

impl Actor for Janitor {
    type Msg = ();
    type State = (String, u64);
    type Arguments = (String, u64);

    async fn pre_start(
        &self,
        me: ActorRef<()>,
        args: (String, u64),
    ) -> Result<Self::State, ActorProcessingErr> {
        println!("[{}] janitor started for term {}", args.0, args.1);
        me.send_interval(Duration::from_millis(300), || ());
        Ok(args)
    }

    async fn handle(
        &self,
        _: ActorRef<()>,
        _: (),
        (node, token): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        println!("[{node}] sweeping (fenced with token {token})");
        Ok(())
    }

    async fn post_stop(
        &self,
        _: ActorRef<()>,
        (node, token): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        println!("[{node}] janitor stopped (term {token} over)");
        Ok(())
    }
}

/// A node of the application: owns its election, hears about its terms, can step down.
struct Node;

enum NodeMsg {
    Election(ElectionEvent),
    StepDown,
}

struct NodeState {
    name: String,
    election: Election,
}

impl Actor for Node {
    type Msg = NodeMsg;
    type State = NodeState;
    type Arguments = (String, LockManager);

    async fn pre_start(
        &self,
        me: ActorRef<NodeMsg>,
        (name, manager): (String, LockManager),
    ) -> Result<NodeState, ActorProcessingErr> {
        let timings = ElectionOptions::default()
            .with_lease_duration(Duration::from_secs(3))
            .with_renew_deadline(Duration::from_secs(2))
            .with_retry_period(Duration::from_millis(250));
        let election = manager.election("janitor", timings)?;
        election.subscribe_actor(&me, NodeMsg::Election)?;
        let node = name.clone();
        election.run_while_leader(move |token, supervisor| {
            let node = node.clone();
            async move {
                let (janitor, _) =
                    Actor::spawn_linked(None, Janitor, (node, token), supervisor).await?;
                Ok(janitor.get_cell())
            }
        })?;
        Ok(NodeState { name, election })
    }

    async fn handle(
        &self,
        _: ActorRef<NodeMsg>,
        message: NodeMsg,
        state: &mut NodeState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            NodeMsg::Election(ElectionEvent::Elected { token }) => {
                println!("[{}] leading (term {token})", state.name);
            }
            NodeMsg::Election(ElectionEvent::Resigned { token }) => {
                println!("[{}] stepped down (term {token})", state.name);
            }
            NodeMsg::Election(ElectionEvent::Deposed { token, reason }) => {
                println!("[{}] deposed (term {token}): {reason}", state.name);
            }
            NodeMsg::Election(_) => {}
            NodeMsg::StepDown => {
                if let Ok(Some(leader)) = state.election.leader().await {
                    println!(
                        "[{}] asked to step down (leader is {})",
                        state.name, leader.holder
                    );
                }
                state.election.resign().await?;
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = MemoryStore::new();
    let mut nodes = Vec::new();
    for name in ["node-a", "node-b"] {
        let manager = LockManager::start(store.clone(), LockOptions::default()).await?;
        let (node, handle) = Actor::spawn(None, Node, (name.to_owned(), manager.clone())).await?;
        nodes.push((name, node, handle, manager));
        tokio::time::sleep(Duration::from_millis(100)).await; // node-a campaigns first
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("--- node-a steps down ---");
    nodes[0].1.send_message(NodeMsg::StepDown)?;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    println!("--- shutting down ---");
    for (_, node, handle, manager) in nodes {
        node.stop(None);
        handle.await?;
        manager.shutdown().await;
    }
    Ok(())
}
