//! From what `mongolock doctor` read and measured to findings: pure, so each rule is tested
//! on its own.

use std::time::Duration;

use mongodb::bson::Document;
use mongolock::LockOptions;

use super::clocks::{Clocks, Reading};
use super::facts::{Facts, Topology, integer};
use super::finding::Finding;
use super::round_trips::RoundTrips;
use crate::cli::duration::show;

/// The wire version of MongoDB 5.0, the oldest the store supports.
const MIN_WIRE_VERSION: i64 = 13;
/// The driver's default heartbeat, when the URI sets none.
const DRIVER_HEARTBEAT: Duration = Duration::from_secs(10);
/// The longest driver heartbeat that keeps a step-down's stall short.
const QUICK_HEARTBEAT: Duration = Duration::from_secs(1);

/// Everything the findings are made from.
pub(crate) struct Observations<'a> {
    pub(crate) facts: &'a Facts,
    pub(crate) round_trips: &'a Result<RoundTrips, String>,
    pub(crate) clocks: &'a Result<Clocks, String>,
    pub(crate) lease: &'a LockOptions,
}

/// The findings, in the order they are shown.
pub(crate) fn findings(seen: &Observations<'_>) -> Vec<Finding> {
    let facts = seen.facts;
    vec![
        server_version(facts),
        topology(&facts.topology),
        change_streams(facts),
        write_concern(facts, seen.round_trips),
        journaling(facts),
        indexes(facts),
        shard_key(facts),
        start_check(facts),
        clocks(seen.clocks, seen.lease),
        driver_heartbeat(facts.uri_heartbeat),
        failover(facts, seen.lease),
        renewal_headroom(seen.round_trips, seen.lease),
    ]
}

fn server_version(facts: &Facts) -> Finding {
    const CHECK: &str = "server version";
    let version = facts.version.as_deref().unwrap_or("unknown version");
    match facts.wire_version {
        Some(wire) if wire >= MIN_WIRE_VERSION => {
            Finding::ok(CHECK, format!("{version} (wire version {wire})"))
        }
        Some(wire) => Finding::problem(
            CHECK,
            format!("{version} (wire version {wire}): older than MongoDB 5.0"),
            "upgrade to MongoDB 5.0 or newer (the lock pipelines need $dateAdd)",
        ),
        None => Finding::problem(
            CHECK,
            format!("{version}: hello reports no wire version"),
            "point mongolock at MongoDB 5.0 or newer",
        ),
    }
}

fn topology(topology: &Topology) -> Finding {
    const CHECK: &str = "topology";
    match topology {
        Topology::Sharded => Finding::ok(CHECK, "sharded cluster, through mongos"),
        Topology::Standalone => Finding::warning(
            CHECK,
            "standalone server: no failover, no change streams",
            "run a replica set in production (even a one-member set enables change streams)",
        ),
        Topology::ReplicaSet {
            name,
            members,
            arbiters,
            primary,
        } => {
            let primary = primary.as_deref().unwrap_or("none");
            let seen = format!(
                "replica set {name}: {} data-bearing member(s){}, primary {primary}",
                members.len(),
                if *arbiters > 0 {
                    format!(" and {arbiters} arbiter(s)")
                } else {
                    String::new()
                }
            );
            if members.len() == 1 {
                Finding::warning(
                    CHECK,
                    format!("{seen}: no failover; losing the server loses every lease"),
                    "run three data-bearing members in production",
                )
            } else if members.len() == 2 {
                Finding::warning(
                    CHECK,
                    format!("{seen}: a majority needs both, so either one down stops every grant"),
                    "add a third data-bearing member",
                )
            } else if *arbiters > 0 {
                Finding::warning(
                    CHECK,
                    seen,
                    "replace arbiters with data-bearing members: with a data-bearing member down, \
                     majority writes (every grant) wait until it is back",
                )
            } else {
                Finding::ok(CHECK, seen)
            }
        }
    }
}

fn change_streams(facts: &Facts) -> Finding {
    const CHECK: &str = "change streams";
    match &facts.change_streams {
        Ok(()) => Finding::ok(
            CHECK,
            "available: a release wakes waiting processes at once",
        ),
        Err(error) => Finding::warning(
            CHECK,
            format!(
                "unavailable ({error}): waiting processes notice a release at their next retry, \
                 within their retry backoff"
            ),
            "run a replica set, and let the user read the lock collection (find covers \
             changeStream)",
        ),
    }
}

