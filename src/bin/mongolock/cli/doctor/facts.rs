//! What `mongolock doctor` reads from the deployment: the server's own reports (`hello`,
//! `buildInfo`, `serverStatus`, `replSetGetConfig`), the lock collection's indexes and
//! sharding record, whether a change stream opens, and a manager's start check. Every read
//! is bounded by [`PROBE_TIMEOUT`]; one that fails is kept as its error, for the finding.

use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};
use mongodb::options::WriteConcern;
use mongodb::{Client, Collection};
use mongolock::MongoStore;
use mongolock::store::LockStore;

/// How long any one read may take.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The deployment's shape, from `hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Topology {
    Standalone,
    ReplicaSet {
        name: String,
        /// Data-bearing members (`hosts` and `passives`).
        members: Vec<String>,
        arbiters: usize,
        primary: Option<String>,
    },
    /// Connected through `mongos`.
    Sharded,
}

/// What the replica set's configuration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicaSetConfig {
    /// `writeConcernMajorityJournalDefault` (true when absent).
    pub(crate) majority_journaled: bool,
    /// `settings.electionTimeoutMillis` (10 s when absent).
    pub(crate) election_timeout: Duration,
}

/// Everything read, each item kept as its error when the read failed.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// `buildInfo.version`.
    pub(crate) version: Result<String, String>,
    /// `hello.maxWireVersion`.
    pub(crate) wire_version: Option<i64>,
    pub(crate) topology: Topology,
    /// `None` when not a replica set.
    pub(crate) replica_set_config: Option<Result<ReplicaSetConfig, String>>,
    /// `serverStatus.storageEngine`: its name and whether it persists.
    pub(crate) storage_engine: Result<(String, bool), String>,
    /// Opening a change stream on the lock collection.
    pub(crate) change_streams: Result<(), String>,
    /// The lock collection's indexes; `None` when the collection does not exist yet.
    pub(crate) indexes: Result<Option<Vec<Document>>, String>,
    /// The lock collection's shard key (from `config.collections`), if it is sharded.
    pub(crate) shard_key: Result<Option<Document>, String>,
    /// What a lock manager's start check (`prepare`) says.
    pub(crate) start_check: Result<(), String>,
    /// The store's write concern, described.
    pub(crate) write_concern: String,
    /// Whether the write concern waits for a majority.
    pub(crate) write_concern_majority: bool,
    /// `heartbeatFrequencyMS` as the URI sets it.
    pub(crate) uri_heartbeat: Option<Duration>,
}

/// Runs `probe` within [`PROBE_TIMEOUT`], as its result or the error in words.
pub(crate) async fn bounded<T>(
    probe: impl IntoFuture<Output = mongodb::error::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(PROBE_TIMEOUT, probe.into_future()).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(super::super::connect::describe(&error, PROBE_TIMEOUT)),
        Err(_) => Err(format!(
            "no answer within {}",
            super::super::duration::show(PROBE_TIMEOUT)
        )),
    }
}

/// Reads the facts; `hello` must answer (the connection was checked), the rest may fail.
pub(crate) async fn read(
    store: &MongoStore,
    hello: &Document,
    uri_heartbeat: Option<Duration>,
) -> Facts {
    let client = store.database().client();
    let admin = client.database("admin");
    let version = bounded(admin.run_command(doc! { "buildInfo": 1 }))
        .await
        .and_then(|info| {
            info.get_str("version")
                .map(str::to_owned)
                .map_err(|_| "buildInfo has no version".to_owned())
        });
    let topology = topology(hello);
    let replica_set_config = match topology {
        Topology::ReplicaSet { .. } => Some(
            bounded(admin.run_command(doc! { "replSetGetConfig": 1 }))
                .await
                .map(|reply| replica_set_config(&reply)),
        ),
        _ => None,
    };
    let storage_engine = bounded(admin.run_command(doc! { "serverStatus": 1 }))
        .await
        .and_then(|status| {
            let engine = status
                .get_document("storageEngine")
                .map_err(|_| "serverStatus has no storageEngine".to_owned())?;
            Ok((
                engine.get_str("name").unwrap_or("unknown").to_owned(),
                engine.get_bool("persistent").unwrap_or(true),
            ))
        });
    let collection: Collection<Document> = store.database().collection(store.collection_name());
    let change_streams = bounded(async { collection.watch().await.map(drop) }).await;
    let indexes = indexes(store).await;
    let namespace = format!("{}.{}", store.database().name(), store.collection_name());
    let shard_key = shard_key(client, &namespace).await;
    let start_check = match tokio::time::timeout(PROBE_TIMEOUT, store.prepare()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.report()),
        Err(_) => Err("no answer within the probe timeout".to_owned()),
    };
    let (write_concern, write_concern_majority) = describe_write_concern(store.write_concern());
    Facts {
        version,
        wire_version: wire_version(hello),
        topology,
        replica_set_config,
        storage_engine,
        change_streams,
        indexes,
        shard_key,
        start_check,
        write_concern,
        write_concern_majority,
        uri_heartbeat,
    }
}

pub(crate) fn wire_version(hello: &Document) -> Option<i64> {
    match hello.get("maxWireVersion") {
        Some(Bson::Int32(v)) => Some(i64::from(*v)),
        Some(Bson::Int64(v)) => Some(*v),
        _ => None,
    }
}

