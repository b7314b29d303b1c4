#!/usr/bin/env bash
# Instruction counts (valgrind callgrind) of the C API's two ways of feeding the SSE parser over
# the 6 MB Anthropic-shaped stream: fl_sse_parser_feed + fl_sse_parser_next (the chunk copied)
# and fl_sse_parser_feed_each (the chunk read in place), the baseline (reading the file, copying
# each chunk into the consumer's buffer) subtracted.
# Usage: benches/callgrind-c-sse.sh [CHUNK...]   (default: 64 1460 16384 6000000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p ferroloop-capi
cargo build --release -q -p ferroloop-bench --example anthropic_workload
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
out="$target_dir/c-bench"
mkdir -p "$out"
stream="$out/anthropic-42-6000000.sse"
"$target_dir/release/examples/anthropic_workload" 42 6000000 >"$stream"
# Linked statically: no loader work in the counts, and the release library as built above.
cc -std=c11 -O2 -Wall -Wextra -Werror -Ibindings/c/include benches/c/sse_feed.c \
    "$target_dir/release/libferroloop.a" -lpthread -ldl -lm -o "$out/sse_feed"
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$out/sse_feed" "$@" "$stream" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,; }
chunks=("$@"); [ ${#chunks[@]} -gt 0 ] || chunks=(64 1460 16384 6000000)
printf '%-9s %15s %15s %16s\n' chunk "feed + next" "feed_each" "each / next"
for chunk in "${chunks[@]}"; do
  base=$(count none "$chunk")
  next=$(( $(count feed-next "$chunk") - base ))
  each=$(( $(count feed-each "$chunk") - base ))
  printf '%-9s %15d %15d %15.2fx\n' "$chunk" "$next" "$each" "$(echo "$each / $next" | bc -l)"
done