fn write_concern(facts: &Facts, round_trips: &Result<RoundTrips, String>) -> Finding {
    const CHECK: &str = "write concern";
    let timing = match round_trips {
        Ok(measured) => format!(
            "; acquire/release round trip p50 {}, p99 {} ({} writes)",
            show_precise(measured.writes.percentile(50)),
            show_precise(measured.writes.percentile(99)),
            measured.writes.count()
        ),
        Err(_) => String::new(),
    };
    let concern = &facts.write_concern;
    if facts.write_concern_majority {
        return Finding::ok(
            CHECK,
            format!("{concern}: a grant survives a failover{timing}"),
        );
    }
    match facts.topology {
        Topology::Standalone => Finding::ok(CHECK, format!("{concern} (standalone){timing}")),
        _ => Finding::problem(
            CHECK,
            format!(
                "{concern}: a failover can forget an acknowledged grant and hand the lock out \
                 twice{timing}"
            ),
            "use write concern majority (MongoStore's default)",
        ),
    }
}

fn journaling(facts: &Facts) -> Finding {
    const CHECK: &str = "journaling";
    let engine = match &facts.storage_engine {
        Ok((name, true)) => name.clone(),
        Ok((name, false)) => {
            return Finding::problem(
                CHECK,
                format!("storage engine {name} does not persist: a restart forgets every lease"),
                "use the WiredTiger storage engine",
            );
        }
        Err(error) => format!("storage engine unknown ({error})"),
    };
    match &facts.replica_set_config {
        None => Finding::ok(CHECK, format!("{engine}, persistent")),
        Some(Ok(config)) if config.majority_journaled => Finding::ok(
            CHECK,
            format!("{engine}; majority writes are journaled before they are acknowledged"),
        ),
        Some(Ok(_)) => Finding::warning(
            CHECK,
            format!(
                "{engine}; writeConcernMajorityJournalDefault is false: a grant is acknowledged \
                 before it is journaled, and lost if the majority crashes together"
            ),
            "rs.reconfig with writeConcernMajorityJournalDefault: true",
        ),
        Some(Err(error)) => Finding::warning(
            CHECK,
            format!("{engine}; the replica set configuration could not be read ({error})"),
            "run doctor as a user with the clusterMonitor role to check journaling and election \
             timing",
        ),
    }
}

fn is_ttl_on_expiry(index: &Document) -> bool {
    let on_expiry = index
        .get_document("key")
        .is_ok_and(|key| key.len() == 1 && key.contains_key("expiresAt"));
    on_expiry && index.contains_key("expireAfterSeconds")
}

fn indexes(facts: &Facts) -> Finding {
    const CHECK: &str = "indexes";
    match &facts.indexes {
        Err(error) => Finding::warning(
            CHECK,
            format!("could not list the lock collection's indexes ({error})"),
            "let the user run listIndexes on the lock collection",
        ),
        Ok(None) => Finding::ok(
            CHECK,
            "the lock collection does not exist yet: the first manager creates it and its TTL index",
        ),
        Ok(Some(indexes)) => {
            let names: Vec<&str> = indexes
                .iter()
                .filter_map(|index| index.get_str("name").ok())
                .collect();
            match indexes.iter().find(|index| is_ttl_on_expiry(index)) {
                Some(ttl) => {
                    let after = integer(ttl.get("expireAfterSeconds")).unwrap_or(0);
                    Finding::ok(
                        CHECK,
                        format!(
                            "{}: _id serves every lock operation and renewal; the TTL index \
                             removes records {after} s after their lease ended",
                            names.join(", ")
                        ),
                    )
                }
                None => Finding::warning(
                    CHECK,
                    format!(
                        "{}: no TTL index on expiresAt, so records of locks no longer used stay \
                         (harmless: correctness never depends on it)",
                        names.join(", ")
                    ),
                    "start a manager as a user allowed to createIndex (it creates expiresAt_ttl), \
                     or create {expiresAt: 1} with expireAfterSeconds: 0",
                ),
            }
        }
    }
}

fn shard_key(facts: &Facts) -> Finding {
    const CHECK: &str = "shard key";
    let sharded = facts.topology == Topology::Sharded;
    match (&facts.shard_key, sharded) {
        (Ok(None), false) => Finding::ok(CHECK, "not a sharded cluster"),
        (Ok(None), true) => Finding::ok(
            CHECK,
            "the lock collection is unsharded: it lives on its database's primary shard",
        ),
        (Ok(Some(key)), _) => match &facts.start_check {
            Err(error) => Finding::problem(CHECK, format!("sharded on {key}"), error.clone()),
            Ok(()) => Finding::ok(
                CHECK,
                format!(
                    "sharded on {key}: each lock operation targets one shard; a renewal batch \
                     spans shards"
                ),
            ),
        },
        (Err(_), false) => Finding::ok(CHECK, "not a sharded cluster"),
        (Err(error), true) => Finding::warning(
            CHECK,
            format!("could not read config.collections ({error})"),
            "check with sh.status() that the lock collection is unsharded or sharded on _id",
        ),
    }
}

