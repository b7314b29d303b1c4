#!/usr/bin/env bash
# The Node suite: install the npm dev dependencies under node/node_modules, build the addon
# (debug, to keep CI fast) and the `ferroloop` binary (the replay server of the client and agent
# suites), run `node --test`, and type-check the TypeScript example.
set -euo pipefail
cd "$(dirname "$0")/../node"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node/npm missing: installing Debian's nodejs and npm"
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
echo "node $(node --version), npm $(npm --version)"

# `npm ci` installs exactly package-lock.json; fall back to `npm install` without a lockfile.
if [[ -f package-lock.json ]]; then
    npm ci --no-audit --no-fund --loglevel=error
else
    npm install --no-audit --no-fund --loglevel=error
fi
npm run --silent build
# The client and agent suites run against `ferroloop serve-replay` (node/test/replay.js).
(cd .. && cargo build --quiet -p ferroloop-cli)
# The deliberate-panic test prints the panic message; keep it to one line.
RUST_BACKTRACE=0 npm test
npx tsc --noEmit -p examples/tsconfig.json
echo "tsc --noEmit: examples type-check"
