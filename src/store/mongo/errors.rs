//! Mapping driver errors to [`StoreError`]: transient ones (the network, a primary stepping
//! down, a conflict) are retried by the runtime; permanent ones (an invalid namespace,
//! missing privileges, a value the server rejects) fail waiting callers at once. Either way
//! the driver's error stays reachable as the [`source`](std::error::Error::source).

use mongodb::error::{Error, ErrorKind, WriteFailure};

use crate::error::StoreError;

const DUPLICATE_KEY: i32 = 11000;
const UNAUTHORIZED: i32 = 13;

/// Server codes that pass with time: the node is not (or no longer) a writable primary,
/// is shutting down or recovering, the network failed, a limit or a conflict was hit.
const TRANSIENT_CODES: [i32; 22] = [
    6, 7, 24, 46, 50, 64, 89, 91, 112, 134, 189, 262, 9001, 10058, 10107, 11600, 11601, 11602,
    13435, 13436, 251, 202,
];

/// Labels the server or driver put on errors that are safe and worth retrying.
const TRANSIENT_LABELS: [&str; 4] = [
    "RetryableWriteError",
    "TransientTransactionError",
    "RetryableError",
    "SystemOverloadedError",
];

pub(super) fn server_code(error: &Error) -> Option<i32> {
    match error.kind.as_ref() {
        ErrorKind::Command(command) => Some(command.code),
        ErrorKind::Write(WriteFailure::WriteError(write)) => Some(write.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(concern)) => Some(concern.code),
        _ => None,
    }
}

pub(crate) fn is_duplicate_key(error: &Error) -> bool {
    server_code(error) == Some(DUPLICATE_KEY)
}

pub(super) fn is_unauthorized(error: &Error) -> bool {
    if server_code(error) == Some(UNAUTHORIZED) {
        return true;
    }
    match error.kind.as_ref() {
        ErrorKind::Command(command) => command.code_name == "Unauthorized",
        _ => false,
    }
}

/// Whether retrying the same command cannot succeed: a server error whose code is not a
/// known transient one, or a client-side configuration error.
pub(super) fn is_permanent(error: &Error) -> bool {
    if TRANSIENT_LABELS
        .iter()
        .any(|label| error.contains_label(label))
    {
        return false;
    }
    if let Some(code) = server_code(error) {
        return !TRANSIENT_CODES.contains(&code);
    }
    matches!(
        error.kind.as_ref(),
        ErrorKind::Authentication { .. }
            | ErrorKind::InvalidArgument { .. }
            | ErrorKind::InvalidTlsConfig { .. }
            | ErrorKind::IncompatibleServer { .. }
    )
}

/// The store error for a failed `operation`, classified, keeping `error` as its source.
pub(crate) fn backend(operation: &str, error: Error) -> StoreError {
    let message = format!("MongoDB {operation} failed");
    if is_permanent(&error) {
        StoreError::rejected_caused_by(message, error)
    } else {
        StoreError::backend_caused_by(message, error)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use mongodb::bson::doc;

    use super::*;

    fn command_error(code: i32, name: &str) -> Error {
        // The driver builds command errors from the server's reply; so do we.
        let reply = doc! { "ok": 0, "code": code, "codeName": name, "errmsg": "test" };
        let error: mongodb::error::CommandError =
            mongodb::bson::from_document(reply).expect("a command error reply");
        Error::from(ErrorKind::Command(error))
    }

    #[test]
    fn state_changes_and_network_errors_are_transient() {
        for (code, name) in [
            (91, "ShutdownInProgress"),
            (10107, "NotWritablePrimary"),
            (11600, "InterruptedAtShutdown"),
            (13435, "NotPrimaryNoSecondaryOk"),
            (189, "PrimarySteppedDown"),
        ] {
            let error = backend("acquire", command_error(code, name));
            assert!(error.is_transient(), "{code} {name}");
            assert!(error.source().is_some());
        }
        let io = Error::from(ErrorKind::Io(std::sync::Arc::new(std::io::Error::other(
            "reset",
        ))));
        assert!(backend("extend", io).is_transient());
    }

    #[test]
    fn refusals_are_permanent_and_keep_the_driver_error() {
        for (code, name) in [
            (73, "InvalidNamespace"),
            (13, "Unauthorized"),
            (2, "BadValue"),
        ] {
            let error = backend("acquire", command_error(code, name));
            assert!(!error.is_transient(), "{code} {name}");
            let source = error.source().expect("the driver error");
            assert!(source.to_string().contains(name), "{source}");
        }
    }
}
