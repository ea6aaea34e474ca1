//! The memory store's shared records: a semaphore's or a reader/writer lock's holders, and
//! the rules that decide a grant (rules 7 to 14 of the contract, and rule 16's count alone in
//! arrival order, applied under the store's one mutex).

use std::time::Duration;

use tokio::time::Instant;

use crate::error::StoreError;
use crate::kind::{Access, LockKind, MAX_PERMITS};
use crate::name::LockName;
use crate::store::outcome::{Holding, LockRecord};
use crate::store::request::{HolderId, mark_length, wait_length};
use crate::store::{AcquireRequest, LeaseId};

/// One holder of a shared record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SharedHolder {
    lease: LeaseId,
    holder: HolderId,
    token: u64,
    access: Access,
    expires_at: Instant,
}

/// A semaphore's or reader/writer lock's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SharedRecord {
    kind: LockKind,
    /// The counts a semaphore had before `set_permits` changed it: requests still asking
    /// for one of them are judged by the current count.
    recounted_from: Vec<u32>,
    /// Earliest grant first; expired ones are pruned by the next write.
    holders: Vec<SharedHolder>,
    /// The last grant's token.
    last_token: u64,
    /// "A writer waits": one mark per manager whose writer was refused, in the order the
    /// marks began, each until its writer will have tried again.
    writers_marks: Vec<WriterMark>,
    /// A refused reader will try again before this.
    readers_waiting_until: Option<Instant>,
    /// Readers go before writers until this (set when a writer leaves while readers wait).
    readers_turn_until: Option<Instant>,
    /// When the current readers' turn began: the readers it admits past a waiting writer
    /// are those waiting since then or before.
    readers_turn_from: Option<Instant>,
    /// A reader got in during the current turn: once nobody holds, a waiting writer goes.
    readers_turn_served: bool,
    /// When another holder first failed to get in since the last grant.
    contended_since: Option<Instant>,
    /// The managers refused since the last grant: a release reports the wait only to a
    /// holder some other manager waits for.
    contenders: Vec<HolderId>,
}

/// "A writer of this manager waits": one writer's grant leaves the others' marks on, and
/// the earliest marker's writer goes before the writers of every later one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WriterMark {
    by: HolderId,
    until: Instant,
}

/// Whom a shared record lets in next, as far as its holders go (rule 22 reads the line
/// against it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admits {
    /// A semaphore with this many permits free.
    Permits(usize),
    /// A reader/writer lock: whether a write may go (nobody holds), and whether reads may
    /// (no writer holds, fewer than `MAX_PERMITS` read).
    Access { write: bool, read: bool },
}

/// What an acquisition found.
pub(super) enum SharedGrant {
    Granted(u64),
    /// Refused: the first holder, and how long the lease that ends first has left.
    Busy(Option<HolderId>, Option<Duration>),
}

fn live(until: Option<Instant>, now: Instant) -> bool {
    until.is_some_and(|until| until > now)
}

/// The error for a request of `asked` on a record of `found`.
pub(super) fn mismatch(name: &LockName, found: LockKind, asked: LockKind) -> StoreError {
    StoreError::KindMismatch {
        name: name.as_str().to_owned(),
        found,
        asked,
    }
}

impl SharedRecord {
    /// An empty record of `kind`.
    pub(super) fn new(kind: LockKind) -> Self {
        Self {
            kind,
            recounted_from: Vec::new(),
            holders: Vec::new(),
            last_token: 0,
            writers_marks: Vec::new(),
            readers_waiting_until: None,
            readers_turn_until: None,
            readers_turn_from: None,
            readers_turn_served: false,
            contended_since: None,
            contenders: Vec::new(),
        }
    }

    pub(super) fn kind(&self) -> LockKind {
        self.kind
    }

    /// Whether a request of `asked` may be decided on this record: its kind, or a count
    /// the semaphore had before `set_permits` changed it.
    pub(super) fn accepts(&self, asked: LockKind) -> bool {
        // Rule 7.
        self.kind == asked
            || matches!(
                (self.kind, asked),
                (LockKind::Semaphore { .. }, LockKind::Semaphore { permits })
                    if self.recounted_from.contains(&permits)
            )
    }

    /// Changes a semaphore's count; returns the old one.
    pub(super) fn set_permits(&mut self, permits: u32) -> Option<u32> {
        match self.kind {
            LockKind::Semaphore { permits: old } => {
                self.kind = LockKind::Semaphore { permits };
                // (The `retain` below undoes a same-count push and `contains` ignores a
                // repeat: the `||` mutant of this test survives.)
                if old != permits && !self.recounted_from.contains(&old) {
                    self.recounted_from.push(old);
                }
                self.recounted_from.retain(|&count| count != permits);
                Some(old)
            }
            _ => None,
        }
    }

