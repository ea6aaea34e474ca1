//! `mongolock run` of a plain lock: exclusion, the token, `--wait`, loss, exit codes, progress,
//! renewal trouble, leftovers, a primary stepping down.

use std::time::{Duration, Instant};

use mongodb::bson::doc;
use nix::sys::signal::Signal;

use crate::fixture::{
    Fixture, SHORT, app_name, code, holder_part, is_dead, lock_in, read, stderr, stdout,
    written_pid,
};
use crate::process::{Running, Stream};
use crate::support::eventually;
use crate::support::fail_point::FailPoint;

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
    let acquired = stderr(&output);
    let acquired = acquired
        .lines()
        .find(|line| line.starts_with("mongolock: acquired lock \"progress\" (token "))
        .unwrap_or_else(|| panic!("no acquired line: {acquired}"));
    assert!(
        acquired.contains(&format!(") in {}", fixture.namespace())),
        "names where the lock is: {acquired}"
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
    let (_fail, uri) = fixture.renewal_fails_once("renewal");
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
    holder.terminate_still_holding(SHORT);
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
            // The short line comes first: no longer warning of the same renewal before it.
            let first = text.lines().find(|shown| shown.contains("renew"));
            assert_eq!(first, Some(line), "the at-risk line first: {text}");
        }
    }
}

/// `run --arrival-order` joins the name's line: each waiting run has a place, earliest
/// first, which `status` shows, and the lock goes round in that order when it is freed.
#[test]
fn runs_in_arrival_order_wait_in_line_and_are_served_in_it() {
    let fixture = Fixture::new();
    let in_line = ["--arrival-order"];
    let holder = Running::spawn(&mut fixture.run(
        "line",
        &in_line,
        "touch held; while [ ! -e go ]; do sleep 0.05; done",
    ));
    eventually(SHORT, "the holder's command", || {
        fixture.path("held").exists()
    });
    let queue = || -> Vec<String> {
        let json = fixture.status_json(&["line"]);
        lock_in(&json, "line")["queue"]
            .as_array()
            .map(|queue| {
                queue
                    .iter()
                    .filter_map(|place| place["holder"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut waiters = Vec::new();
    for id in ["first", "second"] {
        let waiter = Running::spawn(
            fixture
                .run("line", &in_line, r#"echo "$ID $MONGOLOCK_TOKEN" >> served"#)
                .env("ID", id),
        );
        let places = waiters.len() + 1;
        eventually(SHORT, &format!("{id} in line"), || queue().len() == places);
        waiters.push(waiter);
    }
    let line = queue();
    for (place, waiter) in line.iter().zip(&waiters) {
        assert!(
            place.contains(&holder_part(waiter.pid())),
            "earliest first: {line:?}"
        );
    }
    let table = stdout(&fixture.mongolock("status").output().expect("status"));
    assert_eq!(
        table.matches("waiting (exclusive)").count(),
        2,
        "a line per waiting run: {table}"
    );

    std::fs::write(fixture.path("go"), "").expect("let the holder finish");
    assert_eq!(code(holder.finish(SHORT).status), Some(0));
    for waiter in waiters {
        let output = waiter.finish(SHORT);
        assert_eq!(code(output.status), Some(0), "{}", stderr(&output));
    }
    let served = read(&fixture.path("served"));
    let order: Vec<&str> = served
        .lines()
        .filter_map(|line| line.split(' ').next())
        .collect();
    assert_eq!(order, ["first", "second"], "{served}");
}
