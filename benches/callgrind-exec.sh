#!/usr/bin/env bash
# Instructions per call (valgrind callgrind) of the tool executor against its join_all floor:
# no-op tools ready on their first poll, and tools pending on their first poll that one external
# batch answers (the bindings' host tools). Deterministic, unlike wall time on a shared machine.
# Usage: benches/callgrind-exec.sh [CALLS [ITERATIONS]]   (default: 10000 3)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
iterations=${2:-3}
cargo build --release -q -p ferroloop-bench --example exec_work
bin=target/release/examples/exec_work
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$n" "$iterations" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,; }
base=$(count setup)
per_call() { echo "($(count "$1") - $base) / ($n * $iterations)" | bc; }
printf '%-14s %12s\n' mode "Ir/call"
for mode in floor run pending-floor pending-run; do
  printf '%-14s %12s\n' "$mode" "$(per_call "$mode")"
done
