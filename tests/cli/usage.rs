//! Usage errors, help texts and an unreachable server.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::{
    BIN, DATABASE, Fixture, UNREACHABLE, assert_contains_all, code, lock_in, stderr, stdout,
};

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

/// `watch`, `release`, `status`, `doctor` and `check --help` say what they do and list
/// their exit codes.
#[test]
fn help_of_watch_release_status_doctor_and_check_lists_what_they_do_and_exit_codes() {
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
            "release",
            &[
                "--force",
                "66           no record of the name",
                "64           usage error: a held lock without --force",
            ],
        ),
        (
            "status",
            &[
                "no record",
                "waiting (ACCESS)",
                "earliest first",
                "40 characters",
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
            "--arrival-order",
            "Fairness::ArrivalOrder",
            "Who goes next:",
        ],
    );
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
