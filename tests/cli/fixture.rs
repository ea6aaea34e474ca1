//! One test's world (a server, a fresh collection, a scratch directory) and the small helpers
//! the tests share.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};
use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::process::Running;
use crate::support::fail_point::FailPoint;
use crate::support::{self, eventually, uri};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mongolock");

/// The database every test uses; each test has its own collection.
pub(crate) const DATABASE: &str = "mongolock_cli_tests";

/// An address nothing listens on, failing fast.
pub(crate) const UNREACHABLE: &str = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500";

pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime")
        .block_on(future)
}

pub(crate) async fn client(uri: &str) -> Client {
    support::client_for(uri, None, None).await
}

/// One test's world: a server, a fresh collection and a scratch directory, both removed at
/// the end.
pub(crate) struct Fixture {
    pub(crate) uri: String,
    pub(crate) collection: String,
    pub(crate) dir: PathBuf,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let uri = uri();
        block_on(client(&uri));
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = std::env::temp_dir().join(format!("mongolock-cli-{id}"));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self {
            uri,
            collection: format!("t_{id}"),
            dir,
        }
    }

    /// `mongolock <subcommand> --uri … --database … --collection …`.
    pub(crate) fn mongolock(&self, subcommand: &str) -> Command {
        self.mongolock_at(subcommand, &self.uri)
    }

    /// `mongolock <subcommand> --uri … --database … --collection … ARGS…` run by `script(1)`
    /// on a new pseudo-terminal (its controlling terminal, stdin, stdout and stderr): what
    /// the test types goes in through the returned process's stdin, everything written to the
    /// terminal comes out on its stdout, and its exit code is mongolock's.
    pub(crate) fn on_terminal(&self, subcommand: &str, args: &[&str]) -> Command {
        if Command::new("script").arg("--version").output().is_err() {
            panic!(
                "script(1) is missing: the terminal tests run mongolock on a pseudo-terminal \
                 with it; install util-linux (apt-get install util-linux)"
            );
        }
        let mut words = vec![BIN, subcommand, "--uri", &self.uri, "--database", DATABASE];
        words.extend(["--collection", &self.collection]);
        words.extend(args);
        let line: Vec<String> = words.iter().map(|word| shell_quoted(word)).collect();
        let mut command = Command::new("script");
        command
            .args(["-q", "-e", "-f", "-c", &line.join(" "), "/dev/null"])
            .env("SHELL", "/bin/sh")
            .env_remove("MONGODB_URI")
            .stdin(Stdio::piped())
            .current_dir(&self.dir);
        command
    }

    /// `mongolock <subcommand> --uri URI --database … --collection …`.
    pub(crate) fn mongolock_at(&self, subcommand: &str, uri: &str) -> Command {
        self.mongolock_in(subcommand, uri, DATABASE)
    }

    /// `mongolock <subcommand> --uri URI --database DATABASE --collection …`.
    pub(crate) fn mongolock_in(&self, subcommand: &str, uri: &str, database: &str) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg(subcommand)
            .args(["--uri", uri, "--database", database])
            .args(["--collection", &self.collection])
            .env_remove("MONGODB_URI")
            .stdin(Stdio::null());
        command
    }

    /// `database.collection` of this test's locks, as `mongolock` names it.
    pub(crate) fn namespace(&self) -> String {
        format!("{DATABASE}.{}", self.collection)
    }

    /// Another database, dropped at the end, with a collection named like this test's:
    /// where an application would keep its locks if it used another database than the
    /// tool.
    pub(crate) fn other_database(&self) -> OtherDatabase {
        OtherDatabase {
            uri: self.uri.clone(),
            name: format!("mongolock_cli_other_{}", &self.collection[2..14]),
        }
    }

    /// A `mongolock run` holding `lock` in `other`'s collection, once its command started.
    pub(crate) fn hold_in(&self, other: &OtherDatabase, lock: &str) -> Running {
        let ready = self.path(&format!("{lock}.ready"));
        let script = format!("touch '{}'; exec sleep 30", ready.display());
        let holder = Running::spawn(
            self.mongolock_in("run", &self.uri, &other.name)
                .args(["--lock", lock, "--", "sh", "-c", &script])
                .current_dir(&self.dir),
        );
        eventually(SHORT, "the holder in the other database", || ready.exists());
        holder
    }

    /// `mongolock run --lock NAME [extra…] -- sh -c SCRIPT`, run in the scratch directory.
    pub(crate) fn run(&self, lock: &str, extra: &[&str], script: &str) -> Command {
        self.run_at(&self.uri, lock, extra, script)
    }

    /// [`Fixture::run`] with another URI (the test server with extra options).
    pub(crate) fn run_at(&self, uri: &str, lock: &str, extra: &[&str], script: &str) -> Command {
        let mut command = self.mongolock_at("run", uri);
        command
            .args(["--lock", lock])
            .args(extra)
            .args(["--", "sh", "-c", script])
            .current_dir(&self.dir);
        command
    }

    /// The test server's URI with `option` (`name=value`) added, e.g. an `appName` that
    /// fail points can single out.
    pub(crate) fn uri_with(&self, option: &str) -> String {
        let authority = self.uri.split_once("://").map_or("", |(_, rest)| rest);
        let separator = match (self.uri.contains('?'), authority.contains('/')) {
            (true, _) => "&",
            (false, true) => "?",
            (false, false) => "/?",
        };
        format!("{}{separator}{option}", self.uri)
    }

    /// The next lease renewal (an `update`) of the `mongolock` processes started with the
    /// returned URI fails once, as if the primary were shutting down (error 91); the fail
    /// point stays on until the returned guard is dropped. The URI names them by an `appName`
    /// the fail point singles out, and turns off the driver's own retry, which would hide the
    /// failure from the library.
    pub(crate) fn renewal_fails_once(&self, purpose: &str) -> (FailPoint, String) {
        let app = app_name(self, purpose);
        let fail = FailPoint::on(
            &self.uri,
            doc! { "times": 1 }.into(),
            doc! { "failCommands": ["update"], "errorCode": 91, "appName": &app },
        );
        (
            fail,
            self.uri_with(&format!("appName={app}&retryWrites=false")),
        )
    }

    /// `mongolock elect --name NAME --lease 2s --grace 300ms -- sh -c SCRIPT`.
    pub(crate) fn elect(&self, name: &str, script: &str) -> Command {
        let mut command = self.mongolock("elect");
        command
            .args(["--name", name, "--lease", "2s", "--grace", "300ms"])
            .args(["--", "sh", "-c", script])
            .current_dir(&self.dir);
        command
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A released lock's document, as `run` leaves it, except that it expires in an hour so
    /// the server's TTL monitor cannot delete it while the test looks at it.
    pub(crate) fn insert_free_lock(&self, name: &str, token: i64) {
        block_on(async {
            let in_an_hour = mongodb::bson::DateTime::from_millis(
                mongodb::bson::DateTime::now().timestamp_millis() + 3_600_000,
            );
            client(&self.uri)
                .await
                .database(DATABASE)
                .collection::<Document>(&self.collection)
                .insert_one(doc! {
                    "_id": name, "leaseId": Bson::Null, "holder": Bson::Null,
                    "expiresAt": in_an_hour, "token": token,
                })
                .await
                .expect("insert a free lock document");
        });
    }

    /// A `mongolock run` holding `lock` (with `extra` flags) and its fencing token, once its
    /// command has started (it then sleeps).
    pub(crate) fn hold(&self, lock: &str, extra: &[&str]) -> (Running, u64) {
        let token_file = self.path(&format!("{lock}.token"));
        let script = format!(
            "echo $MONGOLOCK_TOKEN > '{}'; exec sleep 30",
            token_file.display()
        );
        let holder = Running::spawn(&mut self.run(lock, extra, &script));
        eventually(SHORT, "the holder's token", || {
            read(&token_file).ends_with('\n')
        });
        let token = read(&token_file).trim().parse().expect("a numeric token");
        (holder, token)
    }

    /// Asserts that nobody holds `lock`: a single attempt to take it succeeds.
    pub(crate) fn assert_free(&self, lock: &str) {
        let output = self
            .run(lock, &["-q", "--wait", "0"], "true")
            .output()
            .expect("run mongolock");
        assert_eq!(
            code(output.status),
            Some(0),
            "{lock:?} is still held: {}",
            stderr(&output)
        );
    }

    /// Like [`Fixture::hold`], for one of several holders of `lock` (a semaphore's, a
    /// reader's): the token goes to `ID.token`, and `extra` says what is held.
    pub(crate) fn hold_as(&self, id: &str, lock: &str, extra: &[&str]) -> (Running, u64) {
        let token_file = self.path(&format!("{id}.token"));
        let script = format!(
            "echo $MONGOLOCK_TOKEN > '{}'; exec sleep 30",
            token_file.display()
        );
        let holder = Running::spawn(&mut self.run(lock, extra, &script));
        eventually(SHORT, &format!("{id}'s token"), || {
            read(&token_file).ends_with('\n')
        });
        let token = read(&token_file).trim().parse().expect("a numeric token");
        (holder, token)
    }

    /// `mongolock status --json [NAME…]`, parsed.
    pub(crate) fn status_json(&self, names: &[&str]) -> serde_json::Value {
        let output = self
            .mongolock("status")
            .arg("--json")
            .args(names)
            .output()
            .expect("status");
        assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).expect("JSON")
    }

    /// How many lock documents the collection has.
    pub(crate) fn documents(&self) -> u64 {
        block_on(async {
            client(&self.uri)
                .await
                .database(DATABASE)
                .collection::<Document>(&self.collection)
                .count_documents(doc! {})
                .await
                .expect("count the lock documents")
        })
    }

    pub(crate) fn delete_lock(&self, name: &str) {
        block_on(async {
            let deleted = client(&self.uri)
                .await
                .database(DATABASE)
                .collection::<mongodb::bson::Document>(&self.collection)
                .delete_one(doc! { "_id": name })
                .await
                .expect("delete the lock document");
            assert_eq!(deleted.deleted_count, 1, "no document for lock {name:?}");
        });
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let (uri, collection) = (self.uri.clone(), self.collection.clone());
        block_on(async move {
            if let Ok(client) = Client::with_uri_str(&uri).await {
                let _ = client
                    .database(DATABASE)
                    .collection::<mongodb::bson::Document>(&collection)
                    .drop()
                    .await;
            }
        });
    }
}

