#!/usr/bin/env bash
# Install the test dependencies and run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
# one worker per core, each taking whole test files (a file's servers and mounts stay in one process)
exec .venv/bin/python -m pytest -p no:cacheprovider -q -ra --durations=40 -n auto --dist loadfile "$@"
