#!/usr/bin/env bash
# Packs onnxruntime-gpu's provider libraries for scripts/gpu/ort-trt-check.sh (onnxruntime's TensorRT provider on the
# H200) into .device/ort-trt/ (git-ignored, never committed): libonnxruntime_providers_shared.so,
# libonnxruntime_providers_tensorrt.so and libonnxruntime_providers_cuda.so (every cubin but sm_90 zeroed by
# shared/gpu/strip_fatbin.py: for carrying to the H200 only, never for users), one xz tarball split into 56 MiB
# parts, one device call each. Node, node_modules and TensorRT 10.6 come from scripts/gpu/pack-tensorrt.sh and
# prepare-tensorrt-carry.sh (tensorrt-on-device.sh core sets them up first).
#
#   scripts/gpu/pack-ort-trt.sh /path/to/onnxruntime_gpu-1.30.0-cp312-cp312-manylinux_2_28_x86_64.whl
# (pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 onnxruntime-gpu==1.30.0)
set -euo pipefail
wheel=${1:?usage: pack-ort-trt.sh onnxruntime_gpu-1.30.0-...whl}
root=$(git rev-parse --show-toplevel)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -qx '/.device/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null || echo '/.device/' >> "$(git rev-parse --git-common-dir)/info/exclude"
out=.device/ort-trt
rm -rf "$out" && mkdir -p "$out" "$work/libs"
python3 - "$wheel" "$work" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in ("libonnxruntime_providers_shared.so", "libonnxruntime_providers_tensorrt.so", "libonnxruntime_providers_cuda.so"):
    open(f"{sys.argv[2]}/{n}", "wb").write(z.read(f"onnxruntime/capi/{n}"))
PY
cp "$work/libonnxruntime_providers_shared.so" "$work/libonnxruntime_providers_tensorrt.so" "$work/libs/"
python3 "${STRIP_FATBIN:-/work/shared/gpu/strip_fatbin.py}" "$work/libonnxruntime_providers_cuda.so" "$work/libs/libonnxruntime_providers_cuda.so" 90 > /dev/null
python3 "${STRIP_FATBIN:-/work/shared/gpu/strip_fatbin.py}" "$work/libonnxruntime_providers_tensorrt.so" "$work/libs/libonnxruntime_providers_tensorrt.so" 90 > /dev/null || \
  cp "$work/libonnxruntime_providers_tensorrt.so" "$work/libs/"
tar cf - -C "$work/libs" . | xz -T0 -6 > "$work/providers.tar.xz"
split -b 56M -d "$work/providers.tar.xz" "$out/providers.tar.xz.part-"
cp scripts/gpu/ort-trt-check.sh "$out/"
du -sh "$out"/* | sed 's/^/packed: /'
