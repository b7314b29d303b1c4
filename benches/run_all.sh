#!/usr/bin/env bash
# Every benchmark on this machine, one after the other, into one report:
#   1. `ferroloop bench` (the Rust core against its Rust peers, interleaved rounds);
#   2. if present, `benches/python/bench.py` (the Python package against the official SDKs),
#      in a venv at .venv-bench with its peers installed (anthropic, httpx-sse, tiktoken);
#   3. if present, `benches/node/bench.mjs` (the Node package against the JS peers).
#
# Usage: benches/run_all.sh [--quick] [--out FILE]
#   --quick   smaller inputs and fewer rounds everywhere (a smoke run, not for publishing)
#   --out     also write the combined report to FILE (default: stdout only)
# Environment: PYTHON (default python3), BENCH_SKIP_PYTHON=1, BENCH_SKIP_NODE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick="--quick" ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

report=$(mktemp)
trap 'rm -f "$report"' EXIT
say() { printf '%s\n' "$*" | tee -a "$report"; }
note() { printf '%s\n' "$*" >&2; }

say "# ferroloop benchmarks — $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""
say "machine: $(nproc) cores, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), \
$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(rustc --version)"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
say ""

note "building the CLI (release)…"
cargo build --release --quiet -p ferroloop-cli
say "## ferroloop bench ${quick}"
say ""
say '```'
# The progress bar goes to the terminal (stderr); the table to the report.
target/release/ferroloop bench ${quick} | tee -a "$report"
say '```'

# A script accepting --quick gets it.
script_args() { if [ -n "$quick" ] && grep -q -- '--quick' "$1"; then echo "--quick"; fi; }

if [ -f benches/python/bench.py ] && [ "${BENCH_SKIP_PYTHON:-0}" != 1 ]; then
  python=${PYTHON:-python3}
  venv=.venv-bench
  if [ ! -x "$venv/bin/python" ]; then
    note "creating $venv…"
    "$python" -m venv "$venv"
  fi
  note "installing the Python peers into $venv…"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet anthropic httpx httpx-sse tiktoken
  if [ -f benches/python/requirements.txt ]; then
    "$venv/bin/pip" install --quiet -r benches/python/requirements.txt
  fi
  if [ -f python/pyproject.toml ]; then
    # A release build of the package (pip builds maturin projects in release mode).
    note "building and installing the ferroloop Python package (release)…"
    "$venv/bin/pip" install --quiet ./python
  fi
  say ""
  say "## Python (benches/python/bench.py)"
  say ""
  say '```'
  # shellcheck disable=SC2046
  if ! "$venv/bin/python" benches/python/bench.py $(script_args benches/python/bench.py) | tee -a "$report"; then
    say "(benches/python/bench.py failed; see stderr)"
  fi
  say '```'
else
  note "benches/python/bench.py: not present or skipped"
fi

if [ -f benches/node/bench.mjs ] && [ "${BENCH_SKIP_NODE:-0}" != 1 ]; then
  if [ -f node/package.json ]; then
    note "building the ferroloop Node package (release)…"
    (
      cd node && npm install --no-audit --no-fund --silent
      if grep -q '"build:release"' package.json; then npm run --silent build:release; else npm run --silent --if-present build; fi
    )
  fi
  if [ -f benches/node/package.json ]; then
    note "installing the Node peers…"
    (cd benches/node && npm install --no-audit --no-fund --silent)
  fi
  say ""
  say "## Node (benches/node/bench.mjs)"
  say ""
  say '```'
  # shellcheck disable=SC2046
  if ! node benches/node/bench.mjs $(script_args benches/node/bench.mjs) | tee -a "$report"; then
    say "(benches/node/bench.mjs failed; see stderr)"
  fi
  say '```'
else
  note "benches/node/bench.mjs: not present or skipped"
fi

say ""
say "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$out" ]; then
  cp "$report" "$out"
  note "report written to $out"
fi
