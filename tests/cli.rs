//! End-to-end tests of the `mongolock` binary against a real MongoDB-compatible server:
//! mutual exclusion of `run`, the token in the environment, `--wait`, the command stopped on
//! lock loss, exit codes, signal forwarding, `status`, connection errors and `elect`.
//!
//! Needs `MONGODB_URI` (`scripts/test.sh` starts a throw-away SecantusDB server and sets it);
//! the tests that need a server fail, never skip, without one. Each test works in its own
//! collection. Conditions are polled with deadlines; the only fixed waits check that
//! something does *not* happen.
#![cfg(unix)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use mongodb::Client;
use mongodb::bson::doc;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
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
        let mut command = Command::new(BIN);
        command
            .arg(subcommand)
            .args(["--uri", &self.uri, "--database", DATABASE])
            .args(["--collection", &self.collection])
            .env_remove("MONGODB_URI")
            .stdin(Stdio::null());
        command
    }

    /// `mongolock run --lock NAME [extra…] -- sh -c SCRIPT`, run in the scratch directory.
    fn run(&self, lock: &str, extra: &[&str], script: &str) -> Command {
        let mut command = self.mongolock("run");
        command
            .args(["--lock", lock])
            .args(extra)
            .args(["--", "sh", "-c", script])
            .current_dir(&self.dir);
        command
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

/// A running `mongolock`, stopped (SIGTERM, then SIGKILL) if the test ends without waiting
/// for it.
struct Running {
    child: Option<Child>,
    pid: Pid,
}

impl Running {
    fn spawn(command: &mut Command) -> Self {
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mongolock");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
        Self {
            child: Some(child),
            pid,
        }
    }

    fn pid(&self) -> Pid {
        self.pid
    }

    fn signal(&self, signal: Signal) {
        kill(self.pid, signal).expect("signal mongolock");
    }

    /// Waits for the exit (at most `limit`) and returns the status and output.
    fn finish(mut self, limit: Duration) -> Output {
        let mut child = self.child.take().expect("not finished yet");
        let deadline = Instant::now() + limit;
        while child.try_wait().expect("poll mongolock").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let output = child
                    .wait_with_output()
                    .expect("collect mongolock's output");
                panic!(
                    "mongolock did not exit within {limit:?}; stderr: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child
            .wait_with_output()
            .expect("collect mongolock's output")
    }
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

fn code(status: ExitStatus) -> Option<i32> {
    status.code()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
    let output = fixture
        .run("busy", &["--wait", "0"], "true")
        .output()
        .expect("run mongolock");
    assert_eq!(
        code(output.status),
        Some(0),
        "released: {}",
        stderr(&output)
    );
}

#[test]
fn the_command_is_stopped_when_the_lock_is_lost() {
    let fixture = Fixture::new();
    let holder = Running::spawn(&mut fixture.run(
        "doomed",
        &["--expiry", "2s", "--grace", "300ms"],
        "echo $$ > pid; exec sleep 30",
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
    let output = fixture.run("free-lock", &[], "true").output().expect("run");
    assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    let holder = Running::spawn(&mut fixture.run(
        "held-lock",
        &[],
        "echo $MONGOLOCK_TOKEN > token; exec sleep 30",
    ));
    eventually(SHORT, "the holder's token", || {
        read(&fixture.path("token")).ends_with('\n')
    });
    let token = read(&fixture.path("token")).trim().to_owned();

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
    let output = fixture
        .run("exits", &["--wait", "0"], "true")
        .output()
        .expect("run");
    assert_eq!(
        code(output.status),
        Some(0),
        "resigned: {}",
        stderr(&output)
    );
}