fn start_check(facts: &Facts) -> Finding {
    const CHECK: &str = "manager start";
    match &facts.start_check {
        Ok(()) => Finding::ok(
            CHECK,
            "a lock manager starts here (its server version and shard key checks pass)",
        ),
        Err(error) => Finding::problem(
            CHECK,
            format!("a lock manager refuses to start: {error}"),
            "fix what the message names",
        ),
    }
}

fn show_reading(reading: &Reading) -> String {
    format!("{:+} ms (±{})", reading.offset_ms, reading.uncertainty_ms)
}

fn clocks(clocks: &Result<Clocks, String>, lease: &LockOptions) -> Finding {
    const CHECK: &str = "clock offsets";
    let clocks = match clocks {
        Ok(clocks) => clocks,
        Err(error) => {
            return Finding::warning(
                CHECK,
                format!("could not read the clocks ({error})"),
                "check the members' clocks with NTP monitoring",
            );
        }
    };
    let margin = lease.loss_margin();
    let parts: Vec<String> = clocks
        .members
        .iter()
        .map(|member| match &member.against_now {
            Ok(reading) => format!("{} {}", member.host, show_reading(reading)),
            Err(error) => format!("{} unreadable ({error})", member.host),
        })
        .collect();
    let unreadable = clocks
        .members
        .iter()
        .any(|member| member.against_now.is_err());
    let worst_ms = clocks
        .members
        .iter()
        .filter_map(|member| member.against_now.as_ref().ok())
        .map(|reading| reading.offset_ms.abs() + reading.uncertainty_ms)
        .max()
        .unwrap_or(0);
    let members = if parts.is_empty() {
        String::new()
    } else {
        format!("members against $$NOW: {}; ", parts.join(", "))
    };
    let seen = format!(
        "{members}$$NOW against this host: {} (for reference: client clocks never matter)",
        show_reading(&clocks.now_against_host)
    );
    let worst = Duration::from_millis(u64::try_from(worst_ms).unwrap_or(u64::MAX));
    let fix = format!(
        "synchronise the members' clocks (NTP, chrony): after a failover a primary whose clock \
         runs ahead ends leases early by the difference, and a holder is told of a loss only \
         {} (lease − renew deadline) before its lease ends",
        show(margin)
    );
    if worst >= margin {
        Finding::problem(CHECK, seen, fix)
    } else if worst >= margin / 4 || unreadable {
        Finding::warning(CHECK, seen, fix)
    } else {
        Finding::ok(CHECK, seen)
    }
}

fn driver_heartbeat(uri_heartbeat: Option<Duration>) -> Finding {
    const CHECK: &str = "driver heartbeat";
    let fix = "add heartbeatFrequencyMS=500 to the application's connection string \
               (mongolock's own commands use 500 ms unless the URI sets it)";
    match uri_heartbeat {
        None => Finding::warning(
            CHECK,
            format!(
                "heartbeatFrequencyMS not set: the driver's default {} can mean as long without \
                 any lock operation after a primary steps down",
                show(DRIVER_HEARTBEAT)
            ),
            fix,
        ),
        Some(every) if every <= QUICK_HEARTBEAT => {
            Finding::ok(CHECK, format!("heartbeatFrequencyMS {}", show(every)))
        }
        Some(every) => Finding::warning(
            CHECK,
            format!(
                "heartbeatFrequencyMS {}: as long without any lock operation after a primary \
                 steps down",
                show(every)
            ),
            fix,
        ),
    }
}

/// The time between a renewal falling due and its holder being told of a loss.
fn renewal_window(lease: &LockOptions) -> Duration {
    lease
        .renew_deadline()
        .saturating_sub(lease.renew_interval())
}

fn lease_terms(lease: &LockOptions) -> String {
    format!(
        "lease {}: renewed every {}, a loss told {} after the last renewal",
        show(lease.lease_duration()),
        show(lease.renew_interval()),
        show(lease.renew_deadline())
    )
}