    /// Whether a writer's waiting mark is live.
    fn writer_waits(&self, now: Instant) -> bool {
        self.writers_marks.iter().any(|mark| mark.until > now)
    }

    /// Whether a writer of another manager than `holder`, waiting longer, goes first: the
    /// earliest live mark is not `holder`'s.
    fn other_writer_first(&self, holder: &HolderId, now: Instant) -> bool {
        self.writers_marks
            .iter()
            .find(|mark| mark.until > now)
            .is_some_and(|first| first.by != *holder)
    }

    /// Marks "a writer of `holder` waits" until `until` (or the later end already there).
    /// A mark that had ended is a new one, behind every live one.
    fn mark_writer_waiting(&mut self, holder: &HolderId, until: Instant, now: Instant) {
        // Rule 11: a mark that ended begins again behind every live one.
        self.writers_marks.retain(|mark| mark.until > now);
        match self
            .writers_marks
            .iter_mut()
            .find(|mark| mark.by == *holder)
        {
            Some(mark) => mark.until = mark.until.max(until),
            None => self.writers_marks.push(WriterMark {
                by: holder.clone(),
                until,
            }),
        }
    }

    /// A writer of `holder` got in, or its writers gave up: its manager's mark ends; the
    /// other managers' stay. Returns whether a mark was there to end.
    pub(super) fn end_writers_mark(&mut self, holder: &HolderId) -> bool {
        let before = self.writers_marks.len();
        self.writers_marks.retain(|mark| mark.by != *holder);
        self.writers_marks.len() < before
    }

    /// Whether anybody holds an unexpired lease or a waiting mark is live: a record that is
    /// neither may be swept.
    pub(super) fn is_expired(&self, now: Instant) -> bool {
        !self.holders.iter().any(|holder| holder.expires_at > now)
            && !self.writer_waits(now)
            && !live(self.readers_waiting_until, now)
            && !live(self.readers_turn_until, now)
    }

    /// Whether `lease` holds an unexpired place.
    pub(super) fn is_held_by(&self, lease: LeaseId, now: Instant) -> bool {
        self.holders
            .iter()
            .any(|holder| holder.lease == lease && holder.expires_at > now)
    }

    /// Rule 3: `request` was refused at `now`, by the holders or by the line: the record is
    /// contended since its requester began waiting (keeping the earliest), and its manager
    /// is one a release reports the wait to others for. MongoDB's pipeline marks every
    /// refusal alike, whatever refused it.
    pub(super) fn contended(&mut self, request: &AcquireRequest, now: Instant) {
        let waiting_since = now.checked_sub(wait_length(request.waited)).unwrap_or(now);
        self.contended_since = Some(
            self.contended_since
                .map_or(waiting_since, |since| since.min(waiting_since)),
        );
        if !self.contenders.contains(&request.holder) {
            self.contenders.push(request.holder.clone());
        }
    }

    /// Applies the contract's grant rules (7 to 14, 16) to `request` at `now`; a grant takes
    /// the token `reserve` gives (called only for a grant).
    pub(super) fn try_acquire(
        &mut self,
        request: &AcquireRequest,
        now: Instant,
        reserve: impl FnOnce() -> u64,
    ) -> SharedGrant {
        // Only unexpired holders count (rules 8 to 10).
        self.holders.retain(|holder| holder.expires_at > now);
        let writer_holds = self
            .holders
            .iter()
            .any(|holder| holder.access.excludes_all());
        let readers_turn = live(self.readers_turn_until, now);
        let waiting_since = now.checked_sub(wait_length(request.waited)).unwrap_or(now);
        // Rule 13, as rule 10 reads it.
        // A turn admits the readers that waited since it began while it lasts: until one of
        // them got in and all have left again (then the waiting writer goes next).
        let waited_for_the_turn = readers_turn
            && self
                .readers_turn_from
                .is_some_and(|from| waiting_since <= from)
            && (!self.readers_turn_served || !self.holders.is_empty());
        // Rule 16.
        // In arrival order the line (checked before) decides who goes first: the waiting
        // marks and the readers' turn are neither read nor written.
        let marks = !request.in_arrival_order;
        let free = match (request.access, self.kind) {
            // Rule 8 (and rule 7 for an older count).
            // The record's count, which a request of a count it had before is judged by.
            (Access::Permit { .. }, LockKind::Semaphore { permits })
            | (Access::Permit { permits }, _) => self.holders.len() < permits as usize,
            // Rule 9.
            (Access::Write, _) => {
                self.holders.is_empty()
                    && (!marks
                        || ((!readers_turn || self.readers_turn_served)
                            && !self.other_writer_first(&request.holder, now)))
            }
            // Rule 10.
            (Access::Read, _) => {
                !writer_holds
                    && self.holders.len() < MAX_PERMITS as usize
                    && (!marks || waited_for_the_turn || !self.writer_waits(now))
            }
            (Access::Exclusive, _) => false,
        };
        if !free {
            // Rule 3: the earliest wait marks the record contended, and who was refused.
            self.contended(request, now);
            // Rules 11 and 12: a refused writer marks its manager's wait, a refused reader the
            // readers'.
            if marks && !request.retry_within.is_zero() {
                let until = now + mark_length(request.retry_within);
                match request.access {
                    Access::Write => self.mark_writer_waiting(&request.holder, until, now),
                    Access::Read => {
                        self.readers_waiting_until = Some(
                            self.readers_waiting_until
                                .map_or(until, |before| before.max(until)),
                        );
                    }
                    _ => {}
                }
            }
            return SharedGrant::Busy(
                self.holders.first().map(|first| first.holder.clone()),
                self.first_lease_end(now),
            );
        }
        // Rule 14.
        let token = reserve();
        self.last_token = token;
        self.contended_since = None;
        self.contenders.clear();
        match request.access {
            // Rules 11 and 13.
            // The writer's wait is over, and so is any readers' turn it came after. The mark
            // stays for the writers of other managers that marked it and still wait.
            Access::Write => {
                if marks {
                    self.end_writers_mark(&request.holder);
                }
                self.readers_turn_until = None;
            }
            // Rule 13: the turn has let a reader in.
            // (Outside a turn the flag is unread, and a new turn resets it: marking it
            // there too changes nothing, so the guard's mutant survives.)
            Access::Read if readers_turn => self.readers_turn_served = true,
            _ => {}
        }
        self.holders.push(SharedHolder {
            lease: request.lease,
            holder: request.holder.clone(),
            token,
            access: request.access,
            expires_at: now + request.lease_duration,
        });
        SharedGrant::Granted(token)
    }

