#!/usr/bin/env bash
# Installs Nereid from this source tree into PREFIX the way the container images do (Dockerfile, Dockerfile.gpu
# run exactly this), and the way a user installs the npm package: build, `npm pack`, then `npm install --global`
# of that tarball with production dependencies only. CI runs it as is on a copy of the tree (no Docker engine
# there) and serves the example repository from the result (scripts/check-package.sh).
#
#   bash deploy/docker/install.sh /opt/nereid      → /opt/nereid/bin/nereid
set -euo pipefail
PREFIX=${1:?usage: install.sh PREFIX}
cd "$(dirname "$0")/../.."
# onnxruntime-node's install script would download CUDA libraries from outside the npm registry; the CPU build
# needs none, and the GPU image gets them with `nereid gpu setup` (install-gpu.sh).
export npm_config_onnxruntime_node_install=skip
npm ci --no-audit --no-fund
npm run build
pack=$(mktemp -d)
tarball=$(npm pack --silent --pack-destination "$pack")
npm install --global --prefix "$PREFIX" --omit=dev --no-audit --no-fund "$pack/$tarball"
rm -rf "$pack"
"$PREFIX/bin/nereid" --version
