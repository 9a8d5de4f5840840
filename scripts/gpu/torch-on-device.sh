#!/usr/bin/env bash
# Nereid's pytorch backend on the H200 (device tool: Python 3.12 with torch + CUDA 13, no network, no Node), next
# to bare PyTorch in the same run. Packed by `bash scripts/gpu/pack-torch.sh`; one call from the repository root:
#   carry: [".device/torch", "dist"]
#   command: bash scripts/gpu/torch-on-device.sh
# It unpacks Node and node_modules into /tmp/torchdev, exports BERT-base (12 layers, hidden 768, random weights)
# to TorchScript with scripts/make_examples.py --bert-torchscript (torch only), then runs the benchmark driver
# (scripts/gpu/torch-bench.ts, bundled): for examples/pytorch_repository/text_encoder_torch and BERT-base, bare
# PyTorch's loop (scripts/gpu/torch_baseline.py) and `nereid serve` with KIND_GPU instances at batch 32, sequence
# 128, over HTTP at concurrency 1, 2, 4 and 8. Output: stdout, $OUT/torch-bench.json and $OUT/torch-output.txt.
# TORCH_BENCH_MS (default 5000) is each point's length; TORCH_BENCH_BERT=0 skips BERT-base.
set -uo pipefail
cd "$(dirname "$0")/../.."
T=/tmp/torchdev
out=${OUT:-$T/out}
mkdir -p "$T" "$out"
D=${TORCH_CARRY:-.device/torch}
log() { echo "[torch-on-device] $*"; }
t0=$(date +%s)
if [ ! -x "$T/node" ]; then
  xz -T0 -dc "$D/node.xz" > "$T/node" && chmod +x "$T/node" || exit 2
  rm -rf "$T/nm" && mkdir -p "$T/nm" && xz -T0 -dc "$D/nm.tar.xz" | tar xf - -C "$T/nm" || exit 2
fi
[ -L node_modules ] && rm -f node_modules
[ -e node_modules ] || ln -s "$T/nm/node_modules" node_modules
export PATH="$T:$PATH"
PY=${PY:-$(command -v python3)}
# torch's CUDA libraries from its nvidia-* wheels, for the engine processes as for the baseline.
nv=$("$PY" -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib')) + glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', 'cu*', 'lib')))))" 2>/dev/null || true)
export LD_LIBRARY_PATH="${nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  log "unpacked in $(( $(date +%s) - t0 )) s; node $(node --version); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
  "$PY" -c "import torch, numpy; print('[torch-on-device] torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0), '| numpy', numpy.__version__)"
  models='{"name":"text_encoder_torch","path":"examples/pytorch_repository/text_encoder_torch/1/model.pt","vocab":1000}'
  if [ "${TORCH_BENCH_BERT:-1}" = 1 ]; then
    t=$(date +%s)
    "$PY" scripts/make_examples.py --bert-torchscript "$T/bert-fp32" 2>&1 | grep -v Warning | tail -2
    log "BERT-base TorchScript exported in $(( $(date +%s) - t )) s"
    models="$models,{\"name\":\"bert_torch\",\"path\":\"$T/bert-fp32/model.pt\",\"vocab\":30522}"
  fi
  job="{\"python\":\"$PY\",\"models\":[$models],\"batch\":32,\"seq\":128,\"ms\":${TORCH_BENCH_MS:-5000},\"concurrency\":[1,2,4,8],\"instances\":2,\"nereid\":\"dist/cli/nereid.cjs\",\"out\":\"$out\"}"
  timeout 480 node "$D/torch-bench.mjs" "$job"
  echo "exit $? after $(( $(date +%s) - t0 )) s"
} 2>&1 | tee "$out/torch-output.txt"
