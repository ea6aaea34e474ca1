//! `mongolock doctor`: points at a deployment and says whether it is fit for locks and why,
//! one finding per line (ok, warning or problem, with the fix), as a table or JSON. The exit
//! code follows the worst finding: 2 for a problem, 0 otherwise, or 1 for a warning with
//! `--strict`. Deploy scripts gate on it, and a warning (no failover on a one-member replica
//! set, a slow heartbeat) leaves locks working and safe, so only `--strict` fails on one.
//!
//! It reads the server's own reports ([`facts`]), measures round trips with the store's own
//! commands on a scratch lock it deletes afterwards ([`round_trips`]), reads every member's
//! clock ([`clocks`]) and judges the lot against the lease the application will use
//! ([`judge`]). Besides the scratch lock it changes only what a starting lock manager would:
//! it creates the lock collection and asks for its TTL index.

mod clocks;
mod facts;
mod finding;
mod judge;
mod round_trips;

use std::time::SystemTime;

use mongodb::bson::doc;
use mongolock::LockOptions;
use serde_json::json;

use super::progress::Progress;
use super::signals::{Signals, interrupted};
use super::{CliError, ConnectionArgs, DoctorArgs, duration};
use facts::Topology;

/// Runs `mongolock doctor`; returns the exit code of the worst finding (a warning fails only
/// with `--strict`).
pub(super) async fn doctor(
    args: DoctorArgs,
    at: &ConnectionArgs,
    signals: &mut Signals,
    progress: Progress,
) -> Result<u8, CliError> {
    let connection = super::connect(at, signals, progress).await?;
    let lease = LockOptions::default().with_lease_duration(args.lease);
    let examined = tokio::select! {
        examined = examine(&connection, &lease, usize::from(args.samples), progress) => examined?,
        signal = signals.recv() => return Err(interrupted(signal)),
    };
    let findings = judge::findings(&judge::Observations {
        facts: &examined.facts,
        round_trips: &examined.round_trips,
        clocks: &examined.clocks,
        lease: &lease,
    });
    let store = &connection.store;
    let text = if args.json {
        let context = json!({
            "time": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            "uri": connection.endpoint.shown_uri,
            "database": store.database().name(),
            "collection": store.collection_name(),
            "lease_ms": u64::try_from(args.lease.as_millis()).unwrap_or(u64::MAX),
        });
        format!("{}\n", finding::to_json(context, &findings))
    } else {
        let header = format!(
            "mongolock doctor: {} · locks in {} · lease {}",
            connection.endpoint.shown_uri,
            connection.namespace(),
            duration::show(args.lease)
        );
        finding::render_table(&header, &findings)
    };
    print!("{text}");
    Ok(finding::worst(&findings).exit_code(args.strict))
}

/// What was read and measured.
struct Examined {
    facts: facts::Facts,
    round_trips: Result<round_trips::RoundTrips, String>,
    clocks: Result<clocks::Clocks, String>,
}

async fn examine(
    connection: &super::connect::Connection,
    lease: &LockOptions,
    samples: usize,
    progress: Progress,
) -> Result<Examined, CliError> {
    let store = &connection.store;
    let admin = store.database().client().database("admin");
    let hello = facts::bounded(admin.run_command(doc! { "hello": 1 }))
        .await
        .map_err(|reason| CliError::Unavailable {
            uri: connection.endpoint.shown_uri.clone(),
            reason,
        })?;
    progress.detail(format_args!("reading the deployment's configuration"));
    let facts = facts::read(store, &hello, connection.uri_heartbeat).await;
    progress.detail(format_args!(
        "measuring {samples} round trips of each kind on a scratch lock"
    ));
    let round_trips = round_trips::measure(store, samples, lease.lease_duration()).await;
    progress.detail(format_args!("reading the members' clocks"));
    let members = match &facts.topology {
        Topology::ReplicaSet { members, .. } => members.clone(),
        Topology::Standalone | Topology::Sharded => Vec::new(),
    };
    let clocks = clocks::read(store.database(), &connection.options, &members).await;
    Ok(Examined {
        facts,
        round_trips,
        clocks,
    })
}
