//! Clock offsets, for `mongolock doctor`. Leases are measured by the primary's clock
//! (`$$NOW`), so client clocks never matter; but after a failover the new primary's clock
//! measures the leases the old one granted, and one running ahead ends them early by the
//! difference, eating into the margin between a holder being told of a loss and the lease
//! expiring. Each member's clock is read with `hello` (`localTime`) over a direct connection
//! and compared with `$$NOW` on the primary; this host's clock is shown for reference.
//!
//! Each offset is taken from the quickest of a few exchanges, assuming the answer was
//! written halfway through it; it is uncertain by half that exchange's round trip.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mongodb::bson::{Bson, Document, doc};
use mongodb::options::{ClientOptions, ServerAddress};
use mongodb::{Client, Database};

use super::facts::bounded;

/// Exchanges per clock; the quickest one counts.
const EXCHANGES: usize = 3;

/// One clock against this host's: `offset` = its time − this host's, ± `uncertainty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) offset_ms: i64,
    pub(crate) uncertainty_ms: i64,
}

/// One member's clock against `$$NOW` (the primary's), or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberClock {
    pub(crate) host: String,
    pub(crate) against_now: Result<Reading, String>,
}

/// What the clocks showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clocks {
    /// `$$NOW` against this host's clock.
    pub(crate) now_against_host: Reading,
    pub(crate) members: Vec<MemberClock>,
}

fn millis_since_epoch(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The quickest of [`EXCHANGES`] readings of a server's clock, `read` returning its time in
/// milliseconds since the epoch.
async fn read_clock<F, Fut>(mut read: F) -> Result<Reading, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<i64, String>>,
{
    let mut best: Option<(Duration, Reading)> = None;
    for _ in 0..EXCHANGES {
        let (sent, started) = (SystemTime::now(), Instant::now());
        let server_ms = read().await?;
        let round_trip = started.elapsed();
        let halfway = millis_since_epoch(sent + round_trip / 2);
        let half_ms = i64::try_from(round_trip.as_millis() / 2).unwrap_or(i64::MAX);
        let reading = Reading {
            offset_ms: server_ms - halfway,
            // Dates have millisecond resolution: one more either way.
            uncertainty_ms: half_ms + 1,
        };
        if best.is_none_or(|(quickest, _)| round_trip < quickest) {
            best = Some((round_trip, reading));
        }
    }
    best.map(|(_, reading)| reading)
        .ok_or_else(|| "no exchange".to_owned())
}

fn date_millis(value: Option<&Bson>) -> Result<i64, String> {
    match value {
        Some(Bson::DateTime(date)) => Ok(date.timestamp_millis()),
        _ => Err("the answer has no date".to_owned()),
    }
}

/// `$$NOW` on the primary, through `database` (`$documents` needs MongoDB 5.1; on 5.0 the
/// primary's `hello` time stands in for it).
async fn server_now(database: &Database) -> Result<i64, String> {
    let pipeline = vec![
        doc! { "$documents": [{}] },
        doc! { "$project": { "now": "$$NOW" } },
    ];
    let command = doc! { "aggregate": 1, "pipeline": pipeline, "cursor": {} };
    match bounded(database.run_command(command)).await {
        Ok(reply) => {
            let first = reply
                .get_document("cursor")
                .and_then(|cursor| cursor.get_array("firstBatch"))
                .ok()
                .and_then(|batch| batch.first())
                .and_then(Bson::as_document)
                .cloned()
                .unwrap_or_default();
            date_millis(first.get("now"))
        }
        Err(_) => hello_time(&database.client().database("admin")).await,
    }
}

async fn hello_time(admin: &Database) -> Result<i64, String> {
    let reply: Document = bounded(admin.run_command(doc! { "hello": 1 })).await?;
    date_millis(reply.get("localTime"))
}

/// Reads `$$NOW` through `database` and the clock of each of `members` over a direct
/// connection made from `options`.
pub(crate) async fn read(
    database: &Database,
    options: &ClientOptions,
    members: &[String],
) -> Result<Clocks, String> {
    let now_against_host = read_clock(|| server_now(database)).await?;
    let mut clocks = Vec::with_capacity(members.len());
    for host in members {
        let against_now = match member_client(options, host) {
            Ok(client) => {
                let admin = client.database("admin");
                let reading = read_clock(|| hello_time(&admin)).await;
                client.shutdown().await;
                reading.map(|member| Reading {
                    offset_ms: member.offset_ms - now_against_host.offset_ms,
                    uncertainty_ms: member.uncertainty_ms + now_against_host.uncertainty_ms,
                })
            }
            Err(error) => Err(error),
        };
        clocks.push(MemberClock {
            host: host.clone(),
            against_now,
        });
    }
    Ok(Clocks {
        now_against_host,
        members: clocks,
    })
}

fn member_client(options: &ClientOptions, host: &str) -> Result<Client, String> {
    let mut direct = options.clone();
    direct.hosts = vec![ServerAddress::parse(host).map_err(|error| error.to_string())?];
    direct.direct_connection = Some(true);
    direct.repl_set_name = None;
    direct.server_selection_timeout = Some(super::facts::PROBE_TIMEOUT);
    Client::with_options(direct).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_quickest_exchange_counts() {
        let host_now = millis_since_epoch(SystemTime::now());
        let reading = read_clock(|| async move { Ok::<_, String>(host_now + 60_000) })
            .await
            .unwrap();
        assert!(
            (reading.offset_ms - 60_000).abs() <= reading.uncertainty_ms + 5,
            "{reading:?}"
        );
        let failing = read_clock(|| async { Err::<i64, _>("down".to_owned()) }).await;
        assert_eq!(failing, Err("down".to_owned()));
    }
}