fn failover(facts: &Facts, lease: &LockOptions) -> Finding {
    const CHECK: &str = "failover";
    let window = renewal_window(lease);
    let config = match (&facts.topology, &facts.replica_set_config) {
        (Topology::Standalone, _) => {
            return Finding::ok(
                CHECK,
                "no failover (standalone): a restart ends the holds it outlasts",
            );
        }
        (Topology::Sharded, _) => {
            return Finding::ok(
                CHECK,
                "each shard fails over on its own: run doctor against the lock collection's \
                 shard to check its timing",
            );
        }
        (_, Some(Ok(config))) => config,
        (_, _) => {
            return Finding::warning(
                CHECK,
                "election timing unknown (the replica set configuration could not be read)",
                "run doctor as a user with the clusterMonitor role",
            );
        }
    };
    let heartbeat = facts.uri_heartbeat.unwrap_or(DRIVER_HEARTBEAT);
    let bound = config.election_timeout + heartbeat;
    let seen = format!(
        "a failover takes up to about {} (electionTimeoutMillis {} + driver heartbeat {}); \
         renewals have {} before a holder is told of a loss ({})",
        show(bound),
        show(config.election_timeout),
        show(heartbeat),
        show(window),
        lease_terms(lease)
    );
    if window > bound {
        Finding::ok(CHECK, format!("{seen}: holders keep their locks"))
    } else {
        Finding::warning(
            CHECK,
            format!("{seen}: holders lose their locks during a failover (told first, so safely)"),
            format!(
                "to ride failovers out, use a lease of at least {} (or a shorter \
                 electionTimeoutMillis and heartbeatFrequencyMS=500)",
                show((bound + Duration::from_secs(1)) * 3)
            ),
        )
    }
}

fn renewal_headroom(round_trips: &Result<RoundTrips, String>, lease: &LockOptions) -> Finding {
    const CHECK: &str = "renewal headroom";
    let measured = match round_trips {
        Ok(measured) => measured,
        Err(error) => {
            return Finding::problem(
                CHECK,
                format!("a scratch lock could not be acquired, renewed and released: {error}"),
                "fix what the message names: locks will not work until it does",
            );
        }
    };
    let window = renewal_window(lease);
    let p99 = measured.renewals.percentile(99);
    let seen = format!(
        "renewal round trip p50 {}, p99 {} ({} renewals) against a renewal window of {} ({})",
        show_precise(measured.renewals.percentile(50)),
        show_precise(p99),
        measured.renewals.count(),
        show(window),
        lease_terms(lease)
    );
    let fix = "lengthen the lease, or move the application closer to the primary";
    if p99 <= window / 10 {
        Finding::ok(CHECK, seen)
    } else if p99 <= window / 2 {
        Finding::warning(CHECK, seen, fix)
    } else {
        Finding::problem(CHECK, seen, fix)
    }
}

