//! From the connection flags to a [`MongoStore`] or a running [`LockManager`]: URI from
//! `--uri` or `MONGODB_URI`, a short server-selection timeout so an unreachable server fails
//! fast, a short heartbeat so a new primary is found fast, database and collection names
//! checked before any I/O, passwords kept out of messages, and driver errors in a few words.

use std::time::Duration;

use mongodb::Client;
use mongodb::bson::doc;
use mongodb::error::{Error, ErrorKind};
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongodb::options::ClientOptions;

use super::{CliError, ConnectionArgs};
use mongolock::{LockError, LockManager, LockOptions, MongoStore, StoreError};

/// How long the driver looks for a usable server before an operation fails, unless the URI
/// sets `serverSelectionTimeoutMS` (the driver's own default is 30 s).
pub(crate) const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the driver checks the server, unless the URI sets `heartbeatFrequencyMS` (the
/// driver's default is 10 s, and its minimum 500 ms). After a primary steps down or restarts,
/// the driver waits for its next check before it sends anything again, so this bounds how
/// long locks stall: measured against the test server with `failCommand` errors 91, 11600
/// and 10107, about 0.5 s instead of 10 s.
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(500);

/// The database used when neither `--database` nor the URI's path names one.
pub(crate) const DEFAULT_DATABASE: &str = "mongolock";

/// A store on the configured database and collection, on a server that answered a ping.
#[derive(Debug, Clone)]
pub(crate) struct Connection {
    /// The store.
    pub store: MongoStore,
    /// The server, for messages.
    pub endpoint: Endpoint,
    /// The client's options (the URI's, with mongolock's defaults), for connections of
    /// `mongolock doctor` to each member.
    pub options: ClientOptions,
    /// `heartbeatFrequencyMS` as the URI itself sets it (`None`: not set).
    pub uri_heartbeat: Option<Duration>,
}

/// The server as messages name it.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The URI with any password hidden.
    pub shown_uri: String,
    /// How long the driver looks for a server before failing an operation.
    pub selection_timeout: Duration,
}

impl Endpoint {
    /// The error to report for a store failure on this server.
    pub(crate) fn store_error(&self, error: &StoreError) -> CliError {
        CliError::from_store(error, &self.shown_uri, &self.describe_store(error))
    }

    /// The error to report for a library failure on this server.
    pub(crate) fn lock_error(&self, error: LockError) -> CliError {
        match error {
            LockError::Store(store) => self.store_error(&store),
            other => CliError::from_lock(other),
        }
    }

    /// A store error in a few words: what failed, then the driver's error as [`describe`]
    /// puts it (never its debug dump).
    pub(crate) fn describe_store(&self, error: &StoreError) -> String {
        let driver = |source: &Option<mongolock::store::BackendCause>| {
            source
                .as_deref()
                .and_then(|cause| cause.downcast_ref::<Error>())
                .map(|driver| describe(driver, self.selection_timeout))
        };
        match error {
            StoreError::Backend { message, source } | StoreError::Rejected { message, source } => {
                match driver(source) {
                    Some(cause) => format!("{message}: {cause}"),
                    None => error.report(),
                }
            }
            StoreError::Timeout(after) => format!(
                "MongoDB did not answer within {}",
                super::duration::show(*after)
            ),
            other => other.report(),
        }
    }
}

impl Connection {
    /// Resolves the URI, checks the names, builds the store and pings the server (one round
    /// trip, failing within the server-selection timeout when no server answers).
    ///
    /// Errors: [`CliError::NoUri`] when neither `--uri` nor `MONGODB_URI` is set,
    /// [`CliError::InvalidUri`] when it does not parse, [`CliError::Usage`] for a bad
    /// database or collection name, [`CliError::Unavailable`] when the ping fails.
    pub(crate) async fn open(args: &ConnectionArgs) -> Result<Self, CliError> {
        Self::open_monitored(args, None).await
    }

