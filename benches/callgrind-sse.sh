#!/usr/bin/env bash
# Instruction counts (valgrind callgrind) of each SSE implementation on the 6 MB Anthropic-shaped
# workload: repeatable on a shared, noisy machine, where wall-clock medians are not.
# Usage: benches/callgrind-sse.sh [CHUNK...]   (default: 16384 1460 64)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p ferroloop-bench --example sse_once
bin=target/release/examples/sse_once
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,; }
chunks=("$@"); [ ${#chunks[@]} -gt 0 ] || chunks=(16384 1460 64)
printf '%-8s %-20s %15s %12s\n' chunk implementation instructions "vs ferroloop"
for chunk in "${chunks[@]}"; do
  base=$(count none "$chunk")
  ours=""
  for imp in ferroloop "ferroloop (Stream)" eventsource-stream sse-stream sseer sse-parse; do
    n=$(( $(count "$imp" "$chunk") - base ))
    [ -n "$ours" ] || ours=$n
    printf '%-8s %-20s %15d %11.2fx\n' "$chunk" "$imp" "$n" "$(echo "$n / $ours" | bc -l)"
  done
done
