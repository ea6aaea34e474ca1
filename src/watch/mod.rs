//! Watching locks: [`LockWatch`], the stream of [`LockChange`]s a caller reads, and the task
//! that produces them (what it reports and what it costs: [`LockWatch`]). It needs only the
//! store and the vocabulary, not the lock runtime: it sees what every process writes, this
//! one's included, through the store.
//!
//! | file | holds |
//! |---|---|
//! | `change.rs` | [`LockChange`]: what happened to a watched lock |
//! | `stream.rs` | [`LockWatch`]: the stream a caller reads |
//! | `known.rs` | what the task knows of one name, and the change that reports a grant's end |
//! | `follower.rs` | the task: the first read, the feed or polling, lease ends, the difference a record makes |

mod change;
mod follower;
mod known;
mod stream;

pub use change::LockChange;
pub use stream::LockWatch;
