#!/usr/bin/env bash
# Every test suite of ferroloop, from a fresh clone: the README's test command, and what CI runs.
# Installs what it needs (nothing is installed by hand). Each suite prints its runner's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A clean clone builds everything once: incremental caches would only add gigabytes to target/.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

section() { printf '\n==== %s\n' "$*"; }

section "rust: format"
cargo fmt --all -- --check

section "rust: clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The workspace build turns on the core's `client` feature (the CLI needs it); the core with its
# default features (none), as a library user gets it, must build as cleanly.
cargo clippy -p ferroloop --all-targets --locked -- -D warnings

section "rust: tests (incl. the client and the agent against the loopback replay server)"
cargo test --workspace --locked

section "rust: bounded memory (release: 1 GiB of messages, a 10 GiB hostile event)"
cargo test -p ferroloop --release --locked --test memory_bound

section "rust: docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

section "c: libferroloop (C programs, valgrind)"
bash scripts/test-c.sh

section "node: addon (napi-rs), node --test, tsc"
bash scripts/test-node.sh

section "python: pytest + mypy"
bash scripts/test-python.sh

section "done"
echo "all suites passed"
