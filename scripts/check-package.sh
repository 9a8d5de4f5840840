#!/usr/bin/env bash
# Nereid as users install it, checked end to end (CI runs it):
#   1. the npm package: `npm pack`, the tarball installed in a clean folder with production dependencies only,
#      then `npx nereid serve` answers ready, serves the console and infers, `npx nereid model check` prints a
#      completed config, and SIGTERM exits 0;
#   2. the container images' install steps (deploy/docker/install.sh) run as is on a copy of the tree (there is
#      no Docker engine here), and the nereid they install serves the same way.
# Ends with 'N passed, N failed'; exits 1 if anything failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# onnxruntime-node's install script would fetch CUDA libraries from outside the npm registry; the CPU package
# needs none (`nereid gpu setup` installs them for GPU use).
export ONNXRUNTIME_NODE_INSTALL=skip
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -- "-$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# Starts "$@ serve" on the example repository, waits for ready (60 s at most), infers once, checks the console,
# then SIGTERM and a clean exit.
serve_check() {
  local label=$1
  shift
  local port log
  port=$(free_port)
  log="$work/serve-$port.log"
  # Its own process group, signalled as a whole below, as Ctrl-C signals a terminal's foreground job: npx runs
  # nereid through a shell and does not forward signals itself.
  setsid "$@" serve --model-repository "$ROOT/examples/model_repository" --http-address=127.0.0.1 --http-port="$port" \
    --allow-grpc=false --allow-metrics=false >"$log" 2>&1 &
  server_pid=$!
  local ready=0
  for _ in $(seq 1 120); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/health/ready")" = 200 ]; then
      ready=1
      break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$ready" = 1 ]; then ok "$label: serve answers ready"; else fail "$label: serve answers ready"; tail -20 "$log"; fi
  local body='{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}'
  if curl -sf "http://127.0.0.1:$port/v2/models/simple/infer" -d "$body" | grep -q '"data":\[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\]'; then
    ok "$label: infers on 'simple'"
  else
    fail "$label: infers on 'simple'"
  fi
  if curl -sf "http://127.0.0.1:$port/console/" | grep -q '<script src="app.js">'; then
    ok "$label: serves the web console"
  else
    fail "$label: serves the web console"
  fi
  # npm's exit status is npm's own: the server's log says whether nereid drained and stopped by itself.
  kill -TERM -- "-$server_pid"
  wait "$server_pid"
  for _ in $(seq 1 40); do
    grep -q '"msg":"stopped"' "$log" && break
    sleep 0.25
  done
  if grep -q '"msg":"stopped"' "$log"; then ok "$label: SIGTERM stops it cleanly"; else fail "$label: SIGTERM stops it cleanly"; tail -5 "$log"; fi
  server_pid=
}

echo "== npm pack"
npm run build --silent
tarball=$(npm pack --silent --pack-destination "$work")
contents=$(tar -tzf "$work/$tarball")
missing=
for f in package/dist/cli/main.js package/dist/index.js package/proto/model_config.proto package/console/index.html package/console/app.js; do
  grep -qx "$f" <<<"$contents" || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "tarball holds dist, proto and console"; else fail "tarball lacks:$missing"; fi
if grep -qE '^package/(src|test|bench|examples)/|\.test\.js$' <<<"$contents"; then
  fail "tarball ships sources or tests"
else
  ok "tarball ships no sources or tests ($(wc -l <<<"$contents") files)"
fi

echo "== install the tarball in a clean folder"
mkdir "$work/app"
if (cd "$work/app" && npm init -y >/dev/null && npm install --omit=dev --no-audit --no-fund "$work/$tarball" >/dev/null); then
  ok "npm install $tarball"
  cd "$work/app"
  serve_check "npx nereid" npx --no-install nereid
  if npx --no-install nereid model check "$ROOT/examples/model_repository/simple" 2>/dev/null | grep -q '^name: "simple"$'; then
    ok "npx nereid model check prints the completed config"
  else
    fail "npx nereid model check prints the completed config"
  fi
  cd "$ROOT"
else
  fail "npm install $tarball"
fi

echo "== the container images' install steps (deploy/docker/install.sh), as is, on a copy of the tree"
mkdir "$work/src"
git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$work/src"
if (cd "$work/src" && bash deploy/docker/install.sh "$work/prefix" >"$work/install.log" 2>&1); then
  ok "deploy/docker/install.sh"
  serve_check "installed nereid" "$work/prefix/bin/nereid"
else
  fail "deploy/docker/install.sh"
  tail -30 "$work/install.log"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
