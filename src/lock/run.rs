//! Run a future while holding a lock: acquire, run the work with the guard at hand, stop
//! the work the moment the lock is lost, release — the lines every caller would otherwise
//! write around [`Lock::acquire`], done once.

use std::time::Duration;

use super::guard::LockGuard;
use super::handle::Lock;
use crate::error::LockError;

impl Lock {
    /// Acquires the lock (waiting as [`acquire`](Self::acquire) does), runs `work` with the
    /// [`LockGuard`] at hand, releases the lock when the work is done, and returns the work's
    /// output.
    ///
    /// If the lock is lost while the work runs, the work's future is dropped at once — at the
    /// holder's loss signal, which comes before anyone else can hold the lock — and the call
    /// returns [`LockError::Lost`] with the reason. Work that finished returns its output:
    /// it ran while the lock was held, even if the lock is lost or its release fails right
    /// after (a failed release is logged and the lease expires on its own). Still pass
    /// [`guard.token()`](LockGuard::token) to the resource the lock protects: dropping the
    /// future stops the work at its next `.await`, not a write already sent.
    ///
    /// The work is an async closure or async function taking `&LockGuard`:
    /// `async |guard| { … }`, or `|guard| { let token = guard.token(); async move { … } }`.
    /// Its output is returned as is, so a fallible work returns `Result<Result<_, E>, _>`.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire) when the lock could not be acquired (the work did not
    /// run); [`LockError::Lost`] if the lock was lost while the work ran (the work was
    /// stopped).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe. Dropping the returned future while it waits leaves nothing held (as
    /// [`acquire`](Self::acquire)); while the work runs, it drops the work and releases the
    /// lock in the background (as dropping a [`LockGuard`] does).
    ///
    /// ```
    /// use mongolock::{LockManager, LockOptions, MemoryStore};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("nightly-report")?;
    /// let written = lock
    ///     .run_locked(async |guard| {
    ///         // Write the report, fencing each write with guard.token().
    ///         format!("report written under token {}", guard.token())
    ///     })
    ///     .await?;
    /// assert!(written.starts_with("report written"));
    /// assert!(lock.try_acquire().await?.is_some(), "released when the work was done");
    /// # manager.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub async fn run_locked<T>(
        &self,
        work: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<T, LockError> {
        let guard = self.acquire().await?;
        hold_while(guard, work).await
    }

    /// Like [`run_locked`](Self::run_locked), giving up with [`LockError::Timeout`] if the
    /// lock is not acquired within `timeout`; the work then does not run. The timeout bounds
    /// the wait only: once acquired, the work runs until it finishes or the lock is lost.
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`] if the lock was not held within `timeout`; otherwise as
    /// [`run_locked`](Self::run_locked).
    ///
    /// # Cancel safety
    ///
    /// As [`run_locked`](Self::run_locked).
    ///
    /// ```
    /// use mongolock::{LockError, LockManager, LockOptions, MemoryStore};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
    /// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let lock = manager.lock("nightly-report")?;
    /// let _held = lock.acquire().await?;
    /// let second = lock
    ///     .run_locked_timeout(Duration::from_millis(50), async |_guard| unreachable!())
    ///     .await;
    /// assert!(matches!(second, Err(LockError::Timeout(_))));
    /// # Ok(()) }
    /// ```
    pub async fn run_locked_timeout<T>(
        &self,
        timeout: Duration,
        work: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<T, LockError> {
        let guard = self.acquire_timeout(timeout).await?;
        hold_while(guard, work).await
    }
}

/// Runs `work` until it finishes or `guard` reports a loss, then releases.
async fn hold_while<T>(
    guard: LockGuard,
    work: impl AsyncFnOnce(&LockGuard) -> T,
) -> Result<T, LockError> {
    let finished = {
        let work = work(&guard);
        tokio::select! {
            // The loss is looked at first: work that finishes in the same poll as a loss is
            // reported does not count as having run under the lock.
            biased;
            reason = guard.lost() => Err(reason),
            output = work => Ok(output),
        }
        // The work's future is dropped here, before the release or the error goes out.
    };
    match finished {
        Ok(output) => {
            let name = guard.name().clone();
            match guard.release().await {
                // Lost after the work finished: the loss signal comes before anyone else can
                // hold the lock, so the work did run exclusively.
                Ok(()) | Err(LockError::Lost(_)) => {}
                Err(error) => tracing::warn!(
                    lock = %name,
                    %error,
                    "could not release the lock after the work finished; its lease expires on its own"
                ),
            }
            Ok(output)
        }
        Err(reason) => {
            // A lost hold has nothing to release; `release` just disarms the guard.
            let _ = guard.release().await;
            Err(LockError::Lost(reason))
        }
    }
}
