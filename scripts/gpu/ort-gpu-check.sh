#!/usr/bin/env bash
# GPU check of the onnxruntime C API engine, on the device tool's machine (one H200, no Node, no network).
# Two calls, back to back (the machine is released after ~30 s idle), each carrying one half packed by
# scripts/gpu/pack-ort-gpu.sh. The device tool sends the checkout the session started in: copy .device/a and
# .device/b (this script is in .device/a) into an ignored folder of that checkout, and pass the folder:
#   call 1: carry [".device/a"]  bash .device/a/ort-gpu-check.sh stage .device/a
#           unpacks Node, node_modules and the provider libraries into /tmp, exports a BERT-base
#           (12 layers, hidden 768, INT32 inputs, opset 17) with torch through scripts/make_examples.py
#   call 2: carry [".device/b"]  bash /tmp/ortgpu/ort-gpu-check.sh run .device/b
#           completes libonnxruntime_providers_cuda.so, places the providers beside libonnxruntime.so.1, prints
#           the GPU, runs scripts/gpu/ort-gpu-check.ts (bundled) and keeps onnxruntime's verbose lines of interest
# Output: stdout, and $OUT/ort-gpu-output.txt plus $OUT/ort-verbose.log.xz when $OUT is set.
set -uo pipefail
mode=${1:?usage: ort-gpu-check.sh stage|run DIR}
D=${2:?usage: ort-gpu-check.sh stage|run DIR (the carried folder)}
T=/tmp/ortgpu
mkdir -p "$T"
log() { echo "[ort-gpu-check] $*"; }

if [ "$mode" = stage ]; then
  t0=$(date +%s)
  xz -dc "$D/node.xz" > "$T/node" && chmod +x "$T/node"
  rm -rf "$T/nm" && mkdir -p "$T/nm" && xz -dc "$D/node_modules.tar.xz" | tar xf - -C "$T/nm"
  xz -dc "$D/providers-small.tar.xz" | tar xf - -C "$T/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
  cp "$D/cuda.xz.00" "$D/ort-gpu-check.mjs" "$D/onnx.proto" "$D/ort-gpu-check.sh" "$T/"
  log "staged: $(du -sh "$T" | cut -f1) in $(( $(date +%s) - t0 )) s; node $("$T/node" --version)"
  mkdir -p /tmp/bert
  python3 - <<'PY'
import os, sys, time
sys.path.insert(0, "scripts")
import torch
import make_examples as mx
t = time.time()
torch.manual_seed(0)
enc = mx.TextEncoder(vocab=30522, hidden=768, heads=12, layers=12, ffn=3072, max_pos=512).eval()
ids = torch.randint(0, 30522, (2, 128), dtype=torch.int32)
mask = torch.ones(2, 128, dtype=torch.int32)
types = torch.zeros(2, 128, dtype=torch.int32)
names = ["input_ids", "attention_mask", "token_type_ids"]
mx.export(enc, (ids, mask, types), "/tmp/bert/model.onnx", names, ["output"],
          {n: {0: "batch", 1: "sequence"} for n in names + ["output"]})
print(f"[ort-gpu-check] BERT-base exported in {time.time() - t:.0f} s, torch {torch.__version__}")
PY
  exit 0
fi

[ "$mode" = run ] || { echo "unknown mode $mode"; exit 2; }
[ -x "$T/node" ] || { echo "stage first (call 1 did not run on this machine, or it was released)"; exit 3; }
lib="$T/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
cat "$T/cuda.xz.00" "$D"/cuda.xz.0* | xz -dc > "$lib/libonnxruntime_providers_cuda.so"
ls -la "$lib" | sed 's/^/[lib] /'
# The check runs from the checkout (examples/, scripts/); its node_modules is the staged one.
[ -L node_modules ] && rm -f node_modules
[ -e node_modules ] || ln -s "$T/nm/node_modules" node_modules
mkdir -p "$D/run" && cp "$T/ort-gpu-check.mjs" "$T/onnx.proto" "$D/run/"
# CUDA 13 / cuDNN 9 from the system cache, else from torch's nvidia-* wheels.
nv=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib')))))" 2>/dev/null || true)
export LD_LIBRARY_PATH="${nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${OUT:-$T}
{
  echo "== device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  echo "node $("$T/node" --version), UV_THREADPOOL_SIZE=${UV_THREADPOOL_SIZE:-unset}"
  echo "== providers beside libonnxruntime.so.1: $(cd "$lib" && ls libonnxruntime_providers_*.so | tr '\n' ' ')"
  echo "== CUDA libraries resolved by the CUDA provider:"
  ldd "$lib/libonnxruntime_providers_cuda.so" | grep -E "cuda|cublas|cudnn|cufft|curand|not found" | sed 's/^/   /'
  UV_THREADPOOL_SIZE=20 timeout 420 "$T/node" "$D/run/ort-gpu-check.mjs" --dir "$T/models" --bert /tmp/bert/model.onnx 2> "$T/verbose.log"
  echo "exit $?"
  echo
  echo "== onnxruntime verbose log: lines of interest (full log: ort-verbose.log.xz)"
  grep -E "placed on|Node\(s\) placed|CUDA failure|cudaError|BFCArena|Available memory|Failed to allocate|[Cc]apture|[Rr]eplay|graph|TensorRT|nvinfer|EP Error|==" "$T/verbose.log" \
    | grep -vE "GraphTransformer|graph_partitioner|Removing|Transformer|Fused|fusion" | cut -c1-400 | head -150
} 2>&1 | tee "$out/ort-gpu-output.txt"
xz -T0 -6 -c "$T/verbose.log" > "$out/ort-verbose.log.xz" 2>/dev/null || true
