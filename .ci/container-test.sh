#!/usr/bin/env bash
# The GitHub Action's container, for real: build the Dockerfile with podman on a Debian base made locally with
# debootstrap, then run it the way the Actions runner runs a Docker action (same INPUT_* / GITHUB_* environment,
# same /github/* mounts, args from action.yml) on the bundled example (examples/squad: base.yml on main, head.yml
# on the PR branch) against a fake GitHub REST server on 127.0.0.1, and check what it posted.
#
# Checks: 1st run posts one comment and exits 1; 2nd run edits that same comment (base from the cache);
# pull_request_target exits 2 without running anything; a 403 on comment creation still writes the job summary
# and exits 1.
#
# Skips (exit 0, with a clear message) only when podman cannot be installed. Usage: bash .ci/container-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BASE_IMAGE="localhost/debian-py:bookworm"
IMAGE="localhost/rag-gate:ci"
PODMAN=(podman --runtime runc --cgroup-manager=cgroupfs)
LIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
PY="$(command -v python3)"
say() { printf '[container-test] %s\n' "$*"; }

# --- tools ---------------------------------------------------------------------------------------------------
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
  say "installing podman, buildah, runc and debootstrap with apt"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc debootstrap; } \
      >/tmp/rag-gate-apt.log 2>&1; then
    say "SKIP: podman could not be installed (see /tmp/rag-gate-apt.log); the container was NOT tested"
    exit 0
  fi
fi

# --- base image: Debian bookworm with python3, from the apt mirror this machine uses -------------------------
if ! "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  mirror="$(grep -hoE '^(URIs:|deb) *https?://[^ ]*debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
            | grep -oE 'https?://[^ ]*' | grep -v security | head -n1 || true)"
  if [ -z "$mirror" ]; then
    say "SKIP: no Debian mirror configured for apt on this machine; the container was NOT tested"
    exit 0
  fi
  rootfs="$(mktemp -d /tmp/rag-gate-rootfs.XXXXXX)"
  say "debootstrap bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,git bookworm "$rootfs" "$mirror" \
    >/tmp/rag-gate-debootstrap.log 2>&1
  tar -C "$rootfs" -c . | "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
fi

