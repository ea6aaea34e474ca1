//! The driver floor: the very commands mongolock sends for one acquire + release, issued
//! directly through the driver's collection API with no runtime around them.
//!
//! The commands are captured from mongolock itself (command monitoring) rather than written
//! out here, so the floor stays "the same commands" whatever the runtime sends after a change:
//! each captured write is replayed with its filter, update and options, on the same
//! collection and write concern, with the lock name (`_id` in the filters) swapped for the
//! floor's own.

use mongodb::bson::{Bson, Document, from_document};
use mongodb::options::{CollectionOptions, ReturnDocument, UpdateModifications, WriteConcern};
use mongodb::{Collection, Database};

use super::commands::{CommandLog, collection_of};
use super::contender::Contender;
use mongolock::{LockManager, LockOptions, MongoStore};

/// The write commands a lock cycle is made of.
const WRITES: &[&str] = &["findAndModify", "update", "delete", "insert"];

#[derive(Debug, Clone)]
enum Step {
    FindAndModify {
        query: Document,
        update: Option<UpdateModifications>,
        upsert: bool,
        return_after: bool,
    },
    Update {
        query: Document,
        update: UpdateModifications,
        upsert: bool,
        multi: bool,
    },
    Delete {
        query: Document,
        many: bool,
    },
}

/// A replayable acquire + release (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Floor {
    collection: Collection<Document>,
    steps: Vec<Step>,
    names: Vec<String>,
}

impl Floor {
    /// Runs one acquire + release of `lock` (a mutex, a semaphore, a read or write lock,
    /// whose manager's client reports to `log`), warmed up by a first cycle, and captures the
    /// write commands of the second one on `collection` of `database`.
    ///
    /// # Errors
    ///
    /// When the lock fails or a captured command cannot be replayed.
    pub(crate) async fn capture<C: Contender>(
        lock: &C,
        log: &CommandLog,
        database: &Database,
        collection: &str,
    ) -> Result<Self, String> {
        super::contender::cycle(lock).await?;
        log.capture();
        let captured = super::contender::cycle(lock).await;
        let commands = log.take_captured();
        captured?;
        let writes: Vec<&Document> = commands
            .iter()
            .filter(|command| {
                collection_of(command) == collection
                    && command
                        .keys()
                        .next()
                        .is_some_and(|name| WRITES.contains(&name.as_str()))
            })
            .collect();
        if writes.len() < 2 {
            return Err(format!(
                "expected an acquire and a release command on {collection}, captured {commands:?}"
            ));
        }
        let write_concern = match writes[0].get_document("writeConcern") {
            Ok(concern) => from_document::<WriteConcern>(concern.clone())
                .map_err(|e| format!("captured write concern {concern:?}: {e}"))?,
            Err(_) => WriteConcern::default(),
        };
        let options = CollectionOptions::builder()
            .write_concern(write_concern)
            .build();
        let steps = writes
            .iter()
            .map(|command| step(command))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            collection: database.collection_with_options(collection, options),
            names: writes
                .iter()
                .filter_map(|command| command.keys().next().cloned())
                .collect(),
            steps,
        })
    }

    /// The commands a default mongolock manager on `database` sends for one acquire +
    /// release, captured from a manager started for the purpose (the client reports to
    /// `log`) and shut down afterwards, so it sends nothing more.
    ///
    /// # Errors
    ///
    /// As [`capture`](Self::capture), or when the manager cannot start.
    pub(crate) async fn of_default_manager(
        database: &Database,
        log: &CommandLog,
    ) -> Result<Self, String> {
        let manager = LockManager::start(MongoStore::new(database.clone()), LockOptions::default())
            .await
            .map_err(|e| format!("manager start: {e}"))?;
        let floor = match manager.lock("floor-capture") {
            Ok(lock) => Self::capture(&lock, log, database, MongoStore::DEFAULT_COLLECTION).await,
            Err(e) => Err(e.to_string()),
        };
        manager.shutdown().await;
        floor
    }

    /// The same commands on the lock named `name`.
    pub(crate) fn for_name(&self, name: &str) -> Self {
        let rename = |query: &Document| {
            let mut query = query.clone();
            if query.contains_key("_id") {
                query.insert("_id", name);
            }
            query
        };
        let steps = self
            .steps
            .iter()
            .map(|step| match step {
                Step::FindAndModify {
                    query,
                    update,
                    upsert,
                    return_after,
                } => Step::FindAndModify {
                    query: rename(query),
                    update: update.clone(),
                    upsert: *upsert,
                    return_after: *return_after,
                },
                Step::Update {
                    query,
                    update,
                    upsert,
                    multi,
                } => Step::Update {
                    query: rename(query),
                    update: update.clone(),
                    upsert: *upsert,
                    multi: *multi,
                },
                Step::Delete { query, many } => Step::Delete {
                    query: rename(query),
                    many: *many,
                },
            })
            .collect();
        Self {
            collection: self.collection.clone(),
            steps,
            names: self.names.clone(),
        }
    }

    /// `findAndModify + findAndModify`: the commands of one cycle.
    pub(crate) fn describe(&self) -> String {
        self.names.join(" + ")
    }

    /// How many commands one cycle sends.
    pub(crate) fn commands_per_cycle(&self) -> usize {
        self.steps.len()
    }

    async fn run(&self, step: &Step) -> Result<(), String> {
        let failed = |e: mongodb::error::Error| format!("floor: {e}");
        match step {
            Step::FindAndModify {
                query,
                update: Some(update),
                upsert,
                return_after,
            } => {
                let returned = self
                    .collection
                    .find_one_and_update(query.clone(), update.clone())
                    .upsert(*upsert)
                    .return_document(if *return_after {
                        ReturnDocument::After
                    } else {
                        ReturnDocument::Before
                    })
                    .await
                    .map_err(failed)?;
                // Every replayed command matches (the floor runs uncontended): a miss means
                // the replay is not doing what mongolock does.
                if returned.is_none() {
                    return Err(format!("floor: {query} matched nothing"));
                }
            }
            Step::FindAndModify {
                query,
                update: None,
                ..
            } => {
                self.collection
                    .find_one_and_delete(query.clone())
                    .await
                    .map_err(failed)?;
            }
            Step::Update {
                query,
                update,
                upsert,
                multi,
            } => {
                let result = if *multi {
                    self.collection
                        .update_many(query.clone(), update.clone())
                        .upsert(*upsert)
                        .await
                } else {
                    self.collection
                        .update_one(query.clone(), update.clone())
                        .upsert(*upsert)
                        .await
                };
                result.map_err(failed)?;
            }
            Step::Delete { query, many } => {
                let result = if *many {
                    self.collection.delete_many(query.clone()).await
                } else {
                    self.collection.delete_one(query.clone()).await
                };
                result.map_err(failed)?;
            }
        }
        Ok(())
    }
}

