//! Records of a lock kept in another database than the one a command looked in.
//!
//! An application that keeps its locks in `app` and an operator whose `mongolock` reads
//! `mongolock` (the URI names no database) see two different worlds: the lock the
//! application holds has no record where the tool looks. When a command finds no record of
//! a name, it asks the server which other databases have a collection of the same name with
//! a record of it, and says how to point at them. The look is read-only and bounded: one
//! `listDatabases` (only the databases the user may read), at most [`MAX_DATABASES`] of
//! them, one `find` each, all within [`LOOK_FOR`]; when the server refuses or is slow, the
//! command says nothing more than it would have.

use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::FindOptions;

use super::connect::Connection;
use super::progress::Progress;
use mongolock::LockName;

/// The most databases looked in; a deployment with more is a shared cluster where guessing
/// would cost more than it tells.
const MAX_DATABASES: usize = 64;

/// How long the whole look may take before the command goes on without it.
const LOOK_FOR: Duration = Duration::from_secs(2);

/// Databases that never hold locks.
const SYSTEM_DATABASES: [&str; 3] = ["admin", "config", "local"];

/// Another database whose collection of the same name has records the command looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sighting {
    /// The database.
    pub database: String,
    /// The names it has a record of, in the order asked (empty when asked for any record).
    pub names: Vec<String>,
}

/// The other databases that have a record of any of `names` in a collection named like
/// the connection's, by database name; with no names, those whose collection has any
/// record at all. Empty when none has, or when the server could not tell within
/// [`LOOK_FOR`] (said with `-v`).
pub(crate) async fn look(
    connection: &Connection,
    names: &[&LockName],
    progress: Progress,
) -> Vec<Sighting> {
    match tokio::time::timeout(LOOK_FOR, sightings(connection, names)).await {
        Ok(Ok(found)) => found,
        Ok(Err(error)) => {
            progress.detail(format_args!(
                "could not look for records in other databases: {}",
                super::connect::describe(&error, connection.endpoint.selection_timeout)
            ));
            Vec::new()
        }
        Err(_) => {
            progress.detail(format_args!(
                "did not look for records in other databases: no answer within {}",
                super::duration::show(LOOK_FOR)
            ));
            Vec::new()
        }
    }
}

async fn sightings(
    connection: &Connection,
    names: &[&LockName],
) -> Result<Vec<Sighting>, mongodb::error::Error> {
    let own = connection.store.database();
    let collection = connection.store.collection_name();
    let client = own.client();
    let mut databases = client
        .list_database_names()
        .authorized_databases(true)
        .await?;
    databases.retain(|database| {
        database != own.name() && !SYSTEM_DATABASES.contains(&database.as_str())
    });
    databases.sort();
    databases.truncate(MAX_DATABASES);
    let filter = if names.is_empty() {
        doc! {}
    } else {
        let ids: Vec<Bson> = names
            .iter()
            .map(|name| Bson::String(name.as_str().to_owned()))
            .collect();
        doc! { "_id": { "$in": ids } }
    };
    let limit = i64::try_from(names.len().max(1)).unwrap_or(i64::MAX);
    let options = FindOptions::builder()
        .projection(doc! { "_id": 1 })
        .limit(limit)
        .build();
    let looks = databases.into_iter().map(|database| {
        let records = client
            .database(&database)
            .collection::<Document>(collection);
        let (filter, options) = (filter.clone(), options.clone());
        async move {
            let found: Vec<Document> = records
                .find(filter)
                .with_options(options)
                .await?
                .try_collect()
                .await?;
            Ok::<_, mongodb::error::Error>((database, found))
        }
    });
    let mut found = Vec::new();
    for looked in futures::future::join_all(looks).await {
        let (database, records) = looked?;
        if records.is_empty() {
            continue;
        }
        let ids: Vec<&str> = records
            .iter()
            .filter_map(|record| record.get_str("_id").ok())
            .collect();
        let names = names
            .iter()
            .map(|name| name.as_str())
            .filter(|name| ids.contains(name))
            .map(str::to_owned)
            .collect();
        found.push(Sighting { database, names });
    }
    Ok(found)
}

/// The databases of `sightings` that have a record of `name`.
pub(crate) fn of<'a>(sightings: &'a [Sighting], name: &str) -> Vec<&'a str> {
    sightings
        .iter()
        .filter(|sighting| sighting.names.iter().any(|found| found == name))
        .map(|sighting| sighting.database.as_str())
        .collect()
}

/// What to tell about `databases` that have what was looked for in `collection`:
/// `app.distributed_locks has one: pass --database app`, or for several `app.distributed_locks
/// and jobs.distributed_locks have one: pass --database app (or jobs)`; `what` is `one` or
/// `records`. `None` when there are none.
pub(crate) fn pointer(databases: &[&str], collection: &str, what: &str) -> Option<String> {
    let (first, others) = databases.split_first()?;
    let places: Vec<String> = databases
        .iter()
        .map(|database| format!("{database}.{collection}"))
        .collect();
    let verb = if others.is_empty() { "has" } else { "have" };
    let also = if others.is_empty() {
        String::new()
    } else {
        format!(" (or {})", others.join(", "))
    };
    Some(format!(
        "{} {verb} {what}: pass --database {first}{also}",
        join_and(&places)
    ))
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_name_each_place_and_the_flag() {
        assert_eq!(pointer(&[], "locks", "one"), None);
        assert_eq!(
            pointer(&["app"], "distributed_locks", "one").as_deref(),
            Some("app.distributed_locks has one: pass --database app")
        );
        assert_eq!(
            pointer(&["app", "jobs", "web"], "c", "records").as_deref(),
            Some("app.c, jobs.c and web.c have records: pass --database app (or jobs, web)")
        );
        let seen = [
            Sighting {
                database: "app".into(),
                names: vec!["a".into(), "b".into()],
            },
            Sighting {
                database: "jobs".into(),
                names: vec!["b".into()],
            },
        ];
        assert_eq!(of(&seen, "b"), ["app", "jobs"]);
        assert!(of(&seen, "c").is_empty());
    }
}
