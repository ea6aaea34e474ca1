//! The direct route from lock handles to a lock actor, and the count that lets the actor stop
//! when idle without losing a request sent on it.
//!
//! The supervisor routes a handle's first request and gives the handle the [`Route`]; later
//! requests go straight to the actor, one mailbox hop instead of two. Every sender (the
//! supervisor included) counts a request on the route's [`RouteGate`] before sending it, and
//! the actor counts what it receives. An idle actor retires only if the two counts agree at
//! the moment it marks the gate retired; a sender that finds the gate retired after counting
//! takes its count back and asks the supervisor, which starts a fresh actor. Both sides write
//! their flag before reading the other's (sequentially consistent), so at least one of them
//! sees the other: either the actor stays for the request, or the request goes elsewhere.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ractor::ActorRef;

use super::message::LockMsg;

/// The counts shared by a lock actor and everyone sending it requests.
#[derive(Debug, Default)]
pub(crate) struct RouteGate {
    /// Requests counted by senders (and not taken back).
    sent: AtomicU64,
    /// Set by the actor while it decides to stop; a retired gate takes no more requests.
    retired: AtomicBool,
}

impl RouteGate {
    /// Called by the idle actor that has received `seen` requests: whether it may stop now.
    /// Once it returns `true` no request will be sent on this gate again.
    pub(crate) fn try_retire(&self, seen: u64) -> bool {
        self.retired.store(true, Ordering::SeqCst);
        if self.sent.load(Ordering::SeqCst) == seen {
            return true;
        }
        // A request is on its way: stay for it.
        self.retired.store(false, Ordering::SeqCst);
        false
    }
}

/// A lock actor and its gate.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) actor: ActorRef<LockMsg>,
    pub(crate) gate: Arc<RouteGate>,
}

impl Route {
    /// Sends a request the actor counts, unless the actor has retired or stopped; then the
    /// request comes back and nothing was counted.
    pub(crate) fn send_request(&self, request: LockMsg) -> Result<(), LockMsg> {
        debug_assert!(request.is_counted_request());
        self.gate.sent.fetch_add(1, Ordering::SeqCst);
        if self.gate.retired.load(Ordering::SeqCst) {
            self.gate.sent.fetch_sub(1, Ordering::SeqCst);
            return Err(request);
        }
        let Err(refused) = self.actor.send_message(request) else {
            return Ok(());
        };
        self.gate.sent.fetch_sub(1, Ordering::SeqCst);
        match refused {
            ractor::MessagingErr::SendErr(request) => Err(request),
            // `send_message` refuses only with the message; were it otherwise, the request
            // is dropped and its caller's reply channel closes (an error).
            ractor::MessagingErr::ChannelClosed | ractor::MessagingErr::InvalidActorType => Ok(()),
        }
    }
}

/// The route a lock handle (and its clones) remembers; empty until the supervisor has routed
/// a request, and emptied when the route is refused.
#[derive(Debug, Default)]
pub(crate) struct CachedRoute(Mutex<Option<Route>>);

impl CachedRoute {
    pub(crate) fn get(&self) -> Option<Route> {
        self.slot().clone()
    }

    pub(crate) fn set(&self, route: Route) {
        *self.slot() = Some(route);
    }

    /// Forgets `route` unless a newer one replaced it meanwhile. Only spares later requests
    /// one refused send each: a retired gate stays retired, and the supervisor's forward of
    /// the refused request caches the new route anyway (so its mutant survives).
    pub(crate) fn forget(&self, route: &Route) {
        let mut slot = self.slot();
        if slot
            .as_ref()
            .is_some_and(|cached| Arc::ptr_eq(&cached.gate, &route.gate))
        {
            *slot = None;
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Route>> {
        // Every critical section is one assignment or clone: a poisoned slot is consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_actor_retires_only_when_every_counted_request_arrived() {
        let gate = RouteGate::default();
        assert!(gate.try_retire(0));
        let gate = RouteGate::default();
        gate.sent.fetch_add(1, Ordering::SeqCst);
        assert!(!gate.try_retire(0), "a request is on its way");
        assert!(!gate.retired.load(Ordering::SeqCst));
        assert!(gate.try_retire(1));
    }
}
