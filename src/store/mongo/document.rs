//! The lock document: how values are encoded (its field names are in `fields.rs`), and how a
//! returned document is read back into an outcome — for a mutex's document (one lease) and a
//! shared record's (a semaphore's or a reader/writer lock's list of holders).

use std::collections::HashSet;
use std::time::Duration;

use mongodb::bson::{Bson, Document, Uuid};

use super::fields::{
    ACCESS, ACQUIRED_AT, CONTENDED_AT, EXPIRES_AT, FORCED_AT, FORCED_EXPIRES_AT, FORCED_RELEASE,
    GRANTED_TOKEN, HOLDER, HOLDERS, ID, KIND, LAST_CONTENDED_MS, LEASE, LEASE_ID, PERMIT, PERMITS,
    READ, RECOUNTED_FROM, RWLOCK, SEMAPHORE, SERVER_NOW, TOKEN, WRITE,
};
use super::line;
use crate::error::StoreError;
use crate::kind::{Access, LockKind, MAX_PERMITS};
use crate::name::LockName;
use crate::store::outcome::{Holding, LockRecord};
use crate::store::request::HolderId;
use crate::store::{AcquireOutcome, HandOverOutcome, LeaseId, ReleaseOutcome};

/// The BSON value a lease id is stored as.
pub(super) fn lease_value(lease: LeaseId) -> Bson {
    Bson::from(Uuid::from_bytes(lease.as_uuid().into_bytes()))
}

/// The lease id a document carries, if it is one this crate wrote.
pub(super) fn lease_of(document: &Document) -> Option<LeaseId> {
    document.get(LEASE_ID).and_then(lease_in_value)
}

/// `value` as a lease id, if it is one this crate wrote (a 16-byte binary).
fn lease_in_value(value: &Bson) -> Option<LeaseId> {
    match value {
        Bson::Binary(binary) => {
            let bytes: [u8; 16] = binary.bytes.as_slice().try_into().ok()?;
            Some(LeaseId::from_uuid(uuid::Uuid::from_bytes(bytes)))
        }
        _ => None,
    }
}

/// The leases the last forced release of `document` cleared, from its trace: a mutex's
/// `forcedRelease.leaseId`, a shared record's `forcedRelease.holders[].lease`. Empty without
/// a trace, or with one written before traces named the lease.
pub(super) fn forced_leases(document: &Document) -> HashSet<LeaseId> {
    let Ok(forced) = document.get_document(FORCED_RELEASE) else {
        return HashSet::new();
    };
    let entries = forced
        .get_array(HOLDERS)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let cleared_entries = entries
        .iter()
        .filter_map(Bson::as_document)
        .filter_map(|entry| entry.get(LEASE).and_then(lease_in_value));
    lease_of(forced)
        .into_iter()
        .chain(cleared_entries)
        .collect()
}

/// Reads the answer of the acquire `findAndModify`: ours iff the stored lease id is the one
/// we sent. A refusal that listed `listed`'s holder (with its `retry_within`) on the line
/// says how long the lease had left, by the server's clock the place was stamped with.
pub(super) fn acquire_outcome(
    document: Document,
    lease: LeaseId,
    listed: Option<(&str, Duration)>,
) -> Result<AcquireOutcome, StoreError> {
    if document.get(LEASE_ID) == Some(&lease_value(lease)) {
        return Ok(AcquireOutcome::acquired(granted_token(&document)?));
    }
    let lease_left = listed
        .and_then(|(holder, retry_within)| line::placed_at(&document, holder, retry_within))
        .zip(document.get_datetime(EXPIRES_AT).ok())
        .map(|(now, expires)| {
            let left = expires.timestamp_millis().saturating_sub(now).max(0);
            Duration::from_millis(left.unsigned_abs())
        });
    Ok(AcquireOutcome::Busy {
        holder: holder(&document),
        lease_left,
    })
}

