#!/usr/bin/env bash
# Packs what scripts/gpu/ort-gpu-check.sh needs on the GPU machine (device tool) into two carries of at most
# ~60 MiB each, under .device/ (git-ignored; never committed):
#   .device/a: Node (stripped, xz), a minimal node_modules (koffi for linux-x64, onnxruntime-node's
#              libonnxruntime.so.1), the check script bundled with esbuild, onnx.proto, the small provider
#              libraries, and the first part of libonnxruntime_providers_cuda.so (xz)
#   .device/b: the rest of libonnxruntime_providers_cuda.so
# The CUDA provider is carried with every cubin but sm_90 zeroed (shared/gpu/strip_fatbin.py): for the H200
# only, never for users.
#
#   scripts/gpu/pack-ort-gpu.sh /path/to/onnxruntime_gpu-1.30.0-cp312-cp312-manylinux_2_28_x86_64.whl
# (pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 onnxruntime-gpu==1.30.0)
set -euo pipefail
wheel=${1:?usage: pack-ort-gpu.sh onnxruntime_gpu-1.30.0-...whl}
root=$(git rev-parse --show-toplevel)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf .device/a .device/b
mkdir -p .device/a .device/b

# Node, without debug info (86 MB instead of 99; xz -9: ~22 MB)
strip -o "$work/node" "$(readlink -f "${NODE_BIN:-$(command -v node)}")"
xz -T0 -9 -c "$work/node" > .device/a/node.xz

# node_modules: only what the bundled script loads natively
nm=$(readlink -f node_modules)
mkdir -p "$work/nm/node_modules/koffi/build/koffi" "$work/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
cp "$nm"/koffi/{package.json,index.js,indirect.js} "$work/nm/node_modules/koffi/"
cp -r "$nm/koffi/build/koffi/linux_x64" "$work/nm/node_modules/koffi/build/koffi/"
cp "$nm/onnxruntime-node/package.json" "$work/nm/node_modules/onnxruntime-node/"
cp "$nm/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$work/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/"
tar cf - -C "$work/nm" node_modules | xz -T0 -9 > .device/a/node_modules.tar.xz

# the check script, bundled (everything but the native modules)
"$nm/.bin/esbuild" scripts/gpu/ort-gpu-check.ts --bundle --platform=node --format=esm --target=node20 \
  --external:koffi --external:onnxruntime-node --log-level=warning --outfile=.device/a/ort-gpu-check.mjs \
  --banner:js="import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
cp test/fixtures/onnx.proto scripts/gpu/ort-gpu-check.sh .device/a/

# provider libraries from the wheel
python3 - "$wheel" "$work" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in ("libonnxruntime_providers_shared.so", "libonnxruntime_providers_tensorrt.so", "libonnxruntime_providers_cuda.so"):
    open(f"{sys.argv[2]}/{n}", "wb").write(z.read(f"onnxruntime/capi/{n}"))
PY
tar cf - -C "$work" libonnxruntime_providers_shared.so libonnxruntime_providers_tensorrt.so | xz -T0 -9 > .device/a/providers-small.tar.xz
python3 "${STRIP_FATBIN:-/work/shared/gpu/strip_fatbin.py}" "$work/libonnxruntime_providers_cuda.so" "$work/cuda90.so" 90 > /dev/null
xz -T0 -6 -c "$work/cuda90.so" > "$work/cuda90.so.xz"
# what is left of carry a's budget goes to the first part
used=$(du -cb .device/a/* | tail -1 | cut -f1)
first=$(( 60 * 1024 * 1024 - used ))
split -b "$first" -d "$work/cuda90.so.xz" "$work/cuda.xz."
mv "$work/cuda.xz.00" .device/a/
mv "$work"/cuda.xz.0[1-9] .device/b/
du -sh .device/a .device/b .device/a/* .device/b/* | sed 's/^/packed: /'
