#!/usr/bin/env bash
# The Python package's suite: builds the extension into a virtualenv at the repository root
# (`.venv`), runs pytest on python/tests and `mypy --strict` on python/examples (which exercises the
# .pyi stubs). Installs everything it needs; prints pytest's summary line.
#
#   FERROLOOP_PY_INSTALL=pip bash scripts/test-python.sh   # install with `pip install ./python`
#                                                          # (a release build, as users get it)
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

if [ "${FERROLOOP_PY_INSTALL:-develop}" = pip ]; then
    python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./python
else
    # A debug build installed in place: fast, and shares the workspace's target directory.
    (cd python && maturin develop --quiet 2>&1 | { grep -v '^Ignoring ' || true; })
    python -c 'import ferroloop._native' || { echo "maturin develop failed" >&2; exit 1; }
fi

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
