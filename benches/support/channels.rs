//! The message-passing floor of an actor runtime: a task answering requests over a tokio
//! mpsc channel with a oneshot reply. An acquire + release through a lock actor is at best
//! two such round trips.

use tokio::sync::{mpsc, oneshot};

/// A spawned task that answers every request at once.
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    requests: mpsc::UnboundedSender<oneshot::Sender<u64>>,
}

impl Echo {
    /// Spawns the answering task on the current runtime; it ends when every `Echo` is dropped.
    pub(crate) fn spawn() -> Self {
        let (requests, mut inbox) = mpsc::unbounded_channel::<oneshot::Sender<u64>>();
        tokio::spawn(async move {
            while let Some(reply) = inbox.recv().await {
                let _ = reply.send(1);
            }
        });
        Self { requests }
    }

    /// One request and its answer.
    pub(crate) async fn round_trip(&self) -> u64 {
        let (reply, answer) = oneshot::channel();
        if self.requests.send(reply).is_err() {
            return 0;
        }
        answer.await.unwrap_or(0)
    }

    /// What an acquire + release costs at the very least: two round trips.
    pub(crate) async fn two_round_trips(&self) -> u64 {
        self.round_trip().await + self.round_trip().await
    }
}
