#!/usr/bin/env bash
# Every test suite of ferroloop, from a fresh clone: the README's test command, and what CI runs.
# Installs what it needs (nothing is installed by hand). Each suite prints its runner's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

section() { printf '\n==== %s\n' "$*"; }

section "rust: format"
cargo fmt --all -- --check

section "rust: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

section "rust: tests"
cargo test --workspace --locked

section "rust: docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

section "client: loopback fault injection"
bash scripts/test-client.sh

section "c: libferroloop (C programs, valgrind)"
bash scripts/test-c.sh

section "done"
echo "all suites passed"
