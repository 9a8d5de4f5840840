#!/usr/bin/env bash
# What runs on real TensorRT on the H200 (device tool), as far as this environment allows: no TensorRT plan can
# be built for sm_90 from the packages reachable here (the Maven Central redistributable lacks
# libnvinfer_builder_resource_sm90), so this shows the runtime side and the refusals, all through Nereid's own
# paths:
#   1. `nereid tensorrt setup` from the carried files (offline fallback: Maven Central libraries + PyPI bindings)
#      and its check: import, GPUs, a runtime created on the GPU;
#   2. the API of the real 11.2 bindings dumped again and diffed with test/fixtures/tensorrt/api-11.2.json (and
#      cuda-bindings with cuda-runtime-api-13.json), then the test double checked against the device's dump;
#   3. the seed's layout `model_2/1/model.plan` (no config) with a random plan, an empty one, a truncated plan
#      header: each refused with TensorRT's own message, through the backend and `nereid tensorrt check`;
#   4. `nereid convert` of the example encoder with the seed's flags: says exactly why it cannot build here;
#   5. version-compatible loading through the lean runtime (the only runtime in a second set-up): up to
#      deserialization, and the refusal without version-compatible=true.
#
# Before: the chunks of .trt-carry/ (see scripts/gpu/prepare-tensorrt-carry.sh) copied to $CARRY by earlier calls,
# and Node from pack-for-device.sh (.device/). Output: stdout, and files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
CARRY=${CARRY:-/tmp/trtcarry}
OUT=${OUT:-/tmp/trt-out}
H=/tmp/nereid-trt-home
LEAN=/tmp/nereid-trt-lean
mkdir -p "$OUT"
if [ -f .device/setup.sh ]; then source .device/setup.sh; else export PATH=/tmp/device-node:$PATH; [ -e node_modules ] || ln -s /tmp/device-nm/node_modules node_modules; fi
PY=${PY:-$(command -v python3)}
PYTAG=cp$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
nereid() { node --import tsx src/cli/main.ts "$@"; }
step() { printf '\n=== %s\n' "$*"; }

step "0. machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" --version; node --version

step "1. libraries: reassemble the carried chunks (stripped to sm_90 for transport only)"
mkdir -p "$H/carried"
if [ ! -f "$H/carried/libnvinfer.so.11" ]; then
  cat "$CARRY"/tensorrt-libs.tar.xz.part-* | xz -dc | tar xf - -C "$H/carried" || { echo "cannot reassemble $CARRY/tensorrt-libs.tar.xz.part-*"; exit 1; }
fi
ls -la "$H/carried"
mkdir -p "$H/jar-libs" "$LEAN/lib"
for f in libnvinfer.so.11 libnvinfer_plugin.so.11 libnvonnxparser.so.11 libnvinfer_vc_plugin.so.11; do ln -sf "$H/carried/$f" "$H/jar-libs/$f"; done
ln -sf "$H/carried/libnvinfer_lean.so.11" "$LEAN/lib/libnvinfer_lean.so.11"

step "1. nereid tensorrt setup (offline fallback: the carried libraries + PyPI bindings wheel)"
W="$CARRY/wheels"
NEREID_TENSORRT_HOME=$H nereid tensorrt setup --python "$PY" --home "$H" --fallback-only --jar "$H/jar-libs" \
  --wheel "$W"/tensorrt_cu13_bindings-11.2.1.2-${PYTAG}-*.whl --wheel "$W"/cuda_bindings-*-${PYTAG}-*.whl --wheel "$W"/cuda_pathfinder-*.whl
echo "setup exit: $?"
export NEREID_TENSORRT_HOME=$H
cat "$H/env.json"

