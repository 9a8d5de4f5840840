#!/usr/bin/env bash
# tritonclient's CUDA shared-memory flow (tritonclient.utils.cuda_shared_memory, unchanged: scripts/gpu/cudashm_flow.py)
# against Nereid serving `simple` as KIND_GPU and KIND_CPU onnxruntime models, and the same add/sub as a pytorch KIND_GPU
# TorchScript model (simple_torch) and a python model.py KIND_GPU model over DLPack (simple_pydl), both in their own
# processes, on the device tool's H200 (no Node, no network; Python 3.12 with torch + CUDA 13). Packed by
# scripts/gpu/pack-cudashm.sh into .device/cs/part-NN (58 MiB each).
# One device call per part, back to back (what a call copies to /tmp survives while the machine stays warm), from
# the repository root:
#   call k (k = 00, 01, ...): carry [".device/cs/part-k", ".device/cs/parts"]
#                             bash scripts/gpu/cudashm-on-device.sh
# Each call keeps its part in /tmp/cs; the call that brings the last part unpacks everything and runs the flow.
# Output: $OUT/cudashm-output.txt (the checks, 'N passed, N failed') and $OUT/nereid.log.
set -uo pipefail
T=/tmp/cs
out=${OUT:-$T}
mkdir -p "$T/parts"
log() { echo "[cudashm] $*"; }
want=$(cat .device/cs/parts 2>/dev/null || echo 0)
for p in .device/cs/part-*; do [ -f "$p" ] && cp "$p" "$T/parts/"; done
have=$(ls "$T/parts" | wc -l)
if [ "$have" -lt "$want" ]; then log "kept part(s) $(ls "$T/parts" | tr '\n' ' '); $have of $want: call again with the next part"; exit 0; fi

if [ ! -f "$T/ready" ]; then
  t0=$(date +%s)
  cat "$T"/parts/part-* | tar xf - -C /tmp || exit 2   # the tar holds cs/...: lands in /tmp/cs
  xz -T0 -dc "$T/node.xz" > "$T/node" && chmod +x "$T/node"
  rm -rf "$T/nm" && mkdir -p "$T/nm"
  xz -T0 -dc "$T/nm.tar.xz" | tar xf - -C "$T/nm"
  xz -T0 -dc "$T/deps.tar.xz" | tar xf - -C "$T/nm"
  lib="$T/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
  xz -T0 -dc "$T/cuda90.so.xz" > "$lib/libonnxruntime_providers_cuda.so"
  xz -T0 -dc "$T/shared.so.xz" > "$lib/libonnxruntime_providers_shared.so"
  touch "$T/ready"
  log "unpacked in $(( $(date +%s) - t0 )) s"
