//! `mongolock run` of semaphores, reader/writer locks and several locks, and their flags.

use nix::sys::signal::Signal;

use crate::fixture::{Fixture, SHORT, code, holder_part, lock_in, read, stderr, stdout};
use crate::process::{Running, Stream};
use crate::support::eventually;

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
    let header = format!("locks in {}\nNAME  KIND ", fixture.namespace());
    assert!(table.starts_with(&header), "{table}");
    assert!(table.contains(" semaphore  2/2 held "), "{table}");
    assert_eq!(table.lines().count(), 4, "a line per holder: {table}");

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
    let (_fail, uri) = fixture.renewal_fails_once("renew-all");
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
    holder.terminate_still_holding(SHORT);
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