/// Reads the answer of the release `findAndModify` (the document after the update):
/// `None` means the owner check matched nothing.
pub(super) fn release_outcome(after: Option<Document>) -> ReleaseOutcome {
    match after {
        None => ReleaseOutcome::NotOwner,
        Some(document) => ReleaseOutcome::Released {
            contended_for: last_contended(&document),
        },
    }
}

/// Reads the answer of the forced-release `findAndModify` (the document after the update):
/// the grant that was cleared, as it stood at the server's `$$NOW` of the release. `None`
/// means nothing held the lock, and nothing was written.
pub(super) fn forced_release_record(
    after: Option<Document>,
) -> Result<Option<LockRecord>, StoreError> {
    let Some(document) = after else {
        return Ok(None);
    };
    let forced = document
        .get_document(FORCED_RELEASE)
        .map_err(|_| malformed(&document, "a forced release left no forcedRelease record"))?;
    let (Ok(at), Ok(expires), Some(holder)) = (
        forced.get_datetime(FORCED_AT),
        forced.get_datetime(FORCED_EXPIRES_AT),
        holder(forced),
    ) else {
        return Err(malformed(
            &document,
            "the forcedRelease record is incomplete",
        ));
    };
    let left_ms = expires
        .timestamp_millis()
        .saturating_sub(at.timestamp_millis());
    let record = LockRecord::held(
        holder,
        grant_token(&document)?,
        Duration::from_millis(left_ms.max(0).unsigned_abs()),
    );
    Ok(Some(match last_contended(&document) {
        Some(waited) => record.with_contended_for(waited),
        None => record,
    }))
}

/// Reads the document a hand-over to `lease` returned.
pub(super) fn hand_over_outcome(
    after: Option<Document>,
    lease: LeaseId,
    in_arrival_order: bool,
) -> Result<HandOverOutcome, StoreError> {
    let Some(document) = after else {
        return Ok(HandOverOutcome::NotOwner);
    };
    if in_arrival_order && matches!(document.get(LEASE_ID), Some(Bson::Null)) {
        // An earlier waiter elsewhere goes first: the lock was released instead.
        return Ok(HandOverOutcome::Released {
            contended_for: last_contended(&document),
        });
    }
    if document.get(LEASE_ID) != Some(&lease_value(lease)) {
        return Err(malformed(
            &document,
            "a hand-over did not write the new lease",
        ));
    }
    Ok(HandOverOutcome::HandedOver {
        token: granted_token(&document)?,
        contended_for: last_contended(&document),
    })
}

/// The token of a grant the caller just received (never 0).
fn granted_token(document: &Document) -> Result<u64, StoreError> {
    match grant_token(document)? {
        0 => Err(malformed(document, "a granted lock has no fencing token")),
        token => Ok(token),
    }
}

/// The token of the record's current (or last) grant: [`GRANTED_TOKEN`], or on a record
/// written by a version that reserves no block, [`TOKEN`]; 0 when neither is there.
fn grant_token(document: &Document) -> Result<u64, StoreError> {
    if document.contains_key(GRANTED_TOKEN) {
        token(document, GRANTED_TOKEN)
    } else {
        token(document, TOKEN)
    }
}

/// How long others had waited, as the last release or hand-over computed it.
fn last_contended(document: &Document) -> Option<Duration> {
    match document.get(LAST_CONTENDED_MS) {
        Some(Bson::Int64(ms)) => Some(Duration::from_millis((*ms).max(0).unsigned_abs())),
        Some(Bson::Int32(ms)) => Some(Duration::from_millis(i64::from(*ms).max(0).unsigned_abs())),
        _ => None,
    }
}

