#!/usr/bin/env bash
# Prepares .trt-carry/ (git-ignored) for scripts/gpu/tensorrt-on-device.sh: TensorRT 11.2's libraries from Maven
# Central's org.bytedeco:tensorrt:11.2-1.5.14 linux-x86_64-redist jar and the lean runtime 11.4.0.106 from PyPI,
# with every cubin but sm_90's zeroed (shared/gpu/strip_fatbin.py: for carrying to the H200 only, never for
# users), in one xz tarball split into 58 MB chunks (a device call carries 64 MiB with the working tree), plus the
# cp312 wheels the device needs (it has no network). Idempotent: downloads go to $WORK (default /tmp/trtcarry-src).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
WORK=${WORK:-/tmp/trtcarry-src}
STRIP=${STRIP:-$root/../shared/gpu/strip_fatbin.py}
[ -f "$STRIP" ] || STRIP=/work/shared/gpu/strip_fatbin.py
mkdir -p "$WORK/libs" "$WORK/wheels" .trt-carry/wheels
grep -qx '/.trt-carry/' .git/info/exclude 2>/dev/null || echo '/.trt-carry/' >> "$(git rev-parse --git-common-dir)/info/exclude"
jar="$WORK/tensorrt-11.2-1.5.14-linux-x86_64-redist.jar"
[ -f "$jar" ] || curl -fL --progress-bar -o "$jar" https://repo1.maven.org/maven2/org/bytedeco/tensorrt/11.2-1.5.14/tensorrt-11.2-1.5.14-linux-x86_64-redist.jar
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 -d "$WORK/wheels" tensorrt-cu13-bindings==11.2.1.2 tensorrt-lean-cu13-bindings==11.4.0.106 \
  tensorrt-lean-cu13-libs==11.4.0.106 cuda-bindings==13.4.4 cuda-pathfinder
if [ ! -f "$WORK/tensorrt-libs.tar.xz" ]; then
  mkdir -p "$WORK/jar" "$WORK/lean"
  unzip -q -o -j "$jar" 'org/bytedeco/tensorrt/linux-x86_64/*' -d "$WORK/jar"
  unzip -q -o -j "$WORK"/wheels/tensorrt_lean_cu13_libs-*.whl 'tensorrt_lean_libs/libnvinfer_lean.so.11' -d "$WORK/lean"
  for f in libnvinfer.so.11 libnvinfer_plugin.so.11 libnvinfer_vc_plugin.so.11; do python3 "$STRIP" "$WORK/jar/$f" "$WORK/libs/$f" 90 | tail -1; done
  cp "$WORK/jar/libnvonnxparser.so.11" "$WORK/libs/"
  python3 "$STRIP" "$WORK/lean/libnvinfer_lean.so.11" "$WORK/libs/libnvinfer_lean.so.11" 90 | tail -1
  (cd "$WORK/libs" && tar cf - libnvinfer.so.11 libnvinfer_plugin.so.11 libnvonnxparser.so.11 libnvinfer_vc_plugin.so.11 libnvinfer_lean.so.11 | xz -T0 -6 > ../tensorrt-libs.tar.xz)
fi
rm -f .trt-carry/tensorrt-libs.tar.xz.part-*
split -b 58M -d "$WORK/tensorrt-libs.tar.xz" .trt-carry/tensorrt-libs.tar.xz.part-
cp "$WORK"/wheels/tensorrt_cu13_bindings-11.2.1.2-cp312-*.whl "$WORK"/wheels/tensorrt_lean_cu13_bindings-*-cp312-*.whl \
   "$WORK"/wheels/cuda_bindings-*-cp312-*.whl "$WORK"/wheels/cuda_pathfinder-*.whl .trt-carry/wheels/
du -sh .trt-carry/* .trt-carry/wheels/* | sed 's/^/carry: /'
