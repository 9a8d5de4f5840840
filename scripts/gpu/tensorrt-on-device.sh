#!/usr/bin/env bash
# TensorRT 10.6 for real on the H200 (device tool), through Nereid's own paths; every phase prints what it saw.
# Prepared here by scripts/gpu/prepare-tensorrt-carry.sh (.trt-carry/: TensorRT's libraries in chunks, wheels) and
# scripts/gpu/pack-tensorrt.sh (.device/trt/: Node, node_modules, test plugin libraries). Calls back to back (the
# machine is released after ~30 s idle; what a call leaves in /tmp survives while it stays warm), from the root:
#   stage PATH   (carry [PATH]) copies a carried file or folder to /tmp/trtcarry: each chunk, .device/trt, .trt-carry/wheels
#   export       (torch only) seed 001's model exported as the blog does, and BERT-base: can share a stage call
#   core         set-up and check, the real API against the double's, plans TensorRT must refuse, `nereid convert`
#                with the seed's flags, version-compatible, seed 001 end to end, every seed-000 option observed
#   bench        BERT-base fp16 built by `nereid convert`, the TensorRT benchmark next to bare TensorRT (and on a
#                pooled BERT-base, whose 3 KB answers leave the load generator's ceiling far above the GPU's)
#   onnx         (after export and core's set-up) BERT-base's model.onnx served by the tensorrt backend: built at the
#                first load into a fresh plan cache, reused by a reload, a second instance and a restart (times,
#                builds counted), answers against onnxruntime's CPU provider; ONNX_PRECISIONS="fp32 fp16" (default).
#                NEREID_ONNX_DRY=1 runs it here against the TensorRT test double (a tiny identity model instead)
# Output: stdout; files in $OUT (device tool) or /tmp/trt-out.
set -uo pipefail
cd "$(dirname "$0")/../.."
mode=${1:?usage: tensorrt-on-device.sh stage PATH | export | core | bench | onnx}
C=/tmp/trtcarry
OUT=${OUT:-/tmp/trt-out}
H=/tmp/nereid-trt-home
M=/tmp/trt-models
R=/tmp/trt-repo
PY=${PY:-$(command -v python3)}
mkdir -p "$C" "$OUT" "$M" "$R"
step() { printf '\n=== %s\n' "$*"; }
# SKIP="4 5": leave out steps a previous run on this machine already showed
want() { [[ " ${SKIP:-} " != *" $1 "* ]]; }
ROOT=$PWD
# tsx by path: node resolves a bare --import from the working directory, and seed 001's convert runs in its own
tsnode() { node --conditions=nereid-source --import "$ROOT/node_modules/tsx/dist/loader.mjs" "$@"; }
nereid() { tsnode "$ROOT/src/cli/main.ts" "$@"; }

if [ "$mode" = stage ]; then
  src=${2:?stage PATH}
  cp -r "$src" "$C/" && echo "staged $(du -sh "$C/$(basename "$src")" | cut -f1) $(basename "$src"); /tmp/trtcarry: $(du -sh "$C" | cut -f1)"
  exit 0
fi

if [ "$mode" = export ]; then
  step "export (PyTorch $("$PY" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'))"
  t=$(date +%s)
  [ -f "$M/seed001/ids.npy" ] || "$PY" scripts/gpu/trt_models.py seed001 "$M/seed001" 2>&1 | grep -v -i warn | tail -5
  echo "seed001 exported in $(( $(date +%s) - t )) s"; t=$(date +%s)
  [ -f "$M/bert/model.onnx" ] || "$PY" scripts/gpu/trt_models.py bert "$M/bert" 2>&1 | grep -v -i warn | tail -5
  echo "bert exported in $(( $(date +%s) - t )) s"
  "$PY" scripts/gpu/trt_models.py unsupported "$M" && ls -la "$M" "$M/seed001" "$M/bert"
  exit 0
fi

if [ "$mode" = onnx ] && [ "${NEREID_ONNX_DRY:-}" = 1 ]; then
  step "11 (dry). ONNX on the tensorrt backend against the TensorRT test double: wiring only, times mean nothing"
  export PATH="$ROOT/node_modules/.bin:$PATH" PYTHONPATH="$ROOT/test/fixtures/tensorrt/double"
  DPY=$ROOT/.venv/bin/python; [ -x "$DPY" ] || DPY=$PY
  "$DPY" scripts/gpu/trt_models.py identity "$M/identity"
  OUT="$OUT" tsnode scripts/gpu/tensorrt-onnx.ts "$M/identity/model.onnx" /tmp/trt-onnx-dry; echo "exit: $?"
  exit 0
fi

