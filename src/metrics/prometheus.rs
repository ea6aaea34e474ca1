//! A one-call Prometheus exporter for applications that do not install their own
//! (feature `prometheus`).

use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};

use super::{ACQUIRE_WAIT, HOLD_TIME, OTHERS_WAITED, STORE_OPERATION};

/// Buckets for lock waits and holds: from a millisecond (uncontended) to five minutes
/// (long critical sections, leadership terms).
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub const WAIT_AND_HOLD_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
];

/// Buckets for store round trips: half a millisecond (local server) to five seconds (a store
/// in trouble; calls are cut at the renew deadline anyway).
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub const STORE_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Installs `metrics-exporter-prometheus` as the global recorder, serving `/metrics` on
/// `listen`, with histogram buckets suited to lock waits, holds and store calls, and
/// registers the help texts of every mongolock metric. Call once, inside a Tokio runtime.
///
/// # Errors
///
/// The exporter's `BuildError` if the address cannot be bound or a recorder is already
/// installed.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// mongolock::metrics::install_prometheus_exporter(([127, 0, 0, 1], 9464).into())?;
/// // curl http://127.0.0.1:9464/metrics
/// # Ok(()) }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub fn install_prometheus_exporter(listen: SocketAddr) -> Result<(), BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(listen)
        .set_buckets_for_metric(
            Matcher::Full(ACQUIRE_WAIT.to_owned()),
            WAIT_AND_HOLD_BUCKETS,
        )?
        .set_buckets_for_metric(Matcher::Full(HOLD_TIME.to_owned()), WAIT_AND_HOLD_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full(OTHERS_WAITED.to_owned()),
            WAIT_AND_HOLD_BUCKETS,
        )?
        .set_buckets_for_metric(Matcher::Full(STORE_OPERATION.to_owned()), STORE_BUCKETS)?
        .install()?;
    super::describe();
    Ok(())
}