/// Reads the inspect result (the document plus the server's `$$NOW`).
pub(super) fn lock_record(document: &Document) -> Result<LockRecord, StoreError> {
    let token = grant_token(document)?;
    let now = match document.get(SERVER_NOW) {
        Some(Bson::DateTime(now)) => now.timestamp_millis(),
        _ => return Err(malformed(document, "the server did not report $$NOW")),
    };
    let kind = record_kind(document)?;
    if kind.is_shared() {
        return shared_record(document, kind, now);
    }
    let lease_present = !matches!(document.get(LEASE_ID), None | Some(Bson::Null));
    let remaining_ms = match document.get(EXPIRES_AT) {
        Some(Bson::DateTime(expires)) => expires.timestamp_millis().saturating_sub(now),
        _ => 0,
    };
    let held = lease_present && remaining_ms > 0;
    let contended_ms = match document.get(CONTENDED_AT) {
        Some(Bson::DateTime(since)) if held => Some(now.saturating_sub(since.timestamp_millis())),
        _ => None,
    };
    let mut record = match holder(document).filter(|_| held) {
        Some(holder) => LockRecord::held(
            holder,
            token,
            Duration::from_millis(remaining_ms.unsigned_abs()),
        ),
        None => LockRecord::free(token),
    };
    record.contended_for = contended_ms.map(|ms| Duration::from_millis(ms.max(0).unsigned_abs()));
    Ok(record.with_queue(super::line::queue(document, kind)))
}

/// The value [`KIND`] has for `kind`; `None` for a mutex, whose document has no kind.
pub(super) fn kind_value(kind: LockKind) -> Option<&'static str> {
    match kind {
        LockKind::Semaphore { .. } => Some(SEMAPHORE),
        LockKind::ReadWrite => Some(RWLOCK),
        _ => None,
    }
}

/// The kind of lock `document` records: a mutex when it has no [`KIND`].
pub(super) fn record_kind(document: &Document) -> Result<LockKind, StoreError> {
    match document.get(KIND) {
        None | Some(Bson::Null) => Ok(LockKind::Mutex),
        Some(Bson::String(kind)) if kind == RWLOCK => Ok(LockKind::ReadWrite),
        Some(Bson::String(kind)) if kind == SEMAPHORE => {
            let permits = match document.get(PERMITS).and_then(whole_number) {
                Some(permits) if (1..=i64::from(MAX_PERMITS)).contains(&permits) => permits,
                _ => return Err(malformed(document, "a semaphore without a valid count")),
            };
            let permits = u32::try_from(permits)
                .map_err(|_| malformed(document, "a semaphore without a valid count"))?;
            Ok(LockKind::Semaphore { permits })
        }
        Some(_) => Err(malformed(document, "an unknown kind of lock")),
    }
}

/// Whether a request of `asked` may be decided on the record `document` of kind `found`:
/// its kind, or a count the semaphore had before `set_permits` changed it.
pub(super) fn accepts(document: &Document, found: LockKind, asked: LockKind) -> bool {
    if found == asked {
        return true;
    }
    let (LockKind::Semaphore { .. }, LockKind::Semaphore { permits }) = (found, asked) else {
        return false;
    };
    document.get_array(RECOUNTED_FROM).is_ok_and(|counts| {
        counts
            .iter()
            .filter_map(whole_number)
            .any(|count| count == i64::from(permits))
    })
}

/// An integral number as a stored count or duration may be (Int32, Int64 or an integral
/// double, as a hand edit may leave it).
fn whole_number(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(number) => Some(i64::from(*number)),
        Bson::Int64(number) => Some(*number),
        Bson::Double(number) if number.fract() == 0.0 && number.abs() < 9.0e15 => {
            // Exact: an integral double below 2^53.
            #[allow(clippy::cast_possible_truncation)]
            Some(*number as i64)
        }
        _ => None,
    }
}