/// The first step is the acquire, the rest the release.
impl Contender for Floor {
    type Held = ();

    async fn acquire(&self) -> Result<(), String> {
        match self.steps.first() {
            Some(step) => self.run(step).await,
            None => Err("floor: no commands".to_owned()),
        }
    }

    async fn release(&self, (): ()) -> Result<(), String> {
        for step in self.steps.iter().skip(1) {
            self.run(step).await?;
        }
        Ok(())
    }
}

fn modifications(update: &Bson) -> Result<UpdateModifications, String> {
    match update {
        Bson::Document(document) => Ok(UpdateModifications::Document(document.clone())),
        Bson::Array(stages) => stages
            .iter()
            .map(|stage| match stage {
                Bson::Document(stage) => Ok(stage.clone()),
                other => Err(format!("pipeline stage {other}")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(UpdateModifications::Pipeline),
        other => Err(format!("update {other}")),
    }
}

fn flag(document: &Document, key: &str) -> bool {
    document.get_bool(key).unwrap_or(false)
}

/// The replayable form of one captured write command (one statement each, as mongolock sends).
fn step(command: &Document) -> Result<Step, String> {
    let unsupported = || format!("floor cannot replay {command}");
    let name = command.keys().next().ok_or_else(unsupported)?;
    match name.as_str() {
        "findAndModify" => Ok(Step::FindAndModify {
            query: command.get_document("query").cloned().unwrap_or_default(),
            update: match command.get("update") {
                Some(update) => Some(modifications(update)?),
                None => None,
            },
            upsert: flag(command, "upsert"),
            return_after: flag(command, "new"),
        }),
        "update" => {
            let statement = first_statement(command, "updates").ok_or_else(unsupported)?;
            Ok(Step::Update {
                query: statement.get_document("q").cloned().unwrap_or_default(),
                update: modifications(statement.get("u").ok_or_else(unsupported)?)?,
                upsert: flag(statement, "upsert"),
                multi: flag(statement, "multi"),
            })
        }
        "delete" => {
            let statement = first_statement(command, "deletes").ok_or_else(unsupported)?;
            Ok(Step::Delete {
                query: statement.get_document("q").cloned().unwrap_or_default(),
                many: !matches!(
                    statement.get("limit"),
                    Some(Bson::Int32(1) | Bson::Int64(1))
                ),
            })
        }
        _ => Err(unsupported()),
    }
}

/// The single statement of an `update` or `delete` (the driver sends them in the command
/// body or, for large batches, in a document sequence the monitor shows as an array too).
fn first_statement<'a>(command: &'a Document, key: &str) -> Option<&'a Document> {
    match command.get_array(key).ok()?.as_slice() {
        [Bson::Document(statement)] => Some(statement),
        _ => None,
    }
}
