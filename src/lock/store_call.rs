//! Runs a store call off the actor's message loop: bounded by a timeout, panics caught,
//! the result delivered back to the actor as a message. A call the store answers without
//! waiting (the memory store's) costs no task.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::Duration;

use futures::FutureExt;
use ractor::{ActorRef, Message};
use tokio::time::Instant;

use super::cleanup::Cleanups;
use crate::error::StoreError;

/// A store call in flight, panics caught.
pub(crate) type Call<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

/// A store call started from an actor: answered already if the store could answer without
/// waiting (the memory store always can), else still running — to be awaited off the
/// actor's message loop.
pub(crate) enum Started<T> {
    Answered(Result<T, StoreError>),
    Running(Call<T>),
}

/// Starts `call` (polls it once) and says when it was sent: lease deadlines count from
/// that instant.
pub(crate) fn start<T: Send + 'static>(
    call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> (Instant, Started<T>) {
    let sent_at = Instant::now();
    let mut call: Call<T> = Box::pin(catch_panic(call));
    let started = match (&mut call).now_or_never() {
        Some(result) => Started::Answered(result),
        None => Started::Running(call),
    };
    (sent_at, started)
}

/// Runs `call` and sends `to_message(sent_at, result)` to `actor` when it ends: at once if
/// the store answered without waiting, otherwise from a task bounded by `timeout`, which
/// the manager's shutdown waits for (it frees a lease: `cleanups`).
///
/// The actor is never blocked: it keeps handling its deadline timer and requests while the
/// store call is in flight. If the actor is gone by then, the result is dropped.
pub(crate) fn spawn_store_call<T: Send + 'static, M: Message>(
    actor: &ActorRef<M>,
    cleanups: &Cleanups,
    timeout: Duration,
    call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    to_message: impl FnOnce(Instant, Result<T, StoreError>) -> M + Send + 'static,
) {
    // The actor may have stopped meanwhile (idle, shutdown): nobody needs the answer.
    match start(call) {
        (sent_at, Started::Answered(result)) => {
            let _ = actor.send_message(to_message(sent_at, result));
        }
        (sent_at, Started::Running(call)) => {
            let actor = actor.clone();
            cleanups.spawn(timeout, async move {
                let result = timed(timeout, call).await;
                let _ = actor.send_message(to_message(sent_at, result));
            });
        }
    }
}

/// Awaits `call` for at most `timeout`, turning panics into [`StoreError::Panicked`].
pub(crate) async fn bounded<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    timed(timeout, catch_panic(call)).await
}

/// Awaits `call` for at most `timeout`.
pub(crate) async fn timed<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let late = Err(StoreError::Timeout(timeout));
    tokio::time::timeout(timeout, call).await.unwrap_or(late)
}

/// `call`, with a panic inside it turned into [`StoreError::Panicked`].
pub(crate) async fn catch_panic<T>(
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match AssertUnwindSafe(call).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(StoreError::Panicked(panic_message(panic.as_ref()))),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store call that panics is an error carrying the panic's message, whatever its
    /// payload.
    #[tokio::test]
    async fn a_panicking_call_is_an_error_with_its_message() {
        let message = |panicked: Result<(), StoreError>| match panicked {
            Err(StoreError::Panicked(message)) => message,
            other => panic!("not a panic: {other:?}"),
        };
        let static_text = catch_panic(async { panic!("static text") }).await;
        assert_eq!(message(static_text), "static text");
        let id = 7;
        let formatted = catch_panic(async move { panic!("call {id} failed") }).await;
        assert_eq!(message(formatted), "call 7 failed");
        let other = catch_panic(async { std::panic::panic_any(42_u8) }).await;
        assert_eq!(message(other), "non-string panic payload");
    }
}