/// The holder entries of a shared record, in stored (grant) order; none when the field is
/// missing or null.
fn holder_entries(document: &Document) -> Result<Vec<&Document>, StoreError> {
    match document.get(HOLDERS) {
        None | Some(Bson::Null) => Ok(Vec::new()),
        Some(Bson::Array(entries)) => entries
            .iter()
            .map(|entry| {
                entry
                    .as_document()
                    .ok_or_else(|| malformed(document, "a holder entry is not a document"))
            })
            .collect(),
        Some(_) => Err(malformed(document, "holders is not an array")),
    }
}

/// Reads the answer of a shared acquisition's `findAndModify`: granted iff the returned
/// holders include the lease we sent, with the token of that entry; otherwise busy, told
/// the first holder.
///
/// `readers_of`: the requesting manager, for a read in arrival order, whose grant says
/// which of its other readers may share it (see [`line::readers_waited_over`]).
pub(super) fn shared_acquire_outcome(
    returned: Option<Document>,
    lease: LeaseId,
    (readers_of, placed): (Option<&str>, Option<(&str, Duration)>),
) -> Result<AcquireOutcome, StoreError> {
    let Some(document) = returned else {
        return Ok(AcquireOutcome::busy(None));
    };
    let entries = holder_entries(&document)?;
    let ours = lease_value(lease);
    if let Some(entry) = entries.iter().find(|entry| entry.get(LEASE) == Some(&ours)) {
        return match token(entry, TOKEN)? {
            0 => Err(malformed(
                &document,
                "a granted holder has no fencing token",
            )),
            token => Ok(AcquireOutcome::Acquired {
                token,
                // The entry's grant time is the `$$NOW` the line was judged at.
                readers_waited_over: readers_of.zip(entry.get_datetime(ACQUIRED_AT).ok()).map(
                    |(holder, granted_at)| {
                        line::readers_waited_over(&document, holder, *granted_at)
                    },
                ),
            }),
        };
    }
    // The holder whose lease ends first, by the server's clock its place was stamped with.
    let lease_left = placed
        .and_then(|(holder, retry_within)| line::placed_at(&document, holder, retry_within))
        .and_then(|now| {
            entries
                .iter()
                .filter_map(|entry| entry.get_datetime(EXPIRES_AT).ok())
                .map(|expires| expires.timestamp_millis().saturating_sub(now))
                .filter(|left| *left > 0)
                .min()
        })
        .map(|left| Duration::from_millis(left.unsigned_abs()));
    Ok(AcquireOutcome::Busy {
        holder: entries.first().and_then(|first| holder(first)),
        lease_left,
    })
}

/// Reads the answer of a shared hand-over's `findAndModify` (the record after it, which
/// matched only while the old lease held an unexpired place): handed over iff the holders
/// include `to`, with that entry's token; otherwise the old place was released and `to`
/// refused. `None`: the old lease held no place (or the kind differs), nothing written.
pub(super) fn shared_hand_over_outcome(
    after: Option<Document>,
    to: LeaseId,
) -> Result<Option<HandOverOutcome>, StoreError> {
    let Some(document) = after else {
        return Ok(None);
    };
    let contended_for = last_contended(&document);
    Ok(Some(
        match shared_acquire_outcome(Some(document), to, (None, None))? {
            AcquireOutcome::Acquired { token, .. } => HandOverOutcome::HandedOver {
                token,
                contended_for,
            },
            AcquireOutcome::Busy { .. } => HandOverOutcome::Released { contended_for },
        },
    ))
}