fn strings(document: &Document, key: &str) -> Vec<String> {
    document
        .get_array(key)
        .map(|values| {
            values
                .iter()
                .filter_map(Bson::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn topology(hello: &Document) -> Topology {
    if hello.get_str("msg") == Ok("isdbgrid") {
        return Topology::Sharded;
    }
    match hello.get_str("setName") {
        Ok(name) => {
            let mut members = strings(hello, "hosts");
            members.extend(strings(hello, "passives"));
            Topology::ReplicaSet {
                name: name.to_owned(),
                members,
                arbiters: strings(hello, "arbiters").len(),
                primary: hello.get_str("primary").ok().map(str::to_owned),
            }
        }
        Err(_) => Topology::Standalone,
    }
}

pub(crate) fn replica_set_config(reply: &Document) -> ReplicaSetConfig {
    let config = reply.get_document("config").ok();
    let majority_journaled = config
        .and_then(|config| config.get_bool("writeConcernMajorityJournalDefault").ok())
        .unwrap_or(true);
    let election_ms = config
        .and_then(|config| config.get_document("settings").ok())
        .and_then(|settings| integer(settings.get("electionTimeoutMillis")))
        .and_then(|ms| u64::try_from(ms).ok())
        .unwrap_or(10_000);
    ReplicaSetConfig {
        majority_journaled,
        election_timeout: Duration::from_millis(election_ms),
    }
}

/// A BSON number as a whole number (servers send settings as int32, int64 or double).
pub(crate) fn integer(value: Option<&Bson>) -> Option<i64> {
    match value {
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        // In range, so the cast keeps the value (rounded).
        #[allow(clippy::cast_possible_truncation)]
        Some(Bson::Double(n)) if n.is_finite() && n.abs() < 9.0e15 => Some(n.round() as i64),
        _ => None,
    }
}

async fn indexes(store: &MongoStore) -> Result<Option<Vec<Document>>, String> {
    let listed = bounded(
        store
            .database()
            .run_command(doc! { "listIndexes": store.collection_name() }),
    )
    .await;
    match listed {
        Ok(reply) => Ok(Some(
            reply
                .get_document("cursor")
                .and_then(|cursor| cursor.get_array("firstBatch"))
                .map(|batch| {
                    batch
                        .iter()
                        .filter_map(Bson::as_document)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        )),
        // NamespaceNotFound: nothing created the collection yet.
        Err(error)
            if error.contains("ns does not exist") || error.contains("NamespaceNotFound") =>
        {
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

async fn shard_key(client: &Client, namespace: &str) -> Result<Option<Document>, String> {
    let collections: Collection<Document> = client.database("config").collection("collections");
    let record = bounded(collections.find_one(doc! { "_id": namespace })).await?;
    Ok(record
        .filter(|record| record.get_bool("dropped") != Ok(true))
        .and_then(|record| record.get_document("key").ok().cloned()))
}

/// The write concern in words, and whether it waits for a majority.
pub(crate) fn describe_write_concern(concern: Option<&WriteConcern>) -> (String, bool) {
    use mongodb::options::Acknowledgment;
    let Some(concern) = concern else {
        return ("the server's default".to_owned(), false);
    };
    let (mut words, majority) = match &concern.w {
        Some(Acknowledgment::Majority) => ("majority".to_owned(), true),
        Some(Acknowledgment::Nodes(n)) => (format!("w: {n}"), false),
        Some(Acknowledgment::Custom(tag)) => (format!("w: {tag:?}"), false),
        None => ("the server's default w".to_owned(), false),
        Some(other) => (format!("{other:?}"), false),
    };
    if let Some(journal) = concern.journal {
        words.push_str(&format!(", j: {journal}"));
    }
    if let Some(timeout) = concern.w_timeout {
        words.push_str(&format!(
            ", wtimeout: {}",
            super::super::duration::show(timeout)
        ));
    }
    (words, majority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies_from_hello() {
        assert_eq!(topology(&doc! { "msg": "isdbgrid" }), Topology::Sharded);
        assert_eq!(
            topology(&doc! { "isWritablePrimary": true }),
            Topology::Standalone
        );
        let set = doc! {
            "setName": "rs0", "hosts": ["a:1", "b:1"], "passives": ["c:1"],
            "arbiters": ["d:1"], "primary": "a:1",
        };
        assert_eq!(
            topology(&set),
            Topology::ReplicaSet {
                name: "rs0".to_owned(),
                members: vec!["a:1".to_owned(), "b:1".to_owned(), "c:1".to_owned()],
                arbiters: 1,
                primary: Some("a:1".to_owned()),
            }
        );
    }

    #[test]
    fn replica_set_settings_with_their_defaults() {
        let config = doc! { "config": {
            "writeConcernMajorityJournalDefault": false,
            "settings": { "electionTimeoutMillis": 5000 },
        } };
        assert_eq!(
            replica_set_config(&config),
            ReplicaSetConfig {
                majority_journaled: false,
                election_timeout: Duration::from_secs(5),
            }
        );
        assert_eq!(
            replica_set_config(&doc! {}),
            ReplicaSetConfig {
                majority_journaled: true,
                election_timeout: Duration::from_secs(10),
            }
        );
    }

    #[test]
    fn write_concerns_in_words() {
        use mongodb::options::Acknowledgment;
        assert_eq!(
            describe_write_concern(Some(&WriteConcern::majority())),
            ("majority".to_owned(), true)
        );
        let one = WriteConcern::builder()
            .w(Acknowledgment::Nodes(1))
            .journal(true)
            .build();
        assert_eq!(
            describe_write_concern(Some(&one)),
            ("w: 1, j: true".to_owned(), false)
        );
    }
}
