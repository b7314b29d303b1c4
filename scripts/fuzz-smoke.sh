#!/usr/bin/env bash
# Short fuzzing smoke run of every cargo-fuzz target (not run by CI; see README "Fuzzing").
# Usage: scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]   (default 30)
# Needs a nightly toolchain and cargo-fuzz (installed here if missing). Corpora are seeded from
# the shared fixtures; a crash leaves its input in fuzz/artifacts/<target>/ — turn it into a
# regression test (a conformance vector or a unit test) before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
for target in $(cargo +nightly fuzz list); do
  corpus="fuzz/corpus/$target"
  mkdir -p "$corpus"
  cp tests/fixtures/*/*.sse "$corpus/" 2>/dev/null || true
  echo "== fuzz $target for ${secs}s"
  cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$secs" -rss_limit_mb=2048
done
