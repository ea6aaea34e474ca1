//! The shortest tour of mongolock, on the embedded store (no server needed):
//! two "processes" (managers sharing one store) contend for a lock, tokens increase,
//! a timeout is honoured, and a deleted lock is reported lost to its holder.
//!
//! `cargo run --example quickstart`

use std::time::Duration;

use mongolock::{HolderId, LockError, LockManager, LockName, LockOptions, MemoryStore};

#[tokio::main]
async fn main() -> Result<(), LockError> {
    let store = MemoryStore::new();
    let options = LockOptions::default()
        .with_lease_duration(Duration::from_secs(3))
        .with_retry_backoff(Duration::from_millis(10), Duration::from_millis(100))
        .with_adaptive_backoff(true);
    let alice = LockManager::start(store.clone(), options.clone()).await?;
    let bob = LockManager::start(store.clone(), options).await?;
    println!(
        "alice is {}\nbob   is {}",
        alice.holder_id(),
        bob.holder_id()
    );

    let guard = alice.lock("orders")?.acquire().await?;
    println!("alice holds 'orders' with fencing token {}", guard.token());

    match bob
        .lock("orders")?
        .acquire_timeout(Duration::from_millis(200))
        .await
    {
        Err(LockError::Timeout(after)) => println!("bob gave up after {after:?}: alice holds it"),
        other => println!("unexpected: {other:?}"),
    }

    let bob_lock = bob.lock("orders")?;
    let waiting = bob_lock.acquire();
    let releasing = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        guard.release().await?;
        println!("alice released 'orders'");
        Ok::<(), LockError>(())
    };
    let (bob_guard, released) = tokio::join!(waiting, releasing);
    released?;
    let bob_guard = bob_guard?;
    println!(
        "bob acquired 'orders' with token {} (larger: fenced)",
        bob_guard.token()
    );

    if let Some(record) = bob.lock("orders")?.inspect().await? {
        println!(
            "inspect: holder={} token={} expires_in={:?}",
            record.holder().map(HolderId::as_str).unwrap_or_default(),
            record.token,
            record.expires_in()
        );
    }

    println!("an operator deletes the 'orders' record behind bob's back...");
    store.remove(&LockName::new("orders")?);
    let started = tokio::time::Instant::now();
    let reason = bob_guard.lost().await;
    println!("bob was told after {:?}: {reason}", started.elapsed());

    let third = alice.lock("orders")?.acquire().await?;
    println!(
        "alice re-acquired with token {} (still increasing)",
        third.token()
    );
    drop(third);

    alice.shutdown().await;
    bob.shutdown().await;
    println!("both managers shut down; every lock released");
    Ok(())
}
