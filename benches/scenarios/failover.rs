//! S6: election failover between processes with separate clients. A candidate in a child
//! process is killed (SIGKILL) while leading: how long until the survivor leads. Then the
//! survivor resigns: how long until a fresh candidate process leads.

use std::process::Stdio;
use std::time::Duration;

use mongolock::{ElectionOptions, LockOptions};
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::Instant;

use crate::child::{Args, Side, emit, scratch_name};
use crate::support::stats::millis;

const ELECTION: &str = "s6-leader";

fn election_options(args: &Args) -> ElectionOptions {
    ElectionOptions::default()
        .with_lease_duration(args.millis("lease_ms", 3000))
        .with_renew_deadline(args.millis("renew_ms", 2000))
        .with_retry_period(args.millis("retry_ms", 1000))
}

/// A candidate process (`--child s6-candidate`) and its announcements.
struct Candidate {
    process: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Candidate {
    fn spawn(database: &str, args: &Args) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut process = Command::new(exe)
            .arg("--child")
            .arg("s6-candidate")
            .arg(format!("database={database}"))
            .arg(format!("lease_ms={}", args.get("lease_ms", 3000_u64)))
            .arg(format!("renew_ms={}", args.get("renew_ms", 2000_u64)))
            .arg(format!("retry_ms={}", args.get("retry_ms", 1000_u64)))
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn candidate: {e}"))?;
        let stdout = process
            .stdout
            .take()
            .ok_or_else(|| "candidate has no stdout".to_owned())?;
        Ok(Self {
            process,
            lines: BufReader::new(stdout).lines(),
        })
    }

    /// Waits for the line `RESULT state=<state>`; the instant it arrived.
    async fn announced(&mut self, state: &str, within: Duration) -> Result<Instant, String> {
        let wanted = format!("RESULT state={state}");
        let wait = async {
            loop {
                match self.lines.next_line().await {
                    Ok(Some(line)) if line == wanted => return Ok(Instant::now()),
                    Ok(Some(_)) => {}
                    Ok(None) => return Err(format!("candidate exited before {state}")),
                    Err(e) => return Err(format!("candidate output: {e}")),
                }
            }
        };
        tokio::time::timeout(within, wait)
            .await
            .map_err(|_| format!("candidate not {state} within {within:?}"))?
    }

    async fn kill(&mut self) {
        let _ = self.process.kill().await;
    }
}

/// The candidate process: campaigns, announces `campaigning` and `leader`, then waits to be
/// killed.
pub(crate) async fn candidate(args: &Args) -> Result<(), String> {
    let side = Side::connect("s6-candidate", &args.text("database", "bench_s6")).await?;
    let manager = side.manager(LockOptions::default()).await?;
    let election = manager
        .election(ELECTION, election_options(args))
        .map_err(|e| e.to_string())?;
    emit("state", "campaigning");
    election.campaign().await.map_err(|e| e.to_string())?;
    emit("state", "leader");
    std::future::pending::<()>().await;
    Ok(())
}

/// S6: crash → new leader, resign → new leader, in milliseconds.
pub(crate) async fn s6(args: &Args) -> Result<(), String> {
    let options = election_options(args);
    let (lease, retry) = (options.lease_duration(), options.retry_period());
    let settle = retry * 2;
    let database = scratch_name("s6");
    let side = Side::connect("s6-survivor", &database).await?;

    // Crash: the child leads, the survivor campaigns, the child is killed.
    let mut first = Candidate::spawn(&database, args)?;
    first.announced("leader", Duration::from_secs(30)).await?;
    let manager = side.manager(LockOptions::default()).await?;
    let election = manager
        .election(ELECTION, options.clone())
        .map_err(|e| e.to_string())?;
    let campaign = {
        let election = election.clone();
        tokio::spawn(async move { election.campaign().await.map(|_| Instant::now()) })
    };
    tokio::time::sleep(settle).await;
    let killed = Instant::now();
    first.kill().await;
    emit("lease_ms", lease.as_millis());
    emit("retry_ms", retry.as_millis());
    // Far past the target: a failover this slow is a figure (a timeout), not a broken bench.
    let cap = (lease + retry * 4).max(Duration::from_secs(10));
    let Ok(led) = tokio::time::timeout(cap, campaign).await else {
        emit("timeout", format!("crash>{}s", cap.as_secs()));
        return Ok(());
    };
    let led = led
        .map_err(|e| format!("campaign task: {e}"))?
        .map_err(|e| format!("campaign: {e}"))?;
    emit("crash_ms", format!("{:.0}", millis(led - killed)));

    // Resign: a fresh candidate process waits, the survivor resigns.
    let mut second = Candidate::spawn(&database, args)?;
    second
        .announced("campaigning", Duration::from_secs(30))
        .await?;
    tokio::time::sleep(settle).await;
    let resigned = Instant::now();
    election
        .resign()
        .await
        .map_err(|e| format!("resign: {e}"))?;
    let cap = (retry * 6).max(Duration::from_secs(10));
    match second.announced("leader", cap).await {
        Ok(led) => emit("resign_ms", format!("{:.0}", millis(led - resigned))),
        Err(_) => emit("timeout", format!("resign>{}s", cap.as_secs())),
    }
    second.kill().await;
    let _ = tokio::time::timeout(Duration::from_secs(10), manager.shutdown()).await;
    side.drop_database().await;
    Ok(())
}
