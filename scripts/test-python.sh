#!/usr/bin/env bash
# The Python package's suite: builds the `ferroloop` CLI (the client and agent tests talk to its
# loopback replay server, `ferroloop serve-replay`), builds the extension into a virtualenv at the
# repository root (`.venv`), runs pytest on python/tests, `mypy --strict` on python/examples
# (which exercises the .pyi stubs) and `mypy.stubtest` (the stubs against the built module).
# Installs everything it needs; prints pytest's summary line.
#
#   FERROLOOP_PY_INSTALL=pip bash scripts/test-python.sh   # install with `pip install ./python`
#                                                          # (a release build, as users get it)
#   FERROLOOP_PY_FEATURES= bash scripts/test-python.sh     # build without exact counting (the
#                                                          # tests then check count_tokens raises)
#
# The extension is built with the cargo feature `exact` by default: the CLI already compiles the
# core with it, so the two builds share the core's artifacts (without it the core is compiled a
# second time, which costs more than the feature).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV=.venv

if ! command -v "$PYTHON" >/dev/null 2>&1 || ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "installing python3 and python3-venv with apt-get"
    apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
python -m pip install -q --disable-pip-version-check "maturin>=1.7,<2" pytest pytest-asyncio mypy

echo "python: building the ferroloop CLI (replay server for the client and agent tests)"
cargo build --quiet --locked -p ferroloop-cli
export FERROLOOP_BIN="$PWD/target/debug/ferroloop"

FEATURES="${FERROLOOP_PY_FEATURES-exact}"
if [ "${FERROLOOP_PY_INSTALL:-develop}" = pip ]; then
    python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./python
else
    # A debug build installed in place: fast, and shares the workspace's target directory.
    (cd python && maturin develop --quiet ${FEATURES:+--features "$FEATURES"} 2>&1 | { grep -v '^Ignoring ' || true; })
    python -c 'import ferroloop._native' || { echo "maturin develop failed" >&2; exit 1; }
fi

# The source distribution, what pip builds when no wheel fits (`maturin sdist`: a few seconds, no
# compilation): the crates it compiles, Cargo.lock, the package, its stubs and the licence texts.
echo "python: sdist contents"
rm -rf target/sdist-check
(cd python && maturin sdist --out ../target/sdist-check 2>&1 | { grep -v '^Ignoring ' || true; }) >/dev/null
python - target/sdist-check/ferroloop-*.tar.gz <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1]) as sdist:
    top = sdist.getnames()[0].split("/")[0]
    names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    info = sdist.extractfile(f"{top}/PKG-INFO").read().decode()
    needed = ["PKG-INFO", "pyproject.toml", "Cargo.toml", "Cargo.lock", "core/Cargo.toml",
              "python/Cargo.toml", "ferroloop/__init__.py", "ferroloop/_native.pyi",
              "ferroloop/py.typed", "LICENSE-MIT", "LICENSE-APACHE"]
    missing = [name for name in needed if name not in names]
    for licence in ["LICENSE-MIT", "LICENSE-APACHE"]:
        if f"License-File: {licence}" not in info:
            missing.append(f"PKG-INFO's License-File: {licence}")
    if missing:
        sys.exit(f"the sdist {sys.argv[1]} lacks: {', '.join(missing)}")
EOF
# The sdist ships python/tests but not the repository's shared data (tests/, node/, cli/, the
# README): run from the unpacked sdist, against the extension just installed, the modules that
# read them must skip those tests, naming the file, and pass the others (a few seconds).
echo "python: the sdist's tests outside the repository"
tar -xzf target/sdist-check/ferroloop-*.tar.gz -C target/sdist-check
(cd target/sdist-check/ferroloop-*/python && timeout 300 python -m pytest -q -p no:cacheprovider -rs \
    tests/test_decode.py tests/test_sse.py tests/test_tokens.py tests/test_event_types.py \
    tests/test_parity.py tests/test_result_types.py tests/test_readme.py \
    tests/test_distribution.py) > target/sdist-check/pytest.log 2>&1 || {
    cat target/sdist-check/pytest.log >&2
    echo "the sdist's tests fail outside the repository (target/sdist-check/pytest.log)" >&2
    exit 1
}
grep -q "SKIPPED .*from the ferroloop repository" target/sdist-check/pytest.log || {
    echo "the sdist's tests skipped nothing outside the repository: is the check still outside it?" >&2
    exit 1
}

echo "python: pytest"
set +e
timeout 900 python -m pytest python/tests -q -p no:cacheprovider
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
elif [ "$status" -ne 0 ]; then
    exit "$status"
fi

echo "python: mypy --strict on the examples and tests (checks the stubs)"
(cd python && python -m mypy --strict --no-incremental examples tests)

# The stubs against the built module: every name, signature and property the stubs declare exists
# at runtime with that shape, and nothing the module exports is left out of them.
echo "python: stubtest (stubs against the runtime module)"
MYPY_CACHE_DIR=target/stubtest-cache python -m mypy.stubtest ferroloop --allowlist python/stubtest-allowlist.txt
