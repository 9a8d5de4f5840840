#!/usr/bin/env bash
# onnxruntime's TensorRT execution provider on the H200 (device tool), through Nereid's onnxruntime engine; every
# observation is one OK / FAIL / INFO / SKIP line. Run from the checkout's root, after
# `scripts/gpu/tensorrt-on-device.sh core` (Node in /tmp/trt-node, TensorRT 10.6 recorded in /tmp/nereid-trt-home)
# and, for BERT-base, `tensorrt-on-device.sh export` (/tmp/trt-models/bert/model.onnx). Calls back to back:
#   stage PATH   (carry [PATH]) copies one part packed by scripts/gpu/pack-ort-trt.sh to /tmp/ort-trt-carry
#   run          unpacks the provider libraries beside a copy of onnxruntime-node's libonnxruntime.so.1
#                (NEREID_ORT_LIB_DIR), puts TensorRT 10.6 and CUDA 13 on LD_LIBRARY_PATH, runs
#                scripts/gpu/ort-trt-check.ts and greps onnxruntime's verbose log for what the provider did
#                (BENCH_MS=3000 per throughput variant; SECTION=name for one section), then, when
#                tensorrt-on-device.sh bench left its BERT-base plan, bench/tensorrt.ts on it (BACKEND_BENCH=0: not)
# Output: stdout, and $OUT/ort-trt-output.txt plus $OUT/ort-trt-verbose.log.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
mode=${1:?usage: ort-trt-check.sh stage PATH | run}
C=/tmp/ort-trt-carry
L=/tmp/ort-trt-lib
W=/tmp/ort-trt-work
H=${NEREID_TENSORRT_HOME:-/tmp/nereid-trt-home}
OUT=${OUT:-/tmp/ort-trt-out}
PY=${PY:-$(command -v python3)}
mkdir -p "$C" "$OUT" "$W"

if [ "$mode" = stage ]; then
  src=${2:?stage PATH}
  cp -r "$src" "$C/" && echo "staged $(basename "$src"); $C: $(du -sh "$C" | cut -f1)"
  exit 0
fi
[ "$mode" = run ] || { echo "unknown mode $mode"; exit 2; }

fail() { echo "FAIL $*"; exit 1; }
[ -x /tmp/trt-node/node ] || fail "no /tmp/trt-node/node: run tensorrt-on-device.sh core first (this machine was released?)"
export PATH=/tmp/trt-node:$PATH
[ -e node_modules ] || ln -s /tmp/trt-node/node_modules node_modules
ROOT=$PWD
tsnode() { node --conditions=nereid-source --import "$ROOT/node_modules/tsx/dist/loader.mjs" "$@"; }

if [ ! -f "$L/libonnxruntime_providers_cuda.so" ]; then
  ls "$C"/providers.tar.xz.part-* > /dev/null 2>&1 || fail "no $C/providers.tar.xz.part-*: stage the parts of .device/ort-trt first"
  mkdir -p "$L"
  cat "$C"/providers.tar.xz.part-* | xz -dc | tar xf - -C "$L" || fail "cannot unpack the provider libraries"
fi
cp -f "$(readlink -f node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1)" "$L/libonnxruntime.so.1"
export NEREID_ORT_LIB_DIR=$L
export NEREID_TENSORRT_HOME=$H
# TensorRT 10.6 as `nereid tensorrt setup` recorded it; CUDA 13 / cuDNN 9 from torch's nvidia-* wheels.
rec=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['ld_library_path']))" 2>/dev/null || true)
[ -n "$rec" ] || fail "no ld_library_path in $H/env.json: run tensorrt-on-device.sh core first"
nv=$("$PY" -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib')))))" 2>/dev/null || true)
export LD_LIBRARY_PATH="$rec${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bert=/tmp/trt-models/bert/model.onnx
{
  echo "== device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  echo "node $(node --version); NEREID_ORT_LIB_DIR=$L: $(cd "$L" && ls | tr '\n' ' ')"
  echo "== what the TensorRT provider library needs:"
  ldd "$L/libonnxruntime_providers_tensorrt.so" | grep -E "nvinfer|nvonnx|cuda|not found" | sed 's/^/   /'
  tsnode scripts/gpu/ort-trt-check.ts --work "$W" ${SECTION:+--section "$SECTION"} --ms "${BENCH_MS:-3000}" \
    $([ -f "$bert" ] && echo "--bert $bert") 2> "$W/verbose.log"
  echo "exit $?"
  plan=/tmp/trt-repo/bert/1/model.plan
  if [ "${BACKEND_BENCH:-1}" = 1 ] && [ -f "$plan" ] && [ -z "${SECTION:-}" ]; then
    echo
    echo "== the tensorrt backend on the same BERT-base (fp16 plan of tensorrt-on-device.sh bench), same run"
    tsnode bench/tensorrt.ts --plan "$plan" --out "$OUT" --label bert-base-fp16-beside-ort-trt --ms "${BENCH_MS:-3000}" 2>&1 | tail -30
  else
    echo "SKIP the tensorrt backend's benchmark (no $plan: run tensorrt-on-device.sh bench first; BACKEND_BENCH=0 skips it)"
  fi
  echo
  echo "== onnxruntime's verbose log"
  v="$W/verbose.log"
  grep -q "placed on \[TensorrtExecutionProvider\]" "$v" && echo "OK   nodes placed on [TensorrtExecutionProvider]" \
    || echo "FAIL no 'placed on [TensorrtExecutionProvider]' line"
  grep -q "trt_max_workspace_size: 123456789" "$v" && echo "OK   the provider logged trt_max_workspace_size: 123456789" \
    || echo "INFO no 'trt_max_workspace_size: 123456789' line (its wording may differ; lines below)"
  grep -E "TensorRT provider options|DeSerialized|Serialized|[Ee]ngine cache|[Tt]iming cache|placed on|TensorRT EP|EP Error|nvinfer|fall ?back" "$v" \
    | grep -vE "GraphTransformer|Removing|Fused" | cut -c1-400 | head -80
  echo
} 2>&1 | tee "$OUT/ort-trt-output.txt.part"
ok=$(grep -c '^OK' "$OUT/ort-trt-output.txt.part"); bad=$(grep -c '^FAIL' "$OUT/ort-trt-output.txt.part")
echo "== $ok OK, $bad FAIL" | tee -a "$OUT/ort-trt-output.txt.part"
mv "$OUT/ort-trt-output.txt.part" "$OUT/ort-trt-output.txt"
xz -T0 -6 -c "$W/verbose.log" > "$OUT/ort-trt-verbose.log.xz" 2>/dev/null || true