# core, bench and onnx: Node, TensorRT and the recorded environment.
if [ ! -x /tmp/trt-node/node ]; then TRT_NODE_PACK="$C/trt" source "$C/trt/setup.sh"; else export PATH=/tmp/trt-node:$PATH; fi
[ -e node_modules ] || ln -s /tmp/trt-node/node_modules node_modules
W="$C/wheels"
export NEREID_TENSORRT_HOME=$H

if [ "$mode" = core ]; then
  step "0. machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  "$PY" --version; node --version

  step "1. TensorRT's libraries: the carried chunks reassembled (sm_90-only, for transport)"
  mkdir -p "$H/carried" /tmp/trt-py
  if [ ! -f "$H/carried/libnvinfer.so.10" ]; then
    "$PY" -m pip install -q --disable-pip-version-check --no-deps --target /tmp/trt-py "$W"/zstandard-*.whl
    cat "$C"/tensorrt-libs.tar.zst.part-* | PYTHONPATH=/tmp/trt-py "$PY" -c \
      'import sys, zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)' \
      | tar xf - -C "$H/carried" || { echo "cannot reassemble $C/tensorrt-libs.tar.zst.part-*"; exit 1; }
  fi
  ls -la "$H/carried"
  # The blog's client and its dependencies (the device has no network); numpy is there already.
  "$PY" -m pip install -q --disable-pip-version-check --no-deps --target /tmp/trt-py \
    $(ls "$W"/*.whl | grep -vE 'tensorrt_cu12|cuda_bindings|cuda_pathfinder|zstandard') 2>&1 | tail -2

  step "1. nereid tensorrt setup (offline: Maven Central's 10.6 libraries + PyPI's bindings) and check"
  nereid tensorrt setup --python "$PY" --home "$H" --fallback-only --jar "$H/carried" \
    --wheel "$W"/tensorrt_cu12_bindings-10.6.0-*.whl --wheel "$W"/cuda_bindings-12.9*.whl --wheel "$W"/cuda_pathfinder-*.whl
  echo "setup exit: $?"
  nereid tensorrt check; echo "check exit: $?"
  REC_PP=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['python_path']))")
  REC_LD=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['ld_library_path']))")
  trtpy() { PYTHONPATH="$REC_PP:python:/tmp/trt-py" LD_LIBRARY_PATH="$REC_LD" "$PY" "$@"; }

  step "2. the real 10.6 API, dumped here, against the committed fixture and the test double"
  trtpy scripts/tensorrt/dump_api.py > "$OUT/api-10.6-device.json"
  cmp -s "$OUT/api-10.6-device.json" test/fixtures/tensorrt/api-10.6.json && echo "identical to test/fixtures/tensorrt/api-10.6.json" \
    || diff <("$PY" -m json.tool "$OUT/api-10.6-device.json") <("$PY" -m json.tool test/fixtures/tensorrt/api-10.6.json) | head -20
  NEREID_TRT_DOUBLE_VERSION=10.6.0 PYTHONPATH=test/fixtures/tensorrt/double "$PY" scripts/tensorrt/check_double.py \
    tensorrt="$OUT/api-10.6-device.json" tensorrt_lean="$OUT/api-10.6-device.json" && echo "the double offers nothing the device's 10.6 lacks"

  step "3. plans TensorRT must refuse, in the seed's layout model_2/1/model.plan (no config)"
  mkdir -p "$R/bad/1"
  for kind in random empty truncated; do
    case $kind in
      random) head -c 1048576 /dev/urandom > "$R/bad/1/model.plan" ;;
      empty) : > "$R/bad/1/model.plan" ;;
      truncated) printf 'ftrt\x00\x00\x00\x00\x01\x00\x00\x00' > "$R/bad/1/model.plan"; head -c 200 /dev/zero >> "$R/bad/1/model.plan" ;;
    esac
    echo "--- $kind plan, through the backend:"; tsnode scripts/gpu/tensorrt-load.ts "$R/bad"
    echo "--- $kind plan, nereid tensorrt check --plan:"; nereid tensorrt check --plan "$R/bad/1/model.plan" 2>&1 | tail -2
  done

  if want 4; then
  # (steps 2 and 3 are cheap; 4 and 5 build plans: SKIP them on a rerun)
  step "4. nereid convert with seed 001's flags on the example encoder (INT32 inputs), loaded through the backend"
  S=input_ids:1x8,attention_mask:1x8,token_type_ids:1x8
  nereid convert --onnx examples/model_repository/text_encoder/1/model.onnx --saveEngine "$R/encoder/1/model.plan" --fp16 \
    --minShapes=$S, --optShapes=${S//1x8/16x8} --maxShapes=${S//1x8/64x8} \
    --inputIOFormats=int32:chw,int32:chw,int32:chw --outputIOFormats=fp16:chw --config
  echo "convert exit: $?"
  tsnode scripts/gpu/tensorrt-load.ts "$R/encoder"
  fi

  if want 5; then
  step "5. version-compatible plan (lean runtime left out): refused without the option, loaded with it"
  nereid convert --onnx examples/model_repository/text_encoder/1/model.onnx --saveEngine "$R/vc/1/model.plan" \
    --minShapes=$S --optShapes=$S --maxShapes=${S//1x8/8x8} --versionCompatible --excludeLeanRuntime
  echo "--- version-compatible=false:"; tsnode scripts/gpu/tensorrt-load.ts "$R/vc"
  echo "--- version-compatible=true:"; tsnode scripts/gpu/tensorrt-load.ts "$R/vc" version-compatible=true
  echo "--- a version-compatible plan that embeds the lean runtime (10.6's libnvinfer_lean is in no reachable registry):"
  nereid convert --onnx examples/model_repository/text_encoder/1/model.onnx --saveEngine "$R/vcl/1/model.plan" \
    --minShapes=$S --optShapes=$S --maxShapes=${S//1x8/8x8} --versionCompatible 2>&1 | tail -3
  fi

  if want 6; then
  step "6. models TensorRT refuses to build: an op it lacks, a workspace too small"
  nereid convert --onnx "$M/unsupported.onnx" --saveEngine "$R/unsup/1/model.plan" 2>&1 | tail -3; echo "exit: $?"

  fi
  if want 7; then
  step "7. plans for the option checks (TensorRT's Python API: several profiles, a plugin layer)"
  for what in ${STEP7:-mlp profiles plugin}; do trtpy scripts/gpu/trt_models.py $what "$M" 2>&1 | grep -v -i warn | tail -3; done
  trtpy scripts/gpu/trt_models.py plugin-check "$M/plugin/1/model.plan"
  echo "--- a workspace of 1 MiB for an MLP 2048-8192-2048 at batch 2048:"
  [ -f "$M/wide.onnx" ] && nereid convert --onnx "$M/wide.onnx" --saveEngine "$R/tiny-ws/1/model.plan" --workspace 1 \
    --minShapes=x:1x2048 --optShapes=x:512x2048 --maxShapes=x:2048x2048 2>&1 | tail -3; echo "exit: $?"
  fi

  if want 8; then
  step "8. seed 001 end to end: the blog's trtexec flags verbatim, its repository, its server flags, its client"
  D=$M/seed001
  ( cd "$D" && mkdir -p weight && t=$(date +%s) && \
    nereid convert --onnx=weights/mannequin.onnx --saveEngine=weight/mannequin.plan --fp16 \
      --minShapes=input_ids:1x512,attention_mask:1x512,token_type_ids:1x512, \
      --optShapes=input_ids:16x512,attention_mask:16x512,token_type_ids:16x512 \
      --maxShapes=input_ids:32x512,attention_mask:32x512,token_type_ids:32x512 \
      --inputIOFormats=int32:chw,int32:chw,int32:chw \
      --outputIOFormats=fp16:chw; echo "convert exit: $? in $(( $(date +%s) - t )) s" )
  mkdir -p "$D/model_2/1" "$D/model_2/2"
  cp "$D/weight/mannequin.plan" "$D/model_2/1/model.plan" && cp "$D/weight/mannequin.plan" "$D/model_2/2/model.plan"
  cat > "$D/model_1/config.pbtxt" <<'PBTXT'
name: "model_1"
platform: "pytorch_libtorch"
max_batch_size: 32
input [
  { name: "input_ids" data_type: TYPE_INT32 dims: [ 512 ] },
  { name: "attention_mask" data_type: TYPE_INT32 dims: [ 512 ] },
  { name: "token_type_ids" data_type: TYPE_INT32 dims: [ 512 ] }
]
output [ { name: "outputs" data_type: TYPE_FP32 dims: [ 512, 256 ] } ]
instance_group [ { kind: KIND_GPU } ]
PBTXT
  rm -rf "$D/repo" && mkdir -p "$D/repo" && cp -r "$D/model_1" "$D/model_2" "$D/repo/"
  find "$D/repo" -type f | sort
  nereid serve --model-repository="$D/repo" --strict-model-config=false --model-control-mode=poll > "$OUT/seed001-server.log" 2>&1 &
  spid=$!
  for i in $(seq 1 240); do
    "$PY" -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready').status==200 else 1)" 2>/dev/null && break
    kill -0 $spid 2>/dev/null || break; sleep 0.5
  done
  grep -v '^\s*$' "$OUT/seed001-server.log" | tail -12
  TRITON_CLIENT_URL=127.0.0.1:8000 PYTHONPATH=/tmp/trt-py "$PY" scripts/gpu/seed001_client.py "$D"; echo "client exit: $?"
  kill $spid; wait $spid 2>/dev/null

  fi
  if want 9; then
  step "9. every seed-000 option observed (engine trace)"
  mkdir -p "$M/seed001/model_2/1"
  NEREID_ORDER_LIBS=/tmp/trt-node tsnode scripts/gpu/tensorrt-options.ts "$M"; echo "options exit: $?"
  fi
  exit 0
fi

if [ "$mode" = bench ]; then
  step "10. BERT-base fp16 plan (nereid convert) and the TensorRT benchmark next to bare TensorRT"
  S=input_ids:1x128,attention_mask:1x128,token_type_ids:1x128
  t=$(date +%s)
  [ -f "$R/bert/1/model.plan" ] || nereid convert --onnx "$M/bert/model.onnx" --saveEngine "$R/bert/1/model.plan" --fp16 \
    --minShapes=$S --optShapes=${S//1x128/32x128} --maxShapes=${S//1x128/64x128} 2>&1 | tail -4
  echo "built in $(( $(date +%s) - t )) s: $(ls -la "$R/bert/1/model.plan")"
  want bert && tsnode bench/tensorrt.ts --plan "$R/bert/1/model.plan" --out "$OUT" --label bert-base-fp16 --ms "${BENCH_MS:-3000}" --instances "${BENCH_INSTANCES:-2}"
  if want shapes; then
    step "10a. what setting the input shapes before every run costs bare TensorRT (no: once; same: the same shapes; alternate: B and B-1)"
    PP=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['python_path']))")
    LDP=$("$PY" -c "import json;print(':'.join(json.load(open('$H/env.json'))['ld_library_path']))")
    for r in no same alternate; do
      PYTHONPATH="$PP:python" LD_LIBRARY_PATH="$LDP" "$PY" bench/peers/tensorrt_bare.py --plan "$R/bert/1/model.plan" --batch 1,32 --seconds 2 --reset-shapes $r 2>&1 | grep '^{'
    done
  fi
  if want pooled; then
    step "10c. the same benchmark on BERT-base answering its first token's hidden state (3 KB a response, not 393 KB)"
    [ -f "$M/bert-pooled/model.onnx" ] || "$PY" scripts/gpu/trt_models.py bert-pooled "$M/bert-pooled" 2>&1 | grep -v -i warn | tail -3
    [ -f "$R/bert-pooled/1/model.plan" ] || nereid convert --onnx "$M/bert-pooled/model.onnx" --saveEngine "$R/bert-pooled/1/model.plan" --fp16 \
      --minShapes=$S --optShapes=${S//1x128/32x128} --maxShapes=${S//1x128/64x128} 2>&1 | tail -1
    tsnode bench/tensorrt.ts --plan "$R/bert-pooled/1/model.plan" --out "$OUT" --label bert-pooled-fp16 --ms "${BENCH_MS:-3000}" --instances "${BENCH_INSTANCES:-2}"
  fi
  [ -f "$M/mlp/1/model.plan" ] && want mlp && tsnode bench/tensorrt.ts --plan "$M/mlp/1/model.plan" --out "$OUT" --label mlp --ms 2000
  if want profile; then
    step "10b. where the time goes: the same benchmark profiled (V8 --cpu-prof of bench and server, cProfile of each python child)"
    P="$OUT/prof"; mkdir -p "$P"
    NEREID_BENCH_PROFILE="$P" node --cpu-prof --cpu-prof-dir="$P" --conditions=nereid-source --import "$ROOT/node_modules/tsx/dist/loader.mjs" \
      bench/tensorrt.ts --plan "$R/bert/1/model.plan" --out "$P" --label profiled --ms 2000 --servers tuned/1 2>&1 | grep -v '^|' | tail -12
    tsnode bench/gpu/profile-top.ts "$P" 25
    for f in "$P"/py-*.txt; do [ -f "$f" ] && { echo "--- $f"; grep -v '^$' "$f" | grep -E '###|tottime|^ +[0-9]' | awk '/###/{n=0} {if (n++ < 24) print}'; }; done
  fi
  exit 0
fi
if [ "$mode" = onnx ]; then
  step "11. BERT-base's model.onnx on the tensorrt backend: built at the first load, then from the plan cache"
  [ -f "$M/bert/model.onnx" ] || { echo "no $M/bert/model.onnx: run the export phase first"; exit 1; }
  [ -f "$H/env.json" ] || { echo "no $H/env.json: run the core phase's set-up (step 1) on this machine first"; exit 1; }
  for p in ${ONNX_PRECISIONS:-fp32 fp16}; do
    PRECISION=$p OUT="$OUT" tsnode scripts/gpu/tensorrt-onnx.ts "$M/bert/model.onnx" "/tmp/trt-onnx-$p"; echo "$p exit: $?"
    ls -la /tmp/trt-onnx-$p/plans/*/ 2>/dev/null | tail -4
  done
  exit 0
fi
echo "unknown mode $mode"; exit 2