step "2. API of the real bindings, dumped here and diffed with the committed fixtures"
REC_PP=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['python_path']))")
REC_LD=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['ld_library_path']))")
PYTHONPATH=$REC_PP LD_LIBRARY_PATH=$REC_LD "$PY" scripts/tensorrt/dump_api.py > "$OUT/api-11.2-device.json"
PYTHONPATH=$REC_PP "$PY" scripts/tensorrt/dump_api.py --module cuda.bindings.runtime > "$OUT/cuda-runtime-api-device.json"
"$PY" - "$OUT" <<'PYDIFF'
import json, sys
out = sys.argv[1]
for mine, ref in (("api-11.2-device.json", "test/fixtures/tensorrt/api-11.2.json"), ("cuda-runtime-api-device.json", "test/fixtures/tensorrt/cuda-runtime-api-13.json")):
    a = json.load(open(f"{out}/{mine}")); b = json.load(open(ref))
    an, bn = a["names"], b["names"]
    only_dev = sorted(set(an) - set(bn)); only_fix = sorted(set(bn) - set(an))
    changed = sorted(n for n in set(an) & set(bn) if an[n] != bn[n])
    print(f"{mine} (version {a['version']}) vs {ref} (version {b['version']}): {len(an)} names here, {len(bn)} in the fixture;"
          f" only here {only_dev[:10]}, only in the fixture {only_fix[:10]}, different {changed[:10]}")
PYDIFF
PYTHONPATH=test/fixtures/tensorrt/double "$PY" scripts/tensorrt/check_double.py tensorrt="$OUT/api-11.2-device.json" tensorrt_lean="$OUT/api-11.2-device.json" cuda.bindings.runtime="$OUT/cuda-runtime-api-device.json" \
  && echo "the test double offers nothing the device's real API lacks"

step "3. the seed's layout model_2/1/model.plan (no config): plans TensorRT must refuse"
R=/tmp/trt-repo
rm -rf "$R"; mkdir -p "$R/model_2/1"
for kind in random empty truncated; do
  case $kind in
    random) head -c 1048576 /dev/urandom > "$R/model_2/1/model.plan" ;;
    empty) : > "$R/model_2/1/model.plan" ;;
    # the first bytes of a serialized engine ("ftrt" tag) and nothing after them
    truncated) printf 'ftrt\x00\x00\x00\x00\x01\x00\x00\x00' > "$R/model_2/1/model.plan"; head -c 200 /dev/zero >> "$R/model_2/1/model.plan" ;;
  esac
  echo "--- $kind plan through the backend (auto-complete, as serving model_2 would):"
  node --import tsx scripts/gpu/tensorrt-load.ts "$R/model_2"
  echo "--- $kind plan through nereid tensorrt check:"
  nereid tensorrt check --plan "$R/model_2/1/model.plan"
done

step "4. nereid convert with the seed's flags (the builder cannot work on this GPU with these files)"
nereid convert --onnx examples/model_repository/text_encoder/1/model.onnx --saveEngine "$R/encoder/1/model.plan" --fp16 \
  --minShapes=input_ids:1x8,attention_mask:1x8,token_type_ids:1x8, --optShapes=input_ids:4x8,attention_mask:4x8,token_type_ids:4x8 \
  --maxShapes=input_ids:8x8,attention_mask:8x8,token_type_ids:8x8 --config
echo "convert exit: $?"

step "5. version-compatible through the lean runtime (a set-up with only tensorrt_lean)"
mkdir -p "$LEAN/site" "$LEAN/shim/tensorrt_lean"
"$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$LEAN/site" "$W"/tensorrt_lean_cu13_bindings-*-${PYTAG}-*.whl "$W"/cuda_bindings-*-${PYTAG}-*.whl "$W"/cuda_pathfinder-*.whl
printf 'from tensorrt_lean_bindings import *  # noqa\nfrom tensorrt_lean_bindings import __version__  # noqa\n' > "$LEAN/shim/tensorrt_lean/__init__.py"
printf '{"python": "%s", "ld_library_path": ["%s"], "python_path": ["%s", "%s"], "source": "lean only (device test)"}\n' "$PY" "$LEAN/lib" "$LEAN/shim" "$LEAN/site" > "$LEAN/env.json"
head -c 1048576 /dev/urandom > "$R/model_2/1/model.plan"
echo "--- lean only, version-compatible=false:"
NEREID_TENSORRT_HOME=$LEAN node --import tsx scripts/gpu/tensorrt-load.ts "$R/model_2"
echo "--- lean only, version-compatible=true (the lean runtime deserializes, and refuses random bytes with its own message):"
NEREID_TENSORRT_HOME=$LEAN node --import tsx scripts/gpu/tensorrt-load.ts "$R/model_2" version-compatible=true
echo "--- full runtime with engine host code allowed, version-compatible=true:"
node --import tsx scripts/gpu/tensorrt-load.ts "$R/model_2" version-compatible=true

step "6. benchmark scenario (skipped without a plan)"
node --import tsx bench/tensorrt.ts --quick || true
echo done
