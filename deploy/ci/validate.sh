#!/usr/bin/env bash
# Offline validation of the deployment files (CI runs it): hadolint on both Dockerfiles, `helm lint` and
# `helm template` of the chart with each example values set, every rendered object and the KServe manifests
# against bundled schemas and the KServe SDK's models (validate_manifests.py: unknown fields, kinds or resources
# fail; nothing is skipped), the chart's shutdown arithmetic, and a file of broken objects that must all be refused.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(bash deploy/ci/setup-tools.sh | tail -1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== hadolint"
"$BIN/hadolint" --failure-threshold info Dockerfile Dockerfile.gpu
echo "Dockerfile, Dockerfile.gpu: no findings"

echo "== helm lint / template"
chart=deploy/helm/nereid
variants=(default "autoscaling.enabled=true" "console=false,shutdown.exitTimeoutSecs=120")
for v in "${variants[@]}"; do
  set_args=()
  [ "$v" = default ] || set_args=(--set "$v")
  "$BIN/helm" lint --strict "$chart" "${set_args[@]}"
  "$BIN/helm" template nereid "$chart" "${set_args[@]}" > "$out/chart-${v//[^a-zA-Z0-9]/_}.yaml"
done

echo "== schemas"
"$BIN/python" deploy/ci/validate_manifests.py "$out"/chart-*.yaml deploy/kserve/*.yaml

echo "== chart behaviour"
"$BIN/python" - "$out" <<'PY'
import glob, os, sys, yaml
out = sys.argv[1]
def objects(name):
    return {d["kind"]: d for d in yaml.safe_load_all(open(os.path.join(out, name))) if d}
def check(name, exit_secs, console, hpa):
    o = objects(name)
    pod = o["Deployment"]["spec"]["template"]
    c = pod["spec"]["containers"][0]
    args = c["args"]
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    pre = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert f"--exit-timeout-secs={exit_secs}" in args, args
    assert grace >= pre + exit_secs, f"grace {grace} < preStop {pre} + drain {exit_secs}"
    assert f"--console={str(console).lower()}" in args, args
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "8002", ann
    assert ("HorizontalPodAutoscaler" in o) == hpa
    print(f"{name}: grace {grace}s = preStop {pre}s + drain {exit_secs}s + margin; probes, scrape annotations, console={console}, hpa={hpa}")
check("chart-default.yaml", 30, True, False)
check("chart-autoscaling_enabled_true.yaml", 30, True, True)
check("chart-console_false_shutdown_exitTimeoutSecs_120.yaml", 120, False, False)
PY

echo "== broken objects must be refused"
if refused=$("$BIN/python" deploy/ci/validate_manifests.py deploy/ci/broken.yaml); then
  echo "$refused"
  echo "validate_manifests.py accepted deploy/ci/broken.yaml" >&2
  exit 1
fi
expected=$(grep -c '^kind:' deploy/ci/broken.yaml)
got=$(grep -c '^FAIL ' <<<"$refused" || true)
if [ "$got" -ne "$expected" ]; then
  echo "$refused"
  echo "expected $expected refusals, got $got" >&2
  exit 1
fi
grep '^FAIL ' <<<"$refused" | sed 's/^FAIL /refused as expected: /'
echo "deployment files valid"
