//! The server check of `prepare`: the store's pipelines need MongoDB 5.0 (`$dateAdd`).

use mongodb::Database;
use mongodb::bson::{Bson, Document, doc};

use super::errors;
use crate::error::StoreError;

/// The wire version of MongoDB 5.0, the first with `$dateAdd`.
pub(super) const MIN_WIRE_VERSION: i64 = 13;

/// What `prepare` learns from the server's `hello` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServerInfo {
    /// Names the deployment (replica set name and members, or the server address): the part
    /// of the TTL index's "once per deployment, database and collection" key that tells two
    /// clusters apart.
    pub(super) deployment: String,
}

/// Asks the server for its wire version (`hello`, or `isMaster` on servers that predate it)
/// and fails with [`StoreError::Unsupported`] below MongoDB 5.0.
pub(super) async fn check(database: &Database) -> Result<ServerInfo, StoreError> {
    let reply = match database.run_command(doc! { "hello": 1 }).await {
        Ok(reply) => reply,
        Err(error) if errors::server_code(&error) == Some(59) => database
            .run_command(doc! { "isMaster": 1 })
            .await
            .map_err(|error| errors::backend("isMaster", error))?,
        Err(error) => return Err(errors::backend("hello", error)),
    };
    inspect_reply(&reply)
}

/// The pure part of [`check`], on a `hello` reply.
pub(super) fn inspect_reply(reply: &Document) -> Result<ServerInfo, StoreError> {
    let wire = match reply.get("maxWireVersion") {
        Some(Bson::Int32(v)) => i64::from(*v),
        Some(Bson::Int64(v)) => *v,
        _ => return Err(StoreError::Unsupported(
            "the server's hello reply has no maxWireVersion; MongoStore needs MongoDB 5.0 or newer"
                .to_owned(),
        )),
    };
    if wire < MIN_WIRE_VERSION {
        return Err(StoreError::Unsupported(format!(
            "MongoStore needs MongoDB 5.0 or newer (wire version {MIN_WIRE_VERSION}, for $dateAdd); \
             the server reports wire version {wire} ({})",
            release_of(wire)
        )));
    }
    Ok(ServerInfo {
        deployment: deployment(reply),
    })
}

fn release_of(wire: i64) -> &'static str {
    match wire {
        i64::MIN..=5 => "MongoDB 3.4 or older",
        6 => "MongoDB 3.6",
        7 => "MongoDB 4.0",
        8 => "MongoDB 4.2",
        9..=12 => "MongoDB 4.4",
        _ => "MongoDB 5.0 or newer",
    }
}

fn deployment(reply: &Document) -> String {
    let mut hosts: Vec<&str> = reply
        .get_array("hosts")
        .map(|hosts| hosts.iter().filter_map(Bson::as_str).collect())
        .unwrap_or_default();
    hosts.sort_unstable();
    match (reply.get_str("setName"), reply.get_str("me")) {
        (Ok(set), _) => format!("rs:{set}/{}", hosts.join(",")),
        (Err(_), Ok(me)) => format!("host:{me}"),
        _ => match reply.get_document("topologyVersion") {
            Ok(version) => format!(
                "process:{}",
                version.get("processId").unwrap_or(&Bson::Null)
            ),
            Err(_) => "unknown".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_servers_older_than_5_0() {
        let old = doc! { "isWritablePrimary": true, "maxWireVersion": 9 };
        match inspect_reply(&old) {
            Err(StoreError::Unsupported(message)) => {
                assert!(message.contains("MongoDB 5.0"), "{message}");
                assert!(message.contains("MongoDB 4.4"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            inspect_reply(&doc! {}),
            Err(StoreError::Unsupported(_))
        ));
        let ok = doc! { "maxWireVersion": 13_i64, "setName": "rs0", "hosts": ["b:1", "a:1"] };
        assert_eq!(inspect_reply(&ok).unwrap().deployment, "rs:rs0/a:1,b:1");
        let standalone = doc! { "maxWireVersion": 21, "me": "db:27017" };
        assert_eq!(
            inspect_reply(&standalone).unwrap().deployment,
            "host:db:27017"
        );
    }
}
