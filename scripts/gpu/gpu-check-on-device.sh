#!/usr/bin/env bash
# Runs Nereid's GPU set-up check and GPU metrics on a machine with an NVIDIA GPU (the H200 device), printing
# what a reviewer needs to see: `nereid gpu check` (driver, GPUs, providers, what is missing), the same after
# applying the LD_LIBRARY_PATH it advises, and the nv_gpu_* lines of a metrics scrape next to nvidia-smi's view.
#
# Run from the repository root:
#   [source .device/setup.sh]                      # where node is not installed (see shared/gpu/README.md)
#   [NEREID_GPU_WHEEL=/path/onnxruntime_gpu-1.30.0-….whl]        # install from this wheel first, or
#   [NEREID_GPU_PROVIDER_DIR=/tmp/ort-gpu]         # a folder with libonnxruntime_providers_{shared,cuda}.so: they
#                                                  # are packed into a wheel-shaped zip and installed through
#                                                  # `nereid gpu setup --wheel`, so the set-up path runs too
#   bash scripts/gpu/gpu-check-on-device.sh
# Everything it starts in the background is stopped by pid before it exits.
set -uo pipefail
cd "$(dirname "$0")/../.."

section() { printf '\n=== %s ===\n' "$*"; }

command -v node >/dev/null || { echo "node is not on PATH (source .device/setup.sh first)" >&2; exit 2; }
if [ ! -f dist/cli/main.js ]; then
  section "build"
  node node_modules/typescript/bin/tsc -p tsconfig.build.json || { echo "build failed" >&2; exit 2; }
fi
NEREID=(node dist/cli/main.js)
work=$(mktemp -d /tmp/nereid-gpu-check.XXXXXX)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

section "machine"
node --version
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used,utilization.gpu,power.draw,power.limit --format=csv

wheel=${NEREID_GPU_WHEEL:-}
if [ -z "$wheel" ] && [ -n "${NEREID_GPU_PROVIDER_DIR:-}" ]; then
  version=$(node -p "require('onnxruntime-node/package.json').version")
  wheel="$work/onnxruntime_gpu-$version-device-double.whl"
  section "packing $NEREID_GPU_PROVIDER_DIR into $wheel (stored, not compressed)"
  python3 - "$NEREID_GPU_PROVIDER_DIR" "$wheel" "$version" <<'PY' || exit 2
import os, sys, zipfile
src, out, version = sys.argv[1:]
with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
    z.writestr(f'onnxruntime_gpu-{version}.dist-info/METADATA', f'Name: onnxruntime-gpu\nVersion: {version}\n')
    for f in sorted(os.listdir(src)):
        if f.startswith('libonnxruntime_providers_') and f.endswith('.so'):
            z.write(os.path.join(src, f), 'onnxruntime/capi/' + f)
            print('packed', f)
PY
fi
if [ -n "$wheel" ]; then
  section "nereid gpu setup --wheel $wheel"
  "${NEREID[@]}" gpu setup --wheel "$wheel"
  echo "exit status: $?"
fi

section "nereid gpu check"
"${NEREID[@]}" gpu check | tee "$work/check.txt"
echo "exit status: ${PIPESTATUS[0]}"
advice=$(grep -o 'export LD_LIBRARY_PATH=.*' "$work/check.txt" | head -1 || true)
if [ -n "$advice" ]; then
  section "nereid gpu check, after the advice: $advice"
  eval "$advice"
  "${NEREID[@]}" gpu check
  echo "exit status: $?"
fi

scrape() { node -e "fetch('http://127.0.0.1:$1/metrics').then(r => r.text()).then(t => process.stdout.write(t))"; }

start_server() {
  "${NEREID[@]}" serve --model-repository examples/model_repository --http-port 0 --grpc-port 0 --metrics-port 0 \
    --metrics-address 127.0.0.1 --metrics-interval-ms 1000 --log-verbose 1 "$@" 2>"$work/serve.log" &
  server_pid=$!
  for _ in $(seq 1 100); do
    port=$(grep -oE 'Started Metrics Service at [^ "]+' "$work/serve.log" | sed 's/.*://' | head -1)
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "the server did not start:"; cat "$work/serve.log"; return 1
}
stop_server() { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; server_pid=; }

section "metrics with --allow-gpu-metrics=true (two scrapes 3 s apart; energy counts from server start)"
if start_server --allow-gpu-metrics=true; then
  grep -iE 'gpu|nvml' "$work/serve.log"
  scrape "$port" | grep -E '^(# (HELP|TYPE) )?nv_(gpu_|energy_)'
  sleep 3
  echo "--- 3 s later"
  scrape "$port" | grep -E '^nv_(gpu_|energy_)'
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=uuid,memory.total,memory.used,utilization.gpu,power.draw,power.limit --format=csv,nounits
  stop_server
fi

section "metrics with --allow-gpu-metrics=false (no nv_gpu_* expected)"
if start_server --allow-gpu-metrics=false; then
  echo "nv_gpu_* lines: $(scrape "$port" | grep -c '^nv_gpu_')"
  stop_server
fi
