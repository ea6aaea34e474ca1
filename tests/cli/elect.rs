//! `mongolock elect`.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::fixture::{Fixture, SHORT, code, is_dead, read, stderr, written_pid};
use crate::process::Running;
use crate::support::eventually;

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