/// What the record of a shared hand-over whose `findAndModify` matched nothing says, read
/// back with the server's `$$NOW` (`found`): handed over after all if `to` holds a place
/// (the test server has answered an applied write with nothing), `NotOwner` if `from`
/// holds no unexpired place; `None` if it does (the request asked for another kind or
/// count, which the caller's release and attempt then answer).
pub(super) fn unmatched_hand_over(
    found: Option<&Document>,
    from: LeaseId,
    to: LeaseId,
) -> Result<Option<HandOverOutcome>, StoreError> {
    let Some(document) = found else {
        return Ok(Some(HandOverOutcome::NotOwner));
    };
    let now = match document.get(SERVER_NOW) {
        Some(Bson::DateTime(now)) => *now,
        _ => return Err(malformed(document, "the server did not report $$NOW")),
    };
    let entries = holder_entries(document)?;
    let place = |lease: LeaseId| {
        let lease = lease_value(lease);
        entries
            .iter()
            .find(|entry| entry.get(LEASE) == Some(&lease))
            .filter(|entry| matches!(entry.get(EXPIRES_AT), Some(Bson::DateTime(at)) if *at > now))
    };
    if let Some(entry) = place(to) {
        return Ok(Some(HandOverOutcome::HandedOver {
            token: token(entry, TOKEN)?,
            contended_for: None,
        }));
    }
    Ok(place(from).is_none().then_some(HandOverOutcome::NotOwner))
}

/// The lease ids listed in the array `field` of `document` (values that are not lease ids
/// are skipped: they cannot be any caller's).
pub(super) fn leases_in(document: &Document, field: &str) -> HashSet<LeaseId> {
    let Ok(values) = document.get_array(field) else {
        return HashSet::new();
    };
    values.iter().filter_map(lease_in_value).collect()
}

/// The holdings of `entries` unexpired at `now_ms` (server milliseconds), in order.
fn holdings(
    document: &Document,
    entries: &[&Document],
    kind: LockKind,
    now_ms: i64,
) -> Result<Vec<Holding>, StoreError> {
    let mut holdings = Vec::with_capacity(entries.len());
    for entry in entries {
        let expires_ms = match entry.get(EXPIRES_AT) {
            Some(Bson::DateTime(expires)) => expires.timestamp_millis(),
            _ => return Err(malformed(document, "a holder entry has no expiry")),
        };
        let left_ms = expires_ms.saturating_sub(now_ms);
        if left_ms <= 0 {
            continue;
        }
        let access = match (entry.get_str(ACCESS), kind) {
            (Ok(PERMIT), LockKind::Semaphore { permits }) => Access::Permit { permits },
            (Ok(READ), LockKind::ReadWrite) => Access::Read,
            (Ok(WRITE), LockKind::ReadWrite) => Access::Write,
            _ => {
                return Err(malformed(
                    document,
                    "a holder entry's access does not fit its kind",
                ));
            }
        };
        let Some(holder) = holder(entry) else {
            return Err(malformed(document, "a holder entry names no holder"));
        };
        holdings.push(Holding::new(
            holder,
            token(entry, TOKEN)?,
            access,
            Duration::from_millis(left_ms.unsigned_abs()),
        ));
    }
    Ok(holdings)
}

/// A shared record as inspection shows it at the server's `now_ms`: its unexpired holders in
/// grant order, the last grant's token, and how long others have waited while it is held.
fn shared_record(
    document: &Document,
    kind: LockKind,
    now_ms: i64,
) -> Result<LockRecord, StoreError> {
    let entries = holder_entries(document)?;
    let holders = holdings(document, &entries, kind, now_ms)?;
    let contended_ms = match document.get(CONTENDED_AT) {
        Some(Bson::DateTime(since)) if !holders.is_empty() => {
            Some(now_ms.saturating_sub(since.timestamp_millis()))
        }
        _ => None,
    };
    let mut record = LockRecord::shared(kind, grant_token(document)?, holders)
        .with_queue(super::line::queue(document, kind));
    record.contended_for = contended_ms.map(|ms| Duration::from_millis(ms.max(0).unsigned_abs()));
    Ok(record)
}

