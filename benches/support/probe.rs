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
