#!/usr/bin/env bash
# The cores benchmark (issue 15) on the H200 host (16 cores; the two-GPU kind has 32): req/s and main-thread CPU
# for 1, 2, 4, 8, 16 front-end threads at concurrency 1, 16, 64, 256, HTTP binary and gRPC, `simple` with dynamic
# batching and 4 instances, the server pinned to the first half of the cores and the load-generator processes
# (bench/cores/load.ts, no perf_analyzer or network needed) to the second half. About 6 minutes on 16 cores.
#
# Pack here first (Node 24, production dependencies, tsx, the build): bash scripts/gpu/pack-cores-bench.sh; the device
# call carries [".device/cores", "dist"]. Run from the repository root:
#   bash scripts/gpu/cores-bench-on-device.sh [extra bench/cores.ts flags, e.g. --batching off --instances 1]
# Writes bench/results/cores-h200.{md,json}, copied to $OUT when it is set; the table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."

# Where node is not installed (the H200 host): the packed Node 24 and node_modules (pack-cores-bench.sh).
if ! command -v node >/dev/null && [ -f .device/cores/setup.sh ]; then source .device/cores/setup.sh; fi
command -v node >/dev/null || { echo "node is not on PATH (bash scripts/gpu/pack-cores-bench.sh, carry .device/cores)" >&2; exit 2; }
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 12) ? 0 : 1)' ||
  { echo "front-end threads need Node >= 22.12 (SO_REUSEPORT); this is $(node --version)" >&2; exit 2; }
command -v taskset >/dev/null || echo "taskset not found: server and load generator will not be pinned" >&2
if [ ! -f dist/cli/nereid.cjs ] || [ ! -f dist/frontend/thread.js ]; then
  echo "=== build"
  node node_modules/typescript/bin/tsc -p tsconfig.build.json || { echo "build failed" >&2; exit 2; }
fi

cores=$(nproc)
half=$((cores / 2))
echo "=== machine: $cores cores, $(node --version), load average $(cut -d' ' -f1 /proc/loadavg)"
node --import tsx bench/cores.ts \
  --threads 1,2,4,8,16 \
  --concurrency 1,16,64,256 \
  --protocols http,grpc \
  --server-cpus "0-$((half - 1))" \
  --client-cpus "$half-$((cores - 1))" \
  --loadgen-procs "$half" \
  --batching on \
  --instances 4 \
  --duration-ms 4000 \
  --warmup-ms 1000 \
  --out cores-h200 \
  "$@"
status=$?
if [ -n "${OUT:-}" ]; then cp bench/results/cores-h200.md bench/results/cores-h200.json "$OUT"/ 2>/dev/null; fi
exit $status
