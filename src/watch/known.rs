//! What a watch knows of one name: the grants it counts as held, and the change that
//! reports one's end.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::change::LockChange;
use crate::kind::LockKind;
use crate::name::LockName;
use crate::store::outcome::{Holding, LockRecord};
use crate::store::request::HolderId;

/// One grant the watcher counts as held.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) holder: Option<HolderId>,
    /// When its lease ends, on this process's clock.
    pub(super) ends_at: Instant,
}

impl Held {
    /// A holding as the store reported it at `now`.
    pub(super) fn of(holding: &Holding, now: Instant) -> Self {
        Self {
            holder: Some(holding.holder.clone()),
            ends_at: now + holding.expires_in,
        }
    }
}

/// What the watcher last knew of one name.
#[derive(Debug, Clone, Default)]
pub(super) struct Known {
    /// The record's kind as last read; `None` until a record was read (again, after a
    /// deletion: a name's kind may change only with its record).
    pub(super) kind: Option<LockKind>,
    /// The grants held, by token: one for a held mutex, one per permit or reader of a
    /// shared lock.
    pub(super) held: BTreeMap<u64, Held>,
    /// The last grant reported (0: none).
    pub(super) token: u64,
    /// Its holder: the holder of a grant whose event does not name one (the store only
    /// knows it is the same as the last grant's).
    pub(super) holder: Option<HolderId>,
}

impl Known {
    pub(super) fn from_record(record: Option<&LockRecord>, now: Instant) -> Self {
        let Some(record) = record else {
            return Self::default();
        };
        let held = record
            .holders
            .iter()
            .map(|holding| (holding.token, Held::of(holding, now)))
            .collect::<BTreeMap<_, _>>();
        let holder = match held.get(&record.token) {
            Some(last) => last.holder.clone(),
            None if record.kind.is_shared() => None,
            None => record.holder().cloned(),
        };
        Self {
            kind: Some(record.kind),
            held,
            token: record.token,
            holder,
        }
    }

    pub(super) fn is_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// Counts a new grant as held and as the last one reported; returns its change.
    pub(super) fn add(&mut self, name: &LockName, token: u64, held: Held) -> LockChange {
        self.token = token;
        self.holder.clone_from(&held.holder);
        let holder = held.holder.clone();
        self.held.insert(token, held);
        LockChange::Acquired {
            name: name.clone(),
            holder,
            token,
        }
    }
}

/// How a holding ended.
#[derive(Clone, Copy)]
pub(super) enum End {
    Released,
    ForceReleased,
    Expired,
}

impl End {
    /// A holding that ended before its lease ran out: an operator's forced release, or its
    /// holder's own.
    pub(super) fn let_go(forced: bool) -> Self {
        if forced {
            Self::ForceReleased
        } else {
            Self::Released
        }
    }
}

/// The change that reports the end of `name`'s grant `token`.
pub(super) fn ended(name: &LockName, holder: Option<HolderId>, token: u64, end: End) -> LockChange {
    let name = name.clone();
    match end {
        End::Released => LockChange::Released {
            name,
            holder,
            token,
        },
        End::ForceReleased => LockChange::ForceReleased {
            name,
            holder,
            token,
        },
        End::Expired => LockChange::Expired {
            name,
            holder,
            token,
        },
    }
}
