//! End-to-end tests of the `mongolock` binary against a real MongoDB-compatible server:
//! mutual exclusion of `run`, the token in the environment, `--wait`, the command stopped on
//! lock loss, exit codes, signal forwarding, progress lines, commands on a terminal (under
//! `script(1)`), no process outliving a killed `mongolock`, `status` (table, `--watch`,
//! `--json`), `release --force`, connection errors, recovery after a primary steps down,
//! and `elect`.
//!
//! Needs `MONGODB_URI` (`scripts/test.sh` starts a throw-away SecantusDB server and sets it)
//! and `script` from util-linux; the tests that need them fail, never skip, without them.
//! Each test works in its own collection. Tests wait for output lines and exits; files are
//! polled with deadlines; the only fixed waits check that something does *not* happen.
#![cfg(unix)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::fail_point::FailPoint;
use support::{eventually, uri};

const BIN: &str = env!("CARGO_BIN_EXE_mongolock");
/// The database every test uses; each test has its own collection.
const DATABASE: &str = "mongolock_cli_tests";
/// An address nothing listens on, failing fast.
const UNREACHABLE: &str = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500";

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime")
        .block_on(future)
}

async fn client(uri: &str) -> Client {
    support::client_for(uri, None, None).await
}

/// One test's world: a server, a fresh collection and a scratch directory, both removed at
/// the end.
struct Fixture {
    uri: String,
    collection: String,
    dir: PathBuf,
}

