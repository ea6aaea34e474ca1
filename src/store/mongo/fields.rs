//! The names of the lock document's fields, in one place for every query, pipeline and
//! reader: what each field holds is said here, and nowhere else.

/// `_id`: the lock name, a BSON string.
pub(super) const ID: &str = "_id";
/// The lease id of the current (or last) grant: a BSON UUID (binary subtype 4), or null once
/// released.
pub(super) const LEASE_ID: &str = "leaseId";
/// The holder's identity (`host:pid:random`), or null once released.
pub(super) const HOLDER: &str = "holder";
/// When the lease ends, by the server's clock (the TTL index is on this field).
pub(super) const EXPIRES_AT: &str = "expiresAt";
/// When the current lease was granted, by the server's clock.
pub(super) const ACQUIRED_AT: &str = "acquiredAt";
/// The last fencing token reserved by the current (or last) grant, an Int64: every grant
/// continues from it (see `LockStore::tokens_per_grant`). Versions that reserve no block read it as
/// their grant's token, so a collection shared with them keeps tokens unique.
pub(super) const TOKEN: &str = "token";
/// The fencing token of the current (or last) grant, an Int64: the first of its block.
/// Missing on records written by versions that reserve no block, whose grant's token is
/// [`TOKEN`].
pub(super) const GRANTED_TOKEN: &str = "grantedToken";
/// When another manager first failed to acquire the current grant (server time), or null
/// while uncontended. Set by the acquire pipeline, cleared by release and by the next grant
/// (which a waiting request is given, while other managers' places are live in the line,
/// as the earliest of their arrivals: rule 3).
pub(super) const CONTENDED_AT: &str = "contendedAt";
/// On a shared record, the managers refused since the last grant (null after a grant): a
/// release reports the contention only to a holder some other manager waits for.
pub(super) const CONTENDERS: &str = "contenders";
/// Set by release: how long (ms) other managers had been trying to take the released grant,
/// or null if nobody tried.
pub(super) const LAST_CONTENDED_MS: &str = "lastContendedMs";
/// Set by a forced release (an operator's, never the runtime's): a sub-document recording
/// when ([`FORCED_AT`]) whose grant ([`HOLDER`] and [`LEASE_ID`], same field names) was
/// cleared and when that grant would have expired ([`FORCED_EXPIRES_AT`]); on a shared
/// record, the cleared holder entries ([`HOLDERS`]). Kept as a trace until the next forced
/// release: a renewal that finds its lease gone reads it to tell the holder why.
pub(super) const FORCED_RELEASE: &str = "forcedRelease";
/// `forcedRelease.at`: the server's `$$NOW` of the forced release.
pub(super) const FORCED_AT: &str = "at";
/// `forcedRelease.expiresAt`: when the cleared grant would have expired.
pub(super) const FORCED_EXPIRES_AT: &str = "expiresAt";
/// Added by the inspect query (never stored): the server's `$$NOW`.
pub(super) const SERVER_NOW: &str = "serverNow";

