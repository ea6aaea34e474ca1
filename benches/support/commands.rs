//! Command monitoring for mechanism checks: which commands a `mongodb::Client` sent, by
//! command name and collection, counted from the driver's `CommandStartedEvent`s.
//!
//! Self-contained (only `std` and `mongodb`), so a test can reuse it with
//! `#[path = "../benches/support/commands.rs"] mod commands;` and assert mechanisms such as
//! "renewing N leases took O(1) commands" without timing anything:
//!
//! ```ignore
//! let log = CommandLog::new();
//! let mut options = ClientOptions::parse(&uri).await?;
//! options.command_event_handler = Some(log.handler());
//! let client = Client::with_options(options)?;
//! // ... start a manager on `client`, hold N locks ...
//! let before = log.counts();
//! tokio::time::sleep(cadence * 3).await;
//! let renewals = log.counts().since(&before).named("update");
//! assert!(renewals <= 3 * 20);
//! ```
//!
//! Connection handshakes and server monitoring (`hello` heartbeats) are not command events,
//! so the counts are exactly the operations the application issued. [`CommandLog::capture`]
//! also records the full command documents, for replaying them elsewhere.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mongodb::bson::{Bson, Document};
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;

/// A command as counted: its name (`findAndModify`, `update`, …) and the collection it
/// targets (empty for database or admin commands such as `ping`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct CommandKey {
    pub(crate) name: String,
    pub(crate) collection: String,
}

/// Started commands counted per [`CommandKey`]; a snapshot, or a difference of two.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommandCounts(BTreeMap<CommandKey, u64>);

impl CommandCounts {
    /// Every command counted.
    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Commands named `name` (on any collection).
    pub(crate) fn named(&self, name: &str) -> u64 {
        self.0
            .iter()
            .filter(|(key, _)| key.name == name)
            .map(|(_, count)| count)
            .sum()
    }

    /// Commands on `collection` (any name).
    pub(crate) fn on(&self, collection: &str) -> u64 {
        self.0
            .iter()
            .filter(|(key, _)| key.collection == collection)
            .map(|(_, count)| count)
            .sum()
    }

    /// What was counted after `earlier` (a snapshot of the same log taken before).
    pub(crate) fn since(&self, earlier: &Self) -> Self {
        let mut diff = BTreeMap::new();
        for (key, count) in &self.0 {
            let before = earlier.0.get(key).copied().unwrap_or(0);
            if *count > before {
                diff.insert(key.clone(), count - before);
            }
        }
        Self(diff)
    }

    /// Adds another count (for example of a second client) to this one.
    pub(crate) fn add(&mut self, other: &Self) {
        for (key, count) in &other.0 {
            *self.0.entry(key.clone()).or_insert(0) += count;
        }
    }

    /// `(key, count)` pairs, sorted by key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&CommandKey, u64)> {
        self.0.iter().map(|(key, count)| (key, *count))
    }
}

impl fmt::Display for CommandCounts {
    /// `findAndModify×2, update×1` (commands named once per collection-less name).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
        for (key, count) in &self.0 {
            *by_name.entry(key.name.as_str()).or_insert(0) += count;
        }
        if by_name.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = by_name
            .iter()
            .map(|(name, count)| format!("{name}×{count}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

#[derive(Debug, Default)]
struct Inner {
    counts: CommandCounts,
    captured: Option<Vec<Document>>,
}

/// Counts every command started by the clients it is installed on (see the module docs).
/// Cheap to clone; clones share the counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandLog {
    inner: Arc<Mutex<Inner>>,
}

impl CommandLog {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The handler to put in `ClientOptions::command_event_handler`.
    pub(crate) fn handler(&self) -> EventHandler<CommandEvent> {
        let log = self.clone();
        EventHandler::callback(move |event| {
            if let CommandEvent::Started(started) = event {
                let key = CommandKey {
                    collection: collection_of(&started.command),
                    name: started.command_name,
                };
                let mut inner = log.lock();
                *inner.counts.0.entry(key).or_insert(0) += 1;
                if let Some(captured) = inner.captured.as_mut() {
                    captured.push(started.command);
                }
            }
        })
    }

    /// A snapshot of the counts so far.
    pub(crate) fn counts(&self) -> CommandCounts {
        self.lock().counts.clone()
    }

    /// Starts recording the full command documents (as sent: with `$db`, `lsid`, …).
    pub(crate) fn capture(&self) {
        self.lock().captured = Some(Vec::new());
    }

    /// Stops recording and returns what was recorded since [`capture`](Self::capture).
    pub(crate) fn take_captured(&self) -> Vec<Document> {
        self.lock().captured.take().unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while counting leaves the counts usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The collection a command targets: the string value of its first field
/// (`{findAndModify: "locks", …}`), or empty for commands that take a number (`{ping: 1}`).
pub(crate) fn collection_of(command: &Document) -> String {
    match command.iter().next() {
        Some((_, Bson::String(collection))) => collection.clone(),
        _ => String::new(),
    }
}
