#!/usr/bin/env bash
# Installs the Python peers of the benchmark (S6) into .venv/peers/ (inside .venv, so git, eslint and prettier
# ignore it): MLServer (with onnxruntime for bench/peers/mlserver/runtime.py) and nvidia-pytriton, whose wheel ships
# a CPU tritonserver 2.51 with the python backend. pytriton pins numpy < 2, so pandas (an MLServer dependency) is held below 2.3 to match. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv/peers
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check 'mlserver==1.7.1' onnxruntime 'nvidia-pytriton==0.7.0' 'pandas<2.3'
echo "peers ready: $VENV"
