#!/usr/bin/env bash
# Prepares .trt-carry/ (git-ignored) for a TensorRT run on the H200 (device tool): TensorRT 10.6's libraries from
# Maven Central's org.bytedeco:tensorrt:10.6-1.5.11 linux-x86_64-redist jar (checked against Maven's SHA-1), the
# last of those jars whose builder resource holds sm_90 code (later ones ship only PTX and cannot build on Hopper),
# with every cubin sm_90 cannot use zeroed (shared/gpu/strip_fatbins.py: for carrying to the H200 only, never for
# users), in one zstd tarball split into 56 MiB chunks (a device call carries 64 MiB with the working tree), plus the
# cp312 wheels the device needs and lacks (it has no network): the 10.6 bindings, cuda-bindings 12.9, zstandard (the
# device has no zstd tool) and tritonclient[http] for the seed-001 client.
# Idempotent: downloads go to $WORK (default /tmp/trtcarry-src). About 1.1 GB down, ~1.7 GB unpacked, ~300 MB out.
#
# On the device, chunk by chunk (calls back to back: the machine is released after ~30 s idle), then once:
#   python3 -m pip install --no-deps --target /tmp/trt/wheels-site /tmp/trt/wheels/zstandard-*.whl
#   cat /tmp/trt/tensorrt-libs.tar.zst.part-* | PYTHONPATH=/tmp/trt/wheels-site python3 -c \
#     'import sys, zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)' \
#     | tar xf - -C /tmp/trt/libs
#   nereid tensorrt setup --fallback-only --jar /tmp/trt/libs --wheel /tmp/trt/wheels/tensorrt_cu12_bindings-*.whl ...
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
WORK=${WORK:-/tmp/trtcarry-src}
MAVEN=10.6-1.5.11
STRIP=${STRIP:-$root/../shared/gpu/strip_fatbins.py}
[ -f "$STRIP" ] || STRIP=/work/shared/gpu/strip_fatbins.py
mkdir -p "$WORK/jar" "$WORK/libs" "$WORK/wheels" .trt-carry/wheels
grep -qx '/.trt-carry/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null || echo '/.trt-carry/' >> "$(git rev-parse --git-common-dir)/info/exclude"

url=https://repo1.maven.org/maven2/org/bytedeco/tensorrt/$MAVEN/tensorrt-$MAVEN-linux-x86_64-redist.jar
jar="$WORK/tensorrt-$MAVEN-linux-x86_64-redist.jar"
if [ ! -f "$jar" ]; then
  curl -fL --progress-bar -o "$jar.part" "$url"
  want=$(curl -fsSL "$url.sha1" | cut -c1-40)
  got=$(sha1sum "$jar.part" | cut -c1-40)
  [ "$want" = "$got" ] || { echo "SHA-1 of the download is $got, Maven Central publishes $want" >&2; rm -f "$jar.part"; exit 1; }
  mv "$jar.part" "$jar"
fi

pyplat="--python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any"
# shellcheck disable=SC2086
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: $pyplat -d "$WORK/wheels" \
  tensorrt-cu12-bindings==10.6.0 'cuda-bindings==12.9.*' cuda-pathfinder zstandard 'tritonclient[http]'

out="$WORK/tensorrt-libs.tar.zst"
if [ ! -f "$out" ]; then
  unzip -q -o -j "$jar" 'org/bytedeco/tensorrt/linux-x86_64/*' -d "$WORK/jar"
  libs=(libnvinfer.so.10 libnvinfer_builder_resource.so.10.6.0 libnvinfer_plugin.so.10 libnvinfer_vc_plugin.so.10)
  for f in "${libs[@]}"; do python3 "$STRIP" "$WORK/jar/$f" "$WORK/libs/$f" 90 | tail -1; done
  cp "$WORK/jar/libnvonnxparser.so.10" "$WORK/libs/"
  (cd "$WORK/libs" && tar cf - "${libs[@]}" libnvonnxparser.so.10 | zstd -12 --long=27 -T0 -q -o "$out")
fi
rm -f .trt-carry/tensorrt-libs.tar.zst.part-* .trt-carry/wheels/*
split -b 56M -d "$out" .trt-carry/tensorrt-libs.tar.zst.part-
# numpy and the aio client's packages are on the device already or not needed by the sync HTTP client.
for w in "$WORK"/wheels/*.whl; do
  case "$(basename "$w")" in
    numpy-*|aiohttp-*|aiohappyeyeballs-*|aiosignal-*|attrs-*|frozenlist-*|multidict-*|propcache-*|yarl-*) ;;
    *) cp "$w" .trt-carry/wheels/ ;;
  esac
done
du -sh .trt-carry/* | sed 's/^/carry: /'
