//! The per-name actor, one for every kind of lock: it owns one name's local waiters, the
//! acquisition for them, the leases this process holds on the name and the releases in
//! flight. A mutex, a semaphore and a reader/writer lock differ only in data — the kind —
//! and in a few small rules read from it (`state.rs`): a mutex holds at most one lease and
//! attempts only while it holds nothing; a released mutex may pass to a local waiter under
//! its reserved tokens, a shared place goes back through the store. A read, as it is
//! granted, is joined by the readers waiting here, under the same reserved tokens.
//!
//! Two parts move side by side, one `step` per message (`actor.rs`):
//!
//! | part | states | moves on |
//! |---|---|---|
//! | acquisition (`acquisition.rs`) | `Idle` → `Attempting` → `BackingOff` | a waiter, a grant (next waiter at once, unless a mutex is held), busy (backoff), a release seen here or on the store (attempt now) |
//! | each hold (`holds.rs`) | held → renewing → released (`release.rs`) or lost | its timer, its renewal's answer, its guard |
//!
//! Store calls never run on the message loop: each is spawned (see `store_call`) and
//! reports back as a message, so a deadline timer is handled on time even while a call
//! hangs. What to do with a grant nobody will use lives in `orphan`, when local waiters
//! step back for other processes in `fairness.rs`.
//!
//! The files that move the state (`admission.rs`, `acquisition.rs`, `holds.rs`,
//! `release.rs`) each `impl NameState`; the types the state is made of live in `state.rs`
//! and the files below it, so no file here imports one that imports it back.
//!
//! | file | holds |
//! |---|---|
//! | `actor.rs` | the actor and its one `step` per message |
//! | `state.rs` | what the actor owns and is started with, the kind and its rules, idling and shutdown; a request, a held place, a release or hand-over in flight |
//! | `admission.rs` | whether a request is served, refused, or waits for the record's kind |
//! | `acquisition.rs` | the local waiters' acquisition: moves its phase on |
//! | `phase.rs` | the acquisition's phases, each owning its attempt, backoff or timer |
//! | `attempt.rs` | one acquisition attempt or hand-over: sent off the loop with its claim, its answer judged |
//! | `backoff.rs` | sleep between attempts while another process holds the lock |
//! | `fairness.rs` | when a process gives the lock up to waiters elsewhere, and steps back for them |
//! | `listing.rs` | what refusals leave on the record, a place in line and a writers' mark (`Listing`), and how long each lasts |
//! | `waiters.rs` | the FIFO of local callers waiting for the name |
//! | `holds.rs` | the held leases: grant (readers waiting here join a read), renewal, loss |
//! | `held_lease.rs` | `HeldLease`, one held lease: token, deadline, renewal bookkeeping, its guards |
//! | `release.rs` | a released place: local pass, hand-over, plain release, detach |
//! | `tests.rs` | the actor's answers to messages sent late or twice, sent directly |

mod acquisition;
mod actor;
mod admission;
mod attempt;
mod backoff;
mod fairness;
mod held_lease;
mod holds;
mod listing;
mod phase;
mod release;
mod state;
mod waiters;

pub(crate) use actor::NameActor;
pub(crate) use state::{ManagerContext, NameActorArgs, Retire};

#[cfg(test)]
mod tests;
