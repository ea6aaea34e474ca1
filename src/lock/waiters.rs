//! The FIFO queue of local tasks waiting for one lock.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::guard::LockGuard;
use super::message::GuardReply;
use crate::error::LockError;
use crate::metrics::LockMetrics;
use crate::options::LockOptions;

pub(crate) struct Waiter {
    pub(crate) options: Arc<LockOptions>,
    pub(crate) requested_at: Instant,
    pub(crate) reply: GuardReply,
}

/// Waiters in arrival order, with the waiters gauge kept in step.
pub(crate) struct Waiters {
    queue: VecDeque<Waiter>,
    metrics: LockMetrics,
}

impl Waiters {
    pub(crate) fn new(metrics: LockMetrics) -> Self {
        Self {
            queue: VecDeque::new(),
            metrics,
        }
    }

    pub(crate) fn push(&mut self, waiter: Waiter) {
        self.queue.push_back(waiter);
        self.metrics.waiters(1.0);
    }

    /// Drops waiters whose caller went away (cancelled or timed out); returns whether any
    /// waiter is left.
    pub(crate) fn prune(&mut self) -> bool {
        let before = self.queue.len();
        self.queue.retain(|waiter| !waiter.reply.is_closed());
        self.metrics.waiters(-((before - self.queue.len()) as f64));
        !self.queue.is_empty()
    }

    /// The first waiter's options and how long it has been waiting (the longest wait here).
    pub(crate) fn front(&self) -> Option<(Arc<LockOptions>, Duration)> {
        self.queue
            .front()
            .map(|waiter| (waiter.options.clone(), waiter.requested_at.elapsed()))
    }

    /// Hands a guard to the first waiter still listening. `make_guard` is called once per
    /// waiter tried; a guard that could not be delivered is disarmed (it never held anything
    /// for its caller). Returns whether a waiter took it.
    pub(crate) fn deliver(&mut self, mut make_guard: impl FnMut() -> LockGuard) -> bool {
        while let Some(waiter) = self.queue.pop_front() {
            self.metrics.waiters(-1.0);
            match waiter.reply.send(Ok(make_guard())) {
                Ok(()) => {
                    self.metrics.acquire_wait(waiter.requested_at.elapsed());
                    return true;
                }
                Err(Ok(guard)) => guard.disarm(),
                Err(Err(_)) => {}
            }
        }
        false
    }

    /// Answers every waiter with `error` and empties the queue.
    pub(crate) fn fail_all(&mut self, error: LockError) {
        self.metrics.waiters(-(self.queue.len() as f64));
        for waiter in self.queue.drain(..) {
            let _ = waiter.reply.send(Err(error.clone()));
        }
    }
}

impl Drop for Waiters {
    fn drop(&mut self) {
        // Keep the gauge right when the actor stops or panics with waiters queued.
        self.metrics.waiters(-(self.queue.len() as f64));
    }
}
