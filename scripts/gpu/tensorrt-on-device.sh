#!/usr/bin/env bash
# TensorRT 10.6 for real on the H200 (device tool), through Nereid's own paths. NOT YET RUN: written in a session
# that was lent no device; the first session with one runs it, quotes its output and fixes what it finds.
#   1. `nereid tensorrt setup` from the carried files (the offline fallback: Maven Central's 10.6 libraries + PyPI's
#      bindings) and `nereid tensorrt check`: import, GPUs, a runtime, the builder (a tiny plan built and run);
#   2. the real 10.6 API dumped again on the device and diffed with test/fixtures/tensorrt/api-10.6.json, then the
#      test double (in its 10.6 mode) checked against the device's dump;
#   3. plans TensorRT must refuse (random, empty, truncated) through the backend and `nereid tensorrt check`;
#   4. `nereid convert` of the example encoder with seed 001's trtexec flags (FP16, min/opt/max per input, the
#      blog's I/O formats), its plan loaded through the backend;
#   5. version-compatible: a VC plan built with --excludeLeanRuntime, loaded with and without version-compatible=true;
#   6. the TensorRT benchmark next to bare TensorRT on the plan of step 4.
#
# Before: the chunks of .trt-carry/ (scripts/gpu/prepare-tensorrt-carry.sh) copied to $CARRY by earlier calls (one
# chunk a call, back to back), and Node from shared/gpu/pack-for-device.sh (.device/). Output: stdout, files in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
CARRY=${CARRY:-/tmp/trtcarry}
OUT=${OUT:-/tmp/trt-out}
H=/tmp/nereid-trt-home
mkdir -p "$OUT"
if [ -f .device/setup.sh ]; then source .device/setup.sh; else export PATH=/tmp/device-node:$PATH; [ -e node_modules ] || ln -s /tmp/device-nm/node_modules node_modules; fi
PY=${PY:-$(command -v python3)}
W="$CARRY/wheels"
nereid() { node --import tsx src/cli/main.ts "$@"; }
step() { printf '\n=== %s\n' "$*"; }

step "0. machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" --version; node --version

step "1. libraries: reassemble the carried chunks (stripped to sm_90 for transport only)"
mkdir -p "$H/carried" /tmp/trt-py
if [ ! -f "$H/carried/libnvinfer.so.10" ]; then
  "$PY" -m pip install -q --disable-pip-version-check --no-deps --target /tmp/trt-py "$W"/zstandard-*.whl
  cat "$CARRY"/tensorrt-libs.tar.zst.part-* | PYTHONPATH=/tmp/trt-py "$PY" -c \
    'import sys, zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)' \
    | tar xf - -C "$H/carried" || { echo "cannot reassemble $CARRY/tensorrt-libs.tar.zst.part-*"; exit 1; }
fi
ls -la "$H/carried"

step "1. nereid tensorrt setup (offline fallback) and check"
NEREID_TENSORRT_HOME=$H nereid tensorrt setup --python "$PY" --home "$H" --fallback-only --jar "$H/carried" \
  --wheel "$W"/tensorrt_cu12_bindings-10.6.0-cp312-*.whl --wheel "$W"/cuda_bindings-12.9*-cp312-*.whl --wheel "$W"/cuda_pathfinder-*.whl
echo "setup exit: $?"
export NEREID_TENSORRT_HOME=$H
nereid tensorrt check; echo "check exit: $?"

step "2. the real 10.6 API, dumped here and diffed with the committed fixture"
REC_PP=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['python_path']))")
REC_LD=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['ld_library_path']))")
PYTHONPATH=$REC_PP LD_LIBRARY_PATH=$REC_LD "$PY" scripts/tensorrt/dump_api.py > "$OUT/api-10.6-device.json"
cmp -s "$OUT/api-10.6-device.json" test/fixtures/tensorrt/api-10.6.json && echo "identical to test/fixtures/tensorrt/api-10.6.json" \
  || diff <("$PY" -m json.tool "$OUT/api-10.6-device.json") <("$PY" -m json.tool test/fixtures/tensorrt/api-10.6.json) | head -20
NEREID_TRT_DOUBLE_VERSION=10.6.0 PYTHONPATH=test/fixtures/tensorrt/double "$PY" scripts/tensorrt/check_double.py \
  tensorrt="$OUT/api-10.6-device.json" tensorrt_lean="$OUT/api-10.6-device.json" && echo "the double offers nothing the device's 10.6 lacks"

step "3. plans TensorRT must refuse, in the seed's layout model_2/1/model.plan (no config)"
R=/tmp/trt-repo
rm -rf "$R"; mkdir -p "$R/model_2/1"
for kind in random empty truncated; do
  case $kind in
    random) head -c 1048576 /dev/urandom > "$R/model_2/1/model.plan" ;;
    empty) : > "$R/model_2/1/model.plan" ;;
    truncated) printf 'ftrt\x00\x00\x00\x00\x01\x00\x00\x00' > "$R/model_2/1/model.plan"; head -c 200 /dev/zero >> "$R/model_2/1/model.plan" ;;
  esac
  echo "--- $kind plan through the backend:"; node --import tsx scripts/gpu/tensorrt-load.ts "$R/model_2"
  echo "--- $kind plan through nereid tensorrt check:"; nereid tensorrt check --plan "$R/model_2/1/model.plan"
done

step "4. nereid convert with seed 001's flags, and the plan loaded through the backend"
S=input_ids:1x8,attention_mask:1x8,token_type_ids:1x8
nereid convert --onnx examples/model_repository/text_encoder/1/model.onnx --saveEngine "$R/encoder/1/model.plan" --fp16 \
  --minShapes=$S, --optShapes=${S//1x8/16x8} --maxShapes=${S//1x8/64x8} \
  --inputIOFormats=int32:chw,int32:chw,int32:chw --outputIOFormats=fp16:chw --config
echo "convert exit: $?"
node --import tsx scripts/gpu/tensorrt-load.ts "$R/encoder"

step "5. version-compatible (lean runtime left out): refused without the option, loaded with it"
nereid convert --onnx examples/model_repository/text_encoder/1/model.onnx --saveEngine "$R/vc/1/model.plan" \
  --minShapes=$S --optShapes=$S --maxShapes=${S//1x8/8x8} --versionCompatible --excludeLeanRuntime
echo "--- version-compatible=false:"; node --import tsx scripts/gpu/tensorrt-load.ts "$R/vc"
echo "--- version-compatible=true:"; node --import tsx scripts/gpu/tensorrt-load.ts "$R/vc" version-compatible=true

step "6. benchmark next to bare TensorRT (same plan)"
node --import tsx bench/tensorrt.ts --plan "$R/encoder/1/model.plan" --batch 32 --quick || true
echo done