/// Reads the answer of a shared record's forced release (the document after it): the
/// holdings that were cleared, with the time each had left at the server's `$$NOW` of the
/// release. `None`: no shared record had an unexpired holder, and nothing was written.
pub(super) fn forced_shared_release_record(
    after: Option<Document>,
) -> Result<Option<LockRecord>, StoreError> {
    let Some(document) = after else {
        return Ok(None);
    };
    let kind = record_kind(&document)?;
    let forced = document
        .get_document(FORCED_RELEASE)
        .map_err(|_| malformed(&document, "a forced release left no forcedRelease record"))?;
    let at = forced
        .get_datetime(FORCED_AT)
        .map_err(|_| malformed(&document, "the forcedRelease record is incomplete"))?;
    let entries = holder_entries(forced)?;
    let cleared = holdings(&document, &entries, kind, at.timestamp_millis())?;
    let mut record = LockRecord::shared(kind, grant_token(&document)?, cleared);
    record.contended_for = last_contended(&document);
    Ok(Some(record))
}

/// The error for a request of `asked` on `name`, whose record is `found`.
pub(super) fn kind_mismatch(name: &LockName, found: LockKind, asked: LockKind) -> StoreError {
    StoreError::KindMismatch {
        name: name.as_str().to_owned(),
        found,
        asked,
    }
}

fn holder(document: &Document) -> Option<HolderId> {
    match document.get(HOLDER) {
        Some(Bson::String(holder)) => Some(HolderId::from_string(holder.clone())),
        _ => None,
    }
}

/// A stored token; 0 when the field is missing (a document written by someone else).
fn token(document: &Document, field: &str) -> Result<u64, StoreError> {
    match document.get(field) {
        None | Some(Bson::Null) => Ok(0),
        Some(Bson::Int64(token)) if *token >= 0 => Ok(token.unsigned_abs()),
        Some(Bson::Int32(token)) if *token >= 0 => Ok(u64::from(token.unsigned_abs())),
        Some(Bson::Double(token)) if *token >= 0.0 && token.fract() == 0.0 && *token < 9.0e18 => {
            // An integral, in-range double (a document edited by hand): exact as an integer.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Ok(*token as u64)
        }
        Some(_) => Err(malformed(
            document,
            "the fencing token is not a non-negative integer",
        )),
    }
}

fn malformed(document: &Document, what: &str) -> StoreError {
    let id = document
        .get(ID)
        .map_or_else(|| "?".to_owned(), std::string::ToString::to_string);
    StoreError::backend(format!("malformed lock document {id}: {what}"))
}

#[cfg(test)]
mod tests {
    use mongodb::bson::{DateTime, doc};

    use super::*;

    #[test]
    fn acquired_iff_the_returned_lease_is_ours() {
        let ours = LeaseId::new();
        let returned = doc! {
            ID: "a", LEASE_ID: lease_value(ours), HOLDER: "me", GRANTED_TOKEN: 7_i64, TOKEN: 22_i64,
        };
        assert_eq!(
            acquire_outcome(returned, ours, None).unwrap(),
            AcquireOutcome::acquired(7)
        );
        // Written by a version that reserves no block: its token is the grant's.
        let unreserved = doc! { ID: "a", LEASE_ID: lease_value(ours), HOLDER: "me", TOKEN: 7_i64 };
        assert_eq!(
            acquire_outcome(unreserved, ours, None).unwrap(),
            AcquireOutcome::acquired(7)
        );
        let theirs =
            doc! { ID: "a", LEASE_ID: lease_value(LeaseId::new()), HOLDER: "them", TOKEN: 7_i64 };
        assert_eq!(
            acquire_outcome(theirs, ours, None).unwrap(),
            AcquireOutcome::busy(Some(HolderId::from_string("them".into())))
        );
    }

    #[test]
    fn lease_ids_read_back_as_written() {
        let lease = LeaseId::new();
        assert_eq!(
            lease_of(&doc! { LEASE_ID: lease_value(lease) }),
            Some(lease)
        );
        assert_eq!(lease_of(&doc! { LEASE_ID: Bson::Null }), None);
    }

