//! Process probes for mechanism checks: resident memory and live tokio tasks.

/// This process's resident set size in KiB (`VmRSS` of `/proc/self/status`), or `None`
/// where there is no such file (non-Linux).
pub(crate) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Tasks alive on the current tokio runtime (spawned and not yet finished, sleeping
/// timers included). Panics outside a runtime.
pub(crate) fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// CPU time the server under measurement has used so far, summed over its threads
/// (`/proc/<pid>/task/*/schedstat`, nanoseconds on a CPU), when `MONGOLOCK_BENCH_SERVER_PID`
/// names it (`scripts/bench.sh` sets it for the server it starts); `None` otherwise (a
/// server given by `MONGODB_URI` alone, or non-Linux).
pub(crate) fn server_cpu() -> Option<std::time::Duration> {
    let pid = std::env::var("MONGOLOCK_BENCH_SERVER_PID").ok()?;
    let tasks = std::fs::read_dir(format!("/proc/{}/task", pid.trim())).ok()?;
    let mut nanos = 0_u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        nanos += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(std::time::Duration::from_nanos(nanos))
}
