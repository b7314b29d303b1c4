//! Peak resident memory, per workload (Linux: `/proc/self/status` `VmHWM`, reset through
//! `/proc/self/clear_refs`). Elsewhere the figures are absent.

/// Resets the process's peak-RSS mark to its current RSS. Returns false where unsupported.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak RSS in bytes since start or the last [`reset_peak_rss`].
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