/// A database of one test's, dropped when it is.
pub(crate) struct OtherDatabase {
    uri: String,
    pub(crate) name: String,
}

impl Drop for OtherDatabase {
    fn drop(&mut self) {
        let (uri, name) = (self.uri.clone(), self.name.clone());
        block_on(async move {
            if let Ok(client) = Client::with_uri_str(&uri).await {
                let _ = client.database(&name).drop().await;
            }
        });
    }
}

/// `word` quoted for `sh`.
fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A name for this test's `mongolock` processes, for fail points.
pub(crate) fn app_name(fixture: &Fixture, purpose: &str) -> String {
    format!("{purpose}-{}", &fixture.collection[2..14])
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The pid a child script wrote with `echo $$ > FILE` (complete once it ends in a newline).
pub(crate) fn written_pid(path: &Path) -> Option<i32> {
    let text = read(path);
    text.ends_with('\n')
        .then(|| text.trim().parse().ok())
        .flatten()
}

/// Whether the process is gone (or a zombie nobody reaped yet).
pub(crate) fn is_dead(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return true;
    }
    // Linux: a zombie still answers kill(0); its state is 'Z'.
    let stat = read(Path::new(&format!("/proc/{pid}/stat")));
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

/// The part of a holder id (`host:pid:random`) naming the `mongolock` process `pid`.
pub(crate) fn holder_part(pid: Pid) -> String {
    format!(":{pid}:")
}

pub(crate) fn code(status: ExitStatus) -> Option<i32> {
    status.code()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) const SHORT: Duration = Duration::from_secs(20);

/// Fails naming each of `expected` that `text` lacks.
pub(crate) fn assert_contains_all(text: &str, expected: &[&str]) {
    let missing: Vec<&&str> = expected
        .iter()
        .filter(|line| !text.contains(**line))
        .collect();
    assert!(missing.is_empty(), "{missing:?} missing from:\n{text}");
}

/// The lock named `name` in `status --json` output.
pub(crate) fn lock_in<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["locks"]
        .as_array()
        .and_then(|locks| locks.iter().find(|lock| lock["name"] == name))
        .unwrap_or_else(|| panic!("no lock {name:?} in {json}"))
}