    fn entry(lease: LeaseId, holder: &str, token: i64, access: &str, expires: i64) -> Document {
        doc! {
            LEASE: lease_value(lease), HOLDER: holder, TOKEN: token, ACCESS: access,
            EXPIRES_AT: DateTime::from_millis(expires),
        }
    }

    #[test]
    fn a_shared_grant_is_ours_iff_our_lease_is_among_the_holders() {
        let (ours, theirs) = (LeaseId::new(), LeaseId::new());
        let returned = doc! {
            ID: "s", KIND: SEMAPHORE, PERMITS: 2_i64,
            HOLDERS: [entry(theirs, "them", 5, PERMIT, 9), entry(ours, "me", 21, PERMIT, 9)],
        };
        assert_eq!(
            shared_acquire_outcome(Some(returned.clone()), ours, (None, None)).unwrap(),
            AcquireOutcome::acquired(21)
        );
        assert_eq!(
            shared_acquire_outcome(Some(returned), LeaseId::new(), (None, None)).unwrap(),
            AcquireOutcome::busy(Some(HolderId::from_string("them".into())))
        );
        assert_eq!(
            shared_acquire_outcome(None, ours, (None, None)).unwrap(),
            AcquireOutcome::busy(None)
        );
    }

    /// Refused in line on a shared record, the answer says how long the unexpired holder
    /// whose lease ends first had left, by the server's clock its place was stamped with
    /// (its end minus the request's `retry_within`); an expired entry does not count, and
    /// without a place the clock is not known.
    #[test]
    fn a_shared_refusal_in_line_tells_the_first_lease_end() {
        let (me, retry_within) = ("me", Duration::from_millis(500));
        // Placed at 1 000 ms, so its place ends at 1 500 ms.
        let place = doc! { HOLDER: me, ACCESS: PERMIT, "arrival": DateTime::from_millis(900), "until": DateTime::from_millis(1_500) };
        let returned = doc! {
            ID: "s", KIND: SEMAPHORE, PERMITS: 2_i64,
            HOLDERS: [
                entry(LeaseId::new(), "a", 5, PERMIT, 4_000),
                entry(LeaseId::new(), "b", 21, PERMIT, 800),
                entry(LeaseId::new(), "c", 37, PERMIT, 2_500),
            ],
            "line": [place],
        };
        let refused = |placed| {
            shared_acquire_outcome(Some(returned.clone()), LeaseId::new(), (None, placed)).unwrap()
        };
        assert_eq!(
            refused(Some((me, retry_within))),
            AcquireOutcome::Busy {
                holder: Some(HolderId::from_string("a".into())),
                lease_left: Some(Duration::from_millis(1_500)),
            }
        );
        assert_eq!(
            refused(None),
            AcquireOutcome::busy(Some(HolderId::from_string("a".into())))
        );
    }

    /// A read granted in arrival order says how long the earliest live writer of another
    /// manager in line had waited at the grant (the entry's grant time): not its own place,
    /// not a reader's, not one that ended.
    #[test]
    fn a_read_in_line_is_told_how_long_the_earliest_writer_elsewhere_waited() {
        let ours = LeaseId::new();
        let at = |millis: i64| DateTime::from_millis(millis);
        let place = |holder: &str, access: &str, arrival: i64, until: i64| {
            doc! { HOLDER: holder, ACCESS: access, "arrival": at(arrival), "until": at(until) }
        };
        let mut granted = entry(ours, "me", 30, READ, 9_000);
        granted.insert(ACQUIRED_AT, at(1_000));
        let read = |line: Vec<Document>| {
            let returned = doc! {
                ID: "rw", KIND: RWLOCK, HOLDERS: [granted.clone()], "line": line,
            };
            shared_acquire_outcome(Some(returned), ours, (Some("me"), None)).unwrap()
        };
        let told = |waited: u64| AcquireOutcome::Acquired {
            token: 30,
            readers_waited_over: Some(Duration::from_millis(waited)),
        };
        assert_eq!(read(vec![]), told(0), "nobody in line");
        assert_eq!(
            read(vec![
                place("me", WRITE, 900, 2_000),
                place("them", READ, 920, 2_000),
                place("ended", WRITE, 930, 1_000),
                place("late", WRITE, 990, 2_000),
                place("early", WRITE, 960, 2_000),
            ]),
            told(40),
            "the earliest live writer of another manager"
        );
    }

