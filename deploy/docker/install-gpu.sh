#!/usr/bin/env bash
# The GPU image's extra step (Dockerfile.gpu runs exactly this after install.sh): `nereid gpu setup` puts
# onnxruntime-gpu's CUDA provider libraries beside the installed onnxruntime-node, downloading the matching wheel
# with pip, then checks that their CUDA and cuDNN libraries resolve.
#
# Exit status of setup: 0 ready; 1 something missing. While an image is built there is no GPU driver: libcuda.so.1
# arrives only when the container runs (the NVIDIA container toolkit mounts it), so 1 is expected here as long as
# the provider libraries themselves were installed. `docker run --gpus all IMAGE gpu check` then says whether the
# container is ready. Any other failure (no wheel, a bad call) stops the build.
#
#   bash deploy/docker/install-gpu.sh /opt/nereid
set -uo pipefail
PREFIX=${1:?usage: install-gpu.sh PREFIX}
"$PREFIX/bin/nereid" gpu setup
status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
  echo "install-gpu.sh: nereid gpu setup failed (exit $status)" >&2
  exit "$status"
fi
shopt -s nullglob
providers=("$PREFIX"/lib/node_modules/nereid/node_modules/onnxruntime-node/bin/napi-v*/linux/x64/libonnxruntime_providers_cuda.so)
if [ ${#providers[@]} -eq 0 ]; then
  echo "install-gpu.sh: the CUDA provider library was not installed" >&2
  exit 1
fi
echo "install-gpu.sh: CUDA provider installed: ${providers[0]}"
