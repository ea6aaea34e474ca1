//! Mapping driver errors to [`StoreError`], and recognising the few server codes the store
//! treats specially.

use mongodb::error::{Error, ErrorKind, WriteFailure};

use crate::StoreError;

/// E11000: two upserts raced to insert one `_id`; the loser did not get the lock.
const DUPLICATE_KEY: i32 = 11000;
/// The user may not run the command (for example `createIndexes` on a read/write-only role).
const UNAUTHORIZED: i32 = 13;

/// The server error code carried by `error`, if any.
pub(super) fn server_code(error: &Error) -> Option<i32> {
    match error.kind.as_ref() {
        ErrorKind::Command(command) => Some(command.code),
        ErrorKind::Write(WriteFailure::WriteError(write)) => Some(write.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(concern)) => Some(concern.code),
        _ => None,
    }
}

/// Whether `error` is a duplicate-key error (a lost upsert race).
pub(super) fn is_duplicate_key(error: &Error) -> bool {
    server_code(error) == Some(DUPLICATE_KEY)
}

/// Whether `error` says the user lacks a privilege.
pub(super) fn is_unauthorized(error: &Error) -> bool {
    if server_code(error) == Some(UNAUTHORIZED) {
        return true;
    }
    match error.kind.as_ref() {
        ErrorKind::Command(command) => command.code_name == "Unauthorized",
        _ => false,
    }
}

/// A driver error as a (transient) backend error naming the operation.
pub(super) fn backend(operation: &str, error: &Error) -> StoreError {
    StoreError::Backend(format!("MongoDB {operation} failed: {error}"))
}