fi
# CUDA 13 (cudart, cuBLAS, cuDNN) from torch's nvidia-* wheels: the CUDA provider and Nereid's libcudart need them.
nv=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), 'nvidia', '*', 'lib')))))" 2>/dev/null || true)
export LD_LIBRARY_PATH="${nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Only the Python packages the device lacks are installed from the carried wheels (its numpy stays).
missing=()
for m in "tritonclient:tritonclient" "cuda.bindings:cuda_python cuda_bindings cuda_pathfinder" \
         "geventhttpclient:geventhttpclient gevent greenlet zope_event zope_interface brotli certifi urllib3" \
         "rapidjson:python_rapidjson" "grpc:grpcio typing_extensions" "google.protobuf:protobuf" "packaging:packaging"; do
  python3 -c "import ${m%%:*}" 2>/dev/null || missing+=(${m#*:})
done
if [ ${#missing[@]} -gt 0 ]; then
  wheels=()
  for w in "${missing[@]}"; do wheels+=("$(ls "$T"/wheels/${w}-*.whl "$T"/wheels/${w//_/.}-*.whl 2>/dev/null | head -1)"); done
  rm -rf "$T/py" && python3 -m pip install -q --disable-pip-version-check --no-deps --no-index --target "$T/py" "${wheels[@]}" || exit 4
  export PYTHONPATH="$T/py"
  log "installed from the carry: ${missing[*]}"
fi

# `simple` as a KIND_GPU model on GPU 0 (reads and writes client CUDA memory in place) and as a KIND_CPU one (gets
# host copies): the same requests, the same answers, two paths.
rm -rf "$T/models"
for m in simple_gpu:KIND_GPU simple_cpu:KIND_CPU simple_graph:KIND_GPU simple_graph_pad:KIND_GPU; do
  name=${m%%:*}; kind=${m#*:}
  mkdir -p "$T/models/$name/1"
  cp examples/model_repository/simple/1/model.onnx "$T/models/$name/1/"
  sed "s/^name: \"simple\"/name: \"$name\"/" examples/model_repository/simple/config.pbtxt > "$T/models/$name/config.pbtxt"
  if [ "$kind" = KIND_GPU ]; then group='{ kind: KIND_GPU, count: 1, gpus: [ 0 ] }'; else group='{ kind: KIND_CPU, count: 1 }'; fi
  printf '\ninstance_group [ %s ]\n' "$group" >> "$T/models/$name/config.pbtxt"
done
# simple_graph: the same on the GPU with CUDA graphs (checked by cuda_graph_check.py).
echo 'optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "cuda" parameters { key: "enable_cuda_graph" value: "1" } } ] } }' >> "$T/models/simple_graph/config.pbtxt"
# simple_graph_pad: graphs captured at load for batch 1, 2, 4, 8 (graph_spec); batches 3, 5-7 replay them padded.
spec() { echo "{ batch_size: $1 input { key: \"INPUT0\" value { dim: [ 16 ] } } graph_lower_bound { batch_size: $2 } }"; }
echo "optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"cuda\" parameters { key: \"enable_cuda_graph\" value: \"1\" } } ] }
  cuda { graph_spec [ $(spec 1 1), $(spec 2 2), $(spec 4 3), $(spec 8 5) ] } }" >> "$T/models/simple_graph_pad/config.pbtxt"


# The build goes where it was built (it reads ../../package.json), beside node_modules, in this copy of the checkout.
rm -rf dist && xz -T0 -dc "$T/dist.tar.xz" | tar xf - || exit 2
[ -L node_modules ] && rm -f node_modules
[ -e node_modules ] || ln -s "$T/nm/node_modules" node_modules

# The same add/sub through the process transport: a TorchScript model made here with torch (pytorch backend, KIND_GPU),
# and a model.py that reads its inputs as GPU tensors (FORCE_CPU_ONLY_INPUT_TENSORS "no") and returns DLPack CUDA tensors.
io='input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_GPU, count: 1, gpus: [ 0 ] } ]'
mkdir -p "$T/models/simple_torch/1" "$T/models/simple_pydl/1"
printf 'name: "simple_torch"\nplatform: "pytorch_libtorch"\nmax_batch_size: 8\n%s\n' "$io" > "$T/models/simple_torch/config.pbtxt"
# From a file: TorchScript compiles forward() from its source, which a script read from stdin does not have.
cat > "$T/export_addsub.py" <<'PY'
import sys, warnings
import torch
class AddSub(torch.nn.Module):
    def forward(self, INPUT0, INPUT1):
        return INPUT0 + INPUT1, INPUT0 - INPUT1
warnings.simplefilter("ignore")
torch.jit.script(AddSub()).save(sys.argv[1])
PY
python3 "$T/export_addsub.py" "$T/models/simple_torch/1/model.pt" > "$out/torch-export.log" 2>&1 ||
  { echo "[cudashm] simple_torch export failed:"; tail -5 "$out/torch-export.log"; }
printf 'name: "simple_pydl"\nbackend: "python"\nmax_batch_size: 8\n%s\nparameters [ { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "no" } } ]\n' "$io" > "$T/models/simple_pydl/config.pbtxt"
cat > "$T/models/simple_pydl/1/model.py" <<'PY'
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for r in requests:
            t0, t1 = (pb_utils.get_input_tensor_by_name(r, n) for n in ("INPUT0", "INPUT1"))
            if t0.is_cpu() or t1.is_cpu():
                raise pb_utils.TritonModelException("expected the inputs in the client's CUDA memory")
            a, b = from_dlpack(t0.to_dlpack()), from_dlpack(t1.to_dlpack())
            outs = [pb_utils.Tensor.from_dlpack("OUTPUT0", to_dlpack(a + b)), pb_utils.Tensor.from_dlpack("OUTPUT1", to_dlpack(a - b))]
            responses.append(pb_utils.InferenceResponse(output_tensors=outs))
        return responses
PY
{
  echo "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); node $("$T/node" --version)"
  python3 -c "import tritonclient, cuda.bindings, numpy; print('== tritonclient', tritonclient.__file__, '| cuda.bindings', cuda.bindings.__version__, '| numpy', numpy.__version__)"
  # --exit-on-error=false: a model that fails to load is reported by the flow, the others are still checked.
  "$T/node" dist/cli/nereid.cjs serve --model-repository "$T/models" --allow-client-shm=true --exit-on-error=false \
    --backend-config=pytorch,python-executable="$(command -v python3)" --backend-config=python,python-executable="$(command -v python3)" \
    --http-port 18000 --grpc-port 18001 --metrics-port 18002 --log-verbose 1 > "$out/nereid.log" 2>&1 &
  pid=$!
  for m in simple_gpu simple_graph_pad simple_torch simple_pydl; do
    # Stop waiting when the server is gone (a failed start must not spend the device time on polling).
    for _ in $(seq 1 120); do
      curl -sf "localhost:18000/v2/models/$m/ready" > /dev/null && break
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.5
    done
    echo "== ready $m: $(curl -s -o /dev/null -w '%{http_code}' "localhost:18000/v2/models/$m/ready")"
  done
  for m in simple_graph simple_graph_pad; do
    timeout 60 python3 scripts/gpu/cuda_graph_check.py localhost:18000 "$m"
    echo "cuda graph check ($m) exit $?"
  done
  echo "onnxruntime log lines about graph capture/replay: $(grep -ciE 'cuda graph|captur' "$out/nereid.log")"
  grep -iE 'cuda graph|captur' "$out/nereid.log" | head -5
  timeout 240 python3 scripts/gpu/cudashm_flow.py localhost:18000 localhost:18001 "$out/nereid.log"
  echo "flow exit $?"
  echo "== nvidia-smi (the node process holds the GPU):"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  kill "$pid"; wait "$pid" 2>/dev/null
  for e in onnxruntime pytorch python; do echo "== $e device runs logged: $(grep -c "$e run: inputs" "$out/nereid.log")"; done
  echo "== nereid log (tail, without the per-run lines):"; grep -Ev '(onnxruntime|pytorch|python) run: inputs' "$out/nereid.log" | tail -n 40
} 2>&1 | tee "$out/cudashm-output.txt"
