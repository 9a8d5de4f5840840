#!/usr/bin/env bash
# The GPU benchmark (bench/gpu.ts) on the device tool's H200 (no Node, no network; Python 3.12 with torch+CUDA 13).
# Packed by scripts/gpu/pack-gpubench.sh; two calls back to back (the machine is released after ~30 s idle; what
# call 1 leaves in /tmp survives while it stays warm), from the repository root:
#   call 1: carry [".device/gb-a"]
#           bash scripts/gpu/bench-gpu-on-device.sh stage
#           unpacks the CUDA provider and the onnxruntime-gpu Python package into /tmp/gb, exports BERT-base fp32
#           and fp16 with torch (scripts/make_examples.py --bert), and runs a short baseline as a check
#   call 2: carry [".device/gb-b", "dist", ".device/gpu.mjs", ".device/loadgen-binary.mjs"]
#           bash scripts/gpu/bench-gpu-on-device.sh run
#           unpacks Node and node_modules, places the providers beside libonnxruntime.so.1, runs the benchmark
#           (node .device/gpu.mjs: baselines, then Nereid) and writes $OUT/gpubench-output.txt, gpu.md, gpu.json
#   (a later call with only dist and the bundles: `run` again, as long as the machine stayed warm)
# The device tool sends the checkout the session started in: when that is another checkout, copy this repository's
# files the calls need, and the two folders, into an ignored folder of it, run from the copy and pass the folders
# as GB_A=… / GB_B=… (relative to the copy). NEREID_BENCH_MS / NEREID_BENCH_BASELINE_MS shorten the points.
set -uo pipefail
mode=${1:?usage: bench-gpu-on-device.sh stage|run}
T=/tmp/gb
mkdir -p "$T"
out=${OUT:-$T}
log() { echo "[bench-gpu] $*"; }
# CUDA 13 / cuDNN 9 from torch's nvidia-* wheels (the CUDA provider and the Python baseline need them).
nv=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib')))))" 2>/dev/null || true)
export LD_LIBRARY_PATH="${nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$T/py"
export NEREID_BENCH_MODELS="$T/models"

if [ "$mode" = stage ]; then
  D=${GB_A:-.device/gb-a}
  t0=$(date +%s)
  xz -T0 -dc "$D/cuda90.so.xz" > "$T/libonnxruntime_providers_cuda.so" || exit 2
  rm -rf "$T/py" && mkdir -p "$T/py" && xz -T0 -dc "$D/pyort.tar.xz" | tar xf - -C "$T/py" || exit 2
  ln -sf "$T/libonnxruntime_providers_cuda.so" "$T/py/onnxruntime/capi/libonnxruntime_providers_cuda.so"
  log "staged $(du -sh "$T" | cut -f1) in $(( $(date +%s) - t0 )) s"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  python3 -c "import onnxruntime as o, torch; print('[bench-gpu] onnxruntime', o.__version__, o.__file__, o.get_available_providers(), '| torch', torch.__version__)"
  for dt in fp32 fp16; do
    t=$(date +%s)
    python3 scripts/make_examples.py --bert "$T/models/bert-$dt" --dtype "$dt" 2>&1 | grep -v Warning | tail -8
    log "bert-$dt exported in $(( $(date +%s) - t )) s: $(ls -la "$T/models/bert-$dt/model.onnx" 2>&1)"
  done
  t=$(date +%s)
  python3 scripts/make_examples.py --bert "$T/models/bert-fp16-pooled" --dtype fp16 --pooled 2>&1 | grep -v Warning | tail -4
  log "bert-fp16-pooled exported in $(( $(date +%s) - t )) s: $(ls -la "$T/models/bert-fp16-pooled/model.onnx" 2>&1)"
  log "check: onnxruntime-gpu baseline, bert-fp16, batch 1 and 32"
  python3 bench/gpu/baselines.py ort --model "$T/models/bert-fp16/model.onnx" --batches 1,32 --ms 300 2>&1 | tail -6
  log "check: torch fp16 CUDA graph, batch 32"
  python3 bench/gpu/baselines.py torch --batches 32 --ms 300 2>&1 | tail -4
  log "stage done in $(( $(date +%s) - t0 )) s"
  exit 0
fi

[ "$mode" = run ] || { echo "unknown mode $mode"; exit 2; }
[ -f "$T/libonnxruntime_providers_cuda.so" ] || { echo "stage first (call 1 did not run on this machine, or it was released)"; exit 3; }
D=${GB_B:-.device/gb-b}
if [ -f "$D/node.xz" ]; then
  xz -T0 -dc "$D/node.xz" > "$T/node" && chmod +x "$T/node"
  rm -rf "$T/nm" && mkdir -p "$T/nm"
  xz -T0 -dc "$D/nm.tar.xz" | tar xf - -C "$T/nm"
  xz -T0 -dc "$D/deps.tar.xz" | tar xf - -C "$T/nm"
fi
lib="$T/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
ln -sf "$T/libonnxruntime_providers_cuda.so" "$lib/libonnxruntime_providers_cuda.so"
cp "$T/py/onnxruntime/capi/libonnxruntime_providers_shared.so" "$lib/"
[ -L node_modules ] && rm -f node_modules
[ -e node_modules ] || ln -s "$T/nm/node_modules" node_modules
export PATH="$T:$PATH"
export NEREID_MAIN="$PWD/dist/cli/nereid.cjs"
{
  echo "== device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader); $(nproc) CPUs; node $(node --version)"
  echo "== providers beside libonnxruntime.so.1: $(cd "$lib" && ls libonnxruntime_providers_*.so | tr '\n' ' ')"
  timeout 500 node .device/gpu.mjs
  echo "exit $?"
} 2>&1 | tee "$out/gpubench-output.txt"
cp bench/results/gpu.md bench/results/gpu.json "$out/" 2>/dev/null || true