# --- build: pip in the build trusts the host's CA bundle and uses the host's index, if one is configured ------
build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
ca="${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}"
ca="${ca:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$ca" ]; then
  build_args+=(--volume "$ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
index="${PIP_INDEX_URL:-$(pip config get global.index-url 2>/dev/null || true)}"
if [ -n "$index" ]; then build_args+=(--build-arg "PIP_INDEX_URL=$index"); fi
say "building $IMAGE (layers are cached between runs)"
start=$SECONDS
"${PODMAN[@]}" build --isolation chroot "${LIMITS[@]}" "${build_args[@]}" -t "$IMAGE" . >/tmp/rag-gate-build.log 2>&1 \
  || { tail -n 40 /tmp/rag-gate-build.log; say "FAIL: image build"; exit 1; }
say "built in $((SECONDS - start)) s"

# --- scratch repository: the bundled example, base commit on main, regressing PR commit on feature ----------
work="$(mktemp -d /tmp/rag-gate-ctest.XXXXXX)"
server_pid=""
cleanup() { if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi; rm -rf "$work"; }
trap cleanup EXIT
ws="$work/workspace"
mkdir -p "$ws" "$work/workflow" "$work/file_commands" "$work/home"
cp examples/squad/rag.py examples/squad/corpus.jsonl examples/squad/golden.jsonl "$ws/"
g() { git -C "$ws" -c user.email=ci@example.com -c user.name=ci "$@"; }
g init -q -b main
printf 'rag-gate-out/\n.rag-gate-cache/\n__pycache__/\n' >"$ws/.gitignore"
cp examples/squad/base.yml "$ws/rag-gate.yml"
g add -A && g commit -q -m "base: the example's base configuration"
base_sha="$(g rev-parse HEAD)"
g checkout -q -b feature
cp examples/squad/head.yml "$ws/rag-gate.yml"
g commit -q -am "PR: the example's regressing head configuration"
head_sha="$(g rev-parse HEAD)"

event() {
  cat >"$work/workflow/event.json" <<EOF
{"action": "synchronize", "number": 7,
 "pull_request": {"number": 7,
   "base": {"sha": "$base_sha", "ref": "main", "repo": {"full_name": "octo/rag"}},
   "head": {"sha": "$head_sha", "ref": "feature", "repo": {"full_name": "$1"}}}}
EOF
}

start_server() {  # start_server [--forbid-writes]
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -f "$work/port"
  "$PY" tests/fake_github.py --port-file "$work/port" --state "$work/state.json" --repo octo/rag --pr 7 \
    --token ci-token "$@" &
  server_pid=$!
  for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
  port="$(cat "$work/port")"
}

run_action() {  # run_action EVENT_NAME -> exit code in $rc; stdout in $work/stdout
  : >"$work/file_commands/step_summary"; : >"$work/file_commands/set_output"
  "$PY" tests/container/action_run.py action.yml env github-token=ci-token >"$work/env"
  cat >>"$work/env" <<EOF
GITHUB_ACTIONS=true
CI=true
HOME=/github/home
GITHUB_EVENT_NAME=$1
GITHUB_EVENT_PATH=/github/workflow/event.json
GITHUB_REPOSITORY=octo/rag
GITHUB_API_URL=http://127.0.0.1:$port/api/v3
GITHUB_SERVER_URL=http://127.0.0.1:$port
GITHUB_RUN_ID=1
GITHUB_WORKSPACE=/github/workspace
GITHUB_STEP_SUMMARY=/github/file_commands/step_summary
GITHUB_OUTPUT=/github/file_commands/set_output
RAGAS_DO_NOT_TRACK=true
EOF
  mapfile -t args < <("$PY" tests/container/action_run.py action.yml args)
  set +e
  "${PODMAN[@]}" run --rm "${LIMITS[@]}" --network host --workdir /github/workspace --env-file "$work/env" \
    -v "$ws:/github/workspace" -v "$work/workflow:/github/workflow" -v "$work/file_commands:/github/file_commands" \
    -v "$work/home:/github/home" "$IMAGE" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
  rc=$?
  set -e
  say "run ($1): exit $rc; $(tail -n1 "$work/stderr")"
}

check() {  # check DESCRIPTION PYTHON-EXPRESSION (over state, summary, outputs, stdout)
  if "$PY" - "$work" "$2" <<'EOF'
import json, sys, pathlib
work, expr = pathlib.Path(sys.argv[1]), sys.argv[2]
state = json.loads((work / "state.json").read_text())
comments, requests = state["comments"], state["requests"]
summary = (work / "file_commands/step_summary").read_text()
outputs = dict(l.split("=", 1) for l in (work / "file_commands/set_output").read_text().splitlines() if "=" in l)
stdout = (work / "stdout").read_text()
sys.exit(0 if eval("(" + expr + ")") else 1)
EOF
  then say "ok: $1"; else say "FAIL: $1"; tail -n 20 "$work/stderr"; exit 1; fi
}

start_server
event octo/rag
run_action pull_request
[ "$rc" = 1 ] || { say "FAIL: first run should exit 1"; tail -n 30 "$work/stderr"; exit 1; }
check "first run posts one marked comment" \
  'len(comments) == 1 and comments[0]["body"].startswith("<!-- rag-gate -->") and "fail" in comments[0]["body"]'
check "outputs, summary and annotations" \
  'outputs["verdict"] == "fail" and outputs["report-path"] == "rag-gate-out/report.json" and "| metric |" in summary
   and "::error " in stdout and "ci-token" not in stdout.replace("::add-mask::ci-token", "")'
check "report.json and comment.md are on disk" '(work / "workspace/rag-gate-out/report.json").is_file() and (work / "workspace/rag-gate-out/comment.md").is_file()'
first_id="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["comments"][0]["id"])' "$work/state.json")"

run_action pull_request
[ "$rc" = 1 ] || { say "FAIL: second run should exit 1"; exit 1; }
check "second run edits the same comment, base from the cache" \
  "len(comments) == 1 and comments[0]['id'] == $first_id and [r[0] for r in requests].count('PATCH') == 1
   and 'base from cache' in (work / 'stderr').read_text()"

n_before="$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["requests"]))' "$work/state.json")"
run_action pull_request_target
[ "$rc" = 2 ] || { say "FAIL: pull_request_target should exit 2"; exit 1; }
check "pull_request_target is refused before anything runs" \
  "len(requests) == $n_before and 'workflow_run' in summary and outputs['verdict'] == 'error'"

start_server --forbid-writes
event fork-owner/rag
run_action pull_request
[ "$rc" = 1 ] || { say "FAIL: a 403 on the comment should still exit 1 (the verdict)"; exit 1; }
check "403 on comment creation: summary written, warning given" \
  "comments == [] and any(r[2] == 403 for r in requests) and 'fork' in summary and '| metric |' in summary
   and '::warning title=rag-gate%3A comment not posted' in stdout"

say "all container checks passed"
