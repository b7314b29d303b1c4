#!/usr/bin/env bash
# Short fuzzing smoke run of every cargo-fuzz target (not run by CI; see README "Fuzzing").
# Usage: scripts/fuzz-smoke.sh [SECONDS_PER_TARGET] [TARGET...]   (default 30 s, every target)
# Needs a nightly toolchain and cargo-fuzz (installed here if missing). Corpora are seeded at run
# time from the shared test data (tests/fixtures, tests/decode; nothing is committed under
# fuzz/corpus). A crash leaves its input in fuzz/artifacts/<target>/ and stops the run — turn it
# into a regression test (core/tests/regressions.rs, or a conformance vector) before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
shift || true
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

# Seeds: raw provider streams for the SSE and decoder targets, JSON documents for the
# partial-JSON view (behind two chunk-size bytes, which the target reads first).
seed() {
  local target="$1" corpus="fuzz/corpus/$1"
  mkdir -p "$corpus"
  case "$target" in
    sse)
      cp tests/fixtures/*/*.sse tests/decode/streams/*/*.sse "$corpus/" 2>/dev/null || true ;;
    sse_feeds)
      # 17 control bytes first (see `check_sse_feeds`): no size cap, then (mode, size) pairs
      # that mix every entry point at chunk sizes around the parser's 16-byte small-chunk path.
      for f in tests/fixtures/*/*.sse tests/decode/streams/*/*.sse; do
        printf '\000\000\040\001\005\005\100\006\003\017\017\016\310\014\020\002\050' |
          cat - "$f" > "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")"
      done ;;
    decode_anthropic)
      cp tests/fixtures/anthropic/*.sse tests/decode/streams/anthropic/*.sse "$corpus/" 2>/dev/null || true ;;
    decode_openai_chat|agent_openai_chat)
      cp tests/fixtures/openai-chat/*.sse "$corpus/" 2>/dev/null || true ;;
    decode_openai_responses|agent_openai_responses)
      cp tests/decode/streams/openai-responses/*.sse "$corpus/" 2>/dev/null || true ;;
    agent_stream)
      # The first byte picks the API (0 Anthropic, 1 Chat, 2 Responses); the rest is its stream.
      for f in tests/fixtures/anthropic/*.sse tests/decode/streams/anthropic/*.sse; do
        printf '\000' | cat - "$f" > "$corpus/anthropic-$(basename "$f")"
      done
      for f in tests/fixtures/openai-chat/*.sse; do
        printf '\001' | cat - "$f" > "$corpus/chat-$(basename "$f")"
      done
      for f in tests/decode/streams/openai-responses/*.sse; do
        printf '\002' | cat - "$f" > "$corpus/responses-$(basename "$f")"
      done ;;
    # agent_requests and agent_history build their histories from the bytes: no seeds.
    partial_json)
      for f in tests/decode/expected/*/*.json; do
        printf '\005\003' | cat - "$f" > "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")"
      done ;;
    tokens)
      cp tests/fixtures/*/*.sse tests/decode/expected/*/*.json "$corpus/" 2>/dev/null || true
      find tests/tokens/sample -type f -size -16k -exec cp {} "$corpus/" \; 2>/dev/null || true ;;
    tokens_request)
      cp tests/decode/expected/*/*.json "$corpus/" 2>/dev/null || true
      find tests/tokens -name '*.json' -size -64k -exec cp {} "$corpus/" \; 2>/dev/null || true ;;
  esac
}

dict_for() {
  case "$1" in
    decode_*|agent_openai_chat|agent_openai_responses|agent_stream) echo "fuzz/dicts/decode.dict" ;;
    partial_json) echo "fuzz/dicts/partial_json.dict" ;;
    *) echo "" ;;
  esac
}

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build
for target in "${targets[@]}"; do
  seed "$target"
  dict="$(dict_for "$target")"
  extra=()
  [ -n "$dict" ] && extra+=("-dict=$dict")
  echo "== fuzz $target for ${secs}s"
  cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 "${extra[@]}"
done
echo "fuzz smoke: ${#targets[@]} targets, ${secs}s each, no crash"
