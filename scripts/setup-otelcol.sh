#!/usr/bin/env bash
# Builds the OpenTelemetry Collector that the tracing tests run (test/integration/opentelemetry.test.ts) from
# scripts/otelcol/manifest.yaml with the Collector Builder (ocb, a Go module: no release download is reachable
# here), into $NEREID_OTELCOL_DIR (default ~/.cache/nereid/otelcol, outside the clone so later runs on the same
# machine reuse it, as deploy/ci/setup-tools.sh does for helm). Idempotent: a binary built from this manifest is
# kept. Prints the binary's path. Measured on the 2-core machine: ~10 min on a new machine (empty Go caches:
# ~2.5 min of module downloads, ~520 MB, then the compile, at load average ~9), ~2 min with the modules cached,
# instant once built.
set -euo pipefail
cd "$(dirname "$0")/.."
OCB_VERSION=v0.161.0
DIR=${NEREID_OTELCOL_DIR:-$HOME/.cache/nereid/otelcol}
manifest=scripts/otelcol/manifest.yaml
stamp="$OCB_VERSION-$(sha256sum "$manifest" | cut -c1-12)"
bin="$DIR/$stamp/otelcol-nereid"
if [ ! -x "$bin" ]; then
  command -v go >/dev/null || { echo "setup-otelcol: Go is needed to build the collector" >&2; exit 1; }
  echo "building the OpenTelemetry Collector ($stamp) with ocb (first run only) …" >&2
  mkdir -p "$DIR/bin" "$DIR/$stamp"
  [ -x "$DIR/bin/builder-$OCB_VERSION" ] || {
    GOBIN="$DIR/bin" go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
    mv "$DIR/bin/builder" "$DIR/bin/builder-$OCB_VERSION"
  }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp "$manifest" "$work/manifest.yaml"
  (cd "$work" && "$DIR/bin/builder-$OCB_VERSION" --config manifest.yaml >&2)
  mv "$work/out/otelcol-nereid" "$bin"
fi
ln -sfn "$bin" "$DIR/otelcol-nereid"
echo "$DIR/otelcol-nereid"
