#!/usr/bin/env bash
# Install the test dependencies and run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
# serial; `bash scripts/test.sh -n auto --dist loadfile` runs a worker per core (pytest-xdist, whole
# files per worker: about half the time), not yet what CI runs (README)
exec .venv/bin/python -m pytest -p no:cacheprovider -q -ra --durations=40 "$@"