/// A shared record's kind: [`SEMAPHORE`] or [`RWLOCK`]. Missing on a mutex's document, so
/// documents written before shared kinds existed stay mutexes, and a mutex's acquisition
/// pipeline can tell a shared record by it and leave it alone.
pub(super) const KIND: &str = "kind";
/// [`KIND`] of a semaphore.
pub(super) const SEMAPHORE: &str = "semaphore";
/// [`KIND`] of a reader/writer lock.
pub(super) const RWLOCK: &str = "rwlock";
/// A semaphore's count (an Int64 from 1 to `MAX_PERMITS`).
pub(super) const PERMITS: &str = "permits";
/// A semaphore's counts before `set_permits` changed it: requests asking for one of them
/// are decided by the current count.
pub(super) const RECOUNTED_FROM: &str = "recountedFrom";
/// A shared record's holders, earliest grant first: sub-documents of [`LEASE`],
/// [`HOLDER`], [`TOKEN`] (that grant's fencing token), [`ACCESS`], [`ACQUIRED_AT`] and
/// [`EXPIRES_AT`]. Expired entries stay until the next acquisition prunes them.
pub(super) const HOLDERS: &str = "holders";
/// A holder entry's lease id (a BSON UUID, like [`LEASE_ID`]).
pub(super) const LEASE: &str = "lease";
/// A holder entry's access: [`PERMIT`], [`READ`] or [`WRITE`].
pub(super) const ACCESS: &str = "access";
/// [`ACCESS`] of a semaphore's permit.
pub(super) const PERMIT: &str = "permit";
/// [`ACCESS`] of a reader.
pub(super) const READ: &str = "read";
/// [`ACCESS`] of the writer.
pub(super) const WRITE: &str = "write";
/// A shared record's last grant's holder: the record feed's way to name who was granted
/// (set by every grant, so a change stream shows it only when it changed).
pub(super) const GRANTED_HOLDER: &str = "grantedHolder";
/// Until when a refused writer will try again (server time), or null: new readers wait.
pub(super) const WRITER_WAITING_UNTIL: &str = "writerWaitingUntil";
/// The managers whose writers were refused, earliest first, each with its mark's end (see
/// `writers_marks`): the earliest one's writer goes first, and a writer's grant leaves
/// the others' marks on.
pub(super) const WRITERS_MARKED_BY: &str = "writersMarkedBy";
/// Until when a refused reader will try again (server time), or null.
pub(super) const READERS_WAITING_UNTIL: &str = "readersWaitingUntil";
/// Until when readers go before writers (set when a write is released while readers wait).
pub(super) const READERS_TURN_UNTIL: &str = "readersTurnUntil";
/// When the current readers' turn began: the readers it admits past a waiting writer are
/// those waiting since then or before.
pub(super) const READERS_TURN_FROM: &str = "readersTurnFrom";
/// Whether a reader got in during the current readers' turn: once nobody holds, a waiting
/// writer goes.
pub(super) const READERS_TURN_SERVED: &str = "readersTurnServed";
/// When a shared record last lost holders by a release (server time): the release feed's
/// and the record feed's sign that places came free.
pub(super) const RELEASED_AT: &str = "releasedAt";
/// Set by a mutex's release (and a hand-over that released it for an earlier place in
/// line): the released grant's token, a space and the [`HOLDER`] of the manager that
/// waited longest (`*` when no manager is listed). Each manager's release feed matches
/// only the releases that name it or `*`, so one release wakes one manager.
pub(super) const WAKE: &str = "wake";
/// When a manager whose waiters gave up last took its place or writers' mark off the
/// document (server time): the release feed's sign that those it held back may go.
pub(super) const WITHDRAWN_AT: &str = "withdrawnAt";
/// Set by `release_many`: `{batch, leases}`, the batch's id and the leases that write
/// released from this document, read back only when the batch's counts do not say which
/// keys matched.
pub(super) const RELEASED: &str = "released";
/// `released.batch`: the id (a BSON UUID) of the `release_many` call that wrote it.
pub(super) const RELEASED_BATCH: &str = "batch";
/// `released.leases`: the lease ids that batch released from the document.
pub(super) const RELEASED_LEASES: &str = "leases";

// The temporary fields of the update pipelines: each is set by one stage, read by the
// next ones and unset by the last, so no stored document carries them.

/// Temporary field of the acquire pipeline: whether the lock was free when the update ran.
pub(super) const FREE: &str = "_mongolockFree";
/// Temporary field of the arrival-order acquire pipeline: whether the lease had ended and
/// only an earlier place held the request back, so the wake passes to that place.
pub(super) const PASSES_WAKE: &str = "_mongolockPassesWake";
/// Temporary field of the arrival-order pipelines: the other managers' live places in line.
pub(super) const OTHERS_IN_LINE: &str = "_mongolockOthersInLine";
/// Temporary field of the shared acquire pipeline: the token a grant would take.
pub(super) const NEXT_TOKEN: &str = "_mongolockToken";
/// Temporary field of the shared release pipelines: the holder entries being released.
pub(super) const GONE: &str = "_mongolockGone";
/// Temporary field of the shared release pipelines: whether the release begins a readers'
/// turn. Computed once for the three fields it decides, not written out in each: every
/// copy of an expression costs the server on every shared release (measured in
/// `benches/HISTORY.md#p1-shared-cycle-parts`).
pub(super) const TURN_BEGINS: &str = "_mongolockTurnBegins";
/// Temporary field of the shared extend pipeline: how many entries it extends.
pub(super) const EXTENDED: &str = "_mongolockExtended";
/// Temporary field of the pipelines over a
/// [`LeasesByRecord`](super::pipeline::extend::LeasesByRecord): the record's own leases.
pub(super) const OWN_LEASES: &str = "_mongolockOwnLeases";