    /// Extends `lease` if it still holds an unexpired place (every place it holds: a lease
    /// granted twice holds two, as on MongoDB).
    pub(super) fn extend(
        &mut self,
        lease: LeaseId,
        lease_duration: Duration,
        now: Instant,
    ) -> bool {
        // Rule 2.
        let mut extended = false;
        for holder in &mut self.holders {
            if holder.lease == lease && holder.expires_at > now {
                holder.expires_at = now + lease_duration;
                extended = true;
            }
        }
        extended
    }

    /// Removes `lease`'s place; returns how long others had been waiting (nobody, if only
    /// its own manager was refused since the last grant: its own releases serve its
    /// waiters), or `None` if it held none.
    pub(super) fn release(&mut self, lease: LeaseId, now: Instant) -> Option<Option<Duration>> {
        let at = self
            .holders
            .iter()
            .position(|holder| holder.lease == lease)?;
        let released = self.holders.remove(at);
        // A lease granted twice (the same request sent again) leaves with every place it
        // holds, as on MongoDB.
        self.holders.retain(|holder| holder.lease != lease);
        // Rule 13: a write's release while readers wait begins their turn.
        if released.access == Access::Write && live(self.readers_waiting_until, now) {
            self.readers_turn_until = self.readers_waiting_until;
            self.readers_turn_from = Some(now);
            self.readers_turn_served = false;
        }
        // Rule 3: only another manager's wait is reported.
        let others_wait = self
            .contenders
            .iter()
            .any(|contender| *contender != released.holder);
        Some(
            self.contended_since
                .filter(|_| others_wait)
                .map(|since| now - since),
        )
    }

    /// How long the unexpired holder whose lease ends first has left at `now`: when a
    /// place may come free without a release.
    pub(super) fn first_lease_end(&self, now: Instant) -> Option<Duration> {
        self.holders
            .iter()
            .filter(|holder| holder.expires_at > now)
            .map(|holder| holder.expires_at - now)
            .min()
    }

    /// Whom the record lets in next at `now`, by its unexpired holders.
    pub(super) fn admits(&self, now: Instant) -> Admits {
        let holding = || self.holders.iter().filter(|holder| holder.expires_at > now);
        let held = holding().count();
        match self.kind {
            LockKind::Semaphore { permits } => {
                Admits::Permits((permits as usize).saturating_sub(held))
            }
            _ => Admits::Access {
                write: held == 0,
                read: !holding().any(|holder| holder.access.excludes_all())
                    && held < MAX_PERMITS as usize,
            },
        }
    }

    /// The record as inspection shows it.
    pub(super) fn record(&self, now: Instant) -> LockRecord {
        let holders = self
            .holders
            .iter()
            .filter(|holder| holder.expires_at > now)
            .map(|holder| {
                Holding::new(
                    holder.holder.clone(),
                    holder.token,
                    holder.access,
                    holder.expires_at - now,
                )
            })
            .collect::<Vec<_>>();
        let contended_for = self
            .contended_since
            .filter(|_| !holders.is_empty())
            .map(|since| now - since);
        let mut record = LockRecord::shared(self.kind, self.last_token, holders);
        record.contended_for = contended_for;
        record
    }
}
