#!/usr/bin/env bash
# Compatibility suite: Triton's own Python clients (tritonclient.http/.grpc, sync, async, aio, streaming) and
# perf_analyzer against real Nereid servers started from dist/ by test/compat/conftest.py.
# Prepares .venv (scripts/setup-python.sh, idempotent), builds, then runs pytest; extra arguments go to pytest
# (e.g. `bash scripts/run-compat.sh -k grpc -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh
npm run build --silent
export PYTHONDONTWRITEBYTECODE=1
exec .venv/bin/python -m pytest -p no:cacheprovider -rsx --durations=10 test/compat "$@"
