//! Watching locks: [`LockWatch`], the stream of [`LockChange`]s a caller reads, and the task
//! that produces them. It needs only the store and the vocabulary, not the lock runtime:
//! it sees what every process writes, this one's included, through the store.
//!
//! The task reads the records of the watched names once, then follows the store's record
//! feed ([`LockStore::watch_records`]) where there is one — every grant, renewal, release and
//! deletion, in order — and polls [`LockStore::inspect`] every second where there is none.
//! A lease that runs out is no write, so expiry is noticed by the task itself: it keeps each
//! held lease's end (from the lease length the store reported, counted on this process's
//! clock from when it heard of the write) and, when that passes, asks the store whether the
//! lease is still held.
//!
//! A name's grants are kept by token: one for a held mutex, one per permit or reader of a
//! semaphore or reader/writer lock. A shared record's events do not say which holder left
//! or renewed, so after each of its grants and releases the task reads the record and
//! reports the difference, holder by holder.
//!
//! | file | holds |
//! |---|---|
//! | `change.rs` | [`LockChange`]: what happened to a watched lock |
//! | `stream.rs` | [`LockWatch`]: the stream a caller reads |
//! | `known.rs` | what the task knows of one name, and the change that reports a grant's end |
//! | `follower.rs` | the task: the first read, the feed or polling, lease ends, the difference a record makes |
//!
//! [`LockStore::watch_records`]: crate::store::LockStore::watch_records
//! [`LockStore::inspect`]: crate::store::LockStore::inspect

mod change;
mod follower;
mod known;
mod stream;

pub use change::LockChange;
pub use stream::LockWatch;
