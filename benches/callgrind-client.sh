#!/usr/bin/env bash
# Instruction counts (valgrind callgrind) of the streaming HTTP client against the decoder alone
# on the same 6 MB Anthropic-shaped bytes: the repeatable form of "client + decoder within 2× of
# the decoder alone" on a shared, noisy machine.
#
# The server (`ferroloop serve-replay`) runs natively in its own process; only the client process
# runs under callgrind. Each mode runs with 1 and with 3 streams (passes); (I(3) − I(1)) / 2 is
# the marginal cost of one 6 MB stream, with setup, workload generation and the first connection
# cancelled out.
#
# Usage: benches/callgrind-client.sh [CHUNK_BYTES...]
#   CHUNK_BYTES: how the server writes the body; `0` = one piece with a content-length (the
#   client reads as much as the socket holds), `16384` = HTTP/1.1 chunks of 16 KiB (the client
#   sees 16 KiB frames, like the decoder's 16 KiB chunks). Default: 16384 0.
# Set FERROLOOP=/path/to/ferroloop to use an existing CLI build as the server.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p ferroloop-bench --features client --example client_once --example anthropic_workload
if [ -z "${FERROLOOP:-}" ]; then
  cargo build --release -q -p ferroloop-cli
  FERROLOOP=target/release/ferroloop
fi
bin=target/release/examples/client_once
work=$(mktemp -d)
server_pid=""
cleanup() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
target/release/examples/anthropic_workload 42 6000000 > "$work/stream.sse"

count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,; }
# Marginal instructions of one pass: (I(3) - I(1)) / 2.
per_pass() { local one three; one=$(count "$@" 1); three=$(count "$@" 3); echo $(( (three - one) / 2 )); }

decoder=$(per_pass decoder)
sse=$(per_pass sse)
chunks=("$@"); [ ${#chunks[@]} -gt 0 ] || chunks=(16384 0)
printf '%-14s %-28s %15s %10s\n' "server writes" "client side" "Ir per stream" "ratio"
printf '%-14s %-28s %15d %10s\n' "(in memory)" "SSE parser alone, 16 KiB" "$sse" "1"
printf '%-14s %-28s %15d %10s\n' "(in memory)" "SSE + decoder alone, 16 KiB" "$decoder" "1"
for chunk in "${chunks[@]}"; do
  if [ "$chunk" = 0 ]; then piece=""; label="one piece"; else piece=", \"chunk_bytes\": $chunk"; label="$chunk B chunks"; fi
  printf '{"responses": [{"body": {"fixture": "%s"}%s}], "when_exhausted": "repeat_last"}\n' \
    "$work/stream.sse" "$piece" > "$work/script.json"
  "$FERROLOOP" serve-replay --script "$work/script.json" --ignore-stdin --idle-exit-ms 600000 > "$work/banner" &
  server_pid=$!
  for _ in $(seq 100); do [ -s "$work/banner" ] && break; sleep 0.1; done
  url=$(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$work/banner" | head -1)
  client_sse=$(per_pass client-sse "$url")
  client_decode=$(per_pass client-decode "$url")
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
  printf '%-14s %-28s %15d %9.2fx\n' "$label" "client, raw events" "$client_sse" "$(echo "$client_sse / $sse" | bc -l)"
  printf '%-14s %-28s %15d %9.2fx\n' "$label" "client + decoder" "$client_decode" "$(echo "$client_decode / $decoder" | bc -l)"
done