/// A round trip with sub-millisecond precision.
fn show_precise(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use mongodb::bson::doc;

    use super::super::clocks::MemberClock;
    use super::super::facts::ReplicaSetConfig;
    use super::super::finding::Status;
    use super::super::round_trips::Timings;
    use super::*;

    fn healthy() -> Facts {
        Facts {
            version: Ok("7.0.14".to_owned()),
            wire_version: Some(21),
            topology: Topology::ReplicaSet {
                name: "rs0".to_owned(),
                members: vec!["a:1".into(), "b:1".into(), "c:1".into()],
                arbiters: 0,
                primary: Some("a:1".to_owned()),
            },
            replica_set_config: Some(Ok(ReplicaSetConfig {
                majority_journaled: true,
                election_timeout: Duration::from_secs(10),
            })),
            storage_engine: Ok(("wiredTiger".to_owned(), true)),
            change_streams: Ok(()),
            indexes: Ok(Some(vec![
                doc! { "name": "_id_", "key": { "_id": 1 } },
                doc! { "name": "expiresAt_ttl", "key": { "expiresAt": 1 }, "expireAfterSeconds": 0 },
            ])),
            shard_key: Ok(None),
            start_check: Ok(()),
            write_concern: "majority".to_owned(),
            write_concern_majority: true,
            uri_heartbeat: Some(Duration::from_millis(500)),
        }
    }

    fn measured(renewal_ms: u64) -> RoundTrips {
        let ms = Duration::from_millis;
        RoundTrips {
            writes: Timings::new(vec![ms(2); 20]),
            renewals: Timings::new(vec![ms(renewal_ms); 20]),
        }
    }

    fn clocks(offset_ms: i64) -> Clocks {
        let reading = |offset_ms| Reading {
            offset_ms,
            uncertainty_ms: 1,
        };
        Clocks {
            now_against_host: reading(40),
            members: vec![
                MemberClock {
                    host: "a:1".into(),
                    against_now: Ok(reading(0)),
                },
                MemberClock {
                    host: "b:1".into(),
                    against_now: Ok(reading(offset_ms)),
                },
            ],
        }
    }

    /// Each check's status for `facts`, renewals taking `renewal_ms` (`None`: the scratch
    /// lock failed), member b's clock `offset_ms` off, and `lease`.
    fn statuses(
        facts: &Facts,
        renewal_ms: Option<u64>,
        offset_ms: i64,
        lease: &LockOptions,
    ) -> Vec<(&'static str, Status)> {
        let round_trips = renewal_ms.map(measured).ok_or_else(|| "refused".to_owned());
        findings(&Observations {
            facts,
            round_trips: &round_trips,
            clocks: &Ok(clocks(offset_ms)),
            lease,
        })
        .into_iter()
        .map(|finding| (finding.check, finding.status))
        .collect()
    }

    fn status_of(facts: &Facts, renewal_ms: Option<u64>, offset_ms: i64, check: &str) -> Status {
        let lease = LockOptions::default().with_lease_duration(Duration::from_secs(15));
        let list = statuses(facts, renewal_ms, offset_ms, &lease);
        list.iter()
            .find(|(name, _)| *name == check)
            .map(|(_, status)| *status)
            .unwrap_or_else(|| panic!("no finding {check}"))
    }

    #[test]
    fn a_healthy_replica_set_with_a_long_lease_is_all_ok() {
        let lease = LockOptions::default().with_lease_duration(Duration::from_secs(60));
        let list = statuses(&healthy(), Some(3), 5, &lease);
        assert!(
            list.iter().all(|(_, status)| *status == Status::Ok),
            "{list:?}"
        );
    }

    #[test]
    fn each_rule_flags_its_own_fault() {
        let base = healthy();
        // A 15 s lease leaves a 5 s renewal window: a 10.5 s failover outlasts it.
        assert_eq!(status_of(&base, Some(3), 5, "failover"), Status::Warning);

        let mut old = base.clone();
        old.wire_version = Some(9);
        assert_eq!(
            status_of(&old, Some(3), 5, "server version"),
            Status::Problem
        );

        let mut weak = base.clone();
        weak.write_concern = "w: 1".to_owned();
        weak.write_concern_majority = false;
        assert_eq!(
            status_of(&weak, Some(3), 5, "write concern"),
            Status::Problem
        );

        let mut no_ttl = base.clone();
        no_ttl.indexes = Ok(Some(vec![doc! { "name": "_id_", "key": { "_id": 1 } }]));
        assert_eq!(status_of(&no_ttl, Some(3), 5, "indexes"), Status::Warning);

        let mut sharded = base.clone();
        sharded.topology = Topology::Sharded;
        sharded.shard_key = Ok(Some(doc! { "tenant": 1 }));
        sharded.start_check = Err("sharded on tenant".to_owned());
        assert_eq!(
            status_of(&sharded, Some(3), 5, "shard key"),
            Status::Problem
        );
        assert_eq!(
            status_of(&sharded, Some(3), 5, "manager start"),
            Status::Problem
        );

        // The margin of a 15 s lease is 5 s: 1.5 s of skew is a warning, 6 s a problem.
        assert_eq!(
            status_of(&base, Some(3), 1_500, "clock offsets"),
            Status::Warning
        );
        assert_eq!(
            status_of(&base, Some(3), -6_000, "clock offsets"),
            Status::Problem
        );

        // A 5 s renewal window: p99 600 ms is a warning, 3 s a problem.
        assert_eq!(
            status_of(&base, Some(600), 5, "renewal headroom"),
            Status::Warning
        );
        assert_eq!(
            status_of(&base, Some(3_000), 5, "renewal headroom"),
            Status::Problem
        );
        assert_eq!(
            status_of(&base, None, 5, "renewal headroom"),
            Status::Problem
        );

        let mut unset = base.clone();
        unset.uri_heartbeat = None;
        assert_eq!(
            status_of(&unset, Some(3), 5, "driver heartbeat"),
            Status::Warning
        );

        let mut standalone = base;
        standalone.topology = Topology::Standalone;
        standalone.replica_set_config = None;
        standalone.change_streams = Err("only supported on replica sets".to_owned());
        assert_eq!(
            status_of(&standalone, Some(3), 5, "topology"),
            Status::Warning
        );
        assert_eq!(
            status_of(&standalone, Some(3), 5, "change streams"),
            Status::Warning
        );
        assert_eq!(status_of(&standalone, Some(3), 5, "failover"), Status::Ok);
    }
}