impl Fixture {
    fn new() -> Self {
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
    fn mongolock(&self, subcommand: &str) -> Command {
        self.mongolock_at(subcommand, &self.uri)
    }

    /// `mongolock <subcommand> --uri … --database … --collection … ARGS…` run by `script(1)`
    /// on a new pseudo-terminal (its controlling terminal, stdin, stdout and stderr): what
    /// the test types goes in through the returned process's stdin, everything written to the
    /// terminal comes out on its stdout, and its exit code is mongolock's.
    fn on_terminal(&self, subcommand: &str, args: &[&str]) -> Command {
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
    fn mongolock_at(&self, subcommand: &str, uri: &str) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg(subcommand)
            .args(["--uri", uri, "--database", DATABASE])
            .args(["--collection", &self.collection])
            .env_remove("MONGODB_URI")
            .stdin(Stdio::null());
        command
    }

    /// `mongolock run --lock NAME [extra…] -- sh -c SCRIPT`, run in the scratch directory.
    fn run(&self, lock: &str, extra: &[&str], script: &str) -> Command {
        self.run_at(&self.uri, lock, extra, script)
    }

    /// [`Fixture::run`] with another URI (the test server with extra options).
    fn run_at(&self, uri: &str, lock: &str, extra: &[&str], script: &str) -> Command {
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
    fn uri_with(&self, option: &str) -> String {
        let authority = self.uri.split_once("://").map_or("", |(_, rest)| rest);
        let separator = match (self.uri.contains('?'), authority.contains('/')) {
            (true, _) => "&",
            (false, true) => "?",
            (false, false) => "/?",
        };
        format!("{}{separator}{option}", self.uri)
    }

    /// `mongolock elect --name NAME --lease 2s --grace 300ms -- sh -c SCRIPT`.
    fn elect(&self, name: &str, script: &str) -> Command {
        let mut command = self.mongolock("elect");
        command
            .args(["--name", name, "--lease", "2s", "--grace", "300ms"])
            .args(["--", "sh", "-c", script])
            .current_dir(&self.dir);
        command
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A released lock's document, as `run` leaves it, except that it expires in an hour so
    /// the server's TTL monitor cannot delete it while the test looks at it.
    fn insert_free_lock(&self, name: &str, token: i64) {
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
    fn hold(&self, lock: &str, extra: &[&str]) -> (Running, u64) {
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
    fn assert_free(&self, lock: &str) {
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
    fn hold_as(&self, id: &str, lock: &str, extra: &[&str]) -> (Running, u64) {
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
    fn status_json(&self, names: &[&str]) -> serde_json::Value {
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
    fn documents(&self) -> u64 {
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

    fn delete_lock(&self, name: &str) {
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

/// What a process wrote so far, line by line, and whether each stream has ended.
#[derive(Default)]
struct Written {
    stdout: String,
    stderr: String,
    closed: usize,
}

/// Which stream of a [`Running`] process.
#[derive(Clone, Copy, Debug)]
enum Stream {
    Stdout,
    Stderr,
}

type Shared = Arc<(Mutex<Written>, Condvar)>;

/// A running process (`mongolock`, or `script` running it) whose output is collected as it
/// comes, so a test can wait for a line instead of sleeping. Stopped (SIGTERM, then SIGKILL)
/// if the test ends without waiting for it.
struct Running {
    child: Option<Child>,
    pid: Pid,
    stdin: Option<ChildStdin>,
    written: Shared,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the process");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
        let written: Shared = Arc::default();
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            readers.push(collect(stdout, Stream::Stdout, Arc::clone(&written)));
        }
        if let Some(stderr) = child.stderr.take() {
            readers.push(collect(stderr, Stream::Stderr, Arc::clone(&written)));
        }
        let stdin = child.stdin.take();
        Self {
            child: Some(child),
            pid,
            stdin,
            written,
            readers,
        }
    }

    fn pid(&self) -> Pid {
        self.pid
    }

    fn signal(&self, signal: Signal) {
        kill(self.pid, signal).expect("signal the process");
    }

    /// Writes to the process's stdin (spawned with `Stdio::piped()`).
    fn type_in(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin was piped");
        stdin.write_all(bytes).expect("write to stdin");
        stdin.flush().expect("flush stdin");
    }

    /// Everything written to `stream` so far.
    fn text(&self, stream: Stream) -> String {
        let written = self
            .written
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match stream {
            Stream::Stdout => written.stdout.clone(),
            Stream::Stderr => written.stderr.clone(),
        }
    }

    /// Waits until `stream` contains `wanted` (at most `within`), woken by each new line.
    fn wait_for(&self, stream: Stream, wanted: &str, within: Duration) {
        self.wait_until(stream, within, wanted, |text| text.contains(wanted));
    }

    /// Waits until `condition` holds for what `stream` has so far (at most `within`).
    fn wait_until(
        &self,
        stream: Stream,
        within: Duration,
        what: &str,
        condition: impl Fn(&str) -> bool,
    ) {
        let deadline = Instant::now() + within;
        let (lock, changed) = &*self.written;
        let mut written = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let text = match stream {
                Stream::Stdout => &written.stdout,
                Stream::Stderr => &written.stderr,
            };
            if condition(text) {
                return;
            }
            let now = Instant::now();
            assert!(
                now < deadline && written.closed < 2,
                "no {what:?} on {stream:?} within {within:?}; stdout:\n{}\nstderr:\n{}",
                written.stdout,
                written.stderr
            );
            written = changed
                .wait_timeout(written, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Waits for the exit (at most `limit`) and returns the status and output.
    fn finish(mut self, limit: Duration) -> Output {
        let mut child = self.child.take().expect("not finished yet");
        drop(self.stdin.take());
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().expect("poll the process") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the process did not exit within {limit:?}; stderr: {}",
                    self.text(Stream::Stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        Output {
            status,
            stdout: self.text(Stream::Stdout).into_bytes(),
            stderr: self.text(Stream::Stderr).into_bytes(),
        }
    }
}

/// Copies `from` into `written` line by line, waking waiters after each line.
fn collect(
    from: impl std::io::Read + Send + 'static,
    stream: Stream,
    written: Shared,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            let done = !matches!(reader.read_until(b'\n', &mut line), Ok(read) if read > 0);
            let (lock, changed) = &*written;
            let mut shared = lock.lock().unwrap_or_else(PoisonError::into_inner);
            let text = String::from_utf8_lossy(&line);
            match stream {
                Stream::Stdout => shared.stdout.push_str(&text),
                Stream::Stderr => shared.stderr.push_str(&text),
            }
            if done {
                shared.closed += 1;
            }
            changed.notify_all();
            if done {
                return;
            }
        }
    })
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            let _ = kill(self.pid, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `word` quoted for `sh`.
fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A name for this test's `mongolock` processes, for fail points.
fn app_name(fixture: &Fixture, purpose: &str) -> String {
    format!("{purpose}-{}", &fixture.collection[2..14])
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The pid a child script wrote with `echo $$ > FILE` (complete once it ends in a newline).
fn written_pid(path: &Path) -> Option<i32> {
    let text = read(path);
    text.ends_with('\n')
        .then(|| text.trim().parse().ok())
        .flatten()
}

/// Whether the process is gone (or a zombie nobody reaped yet).
fn is_dead(pid: i32) -> bool {
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
fn holder_part(pid: Pid) -> String {
    format!(":{pid}:")
}

fn code(status: ExitStatus) -> Option<i32> {
    status.code()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const SHORT: Duration = Duration::from_secs(20);

#[test]
fn concurrent_runs_of_one_lock_are_mutually_exclusive() {
    let fixture = Fixture::new();
    let script = r#"echo "start $ID" >> log; sleep 0.3; echo "end $ID" >> log"#;
    let runs: Vec<Running> = (0..3)
        .map(|id| Running::spawn(fixture.run("mutex", &[], script).env("ID", id.to_string())))
        .collect();
    for run in runs {
        let output = run.finish(Duration::from_secs(60));
        assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    }
    let log = read(&fixture.path("log"));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "{log}");
    let mut seen = Vec::new();
    for pair in lines.chunks(2) {
        let id = pair[0].strip_prefix("start ").expect("a start line");
        assert_eq!(pair[1], format!("end {id}"), "overlapping runs:\n{log}");
        seen.push(id.to_owned());
    }
    seen.sort();
    assert_eq!(seen, ["0", "1", "2"]);
}

#[test]
fn the_command_gets_an_increasing_token_and_the_lock_name() {
    let fixture = Fixture::new();
    let token = || {
        let output = fixture
            .run("tokens", &[], r#"echo "$MONGOLOCK_TOKEN $MONGOLOCK_LOCK""#)
            .output()
            .expect("run mongolock");
        assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
        let stdout = String::from_utf8(output.stdout).expect("utf-8");
        let (token, lock) = stdout.trim().split_once(' ').expect("token and name");
        assert_eq!(lock, "tokens");
        token.parse::<u64>().expect("a numeric token")
    };
    let first = token();
    let second = token();
    assert!(first > 0 && second > first, "{first} then {second}");
}

#[test]
fn wait_gives_up_with_75_while_held_and_signals_reach_the_command() {
    let fixture = Fixture::new();
    let holder = Running::spawn(&mut fixture.run("busy", &[], "touch ready; exec sleep 30"));
    eventually(SHORT, "the holder's command", || {
        fixture.path("ready").exists()
    });

    let started = Instant::now();
    let output = fixture
        .run("busy", &["--wait", "200ms"], "echo should-not-run")
        .output()
        .expect("run mongolock");
    assert_eq!(code(output.status), Some(75), "{}", stderr(&output));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    assert!(message.contains("not acquired within 200ms"), "{message}");
    assert!(
        message.contains(&format!(":{}:", holder.pid())),
        "names the holder: {message}"
    );

    // SIGTERM to mongolock reaches the command; its status (143) is passed back, the lock
    // released.
    holder.signal(Signal::SIGTERM);
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(143), "{}", stderr(&output));
    fixture.assert_free("busy");
}

#[test]
fn a_single_attempt_says_who_holds_the_lock() {
    let fixture = Fixture::new();
    let holder = Running::spawn(&mut fixture.run("once", &[], "exec sleep 30"));
    holder.wait_for(Stream::Stderr, "acquired lock \"once\"", SHORT);
    let output = fixture
        .run("once", &["--wait", "0"], "echo should-not-run")
        .output()
        .expect("run mongolock");
    assert_eq!(code(output.status), Some(75), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.starts_with("mongolock: lock \"once\" is held by "),
        "{message}"
    );
    assert!(message.contains(&holder_part(holder.pid())), "{message}");
    assert!(message.ends_with("; not waiting (--wait 0)\n"), "{message}");
    assert!(!message.contains("within 0ms"), "{message}");
}

#[test]
fn the_command_is_stopped_when_the_lock_is_lost() {
    let fixture = Fixture::new();
    // `--expiry` is the old spelling of `--lease`; the command ignores SIGTERM, so only
    // SIGKILL after the grace period stops it.
    let holder = Running::spawn(&mut fixture.run(
        "doomed",
        &["-q", "--expiry", "2s", "--grace", "300ms"],
        "trap '' TERM; echo $$ > pid; exec sleep 30",
    ));
    let mut pid = None;
    eventually(SHORT, "the command's pid", || {
        pid = written_pid(&fixture.path("pid"));
        pid.is_some()
    });
    let pid = pid.expect("a pid");

    fixture.delete_lock("doomed");
    let deleted = Instant::now();
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    assert!(
        deleted.elapsed() >= Duration::from_millis(300),
        "SIGTERM was ignored, so SIGKILL comes after the grace period: {:?}",
        deleted.elapsed()
    );
    assert!(
        deleted.elapsed() < Duration::from_secs(5),
        "loss noticed after {:?}",
        deleted.elapsed()
    );
    assert!(is_dead(pid), "the command ({pid}) survived the loss");
    let message = stderr(&output);
    assert!(message.contains("\"doomed\" was lost"), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
}

#[test]
fn exit_codes_of_the_command_are_passed_through() {
    let fixture = Fixture::new();
    let status = |script: &str| {
        let output = fixture.run("codes", &[], script).output().expect("run");
        code(output.status)
    };
    assert_eq!(status("exit 7"), Some(7));
    assert_eq!(status("exit 0"), Some(0));
    assert_eq!(status("kill -KILL $$"), Some(137));

    let missing = fixture
        .mongolock("run")
        .args(["--lock", "codes", "--", "/nonexistent/program"])
        .output()
        .expect("run");
    assert_eq!(code(missing.status), Some(127), "{}", stderr(&missing));
    // The lock was released after the failed start.
    assert_eq!(status("true"), Some(0));
}

#[test]
fn status_lists_held_and_free_locks() {
    let fixture = Fixture::new();
    // (A released lock's own document may be deleted by the TTL monitor at any moment.)
    fixture.insert_free_lock("free-lock", 3);
    let (holder, token) = fixture.hold("held-lock", &[]);
    let token = token.to_string();

    let output = fixture.mongolock("status").output().expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).expect("utf-8");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "STATE",
            "HOLDER",
            "TOKEN",
            "EXPIRES",
            "IN",
            "CONTENDED"
        ],
        "{table}"
    );
    assert_eq!(rows.len(), 3, "{table}");
    // Sorted by name.
    let (free, held) = (&rows[1], &rows[2]);
    assert_eq!(free[..3], ["free-lock", "free", "-"], "{table}");
    assert_eq!(free[4], "-", "{table}");
    assert_eq!(held[..2], ["held-lock", "held"], "{table}");
    assert!(
        held[2].contains(&format!(":{}:", holder.pid())),
        "holder: {table}"
    );
    assert_eq!(held[3], token, "{table}");
    assert!(held[4].ends_with('s'), "expires in: {table}");
    assert_eq!(held[5], "-", "nobody else tried yet: {table}");

    // A failed attempt by someone else shows as contention.
    let output = fixture
        .run("held-lock", &["--wait", "0"], "true")
        .output()
        .expect("run");
    assert_eq!(code(output.status), Some(75), "{}", stderr(&output));
    let output = fixture.mongolock("status").output().expect("status");
    let table = String::from_utf8(output.stdout).expect("utf-8");
    let held: Vec<&str> = table
        .lines()
        .nth(2)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(
        held.last().is_some_and(|cell| cell.ends_with('s')),
        "contended: {table}"
    );
}

#[test]
fn an_unreachable_server_fails_fast_with_one_line() {
    for args in [
        vec!["status"],
        vec!["run", "--lock", "x", "--", "true"],
        vec!["elect", "--name", "x", "--", "true"],
    ] {
        let started = Instant::now();
        let output = Command::new(BIN)
            .args(&args)
            .env("MONGODB_URI", UNREACHABLE)
            .output()
            .expect("run mongolock");
        assert_eq!(
            code(output.status),
            Some(69),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let message = stderr(&output);
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(message.starts_with("mongolock: "), "{message}");
        assert!(
            message.contains("127.0.0.1:1"),
            "names the server: {message}"
        );
    }
}

#[test]
fn usage_errors_exit_64() {
    let missing_uri = Command::new(BIN)
        .args(["run", "--lock", "x", "--", "true"])
        .env_remove("MONGODB_URI")
        .output()
        .expect("run mongolock");
    assert_eq!(code(missing_uri.status), Some(64));
    assert_eq!(
        stderr(&missing_uri),
        "mongolock: no MongoDB URI: pass --uri or set MONGODB_URI\n"
    );
    let checks: [&[&str]; 4] = [
        &["run", "--lock", "", "--", "true"],
        &["run", "--lock", "x", "--wait", "soon", "--", "true"],
        &["run", "--lock", "x"],
        &["status", "--collection", "system.locks"],
    ];
    for args in checks {
        let output = Command::new(BIN)
            .args(args)
            .env("MONGODB_URI", UNREACHABLE)
            .output()
            .expect("run mongolock");
        assert_eq!(
            code(output.status),
            Some(64),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn elect_runs_the_command_only_while_leading_and_fails_over() {
    let fixture = Fixture::new();
    let script = r#"echo "$ID $MONGOLOCK_TOKEN" >> log; echo $$ > "$ID.pid"; exec sleep 60"#;
    let a = Running::spawn(fixture.elect("leader", script).env("ID", "a"));
    let b = Running::spawn(fixture.elect("leader", script).env("ID", "b"));
    let pid_of = |id: &str| written_pid(&fixture.path(&format!("{id}.pid")));
    eventually(SHORT, "a leader's command", || {
        pid_of("a").or(pid_of("b")).is_some()
    });
    let (leader, follower, leader_id, follower_id) = match pid_of("a") {
        Some(_) => (a, b, "a", "b"),
        None => (b, a, "b", "a"),
    };
    let leader_child = pid_of(leader_id).expect("the leader's command pid");

    // Longer than a lease and many retry periods: the follower's command must not start.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(pid_of(follower_id), None, "two commands ran at once");

    // The leader dies without resigning: its command dies with it (Linux), and the
    // follower's starts once the lease has expired.
    leader.signal(Signal::SIGKILL);
    let killed = Instant::now();
    drop(leader.finish(SHORT));
    if cfg!(target_os = "linux") {
        eventually(SHORT, "the dead leader's command to die", || {
            is_dead(leader_child)
        });
    }
    eventually(SHORT, "the follower's command", || {
        pid_of(follower_id).is_some()
    });
    let took = killed.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "took over before the lease ended: {took:?}"
    );
    assert!(took < Duration::from_secs(8), "failover took {took:?}");

    let log = read(&fixture.path("log"));
    let tokens: Vec<u64> = log
        .lines()
        .map(|line| {
            line.split_once(' ')
                .expect("id and token")
                .1
                .parse()
                .expect("a token")
        })
        .collect();
    assert_eq!(tokens.len(), 2, "{log}");
    assert!(tokens[1] > tokens[0], "{log}");

    follower.signal(Signal::SIGTERM);
    let output = follower.finish(SHORT);
    assert_eq!(code(output.status), Some(143), "{}", stderr(&output));
}

#[test]
fn elect_restarts_the_command_on_a_new_term_and_exits_with_its_code() {
    let fixture = Fixture::new();
    let script = r#"echo "$MONGOLOCK_TOKEN" >> log; echo $$ > pid; exec sleep 60"#;
    let candidate = Running::spawn(&mut fixture.elect("restart", script));
    let mut first = None;
    eventually(SHORT, "the first term's command", || {
        first = written_pid(&fixture.path("pid"));
        first.is_some()
    });
    let first = first.expect("a pid");

    // Deposed (its record deleted): the command is stopped and started again on the next term.
    fixture.delete_lock("restart");
    eventually(SHORT, "the second term's command", || {
        read(&fixture.path("log")).lines().count() == 2
    });
    assert!(
        is_dead(first),
        "the first term's command ({first}) is still running"
    );
    let log = read(&fixture.path("log"));
    let tokens: Vec<u64> = log
        .lines()
        .map(|line| line.parse().expect("a token"))
        .collect();
    assert!(tokens[1] > tokens[0], "{log}");
    drop(candidate);

    // A command that ends on its own ends the candidacy with its exit code, and resigns.
    let output = fixture.elect("exits", "exit 3").output().expect("elect");
    assert_eq!(code(output.status), Some(3), "{}", stderr(&output));
    fixture.assert_free("exits");
}

#[test]
fn a_command_on_a_terminal_reads_it_and_ctrl_c_reaches_it() {
    let fixture = Fixture::new();
    let reader = ["--lock", "tty", "--", "sh", "-c"];
    let script = r#"echo ready; read -r line; echo "got:$line""#;
    let args = [&reader[..], &[script]].concat();

    // What is typed reaches the command (before, it was stopped by SIGTTIN and the lock was
    // renewed forever).
    let mut session = Running::spawn(&mut fixture.on_terminal("run", &args));
    session.wait_for(Stream::Stdout, "ready", SHORT);
    session.type_in(b"hello\n");
    session.wait_for(Stream::Stdout, "got:hello", SHORT);
    let output = session.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stdout(&output));

    // Ctrl-C reaches the command reading the terminal: it dies of SIGINT, the lock is
    // released and mongolock exits with 130.
    let mut session = Running::spawn(&mut fixture.on_terminal("run", &args));
    session.wait_for(Stream::Stdout, "ready", SHORT);
    session.type_in(b"\x03");
    let output = session.finish(SHORT);
    assert_eq!(code(output.status), Some(130), "{}", stdout(&output));
    assert!(!stdout(&output).contains("got:"), "{}", stdout(&output));
    fixture.assert_free("tty");
}

#[test]
fn ctrl_c_while_connecting_exits_130_at_once() {
    // Nothing listens there; the driver would give up after its 5 s selection timeout.
    let mut command = Command::new(BIN);
    command
        .args(["-v", "run", "--uri", "mongodb://127.0.0.1:1", "--lock", "x"])
        .args(["--", "true"])
        .env_remove("MONGODB_URI")
        .stdin(Stdio::null());
    let connecting = Running::spawn(&mut command);
    connecting.wait_for(Stream::Stderr, "connecting to mongodb://127.0.0.1:1", SHORT);
    let sent = Instant::now();
    connecting.signal(Signal::SIGINT);
    let output = connecting.finish(SHORT);
    let took = sent.elapsed();
    assert_eq!(code(output.status), Some(130), "{}", stderr(&output));
    assert!(
        took < Duration::from_secs(2),
        "exited {took:?} after SIGINT"
    );
    assert!(stderr(&output).ends_with("mongolock: interrupted by SIGINT\n"));
}

#[test]
fn progress_says_who_holds_the_lock_while_waiting_and_when_it_is_acquired() {
    let fixture = Fixture::new();
    let holder = Running::spawn(&mut fixture.run("progress", &[], "exec sleep 30"));
    holder.wait_for(Stream::Stderr, "acquired lock \"progress\" (token ", SHORT);

    let waiter = Running::spawn(&mut fixture.run("progress", &[], "echo ran"));
    waiter.wait_for(Stream::Stderr, "; waiting\n", SHORT);
    let waiting = waiter.text(Stream::Stderr);
    assert!(
        waiting.starts_with("mongolock: lock \"progress\" is held by "),
        "{waiting}"
    );
    assert!(waiting.contains(&holder_part(holder.pid())), "{waiting}");

    holder.signal(Signal::SIGTERM);
    assert_eq!(code(holder.finish(SHORT).status), Some(143));
    let output = waiter.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "ran\n");
    assert!(
        stderr(&output).contains("\nmongolock: acquired lock \"progress\" (token "),
        "{}",
        stderr(&output)
    );

    // -q: nothing on stderr but errors.
    let output = fixture
        .run("progress", &["-q"], "true")
        .output()
        .expect("run");
    assert_eq!(code(output.status), Some(0));
    assert_eq!(stderr(&output), "");
}

#[test]
fn renewal_trouble_and_with_v_the_library_events_reach_stderr() {
    let fixture = Fixture::new();
    let app = app_name(&fixture, "renewal");
    // One renewal (an `update`) fails as if the primary were shutting down.
    let _fail = FailPoint::on(
        &fixture.uri,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["update"], "errorCode": 91, "appName": &app },
    );
    // Without the driver's own retry, which would hide the failure from the library.
    let uri = fixture.uri_with(&format!("appName={app}&retryWrites=false"));
    let holder = Running::spawn(&mut fixture.run_at(
        &uri,
        "renew",
        &["-v", "--lease", "3s"],
        "exec sleep 30",
    ));
    holder.wait_until(Stream::Stderr, SHORT, "a renewal warning", |text| {
        text.lines()
            .any(|line| line.starts_with("mongolock: warning: ") && line.contains("lock=renew"))
    });
    let text = holder.text(Stream::Stderr);
    assert!(
        text.lines().any(|line| {
            (line.starts_with("mongolock: debug: ") || line.starts_with("mongolock: info: "))
                && line.contains("lock=renew")
        }),
        "-v shows the library's events: {text}"
    );
    // A progress line warns that the lock is at risk, and another that it recovered: the
    // renewal after the failed one succeeds, so the lock is still held.
    holder.wait_until(
        Stream::Stderr,
        SHORT,
        "the at-risk and recovery lines",
        |text| {
            text.contains("mongolock: renewals of lock \"renew\" are failing: lost in ")
                && text.contains("mongolock: renewals of lock \"renew\" succeed again")
        },
    );
    holder.signal(Signal::SIGTERM);
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(143), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("lost lock"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn status_watch_into_a_pipe_appends_dated_frames_without_escape_codes() {
    let fixture = Fixture::new();
    let _holder = Running::spawn(&mut fixture.run("watched", &[], "touch ready; exec sleep 30"));
    eventually(SHORT, "the holder's command", || {
        fixture.path("ready").exists()
    });
    // `--watch 0.2`, not only `--watch=0.2`.
    let watch = Running::spawn(fixture.mongolock("status").args(["--watch", "0.2"]));
    watch.wait_until(Stream::Stdout, SHORT, "two refreshes", |text| {
        text.matches("\nupdated ").count() >= 2
    });
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(!text.contains('\x1b'), "escape codes in a pipe: {text:?}");
    let frames: Vec<&str> = text.split("mongolock status: ").skip(1).collect();
    assert!(frames.len() >= 2, "{text}");
    for frame in frames {
        let updated = frame.lines().nth(1).unwrap_or_default();
        assert!(
            updated.starts_with("updated 20") && updated.ends_with('Z'),
            "{frame}"
        );
        assert!(frame.contains("\nwatched "), "{frame}");
    }
}

#[test]
fn status_watch_shows_failures_in_words_and_keeps_the_dated_last_data() {
    let fixture = Fixture::new();
    let _holder = Running::spawn(&mut fixture.run("kept", &[], "touch ready; exec sleep 30"));
    eventually(SHORT, "the holder's command", || {
        fixture.path("ready").exists()
    });
    let app = app_name(&fixture, "watch");
    let uri = fixture.uri_with(&format!("appName={app}"));
    let watch = Running::spawn(
        fixture
            .mongolock_at("status", &uri)
            .args(["--watch", "0.2"]),
    );
    watch.wait_for(Stream::Stdout, "\nupdated ", SHORT);
    let fail = FailPoint::on(
        &fixture.uri,
        "alwaysOn".into(),
        doc! { "failCommands": ["aggregate"], "errorCode": 13, "appName": &app },
    );
    watch.wait_for(Stream::Stdout, "showing the last data", SHORT);
    drop(fail);
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let failed = text
        .split("mongolock status: ")
        .find(|frame| frame.contains("refresh failed at "))
        .expect("a failed refresh");
    let reason = failed.lines().nth(1).unwrap_or_default();
    assert!(reason.contains("Unauthorized"), "{reason}");
    for raw in [
        "Kind:",
        "labels:",
        "source:",
        "server response",
        "RawDocument",
    ] {
        assert!(!reason.contains(raw), "driver internals in {reason:?}");
    }
    assert!(failed.contains(" old):\n\nNAME"), "{failed}");
    assert!(failed.contains("\nkept "), "{failed}");
}

#[test]
fn status_json_is_for_scripts() {
    let fixture = Fixture::new();
    fixture.insert_free_lock("a-free", 5);
    let (holder, token) = fixture.hold("b-held", &[]);

    let check = |json: &serde_json::Value| {
        assert_eq!(json["database"], DATABASE, "{json}");
        assert_eq!(json["collection"], fixture.collection.as_str(), "{json}");
        assert!(
            json["time"]
                .as_str()
                .is_some_and(|time| time.ends_with('Z')),
            "{json}"
        );
        let locks = json["locks"].as_array().expect("locks");
        assert_eq!(locks.len(), 2, "{json}");
        let (free, held) = (&locks[0], &locks[1]);
        assert_eq!(free["name"], "a-free", "{json}");
        assert_eq!(free["state"], "free", "{json}");
        assert_eq!(free["token"], 5, "{json}");
        assert!(
            free["holder"].is_null() && free["expires_in_ms"].is_null(),
            "{json}"
        );
        assert_eq!(held["name"], "b-held", "{json}");
        assert_eq!(held["state"], "held", "{json}");
        assert_eq!(held["token"], token, "{json}");
        let holder_id = held["holder"].as_str().expect("a holder");
        assert!(holder_id.contains(&holder_part(holder.pid())), "{json}");
        assert!(
            held["expires_in_ms"].as_u64().is_some_and(|ms| ms > 0),
            "{json}"
        );
        assert!(held["contended_for_ms"].is_null(), "{json}");
    };
    let output = fixture
        .mongolock("status")
        .arg("--json")
        .output()
        .expect("status");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    check(&serde_json::from_slice(&output.stdout).expect("JSON"));

    // With --watch: one object per line.
    let watch = Running::spawn(
        fixture
            .mongolock("status")
            .args(["--json", "--watch", "0.2"]),
    );
    watch.wait_until(Stream::Stdout, SHORT, "two lines", |text| {
        text.matches('\n').count() >= 2
    });
    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    for line in stdout(&output).lines() {
        check(&serde_json::from_str(line).expect("a JSON line"));
    }
}

#[test]
fn release_force_frees_a_stuck_lock_and_its_holder_stops_within_a_cadence() {
    let fixture = Fixture::new();
    // A 3 s lease is renewed every second: the holder must learn of the release within that.
    let cadence = Duration::from_secs(1);
    let (holder, token) = fixture.hold("stuck", &["--lease", "3s", "--grace", "300ms"]);

    // Without --force: refused, saying who holds it; nothing changes.
    let refused = fixture
        .mongolock("release")
        .arg("stuck")
        .output()
        .expect("release");
    assert_eq!(code(refused.status), Some(64), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("\"stuck\" is held by "), "{message}");
    assert!(message.contains(&holder_part(holder.pid())), "{message}");
    assert!(message.contains("--force"), "{message}");

    let released = fixture
        .mongolock("release")
        .args(["--force", "stuck"])
        .output()
        .expect("release --force");
    let at = Instant::now();
    assert_eq!(code(released.status), Some(0), "{}", stderr(&released));
    let said = stdout(&released);
    assert!(
        said.starts_with("released lock \"stuck\", which was held by "),
        "{said}"
    );
    assert!(said.contains(&holder_part(holder.pid())), "{said}");
    assert!(said.contains(&format!("(token {token}, ")), "{said}");

    holder.wait_for(Stream::Stderr, "lost lock \"stuck\"", SHORT);
    let told = at.elapsed();
    assert!(
        told < cadence + Duration::from_millis(800),
        "the holder learnt {told:?} after the release"
    );
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    assert!(stderr(&output).contains("taken over or its record deleted"));

    // Tokens keep rising; a lock nobody holds is left alone.
    let next = fixture
        .run("stuck", &["--wait", "0"], "echo $MONGOLOCK_TOKEN")
        .output()
        .expect("run");
    assert_eq!(code(next.status), Some(0), "{}", stderr(&next));
    let next: u64 = stdout(&next).trim().parse().expect("a token");
    assert!(next > token, "{next} after {token}");
    let again = fixture
        .mongolock("release")
        .args(["--force", "stuck"])
        .output()
        .expect("release --force");
    assert_eq!(code(again.status), Some(0), "{}", stderr(&again));
    assert_eq!(
        stdout(&again),
        "lock \"stuck\" was not held; nothing changed\n"
    );
}

#[test]
fn nothing_the_command_started_outlives_a_sigkilled_mongolock() {
    let fixture = Fixture::new();
    // One grandchild in the command's process group, one in a session of its own.
    // (Their output goes elsewhere, so a survivor cannot keep the test's pipes open.)
    let script = "exec >/dev/null 2>&1; sleep 600 & echo $! > in-group; \
                  setsid sh -c 'echo $$ > own-session; exec sleep 600' & wait";
    let grace = Duration::from_millis(300);
    let runs = [
        fixture.run("orphans", &["--lease", "2s", "--grace", "300ms"], script),
        fixture.elect("orphans-elect", script),
    ];
    for mut command in runs {
        let _ = std::fs::remove_file(fixture.path("in-group"));
        let _ = std::fs::remove_file(fixture.path("own-session"));
        let mongolock = Running::spawn(&mut command);
        let mut pids = (None, None);
        eventually(SHORT, "the grandchildren's pids", || {
            pids = (
                written_pid(&fixture.path("in-group")),
                written_pid(&fixture.path("own-session")),
            );
            pids.0.is_some() && pids.1.is_some()
        });
        let (Some(in_group), Some(own_session)) = pids else {
            unreachable!()
        };
        mongolock.signal(Signal::SIGKILL);
        let killed = Instant::now();
        drop(mongolock.finish(SHORT));
        eventually(
            grace + Duration::from_secs(1),
            "the grandchildren to die",
            || is_dead(in_group) && is_dead(own_session),
        );
        println!("grandchildren gone {:?} after SIGKILL", killed.elapsed());
    }
}

#[test]
fn leftovers_of_a_finished_command_are_stopped_before_the_lock_is_released() {
    let fixture = Fixture::new();
    // The background process ignores SIGTERM: SIGKILL after the grace period stops it. (Its
    // output goes elsewhere, so a survivor cannot keep the test's pipes open.)
    let output = fixture
        .run(
            "leftovers",
            &["--grace", "300ms"],
            "trap '' TERM; sleep 600 >/dev/null 2>&1 & echo $! > pid; exit 5",
        )
        .output()
        .expect("run");
    assert_eq!(code(output.status), Some(5), "{}", stderr(&output));
    let pid = written_pid(&fixture.path("pid")).expect("the background pid");
    assert!(is_dead(pid), "{pid} outlived mongolock");
}

#[test]
fn a_primary_stepping_down_stalls_run_for_about_a_heartbeat_not_ten_seconds() {
    let fixture = Fixture::new();
    for error_code in [91, 11600, 10107] {
        let app = app_name(&fixture, &format!("stepdown{error_code}"));
        // The first acquire fails as after a step-down; the driver then waits for its next
        // check of the server before retrying.
        let _fail = FailPoint::on(
            &fixture.uri,
            doc! { "times": 1 }.into(),
            doc! { "failCommands": ["findAndModify"], "errorCode": error_code, "appName": &app },
        );
        let uri = fixture.uri_with(&format!("appName={app}"));
        let started = Instant::now();
        let output = fixture
            .run_at(&uri, "stepdown", &["-q"], "true")
            .output()
            .expect("run");
        let took = started.elapsed();
        assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
        println!("errorCode {error_code}: run took {took:?}");
        assert!(
            took < Duration::from_secs(3),
            "errorCode {error_code}: {took:?}"
        );
    }
}

#[test]
fn usage_papercuts_have_clear_messages() {
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("MONGODB_URI", UNREACHABLE)
            .stdin(Stdio::null())
            .output()
            .expect("run mongolock")
    };
    let forgot = run(&["run", "--lock", "x", "sleep", "5"]);
    assert_eq!(code(forgot.status), Some(64));
    assert!(
        stderr(&forgot)
            .contains("tip: the command to run goes after '--': mongolock run --lock x -- sleep 5"),
        "{}",
        stderr(&forgot)
    );
    for args in [
        &["run", "--lock", "x", "--lease", "50ms", "--", "true"][..],
        &["run", "--lock", "x", "--expiry", "50ms", "--", "true"],
        &["elect", "--name", "x", "--lease", "1ms", "--", "true"],
    ] {
        let output = run(args);
        assert_eq!(code(output.status), Some(64), "{args:?}");
        assert!(
            stderr(&output).contains("at least 1s"),
            "{}",
            stderr(&output)
        );
    }
    let help = |subcommand: &str| stdout(&run(&[subcommand, "--help"]));
    let status = help("status");
    assert!(
        status.contains("Exit codes:") && status.contains("69"),
        "{status}"
    );
    for only_run in ["75", "76", "--wait", "126"] {
        assert!(
            !status.contains(only_run),
            "status --help lists {only_run}: {status}"
        );
    }
    let run_help = help("run");
    assert!(
        run_help.contains("--lease") && !run_help.contains("--expiry"),
        "{run_help}"
    );
    assert!(
        run_help.contains("75") && run_help.contains("76"),
        "{run_help}"
    );
    assert!(help("elect").contains("--lease"));
}

/// Fails naming each of `expected` that `text` lacks.
fn assert_contains_all(text: &str, expected: &[&str]) {
    let missing: Vec<&&str> = expected
        .iter()
        .filter(|line| !text.contains(**line))
        .collect();
    assert!(missing.is_empty(), "{missing:?} missing from:\n{text}");
}

/// `mongolock doctor --json` on the test server: each finding's status, pinned, and the
/// scratch lock gone afterwards.
fn doctor_statuses(output: &Output) -> Vec<(String, String)> {
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {}", stderr(output)));
    json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|finding| {
            (
                finding["check"].as_str().unwrap_or_default().to_owned(),
                finding["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pinned(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(check, status)| ((*check).to_owned(), (*status).to_owned()))
        .collect()
}

#[test]
fn doctor_pins_its_findings_on_the_test_server() {
    let fixture = Fixture::new();
    // As an application should connect, with a lease long enough to ride failovers out: only
    // the one-member replica set is a warning.
    let uri = fixture.uri_with("heartbeatFrequencyMS=500");
    let output = fixture
        .mongolock_at("doctor", &uri)
        .args(["--json", "--lease", "60s"])
        .output()
        .expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_eq!(
        doctor_statuses(&output),
        pinned(&[
            ("server version", "ok"),
            ("topology", "warning"),
            ("change streams", "ok"),
            ("write concern", "ok"),
            ("journaling", "ok"),
            ("indexes", "ok"),
            ("shard key", "ok"),
            ("manager start", "ok"),
            ("clock offsets", "ok"),
            ("driver heartbeat", "ok"),
            ("failover", "ok"),
            ("renewal headroom", "ok"),
        ])
    );
    // The defaults (a 15 s lease) and no heartbeat setting: a failover outlasts the renewal
    // window, and the driver's heartbeat is slow. The table says so, with the fixes.
    let output = fixture.mongolock("doctor").output().expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_contains_all(
        &stdout(&output),
        &[
            "driver heartbeat  warning  heartbeatFrequencyMS not set",
            "failover          warning  a failover takes up to about 20s",
            "fix: add heartbeatFrequencyMS=500",
            "verdict: fit for locks, with 3 warning(s)",
        ],
    );
    let scratch = block_on(async {
        client(&fixture.uri)
            .await
            .database(DATABASE)
            .collection::<Document>(&fixture.collection)
            .count_documents(doc! { "_id": { "$regex": "^mongolock-doctor-" } })
            .await
            .expect("count")
    });
    assert_eq!(scratch, 0, "the scratch lock was left behind");
}

#[test]
fn doctor_on_a_standalone_server_warns_of_no_change_streams_and_no_failover() {
    let fixture = Fixture::new();
    let uri = format!("{}&heartbeatFrequencyMS=500", support::standalone_uri());
    let output = fixture
        .mongolock_at("doctor", &uri)
        .args(["--json", "--lease", "60s"])
        .output()
        .expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let statuses = doctor_statuses(&output);
    for (check, status) in [
        ("topology", "warning"),
        ("change streams", "warning"),
        ("failover", "ok"),
        ("renewal headroom", "ok"),
    ] {
        assert!(
            statuses.contains(&(check.to_owned(), status.to_owned())),
            "{check}: {status} expected in {statuses:?}"
        );
    }
}

/// A lock collection sharded on another key (its sharding record planted, as `mongos`
/// keeps it) is a problem: exit 2, with the reason and the fix.
#[test]
fn doctor_finds_a_collection_sharded_on_the_wrong_key_a_problem() {
    let fixture = Fixture::new();
    let namespace = format!("{DATABASE}.{}", fixture.collection);
    let plant = |planted: bool| {
        block_on(async {
            let sharding = client(&fixture.uri)
                .await
                .database("config")
                .collection::<Document>("collections");
            if planted {
                let record = doc! { "_id": &namespace, "key": { "tenant": 1 } };
                sharding.insert_one(record).await.map(drop)
            } else {
                sharding
                    .delete_one(doc! { "_id": &namespace })
                    .await
                    .map(drop)
            }
        })
        .expect("plant or remove a sharding record in config.collections");
    };
    plant(true);
    let output = fixture.mongolock("doctor").output().expect("doctor");
    let strict = fixture
        .mongolock("doctor")
        .arg("--strict")
        .output()
        .expect("doctor --strict");
    plant(false);
    assert_eq!(code(strict.status), Some(2), "{}", stderr(&strict));
    assert_eq!(code(output.status), Some(2), "{}", stderr(&output));
    assert_contains_all(
        &stdout(&output),
        &[
            "shard key         problem  sharded on { \"tenant\": 1 }",
            "reshardCollection",
            "manager start     problem",
            "verdict: NOT fit for locks: 2 problem(s)",
        ],
    );
}

/// `mongolock check` on the test server: every check passes with real contention (hand-overs
/// between processes, stale writes refused), the figures are reported, and nothing of the
/// run is left behind.
#[test]
fn check_verifies_the_test_server_and_cleans_up() {
    let fixture = Fixture::new();
    let output = fixture
        .mongolock("check")
        .args(["--processes", "2", "--tasks", "3", "--locks", "2"])
        .args(["--duration", "3s", "--json"])
        .output()
        .expect("check");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check --json printed no JSON ({e}): {}", stderr(&output)));
    assert_eq!(json["passed"], true, "{json}");
    let checks = json["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 4, "{json}");
    for check in checks {
        assert_eq!(check["passed"], true, "{check}");
        assert!(check["cases"].as_u64().is_some_and(|n| n > 0), "{check}");
    }
    let positive = |field: &str| json[field].as_f64().is_some_and(|n| n > 0.0);
    for field in [
        "acquisitions",
        "acquisitions_per_second",
        "commands_per_acquisition",
        "stale_writes_refused",
    ] {
        assert!(positive(field), "{field}: {json}");
    }
    assert!(
        json["remote_hand_overs"]["count"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "no hand-over between processes: {json}"
    );
    assert_eq!(json["losses"], 0, "{json}");
    let (scratch_locks, check_collections) = block_on(async {
        let database = client(&fixture.uri).await.database(DATABASE);
        let locks = database
            .collection::<Document>(&fixture.collection)
            .count_documents(doc! { "_id": { "$regex": "^mongolock-check-" } })
            .await
            .expect("count");
        let collections = database
            .list_collection_names()
            .await
            .expect("list collections");
        (
            locks,
            collections
                .into_iter()
                .filter(|name| name.starts_with("mongolock_check_"))
                .count(),
        )
    });
    assert_eq!(
        (scratch_locks, check_collections),
        (0, 0),
        "the check left data behind"
    );
}

#[test]
fn watch_prints_what_happens_to_a_lock_from_any_process() {
    let fixture = Fixture::new();
    let watch = Running::spawn(fixture.mongolock("watch").args(["--json", "watched"]));
    watch.wait_for(Stream::Stdout, "\"change\":\"current\"", SHORT);

    // Another process takes the lock and lets it go.
    let (holder, token) = fixture.hold("watched", &[]);
    watch.wait_for(Stream::Stdout, "\"change\":\"acquired\"", SHORT);
    // An operator frees it under its holder.
    let output = fixture
        .mongolock("release")
        .args(["--force", "watched"])
        .output()
        .expect("release --force");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    watch.wait_for(Stream::Stdout, "\"change\":\"force_released\"", SHORT);
    drop(holder);

    watch.signal(Signal::SIGINT);
    let output = watch.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let changes: Vec<&str> = lines
        .iter()
        .map(|line| line["change"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        changes[..3],
        ["current", "acquired", "force_released"],
        "{lines:?}"
    );
    let acquired = &lines[1];
    assert_eq!(acquired["name"], "watched");
    assert_eq!(acquired["token"], token);
    assert!(
        acquired["holder"]
            .as_str()
            .is_some_and(|holder| !holder.is_empty()),
        "{acquired}"
    );
    assert_eq!(lines[2]["holder"], acquired["holder"], "{lines:?}");
    assert_eq!(lines[2]["token"], token);
}

/// `doctor`, `check` and `watch --help` say what they do and list their exit codes.
#[test]
fn help_of_watch_doctor_and_check_lists_what_they_do_and_their_exit_codes() {
    for (subcommand, texts) in [
        (
            "watch",
            &[
                "expired",
                "force-released",
                "--json",
                "0            stopped with Ctrl-C",
            ][..],
        ),
        (
            "doctor",
            &[
                "fit for locks",
                "--lease <DURATION>",
                "--json",
                "0            every finding is ok",
                "2            some finding is a problem",
            ],
        ),
        (
            "check",
            &[
                "stale write",
                "--processes <P>",
                "--duration <DURATION>",
                "1            a check failed",
            ],
        ),
    ] {
        let output = Command::new(BIN)
            .args([subcommand, "--help"])
            .output()
            .expect("help");
        assert_eq!(code(output.status), Some(0), "{subcommand}");
        assert_contains_all(&stdout(&output), texts);
    }
}

/// The lock named `name` in `status --json` output.
fn lock_in<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["locks"]
        .as_array()
        .and_then(|locks| locks.iter().find(|lock| lock["name"] == name))
        .unwrap_or_else(|| panic!("no lock {name:?} in {json}"))
}

/// `run --permits 2`: two runs hold a permit at once, a third is refused or waits, and takes
/// the permit a finished run gives back; `status` shows the holders.
#[test]
fn permits_let_that_many_runs_in_at_once_and_the_next_one_waits() {
    let fixture = Fixture::new();
    let permits = ["--permits", "2", "--lease", "2s", "--grace", "300ms"];
    let (first, first_token) = fixture.hold_as("first", "pool", &permits);
    let (second, second_token) = fixture.hold_as("second", "pool", &permits);
    assert_ne!(first_token, second_token);

    let refused = fixture
        .run("pool", &["--permits", "2", "--wait", "0"], "touch ran")
        .output()
        .expect("run");
    assert_eq!(code(refused.status), Some(75), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.starts_with("mongolock: semaphore \"pool\" is full: 2 permits held by "),
        "{message}"
    );
    assert!(message.ends_with("; not waiting (--wait 0)\n"), "{message}");
    assert!(
        !fixture.path("ran").exists(),
        "the command ran without a permit"
    );

    let json = fixture.status_json(&[]);
    let pool = lock_in(&json, "pool");
    assert_eq!(pool["kind"], "semaphore", "{json}");
    assert_eq!(pool["permits"], 2, "{json}");
    assert_eq!(pool["state"], "held", "{json}");
    let holders = pool["holders"].as_array().expect("holders");
    let mut tokens: Vec<u64> = holders
        .iter()
        .map(|holder| holder["token"].as_u64().expect("a token"))
        .collect();
    tokens.sort_unstable();
    let mut expected = vec![first_token, second_token];
    expected.sort_unstable();
    assert_eq!(tokens, expected, "{json}");
    for pid in [first.pid(), second.pid()] {
        let holder = holders
            .iter()
            .find(|holder| {
                holder["holder"]
                    .as_str()
                    .is_some_and(|id| id.contains(&holder_part(pid)))
            })
            .unwrap_or_else(|| panic!("no holder for {pid}: {json}"));
        assert_eq!(holder["access"], "permit", "{json}");
        assert!(
            holder["expires_in_ms"].as_u64().is_some_and(|ms| ms > 0),
            "{json}"
        );
    }
    let table = stdout(&fixture.mongolock("status").output().expect("status"));
    assert!(table.starts_with("NAME  KIND "), "{table}");
    assert!(table.contains(" semaphore  2/2 held "), "{table}");
    assert_eq!(table.lines().count(), 3, "a line per holder: {table}");

    // A third waits, and takes the permit the first gives back.
    let third =
        Running::spawn(&mut fixture.run("pool", &permits, "echo $MONGOLOCK_TOKEN > third.token"));
    third.wait_for(Stream::Stderr, "; waiting\n", SHORT);
    assert!(
        !fixture.path("third.token").exists(),
        "a third permit was given"
    );
    first.signal(Signal::SIGTERM);
    assert_eq!(code(first.finish(SHORT).status), Some(143));
    let output = third.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let third_token: u64 = read(&fixture.path("third.token"))
        .trim()
        .parse()
        .expect("a token");
    assert!(third_token > second_token.max(first_token), "{third_token}");

    // A permit lost (its record deleted) stops the command, as a lock lost does.
    fixture.delete_lock("pool");
    let output = second.finish(SHORT);
    assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("a permit of semaphore \"pool\" was lost while the command ran"),
        "{message}"
    );
}

/// `--shared` runs hold the reader/writer lock together; an `--exclusive` one waits for them,
/// holds new readers back while it waits, and goes next.
#[test]
fn shared_runs_overlap_and_an_exclusive_one_waits_for_them() {
    let fixture = Fixture::new();
    let (reader_a, token_a) = fixture.hold_as("a", "doc", &["--shared"]);
    let (reader_b, token_b) = fixture.hold_as("b", "doc", &["--shared"]);
    assert_ne!(token_a, token_b);

    let refused = fixture
        .run("doc", &["--exclusive", "--wait", "0"], "touch wrote")
        .output()
        .expect("run");
    assert_eq!(code(refused.status), Some(75), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.starts_with("mongolock: reader/writer lock \"doc\" is read-locked by "),
        "{message}"
    );
    let json = fixture.status_json(&["doc"]);
    let doc = lock_in(&json, "doc");
    assert_eq!(doc["kind"], "read_write", "{json}");
    let accesses: Vec<&str> = doc["holders"]
        .as_array()
        .expect("holders")
        .iter()
        .filter_map(|holder| holder["access"].as_str())
        .collect();
    assert_eq!(accesses, ["read", "read"], "{json}");

    let writer = Running::spawn(&mut fixture.run(
        "doc",
        &["--exclusive"],
        "echo $MONGOLOCK_TOKEN > writer.token",
    ));
    writer.wait_for(Stream::Stderr, "; waiting\n", SHORT);
    // Once the writer is seen waiting, a new reader is held back rather than let in.
    eventually(
        SHORT,
        "a new reader held back by the waiting writer",
        || {
            let output = fixture
                .run("doc", &["-q", "--shared", "--wait", "0"], "true")
                .output()
                .expect("run");
            code(output.status) == Some(75)
        },
    );
    assert!(
        !fixture.path("writer.token").exists(),
        "the writer ran among readers"
    );
    for reader in [reader_a, reader_b] {
        reader.signal(Signal::SIGTERM);
        assert_eq!(code(reader.finish(SHORT).status), Some(143));
    }
    let output = writer.finish(SHORT);
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("acquired the write lock on \"doc\" (token "),
        "{}",
        stderr(&output)
    );
    let writer_token: u64 = read(&fixture.path("writer.token"))
        .trim()
        .parse()
        .expect("a token");
    assert!(writer_token > token_a.max(token_b), "{writer_token}");
}

/// Several `--lock`: all held at once with a token each, none held while one is taken, and
/// the command stopped when any is lost.
#[test]
fn several_locks_are_held_all_at_once_and_lost_together() {
    let fixture = Fixture::new();
    let holder = Running::spawn(&mut fixture.run(
        "b",
        &["--lock", "a", "--lease", "2s", "--grace", "300ms"],
        r#"echo "$MONGOLOCK_TOKENS $MONGOLOCK_TOKEN $MONGOLOCK_LOCK" > env; exec sleep 30"#,
    ));
    eventually(SHORT, "the command's environment", || {
        read(&fixture.path("env")).ends_with('\n')
    });
    let env = read(&fixture.path("env"));
    let words: Vec<&str> = env.split_whitespace().collect();
    let [tokens, token, lock] = words[..] else {
        panic!("three words: {env}")
    };
    let pairs: Vec<(&str, u64)> = tokens
        .split(',')
        .map(|pair| {
            let (name, token) = pair.split_once('=').expect("NAME=TOKEN");
            (name, token.parse().expect("a token"))
        })
        .collect();
    assert_eq!(
        pairs.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
        ["a", "b"],
        "byte order: {env}"
    );
    assert_eq!(
        (lock, token),
        ("a", pairs[0].1.to_string().as_str()),
        "{env}"
    );

    let json = fixture.status_json(&["a", "b"]);
    for (name, token) in &pairs {
        let lock = lock_in(&json, name);
        assert_eq!(lock["state"], "held", "{json}");
        assert_eq!(lock["token"], *token, "{json}");
        let holder_id = lock["holder"].as_str().expect("a holder");
        assert!(holder_id.contains(&holder_part(holder.pid())), "{json}");
    }
    let taken = fixture
        .run("b", &["--wait", "0"], "touch ran")
        .output()
        .expect("run");
    assert_eq!(code(taken.status), Some(75), "{}", stderr(&taken));
    // All or none: with "a" taken, "c" is not kept either.
    let partly = fixture
        .run("c", &["--lock", "a", "--wait", "0"], "touch ran")
        .output()
        .expect("run");
    assert_eq!(code(partly.status), Some(75), "{}", stderr(&partly));
    let message = stderr(&partly);
    assert!(
        message.starts_with("mongolock: lock \"a\" is held by "),
        "{message}"
    );
    assert!(!fixture.path("ran").exists());
    fixture.assert_free("c");

    // Losing one stops the command and names it.
    fixture.delete_lock("b");
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("lost lock \"b\""), "{message}");
    assert!(
        message.contains("lock \"b\" was lost while the command ran"),
        "{message}"
    );
    fixture.assert_free("a");
}

/// A renewal failing for a multi-lock warns, naming the lock, and the recovery is told.
#[test]
fn renewal_trouble_of_several_locks_is_told_per_lock() {
    let fixture = Fixture::new();
    let app = app_name(&fixture, "renew-all");
    let _fail = FailPoint::on(
        &fixture.uri,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["update"], "errorCode": 91, "appName": &app },
    );
    let uri = fixture.uri_with(&format!("appName={app}&retryWrites=false"));
    let holder = Running::spawn(&mut fixture.run_at(
        &uri,
        "x",
        &["--lock", "y", "--lease", "3s"],
        "exec sleep 30",
    ));
    holder.wait_until(
        Stream::Stderr,
        SHORT,
        "the at-risk and recovery lines",
        |text| {
            let failing = ["x", "y"].iter().find(|name| {
                text.contains(&format!(
                    "mongolock: renewals of lock \"{name}\" are failing"
                ))
            });
            failing.is_some_and(|name| {
                text.contains(&format!(
                    "mongolock: renewals of lock \"{name}\" succeed again"
                ))
            })
        },
    );
    holder.signal(Signal::SIGTERM);
    let output = holder.finish(SHORT);
    assert_eq!(code(output.status), Some(143), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("lost lock"),
        "{}",
        stderr(&output)
    );
}

/// Flags that do not go together, and counts no semaphore can have, are refused before
/// anything is written or run.
#[test]
fn bad_combinations_and_counts_exit_64_and_write_nothing() {
    let fixture = Fixture::new();
    for extra in [
        &["--lock", "b", "--shared"][..],
        &["--lock", "b", "--exclusive"],
        &["--lock", "b", "--permits", "2"],
        &["--permits", "0"],
        &["--permits", "1001"],
        &["--permits", "many"],
        &["--shared", "--exclusive"],
        &["--shared", "--permits", "2"],
        &["--exclusive", "--permits", "2"],
        &["--lock", "b,c"],
    ] {
        let output = fixture.run("a", extra, "touch ran").output().expect("run");
        assert_eq!(
            code(output.status),
            Some(64),
            "{extra:?}: {}",
            stderr(&output)
        );
        assert!(output.stdout.is_empty(), "{extra:?}");
        assert!(!fixture.path("ran").exists(), "{extra:?} ran the command");
    }
    let several = fixture
        .run("a", &["--lock", "b", "--shared"], "true")
        .output()
        .expect("run");
    assert_eq!(
        stderr(&several),
        "mongolock: --shared is for one lock, but --lock was given 2 names: several --lock take plain locks, all at once\n"
    );
    let zero = stderr(
        &fixture
            .run("a", &["--permits", "0"], "true")
            .output()
            .expect("run"),
    );
    assert!(
        zero.contains("--permits <N>") && zero.contains("1..=1000"),
        "{zero}"
    );
    assert_eq!(
        fixture.documents(),
        0,
        "a refused run wrote a lock document"
    );
}

/// A name is one kind of lock for everyone: asking for another kind exits 78, runs nothing
/// and leaves the holder alone.
#[test]
fn asking_for_another_kind_of_lock_exits_78() {
    let fixture = Fixture::new();
    let (_lock, _) = fixture.hold_as("lock", "plain", &[]);
    let (_permit, _) = fixture.hold_as("permit", "pool", &["--permits", "2"]);
    for (lock, extra, found) in [
        (
            "plain",
            &["--shared"][..],
            "is a lock, not a reader/writer lock",
        ),
        (
            "plain",
            &["--permits", "2"],
            "is a lock, not a semaphore of 2 permits",
        ),
        (
            "pool",
            &["--permits", "3"],
            "is a semaphore of 2 permits, not a semaphore of 3",
        ),
        ("pool", &[], "is a semaphore of 2 permits, not a lock"),
        (
            "pool",
            &["--lock", "other"],
            "is a semaphore of 2 permits, not a lock",
        ),
    ] {
        let mut flags = extra.to_vec();
        flags.extend(["--wait", "0"]);
        let output = fixture
            .run(lock, &flags, "touch ran")
            .output()
            .expect("run");
        let message = stderr(&output);
        assert_eq!(code(output.status), Some(78), "{lock} {extra:?}: {message}");
        assert!(message.contains(found), "{message}");
        assert!(message.contains("nothing was written"), "{message}");
        assert!(
            !fixture.path("ran").exists(),
            "{lock} {extra:?} ran the command"
        );
    }
    fixture.assert_free("other");
    let json = fixture.status_json(&["plain", "pool"]);
    assert_eq!(lock_in(&json, "plain")["state"], "held", "{json}");
    assert_eq!(
        lock_in(&json, "pool")["holders"].as_array().map(Vec::len),
        Some(1),
        "{json}"
    );
}

/// `status NAME…` shows just those locks, in that order, a name without a record as free.
#[test]
fn status_of_named_locks_shows_those_in_order() {
    let fixture = Fixture::new();
    fixture.insert_free_lock("a-free", 5);
    let (holder, token) = fixture.hold("b-held", &[]);
    let json = fixture.status_json(&["b-held", "nobody", "a-free", "b-held"]);
    let locks = json["locks"].as_array().expect("locks");
    let names: Vec<&str> = locks
        .iter()
        .filter_map(|lock| lock["name"].as_str())
        .collect();
    assert_eq!(names, ["b-held", "nobody", "a-free"], "{json}");
    assert_eq!(locks[0]["token"], token, "{json}");
    assert_eq!(locks[0]["kind"], "mutex", "{json}");
    let holders = locks[0]["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 1, "{json}");
    assert_eq!(holders[0]["access"], "exclusive", "{json}");
    assert!(
        holders[0]["holder"]
            .as_str()
            .is_some_and(|id| id.contains(&holder_part(holder.pid()))),
        "{json}"
    );
    assert_eq!(locks[1]["state"], "free", "{json}");
    assert!(locks[1]["kind"].is_null(), "{json}");
    assert_eq!(locks[2]["token"], 5, "{json}");

    let table = stdout(
        &fixture
            .mongolock("status")
            .args(["nobody", "b-held"])
            .output()
            .expect("status"),
    );
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0][..3],
        ["NAME", "STATE", "HOLDER"],
        "mutexes only: no KIND: {table}"
    );
    assert_eq!(rows[1][..2], ["nobody", "free"], "{table}");
    assert_eq!(rows[2][..2], ["b-held", "held"], "{table}");
    let invalid = fixture
        .mongolock("status")
        .arg("")
        .output()
        .expect("status");
    assert_eq!(code(invalid.status), Some(64), "{}", stderr(&invalid));
}

/// `run --help` says what each flag holds and lists the kind-mismatch code.
#[test]
fn run_help_says_what_each_flag_holds_and_every_exit_code() {
    let output = Command::new(BIN)
        .args(["run", "--help"])
        .output()
        .expect("help");
    assert_eq!(code(output.status), Some(0));
    assert_contains_all(
        &stdout(&output),
        &[
            "--shared",
            "--exclusive",
            "--permits <N>",
            "--lock A --lock B",
            "MONGOLOCK_TOKENS",
            "a=12,b=40",
            "75           lock not acquired within --wait",
            "76           lock lost",
            "78           the name is another kind of lock",
        ],
    );
}

/// `release --force` on a semaphore frees every permit, naming each holder with its own
/// token, and every holder stops its command.
#[test]
fn release_force_frees_every_holder_of_a_semaphore() {
    let fixture = Fixture::new();
    let permits = ["--permits", "2", "--lease", "3s", "--grace", "300ms"];
    let (first, first_token) = fixture.hold_as("first", "pool", &permits);
    let (second, second_token) = fixture.hold_as("second", "pool", &permits);
    let released = fixture
        .mongolock("release")
        .args(["--force", "pool"])
        .output()
        .expect("release --force");
    assert_eq!(code(released.status), Some(0), "{}", stderr(&released));
    let said = stdout(&released);
    assert!(
        said.starts_with("released semaphore \"pool\", which was held by "),
        "{said}"
    );
    for (holder, token) in [(&first, first_token), (&second, second_token)] {
        let named = said
            .split("), ")
            .find(|part| part.contains(&format!(" (token {token}, ")));
        assert!(
            named.is_some_and(|part| part.contains(&holder_part(holder.pid()))),
            "each holder with its own token: {said}"
        );
    }
    assert!(
        said.ends_with("; each holder learns it at its next renewal\n"),
        "{said}"
    );
    for holder in [first, second] {
        let output = holder.finish(SHORT);
        assert_eq!(code(output.status), Some(76), "{}", stderr(&output));
    }
    let json = fixture.status_json(&["pool"]);
    assert_eq!(lock_in(&json, "pool")["state"], "free", "{json}");
}

/// The connection flags go before the subcommand too, as with `kubectl` or `etcdctl`
/// (`mongolock --uri URI status`), and the environment still stands in for them.
#[test]
fn connection_flags_are_accepted_before_the_subcommand() {
    let fixture = Fixture::new();
    let (_holder, token) = fixture.hold("global", &[]);
    let before = |subcommand: &str| {
        let mut command = Command::new(BIN);
        command
            .args(["--uri", &fixture.uri, "--database", DATABASE])
            .args(["--collection", &fixture.collection, subcommand])
            .env_remove("MONGODB_URI")
            .stdin(Stdio::null())
            .current_dir(&fixture.dir);
        command
    };
    let status_of = |output: &Output| {
        assert_eq!(code(output.status), Some(0), "{}", stderr(output));
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        let lock = lock_in(&json, "global").clone();
        (lock["state"].clone(), lock["token"].clone())
    };
    let held = (serde_json::json!("held"), serde_json::json!(token));

    let output = before("status")
        .args(["--json", "global"])
        .output()
        .expect("status");
    assert_eq!(status_of(&output), held);

    // The URI from the environment, the database before the subcommand and the collection
    // after it.
    let output = Command::new(BIN)
        .args(["--database", DATABASE, "status", "--json", "global"])
        .args(["--collection", &fixture.collection])
        .env("MONGODB_URI", &fixture.uri)
        .stdin(Stdio::null())
        .output()
        .expect("status");
    assert_eq!(status_of(&output), held);

    // `run` takes them there as well, and holds the lock in that collection.
    let output = before("run")
        .args([
            "--lock",
            "global-run",
            "--",
            "sh",
            "-c",
            "echo $MONGOLOCK_LOCK",
        ])
        .output()
        .expect("run");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "global-run\n");
    assert!(
        fixture.status_json(&[]).to_string().contains("global-run"),
        "the run's lock is in the fixture's collection"
    );
}

/// `doctor` as a deploy gate: on the test server (warnings only: one member, the default
/// lease against failover timing, no heartbeat setting) it exits 0, and 1 with `--strict`;
/// its help says so.
#[test]
fn doctor_exits_0_with_only_warnings_and_1_with_strict() {
    let fixture = Fixture::new();
    let output = fixture.mongolock("doctor").output().expect("doctor");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("\nverdict: fit for locks, with "),
        "{}",
        stdout(&output)
    );
    let output = fixture
        .mongolock("doctor")
        .args(["--strict", "--json"])
        .output()
        .expect("doctor --strict");
    assert_eq!(code(output.status), Some(1), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["worst"], "warning", "{json}");

    let help = Command::new(BIN)
        .args(["doctor", "--help"])
        .output()
        .expect("help");
    assert_contains_all(
        &stdout(&help),
        &[
            "--strict",
            "0            every finding is ok, or the worst is a warning",
            "1            --strict only: the worst finding is a warning",
        ],
    );
}

/// A hold at risk is told in one short line — the lock, the time left, the cause in a few
/// words — not the driver's whole error (a raw dump of the server's reply); `-v`, or a
/// `RUST_LOG` that selects `mongolock=info`, adds the full error on a line of its own.
#[test]
fn the_at_risk_line_is_short_and_v_adds_the_full_error() {
    let fixture = Fixture::new();
    // Plain, with -v, and with RUST_LOG choosing the events instead of -v.
    for (verbose, rust_log) in [(false, false), (true, false), (true, true)] {
        let purpose = match (verbose, rust_log) {
            (false, _) => "risk",
            (true, false) => "risk-v",
            (true, true) => "risk-log",
        };
        let app = app_name(&fixture, purpose);
        // One renewal (an `update`) fails as if the primary were shutting down.
        let _fail = FailPoint::on(
            &fixture.uri,
            doc! { "times": 1 }.into(),
            doc! { "failCommands": ["update"], "errorCode": 91, "appName": &app },
        );
        let uri = fixture.uri_with(&format!("appName={app}&retryWrites=false"));
        let extra: &[&str] = if verbose && !rust_log {
            &["-v", "--lease", "3s"]
        } else {
            &["--lease", "3s"]
        };
        let mut run = fixture.run_at(&uri, "risk", extra, "exec sleep 30");
        if rust_log {
            run.env("RUST_LOG", "mongolock=info");
        } else {
            run.env_remove("RUST_LOG");
        }
        let holder = Running::spawn(&mut run);
        holder.wait_until(Stream::Stderr, SHORT, "the recovery line", |text| {
            text.contains("mongolock: renewals of lock \"risk\" succeed again")
        });
        holder.signal(Signal::SIGTERM);
        let output = holder.finish(SHORT);
        let text = stderr(&output);
        let at_risk: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("mongolock: renewals of lock \"risk\" are failing"))
            .collect();
        let [line] = at_risk[..] else {
            panic!("one at-risk line expected: {text}")
        };
        let (_, time_left) = line
            .split_once(": lost in ")
            .unwrap_or_else(|| panic!("no time left: {line}"));
        assert!(
            time_left.starts_with(|c: char| c.is_ascii_digit()),
            "time left: {line}"
        );
        assert!(line.contains("ShutdownInProgress"), "the cause: {line}");
        assert!(line.len() <= 120, "{} characters: {line}", line.len());
        // The full error: the store's words, the driver's and the server's reply, after the
        // short line.
        let full = text.lines().position(|line| {
            line.starts_with("mongolock: info: renewals of lock \"risk\" are failing: ")
                && line.contains("MongoDB extend")
                && line.contains("server response")
        });
        if verbose {
            let short = text.lines().position(|shown| shown == line);
            assert!(
                full.is_some() && full > short,
                "-v shows the full error after the short line: {text}"
            );
        } else {
            assert_eq!(full, None, "only with -v: {text}");
            assert!(!text.contains("server response"), "{text}");
        }
    }
}
