#!/usr/bin/env bash
# The streaming HTTP client and its loopback replay server: the client's fault-injection suite
# (core/tests/client.rs, feature `client`), its randomized soak (core/tests/client_soak.rs; the
# seed is printed, FERROLOOP_SOAK_SEED replays it), the replay crate, and `ferroloop serve-replay`.
# Everything runs on 127.0.0.1; nothing needs installing beyond the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

cargo test --locked -p ferroloop --features client --test client 2>&1 | tail -n 3
cargo test --locked -p ferroloop --features client --test client_soak 2>&1 | tail -n 3
cargo test --locked -p ferroloop-replay 2>&1 | grep 'test result' | head -n 1
cargo test --locked -p ferroloop-cli --test serve_replay_cli 2>&1 | tail -n 3
