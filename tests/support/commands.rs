//! Command monitoring: what a client sent, with a manager's release change stream apart.

use std::sync::{Arc, Mutex, PoisonError};

use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;

/// Records the name of every command a client sends (and those that failed); the release
/// change stream's commands are kept apart.
#[derive(Clone, Default)]
pub(crate) struct CommandLog {
    operations: Arc<Mutex<Vec<String>>>,
    change_stream: Arc<Mutex<Vec<String>>>,
    failed: Arc<Mutex<Vec<String>>>,
}

impl CommandLog {
    pub(crate) fn handler(&self) -> EventHandler<CommandEvent> {
        let log = self.clone();
        EventHandler::callback(move |event| match event {
            CommandEvent::Started(started) => {
                // The manager's release change stream (opened while it has waiters, then
                // long-polled with getMore) is background traffic, not part of any lock
                // operation.
                let change_stream = started.command_name == "getMore"
                    || (started.command_name == "aggregate"
                        && started.command.to_string().contains("$changeStream"));
                let list = if change_stream {
                    &log.change_stream
                } else {
                    &log.operations
                };
                lock(list).push(started.command_name);
            }
            CommandEvent::Failed(failed) => lock(&log.failed).push(failed.command_name),
            _ => {}
        })
    }

    /// The release change stream's commands so far.
    pub(crate) fn change_stream(&self) -> Vec<String> {
        lock(&self.change_stream).clone()
    }

    /// How many change-stream commands named `name` were sent so far.
    pub(crate) fn change_stream_count(&self, name: &str) -> usize {
        count(&self.change_stream, name)
    }

    /// The commands that failed so far.
    pub(crate) fn failed(&self) -> Vec<String> {
        lock(&self.failed).clone()
    }

    /// The lock operations' commands since the last call.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.operations))
    }

    /// How many lock-operation commands named `name` were sent so far (since the last
    /// [`take`](Self::take)).
    pub(crate) fn count(&self, name: &str) -> usize {
        count(&self.operations, name)
    }
}

fn lock(list: &Mutex<Vec<String>>) -> std::sync::MutexGuard<'_, Vec<String>> {
    list.lock().unwrap_or_else(PoisonError::into_inner)
}

fn count(list: &Mutex<Vec<String>>, name: &str) -> usize {
    lock(list).iter().filter(|command| *command == name).count()
}
