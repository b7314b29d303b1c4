//! Peak resident memory, per workload (Linux: `/proc/self/status` `VmHWM`, reset through
//! `/proc/self/clear_refs`). Elsewhere the figures are absent.

/// Resets the process's peak-RSS mark to its current RSS. Returns false where unsupported.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak RSS in bytes since start or the last [`reset_peak_rss`].
pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The process's current RSS in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn peak_is_at_least_current_and_grows_with_touched_memory() {
        if !reset_peak_rss() {
            return; // not Linux: nothing to measure
        }
        // Other tests run in this process at the same time, so only bounds that hold whatever
        // they allocate are asserted.
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let now = rss_bytes().unwrap();
        let peak = peak_rss_bytes().unwrap();
        assert!(now >= 64 << 20, "{now}");
        assert!(peak >= now, "{peak} vs {now}");
    }
}
