#!/usr/bin/env bash
# `nereid tune` on the H200 (device tool): BERT-base on the GPU (onnxruntime, KIND_GPU) in quick mode, then the
# TensorRT plan when one was built; prints each summary table, writes the reports under $OUT.
# Run after scripts/gpu/tensorrt-on-device.sh has staged Node on this machine (its `stage` calls, and `export` for
# the model; `bench` for the plan). The CUDA provider for onnxruntime comes from scripts/gpu/bench-gpu-on-device.sh
# stage (/tmp/gb) when that ran too; without it the onnxruntime part says so and is skipped.
#   bash scripts/gpu/tune-on-device.sh            (TUNE_BUDGET=seconds per model, default 150)
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-/tmp/tune-out}
BUDGET=${TUNE_BUDGET:-150}
mkdir -p "$OUT"
step() { printf '\n=== %s\n' "$*"; }

# Node and node_modules as tensorrt-on-device.sh left them.
export PATH=/tmp/trt-node:$PATH
# node_modules with tsx (bench-gpu-on-device.sh links one without it)
[ -e node_modules/tsx ] || { rm -f node_modules; ln -s /tmp/trt-node/node_modules node_modules; }
command -v node >/dev/null || { echo "no Node on this machine: run tensorrt-on-device.sh stage first"; exit 3; }
export NEREID_TENSORRT_HOME=/tmp/nereid-trt-home
# CUDA 13 / cuDNN 9 from torch's nvidia-* wheels, as bench-gpu-on-device.sh finds them.
nv=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib')))))" 2>/dev/null || true)
export LD_LIBRARY_PATH="${nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# An array, not a function: `timeout` runs commands only.
NEREID=(node --conditions=nereid-source --import "$ROOT/node_modules/tsx/dist/loader.mjs" "$ROOT/src/cli/main.ts")

step "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1); $(nproc) CPUs; node $(node --version)"

# tune NAME DIR: quick mode on GPU 0 at three concurrencies; the table, then the head of the report.
tune() {
  step "tune $1 (quick, budget ${BUDGET}s)"
  # Sequence length 128 (the plan's profiles fix it; the ONNX model takes it as its benchmark does).
  timeout $((BUDGET + 120)) "${NEREID[@]}" tune "$2" --kind gpu --gpus 0 --concurrency 1,8,32 --time-budget "$BUDGET" \
    --shape input_ids:128 --shape attention_mask:128 --shape token_type_ids:128 --output "$OUT/tune-$1"
  echo "exit $?"
  sed -n '1,12p' "$OUT/tune-$1/report.md" 2>/dev/null
}

# 1. onnxruntime on the GPU: BERT-base fp16 from bench-gpu's stage, else the fp32 export of tensorrt-on-device.sh.
onnx=""
for f in /tmp/gb/models/bert-fp16/model.onnx /tmp/trt-models/bert/model.onnx; do
  [ -f "$f" ] && { onnx=$f; break; }
done
lib=node_modules/onnxruntime-node/bin/napi-v6/linux/x64
if [ ! -f "$lib/libonnxruntime_providers_cuda.so" ] && [ -f /tmp/gb/libonnxruntime_providers_cuda.so ]; then
  ln -sf /tmp/gb/libonnxruntime_providers_cuda.so "$lib/libonnxruntime_providers_cuda.so"
  cp /tmp/gb/py/onnxruntime/capi/libonnxruntime_providers_shared.so "$lib/" 2>/dev/null
fi
# Or the provider libraries scripts/gpu/ort-trt-check.sh unpacked (its `run`).
if [ ! -f "$lib/libonnxruntime_providers_cuda.so" ] && [ -f /tmp/ort-trt-lib/libonnxruntime_providers_cuda.so ]; then
  cp /tmp/ort-trt-lib/libonnxruntime_providers_cuda.so /tmp/ort-trt-lib/libonnxruntime_providers_shared.so "$lib/"
fi
if [ -z "$onnx" ]; then
  echo "no BERT-base ONNX: run tensorrt-on-device.sh export (or bench-gpu-on-device.sh stage) first"
elif [ -n "${TUNE_SKIP_ORT:-}" ]; then
  echo "onnxruntime part skipped (TUNE_SKIP_ORT)"
elif [ ! -f "$lib/libonnxruntime_providers_cuda.so" ]; then
  echo "no CUDA provider beside libonnxruntime.so.1: run bench-gpu-on-device.sh stage first (onnxruntime skipped)"
else
  M=/tmp/tune-models/bert_ort
  mkdir -p "$M/1" && ln -sf "$onnx" "$M/1/model.onnx"
  cat > "$M/config.pbtxt" <<CFG
# Partial: inputs and outputs auto-completed from model.onnx ($onnx).
name: "bert_ort"
backend: "onnxruntime"
max_batch_size: 32
instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]
CFG
  tune bert_ort "$M"
fi

# 2. The TensorRT plan tensorrt-on-device.sh bench built (fp16, profiles 1..64 x 128), when it is there.
plan=/tmp/trt-repo/bert/1/model.plan
if [ -f "$plan" ]; then
  M=/tmp/tune-models/bert_trt
  mkdir -p "$M/1" && ln -sf "$plan" "$M/1/model.plan"
  cat > "$M/config.pbtxt" <<CFG
name: "bert_trt"
platform: "tensorrt_plan"
max_batch_size: 64
instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]
CFG
  tune bert_trt "$M"
else
  echo "no TensorRT plan at $plan (tensorrt-on-device.sh bench builds it): TensorRT skipped"
fi