    /// [`open`](Self::open), with `commands` told of every command the client sends.
    pub(crate) async fn open_monitored(
        args: &ConnectionArgs,
        commands: Option<EventHandler<CommandEvent>>,
    ) -> Result<Self, CliError> {
        let uri = args
            .uri
            .as_deref()
            .map(str::trim)
            .filter(|uri| !uri.is_empty())
            .ok_or(CliError::NoUri)?;
        let shown_uri = redact(uri);
        let invalid = |reason: String| CliError::InvalidUri {
            uri: shown_uri.clone(),
            reason,
        };
        let mut options = ClientOptions::parse(uri)
            .await
            .map_err(|error| invalid(describe(&error, SERVER_SELECTION_TIMEOUT)))?;
        options
            .server_selection_timeout
            .get_or_insert(SERVER_SELECTION_TIMEOUT);
        let uri_heartbeat = options.heartbeat_freq;
        options.heartbeat_freq.get_or_insert(HEARTBEAT);
        let selection_timeout = options
            .server_selection_timeout
            .unwrap_or(SERVER_SELECTION_TIMEOUT);
        options
            .app_name
            .get_or_insert_with(|| "mongolock".to_owned());
        options.command_event_handler = commands;
        let database = args
            .database
            .clone()
            .or_else(|| options.default_database.clone())
            .unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
        check_database_name(&database)?;
        let client = Client::with_options(options.clone())
            .map_err(|error| invalid(describe(&error, selection_timeout)))?;
        let endpoint = Endpoint {
            shown_uri,
            selection_timeout,
        };
        let store = MongoStore::builder(client.database(&database))
            .with_collection(&args.collection)
            .build()
            .map_err(|error| endpoint.store_error(&error))?;
        if let Err(error) = client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .await
        {
            return Err(CliError::Unavailable {
                uri: endpoint.shown_uri,
                reason: describe(&error, selection_timeout),
            });
        }
        Ok(Self {
            store,
            endpoint,
            options,
            uri_heartbeat,
        })
    }

    /// `database.collection`, for messages.
    pub(crate) fn namespace(&self) -> String {
        format!(
            "{}.{}",
            self.store.database().name(),
            self.store.collection_name()
        )
    }

    /// Starts a lock manager on the store: checks the server version (failing within the
    /// server-selection timeout when it is unreachable) and starts the runtime.
    pub(crate) async fn start(self, options: LockOptions) -> Result<LockManager, CliError> {
        LockManager::start(self.store, options)
            .await
            .map_err(|error| self.endpoint.lock_error(error))
    }
}

/// A driver error in a few words: the server-selection error's topology dump is reduced to
/// the first server's error; other kinds without the labels and sources the driver's own
/// `Display` adds in debug form.
pub(crate) fn describe(error: &Error, selection_timeout: Duration) -> String {
    match error.kind.as_ref() {
        ErrorKind::ServerSelection { message, .. } => {
            let cause = message
                .split("Error: Kind: ")
                .nth(1)
                .and_then(|rest| rest.split(", labels").next())
                .map(|cause| format!(" ({})", cause.trim()))
                .unwrap_or_default();
            format!(
                "no server answered within {}{cause}",
                super::duration::show(selection_timeout)
            )
        }
        ErrorKind::Authentication { message, .. } => format!("authentication failed: {message}"),
        // The kind alone: the error's own Display adds labels and sources in Debug form.
        kind => kind.to_string(),
    }
}

/// MongoDB's rules for database names (the characters no platform accepts, and the length).
fn check_database_name(name: &str) -> Result<(), CliError> {
    const FORBIDDEN: &[char] = &['/', '\\', '.', ' ', '"', '$', '\0'];
    let reason = if name.is_empty() {
        Some("it is empty".to_owned())
    } else if let Some(c) = name.chars().find(|c| FORBIDDEN.contains(c)) {
        Some(format!("it contains {c:?}"))
    } else if name.len() > 63 {
        Some("it is longer than 63 bytes".to_owned())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CliError::Usage(format!(
            "invalid MongoDB database name {:?}: {reason}",
            name.chars().take(64).collect::<String>()
        ))),
        None => Ok(()),
    }
}

/// The URI with the password of its user info replaced by `****`, for messages.
pub(crate) fn redact(uri: &str) -> String {
    let Some(scheme_end) = uri.find("://").map(|at| at + 3) else {
        return uri.to_owned();
    };
    let rest = &uri[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return uri.to_owned();
    };
    let user_info = &authority[..at];
    let user = user_info
        .split_once(':')
        .map_or(user_info, |(user, _)| user);
    let hidden = if user_info.contains(':') {
        format!("{user}:****")
    } else {
        user.to_owned()
    };
    format!("{}{hidden}{}", &uri[..scheme_end], &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("mongodb+srv://u:p@w@cluster.example.net/?retryWrites=true"),
            "mongodb+srv://u:****@cluster.example.net/?retryWrites=true"
        );
        assert_eq!(redact("mongodb://u@h"), "mongodb://u@h");
        assert_eq!(redact("not a uri"), "not a uri");
        assert_eq!(
            redact("mongodb://h/?authSource=a@b"),
            "mongodb://h/?authSource=a@b"
        );
    }

    #[test]
    fn database_names_are_checked() {
        assert!(check_database_name("app").is_ok());
        for bad in ["", "a.b", "a b", "a$", "a/b", &"x".repeat(64)] {
            assert!(
                matches!(check_database_name(bad), Err(CliError::Usage(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn redact_hides_only_the_password() {
        assert_eq!(
            redact("mongodb://app:s3cret@db:27017/x"),
            "mongodb://app:****@db:27017/x"
        );
        assert_eq!(redact("mongodb://db:27017/?w=1"), "mongodb://db:27017/?w=1");
    }
}
