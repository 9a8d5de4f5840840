#!/usr/bin/env bash
# Prepares .venv/ for the compatibility suite and the benchmarks: Triton's own Python client (tritonclient[all],
# from PyPI), numpy, pytest and onnx, plus a working perf_analyzer.
#
# perf_analyzer: the `perf-analyzer` name on PyPI is a 0.1.0 placeholder, and tritonclient wheels stopped
# shipping the binary after 2.60; those from 2.55 on need glibc 2.38 (this Debian 12 has 2.36). So we take the
# binary from the tritonclient 2.50.0 wheel on PyPI and give it the two shared libraries it links: libcudart.so.12
# (PyPI nvidia-cuda-runtime-cu12; no GPU is used) and libb64.so.0d (Debian's libb64-0d, unpacked without root).
# `.venv/bin/perf_analyzer` is a wrapper that sets LD_LIBRARY_PATH. Idempotent; safe to rerun.
#
# --torch also installs PyTorch (the pytorch backend's engine runs in this venv; npm run setup-torch). PyPI's only
# Linux x86_64 torch is the CUDA build: torch itself (~540 MB) and the nvidia-* CUDA libraries it links, ~2.8 GB
# of wheels, ~5.4 GB installed, about 1.5 min here (measured: 25 s download, 61 s install). `--no-deps` is not a way
# out: libtorch_cuda.so links cudart, cuBLAS, cuDNN, NCCL... even on a machine without a GPU, so `import torch`
# fails without them; leaving out only what TorchScript never loads (triton, cusolver, nvtx) saves ~20% and would
# be a hand-kept list broken by each torch release. NEREID_TORCH_VERSION pins another version. With torch comes
# onnxscript: torch.onnx.export needs it from torch 2.9 on (its default exporter is the dynamo one). The torch step
# says its size first and shows pip's progress: it is minutes of silence otherwise.
#
# --dry-run prints what would be installed and touches nothing (no venv, no pip, no network); NEREID_VENV names
# another venv folder (default .venv). Both are for checking this script without downloading gigabytes.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NEREID_VENV:-.venv}
PA_VERSION=2.50.0
TORCH_VERSION=${NEREID_TORCH_VERSION:-2.15.0}
TORCH_SIZE='~2.8 GB of wheels to download (torch ~540 MB and the nvidia-* CUDA libraries it links), ~5.4 GB installed'
with_torch=0
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --torch) with_torch=1 ;;
    --dry-run) dry_run=1 ;;
    *) echo "setup-python.sh: unknown argument '$arg' (--torch installs PyTorch too; --dry-run only says what it would do)" >&2; exit 2 ;;
  esac
done
# Runs a command, or under --dry-run prints it.
run() {
  if [ "$dry_run" = 1 ]; then echo "would run: $*"; else "$@"; fi
}
# True when the venv's python imports every module named (never true for a venv that does not exist yet).
imports() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import $1" 2>/dev/null
}
[ -x "$VENV/bin/python" ] || run python3 -m venv "$VENV"
# onnx: the compatibility suite writes tiny BYTES/INT8 models (test/compat/models.py). Where they all import
# already, pip is not run: `npm test` runs this script, and a test run must not reach a package index.
if ! imports 'tritonclient.http, tritonclient.grpc, numpy, pytest, onnx, nvidia.cuda_runtime'; then
  run "$VENV/bin/pip" install -q --disable-pip-version-check 'tritonclient[all]' numpy pytest onnx nvidia-cuda-runtime-cu12
fi
if [ "$with_torch" = 1 ] && ! imports torch; then
  echo "installing PyTorch $TORCH_VERSION and onnxscript (for torch.onnx.export): $TORCH_SIZE;"
  echo "about 1.5 min on a fast link, much longer on a slow one. pip's progress follows."
  t0=$(date +%s)
  # No -q: pip names each wheel with its size as it downloads it (with a progress bar on a terminal).
  run "$VENV/bin/pip" install --disable-pip-version-check --progress-bar on "torch==$TORCH_VERSION" onnxscript
  [ "$dry_run" = 1 ] || echo "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') installed in $(( $(date +%s) - t0 )) s"
elif [ "$with_torch" = 1 ] && ! imports onnxscript; then
  # A venv from before onnxscript was part of this step: add it alone (a few MB), not torch again.
  echo "installing onnxscript (for torch.onnx.export; torch is already here)"
  run "$VENV/bin/pip" install --disable-pip-version-check onnxscript
fi
if [ "$dry_run" = 1 ]; then
  [ -x "$VENV/perf_analyzer/bin/perf_analyzer" ] || echo "would fetch perf_analyzer from the tritonclient $PA_VERSION wheel"
  exit 0
fi

if [ ! -x "$VENV/perf_analyzer/bin/perf_analyzer" ]; then
  tmp=$(mktemp -d)
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux1_x86_64 "tritonclient==$PA_VERSION" -d "$tmp"
  mkdir -p "$VENV/perf_analyzer/bin" "$VENV/perf_analyzer/lib"
  python3 - "$tmp"/tritonclient-*.whl "$VENV/perf_analyzer/bin/perf_analyzer" <<'PY'
import sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith('/bin/perf_analyzer'))
    open(out, 'wb').write(z.read(name))
PY
  chmod +x "$VENV/perf_analyzer/bin/perf_analyzer"
  if ! ldconfig -p 2>/dev/null | grep -q 'libb64.so.0d'; then
    (cd "$tmp" && apt-get download libb64-0d >/dev/null 2>&1) || { apt-get update -qq >/dev/null 2>&1 || true; (cd "$tmp" && apt-get download libb64-0d >/dev/null); }
    dpkg -x "$tmp"/libb64-0d_*.deb "$tmp/b64"
    cp "$tmp"/b64/usr/lib/x86_64-linux-gnu/libb64.so.0d* "$VENV/perf_analyzer/lib/"
  fi
  rm -rf "$tmp"
fi
cudart=$("$VENV/bin/python" -c 'import nvidia.cuda_runtime, os; print(os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib"))')
cat > "$VENV/bin/perf_analyzer" <<SH
#!/usr/bin/env bash
export LD_LIBRARY_PATH="$PWD/$VENV/perf_analyzer/lib:$cudart\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$PWD/$VENV/perf_analyzer/bin/perf_analyzer" "\$@"
SH
chmod +x "$VENV/bin/perf_analyzer"
"$VENV/bin/perf_analyzer" --version >/dev/null
torch=$("$VENV/bin/python" -c 'import torch; print("torch " + torch.__version__)' 2>/dev/null || echo "no torch: --torch installs it")
echo "python env ready: $VENV (tritonclient $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("tritonclient"))'), perf_analyzer $PA_VERSION, $torch)"
