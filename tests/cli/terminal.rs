//! `mongolock run` on a terminal (under `script(1)`): the command reads it, Ctrl-C reaches it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::fixture::{BIN, Fixture, SHORT, code, stderr, stdout};
use crate::process::{Running, Stream};

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
