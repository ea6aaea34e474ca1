//! The round trips `mongolock doctor` measures with the store's own commands, on a scratch
//! lock of its own that it deletes afterwards: acquire and release (the writes a lock costs,
//! at the store's write concern) and renewals of a held lease.

use std::time::{Duration, Instant};

use mongodb::bson::{Document, doc};
use mongolock::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, LeaseId, LeaseKey, LockStore,
};
use mongolock::{HolderId, LockName, MongoStore};

use super::facts::bounded;

/// Measured times of one kind of command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timings {
    sorted: Vec<Duration>,
}

impl Timings {
    pub(crate) fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self { sorted: samples }
    }

    /// The `percent`-th percentile (nearest rank); zero without samples.
    pub(crate) fn percentile(&self, percent: usize) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (percent * self.sorted.len()).div_ceil(100).max(1);
        self.sorted[rank.min(self.sorted.len()) - 1]
    }

    pub(crate) fn count(&self) -> usize {
        self.sorted.len()
    }
}

/// What the scratch lock measured.
#[derive(Debug, Clone)]
pub(crate) struct RoundTrips {
    /// Each acquire and each release.
    pub(crate) writes: Timings,
    /// Each renewal of the held lease.
    pub(crate) renewals: Timings,
}

/// Acquires and releases a scratch lock `samples` times, then holds it and renews it
/// `samples` times; deletes its record at the end, whatever happened.
pub(crate) async fn measure(
    store: &MongoStore,
    samples: usize,
    lease: Duration,
) -> Result<RoundTrips, String> {
    let name = LockName::new(format!(
        "mongolock-doctor-{}",
        uuid::Uuid::new_v4().simple()
    ))
    .map_err(|error| error.to_string())?;
    let measured = run(store, &name, samples, lease).await;
    let collection = store
        .database()
        .collection::<Document>(store.collection_name());
    let deleted = bounded(collection.delete_one(doc! { "_id": name.as_str() })).await;
    let measured = measured?;
    deleted.map_err(|error| format!("could not delete the scratch lock {name}: {error}"))?;
    Ok(measured)
}

async fn run(
    store: &MongoStore,
    name: &LockName,
    samples: usize,
    lease: Duration,
) -> Result<RoundTrips, String> {
    let holder = HolderId::generate();
    let timed = |started: Instant| started.elapsed();
    let mut writes = Vec::with_capacity(samples * 2);
    let mut held = None;
    for round in 0..=samples {
        let id = LeaseId::new();
        let request = AcquireRequest::new(name.clone(), id, holder.clone(), lease);
        let started = Instant::now();
        let outcome = within(store.try_acquire(&request)).await?;
        let took = timed(started);
        let AcquireOutcome::Acquired { .. } = outcome else {
            return Err(format!("the scratch lock {name} was held by someone else"));
        };
        // The last grant is kept for the renewals.
        if round == samples {
            held = Some(id);
            break;
        }
        writes.push(took);
        let started = Instant::now();
        within(store.release(&LeaseKey::new(name.clone(), id))).await?;
        writes.push(timed(started));
    }
    let Some(id) = held else {
        return Err("no lease to renew".to_owned());
    };
    let key = LeaseKey::new(name.clone(), id);
    let mut renewals = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        let outcome = within(store.extend(&ExtendRequest::new(key.clone(), lease))).await?;
        renewals.push(timed(started));
        if outcome != ExtendOutcome::Extended {
            return Err(format!(
                "the scratch lock {name} lost its lease while renewing"
            ));
        }
    }
    within(store.release(&key)).await?;
    Ok(RoundTrips {
        writes: Timings::new(writes),
        renewals: Timings::new(renewals),
    })
}

async fn within<T>(
    call: impl Future<Output = Result<T, mongolock::StoreError>>,
) -> Result<T, String> {
    match tokio::time::timeout(super::facts::PROBE_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.report()),
        Err(_) => Err("no answer within the probe timeout".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let ms = Duration::from_millis;
        let timings = Timings::new((1..=100).rev().map(ms).collect());
        assert_eq!(timings.percentile(50), ms(50));
        assert_eq!(timings.percentile(99), ms(99));
        assert_eq!(timings.percentile(100), ms(100));
        assert_eq!(Timings::new(vec![ms(7)]).percentile(99), ms(7));
        assert_eq!(Timings::new(Vec::new()).percentile(50), Duration::ZERO);
    }
}
