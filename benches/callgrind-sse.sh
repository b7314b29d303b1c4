#!/usr/bin/env bash
# Instruction counts (valgrind callgrind) of each SSE implementation: repeatable on a shared,
# noisy machine, where wall-clock medians are not.
# Usage: benches/callgrind-sse.sh [CHUNK...]   (default: 16384 1460 64)
# Environment: WORKLOAD=anthropic (default; the 6 MB Anthropic-shaped stream) | anthropic-prefix
#   (its first 256 KiB) | single (one 16 MiB data line; adds a memcpy floor row);
#   IMPLS="ferroloop sse-stream" to measure a subset (names without spaces).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p ferroloop-bench --example sse_once
bin=target/release/examples/sse_once
workload=${WORKLOAD:-anthropic}
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" "$workload" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,; }
chunks=("$@"); [ ${#chunks[@]} -gt 0 ] || chunks=(16384 1460 64)
if [ -n "${IMPLS:-}" ]; then
  read -r -a impls <<<"$IMPLS"
else
  impls=(ferroloop "ferroloop (Stream)" eventsource-stream sse-stream sseer sse-parse)
  # eventsource-stream is quadratic in an event's size: minutes under valgrind on 16 MiB.
  [ "$workload" != single ] || impls=(ferroloop "ferroloop (Stream)" sse-stream sseer sse-parse memcpy)
fi
printf '%-18s %-8s %-20s %15s %12s\n' workload chunk implementation instructions "vs ferroloop"
for chunk in "${chunks[@]}"; do
  base=$(count none "$chunk")
  ours=""
  for imp in "${impls[@]}"; do
    n=$(( $(count "$imp" "$chunk") - base ))
    [ -n "$ours" ] || ours=$n
    printf '%-18s %-8s %-20s %15d %11.2fx\n' "$workload" "$chunk" "$imp" "$n" "$(echo "$n / $ours" | bc -l)"
  done
done
