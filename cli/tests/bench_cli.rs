//! `ferroloop bench` as a program: filtered runs, JSON rows, errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

mod common;
use common::bin;

#[test]
fn json_rows_for_a_filtered_quick_run() {
    let out = bin()
        .args(["bench", "--quick", "--json", "--rounds", "1"])
        .args(["--filter", "exec/noop"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["implementation"], "ferroloop ToolExecutor::run");
    assert_eq!(rows[0]["ferroloop_speedup"], 1.0);
    assert_eq!(rows[1]["implementation"], "futures::join_all (floor)");
    for row in rows {
        assert_eq!(row["unit"], "µs/op");
        assert_eq!(row["checksum"], 10_000);
        assert_eq!(row["samples"], 1);
        assert!(row["median"].as_f64().unwrap() > 0.0);
        assert!(row["allocs_per_event"].as_f64().is_some());
    }
}

#[test]
fn a_table_by_default_and_an_error_for_an_unknown_workload() {
    let out = bin()
        .args(["bench", "--quick", "--rounds", "1", "--filter", "exec/noop"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ferroloop ×") && text.contains("exec/noop-10000-calls-per-turn"));

    let out = bin()
        .args(["bench", "--quick", "--filter", "no-such-workload"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no workload matches"));
}
