//! Whether a request is served here: the name's record decides its kind, not the first
//! request this process made. A request of the other family (a mutex, or a shared kind)
//! than the one this process uses the name as waits while the store has not yet answered
//! for that kind (the first attempt is in flight, or failed without an answer), then is
//! judged again: served if nothing is left here, refused once the record has said what
//! the name is. A single try does not wait: it is answered "not acquired".

use ractor::ActorRef;

use super::state::{NameState, Request};
use crate::error::LockError;
use crate::kind::Access;
use crate::lock::message::LockMsg;

/// What becomes of a request for now.
enum Admission {
    Serve,
    Refuse(LockError),
    /// Until the store has answered for the kind this process uses the name as.
    Wait,
}

impl NameState {
    pub(super) fn on_request(&mut self, myself: &ActorRef<LockMsg>, request: Request) {
        match self.admit(request.access()) {
            Admission::Serve => match request {
                Request::Acquire {
                    access,
                    options,
                    requested_at,
                    reply,
                } => self.on_acquire(myself, access, options, requested_at, reply),
                Request::Try {
                    access,
                    options,
                    reply,
                } => self.on_try_acquire(myself, access, options, reply),
            },
            Admission::Refuse(error) => request.refuse(error),
            // A single try does not wait: this process's own request of the other kind
            // holds the name up for now.
            Admission::Wait => match request {
                Request::Try { reply, .. } => {
                    let _ = reply.send(Ok(None));
                }
                request => self.waiting_for_record.push(request),
            },
        }
    }

    /// Judges again the requests waiting for the record (after every message: any may
    /// have brought the store's answer or left the actor unused).
    pub(super) fn admit_waiting(&mut self, myself: &ActorRef<LockMsg>) {
        if self.waiting_for_record.is_empty() {
            return;
        }
        // A request whose caller went away meanwhile is served as any other: the waiters
        // drop it before it is asked for.
        for request in std::mem::take(&mut self.waiting_for_record) {
            self.on_request(myself, request);
        }
    }

    /// A name is used here either as a mutex or as a shared kind, never both at once. With
    /// nothing held, in flight or waited for, the actor takes up the asked kind and the
    /// store's record answers for it; a request of the same family is served; one of the
    /// other family is refused only once the record has answered for this process's kind.
    fn admit(&mut self, access: Access) -> Admission {
        let asked = access.kind();
        if self.is_unused() && !self.waiters.prune() {
            self.kind = asked;
            self.kind_on_record = false;
            return Admission::Serve;
        }
        if asked.is_shared() == self.kind.is_shared() {
            return Admission::Serve;
        }
        if !self.kind_on_record {
            return Admission::Wait;
        }
        Admission::Refuse(LockError::KindMismatch {
            name: self.name.as_str().to_owned(),
            found: self.kind,
            asked,
        })
    }
}