    #[test]
    fn shared_records_show_unexpired_holders_in_grant_order() {
        let now = 1_000_000;
        let document = doc! {
            ID: "rw", KIND: RWLOCK, GRANTED_TOKEN: 48_i64, TOKEN: 63_i64,
            HOLDERS: [
                entry(LeaseId::new(), "gone", 16, READ, now - 1),
                entry(LeaseId::new(), "a", 32, READ, now + 2_000),
                entry(LeaseId::new(), "b", 48, READ, now + 5_000),
            ],
            CONTENDED_AT: DateTime::from_millis(now - 700),
            SERVER_NOW: DateTime::from_millis(now),
        };
        let record = lock_record(&document).unwrap();
        assert_eq!(record.kind, LockKind::ReadWrite);
        assert_eq!(record.token, 48);
        assert_eq!(
            record.holder().cloned(),
            Some(HolderId::from_string("a".into()))
        );
        assert_eq!(record.expires_in(), Some(Duration::from_secs(5)));
        assert_eq!(record.contended_for, Some(Duration::from_millis(700)));
        let seen: Vec<_> = record
            .holders
            .iter()
            .map(|holding| (holding.holder.as_str(), holding.token, holding.access))
            .collect();
        assert_eq!(seen, [("a", 32, Access::Read), ("b", 48, Access::Read)]);

        let semaphore = doc! {
            ID: "s", KIND: SEMAPHORE, PERMITS: 3_i32, SERVER_NOW: DateTime::from_millis(now),
        };
        assert_eq!(
            lock_record(&semaphore).unwrap(),
            LockRecord::shared(LockKind::Semaphore { permits: 3 }, 0, Vec::new())
        );
        for bad in [
            doc! { ID: "x", KIND: "queue", SERVER_NOW: DateTime::from_millis(now) },
            doc! { ID: "x", KIND: SEMAPHORE, PERMITS: 0_i64, SERVER_NOW: DateTime::from_millis(now) },
            doc! {
                ID: "x", KIND: SEMAPHORE, PERMITS: 2_i64, SERVER_NOW: DateTime::from_millis(now),
                HOLDERS: [entry(LeaseId::new(), "a", 1, READ, now + 1)],
            },
        ] {
            assert!(
                matches!(lock_record(&bad), Err(StoreError::Backend { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn records_use_the_server_clock() {
        let now = DateTime::from_millis(1_000_000);
        let held = doc! {
            ID: "a", LEASE_ID: lease_value(LeaseId::new()), HOLDER: "me", TOKEN: 9_i64,
            EXPIRES_AT: DateTime::from_millis(1_002_500), SERVER_NOW: now,
        };
        let record = lock_record(&held).unwrap();
        assert_eq!(
            record.holder().cloned(),
            Some(HolderId::from_string("me".into()))
        );
        assert_eq!(record.expires_in(), Some(Duration::from_millis(2500)));
        assert_eq!(record.token, 9);
        let released = doc! {
            ID: "a", LEASE_ID: Bson::Null, HOLDER: Bson::Null, TOKEN: 9_i64,
            EXPIRES_AT: now, SERVER_NOW: now,
        };
        let record = lock_record(&released).unwrap();
        assert_eq!(
            (record.holder(), record.expires_in(), record.token),
            (None, None, 9)
        );
        let bad = doc! { ID: "a", TOKEN: "nine", SERVER_NOW: now };
        assert!(matches!(lock_record(&bad), Err(StoreError::Backend { .. })));
    }
}
