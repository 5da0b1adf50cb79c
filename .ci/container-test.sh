#!/usr/bin/env bash
# The GitHub Action's container, for real: build the Dockerfile with podman on a Debian base made locally with
# debootstrap, then run it the way the Actions runner runs a Docker action (same INPUT_* / GITHUB_* environment,
# same /github/* mounts, args from action.yml) on the bundled example (examples/squad: base.yml on main, head.yml
# on the PR branch) against a fake GitHub REST server on 127.0.0.1, and check what it posted.
#
# Checks: a push to main stores the base results in the signed cache (exit 0); the 1st PR run takes the base from
# the cache, posts one comment and exits 1; the 2nd run edits that same comment; pull_request_target and
# workflow_run exit 2 without running anything; a 403 on comment creation still writes the job summary and exits 1
# (and credentials in .git/config are warned about); a PR whose pipeline hunts for secrets runs as the unprivileged
# pipeline user (the setup command too), finds neither the token nor the cache key in its environment, rag-gate's
# /proc/1/environ or command line, cannot write the base results or the workspace, and nothing rag-gate wrote or
# printed holds the token in any encoding.
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
chmod 755 "$work"   # the workspace is reached by other users, as on a runner (checked below as uid 1001)
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
# a PR whose pipeline hunts for secrets and reports what it could reach (hashes only: nothing for rag-gate to redact)
g checkout -q -b steal main
cat >"$ws/steal.py" <<'PIPELINE'
import hashlib, json, os

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"<{type(exc).__name__}>"

def _can_write(path):
    try:
        with open(path, "a"):
            return True
    except OSError:
        return False

SOURCES = {"own environment": "\0".join(f"{k}={v}" for k, v in os.environ.items())}
for pid in ("1", str(os.getppid())):
    for part in ("environ", "cmdline"):
        SOURCES[f"/proc/{pid}/{part}"] = _read(f"/proc/{pid}/{part}")
WORDS = {w for text in SOURCES.values() for item in text.split("\0") for w in (item, item.partition("=")[2]) if w}
REPORT = {"uid": os.getuid(), "ppid": os.getppid(),
          "hashes": sorted(hashlib.sha256(w.encode()).hexdigest() for w in WORDS),
          "unreadable": sorted(k for k, v in SOURCES.items() if v.startswith("<")),
          "writable": [p for p in ("rag-gate-out/base/scores.jsonl", "stolen.txt") if _can_write(p)]}

def answer(case, **_):
    return {"answer": json.dumps(REPORT), "retrieved": []}
PIPELINE
sed 's/python: rag:answer/python: steal:answer/' examples/squad/base.yml >"$ws/rag-gate.yml"
g add -A && g commit -q -m "PR: a pipeline that hunts for secrets"
steal_sha="$(g rev-parse HEAD)"
g checkout -q feature

event() {  # event HEAD_REPOSITORY [HEAD_SHA]
  cat >"$work/workflow/event.json" <<EOF
{"action": "synchronize", "number": 7,
 "pull_request": {"number": 7,
   "base": {"sha": "$base_sha", "ref": "main", "repo": {"full_name": "octo/rag"}},
   "head": {"sha": "${2:-$head_sha}", "ref": "feature", "repo": {"full_name": "$1"}}},
 "repository": {"full_name": "octo/rag", "default_branch": "main"}}
EOF
}

push_event() {
  cat >"$work/workflow/event.json" <<EOF
{"ref": "refs/heads/main", "after": "$base_sha", "repository": {"full_name": "octo/rag", "default_branch": "main"}}
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

CACHE_KEY="ci-cache-signing-key-0123456789"
run_action() {  # run_action EVENT_NAME [INPUT=VALUE...] -> exit code in $rc; stdout in $work/stdout
  local event_name=$1 ref=refs/pull/7/merge sha=$head_sha
  shift
  if [ "$event_name" = push ]; then ref=refs/heads/main sha=$base_sha; fi
  : >"$work/file_commands/step_summary"; : >"$work/file_commands/set_output"
  "$PY" tests/container/action_run.py action.yml env github-token=ci-token cache-signing-key="$CACHE_KEY" \
    history=off "$@" >"$work/env"
  cat >>"$work/env" <<EOF
GITHUB_ACTIONS=true
CI=true
HOME=/github/home
GITHUB_EVENT_NAME=$event_name
GITHUB_REF=$ref
GITHUB_SHA=$sha
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
  mapfile -t args < <("$PY" tests/container/action_run.py action.yml args history=off "$@")
  set +e
  "${PODMAN[@]}" run --rm "${LIMITS[@]}" --network host --workdir /github/workspace --env-file "$work/env" \
    -v "$ws:/github/workspace" -v "$work/workflow:/github/workflow" -v "$work/file_commands:/github/file_commands" \
    -v "$work/home:/github/home" "$IMAGE" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
  rc=$?
  set -e
  say "run ($event_name): exit $rc; $(tail -n1 "$work/stderr")"
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
push_event
run_action push
[ "$rc" = 0 ] || { say "FAIL: the push to main should store the base and exit 0"; tail -n 30 "$work/stderr"; exit 1; }
check "a push to main stores the base results in the signed cache" \
  'outputs["verdict"] == "cached" and requests == [] and any((work / "workspace/.rag-gate-cache").glob("*/signature"))'

event octo/rag
run_action pull_request
[ "$rc" = 1 ] || { say "FAIL: first run should exit 1"; tail -n 30 "$work/stderr"; exit 1; }
check "first run takes the base from the cache and posts one marked comment" \
  'len(comments) == 1 and comments[0]["body"].startswith("<!-- rag-gate") and "fail" in comments[0]["body"]
   and "base from cache" in (work / "stderr").read_text()'
check "outputs, summary and annotations" \
  'outputs["verdict"] == "fail" and outputs["report-path"] == "rag-gate-out/report.json" and "| metric |" in summary
   and "::error " in stdout and "ci-token" not in stdout.replace("::add-mask::ci-token", "")'
check "report.json and comment.md are on disk" '(work / "workspace/rag-gate-out/report.json").is_file() and (work / "workspace/rag-gate-out/comment.md").is_file()'
first_id="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["comments"][0]["id"])' "$work/state.json")"
# The job's next steps (upload-artifact, a JUnit reporter) run as the runner's user, not root: every file rag-gate
# wrote in the container, run directories included, is readable by another user (uid 1001, as on hosted runners).
unreadable="$(cd "$ws/rag-gate-out" && find . -type f -print0 | while IFS= read -r -d '' f; do
  setpriv --reuid 1001 --regid 1001 --clear-groups cat "$f" >/dev/null 2>&1 || printf '%s ' "$f"; done)"
if [ -n "$unreadable" ]; then say "FAIL: not readable by uid 1001: $unreadable"; exit 1; fi
say "ok: every file in rag-gate-out/ is readable by uid 1001 ($(find "$ws/rag-gate-out" -type f | wc -l) files)"

run_action pull_request
[ "$rc" = 1 ] || { say "FAIL: second run should exit 1"; exit 1; }
check "second run edits the same comment, base from the cache" \
  "len(comments) == 1 and comments[0]['id'] == $first_id and [r[0] for r in requests].count('PATCH') == 1
   and 'base from cache' in (work / 'stderr').read_text()"

n_before="$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["requests"]))' "$work/state.json")"
run_action pull_request_target
[ "$rc" = 2 ] || { say "FAIL: pull_request_target should exit 2"; exit 1; }
check "pull_request_target is refused before anything runs" \
  "len(requests) == $n_before and 'workflow_run' in summary.replace(chr(92), '') and outputs['verdict'] == 'error'"
run_action workflow_run
[ "$rc" = 2 ] || { say "FAIL: workflow_run should exit 2"; exit 1; }
check "workflow_run is refused before anything runs" \
  "len(requests) == $n_before and 'allow-privileged-event: true' in summary and outputs['verdict'] == 'error'"

start_server --forbid-writes
event fork-owner/rag
g config http.https://github.com/.extraheader "AUTHORIZATION: basic $(printf x-access-token:ci-token | base64)"
run_action pull_request
g config --unset http.https://github.com/.extraheader
[ "$rc" = 1 ] || { say "FAIL: a 403 on the comment should still exit 1 (the verdict)"; exit 1; }
check "403 on comment creation: summary written, warning given" \
  "comments == [] and any(r[2] == 403 for r in requests) and 'fork' in summary and '| metric |' in summary
   and '::warning title=rag-gate%3A comment not posted' in stdout"
check "credentials left in .git/config are warned about" \
  "'::warning title=rag-gate%3A credentials in .git/config' in stdout and 'persist-credentials: false' in stdout"

# --- the PR's code inside the real image: another user, no token, nothing to tamper with, nothing leaked -------
start_server
g checkout -q steal
event octo/rag "$steal_sha"
run_action pull_request setup-command='echo "setup runs as $(id -un) ($(id -u)), token: ${GITHUB_TOKEN:-none}"'
g checkout -q feature
[ "$rc" = 1 ] || { say "FAIL: the secret-hunting PR should still get a verdict (exit 1)"; tail -n 30 "$work/stderr"; exit 1; }
check "the setup command runs as the pipeline user, without the token" \
  "'setup runs as rag-gate-pipeline (10001), token: none' in (work / 'stderr').read_text()"
check "the pipeline runs as the pipeline user and reaches neither the token nor the cache key" \
  'len(found := [json.loads(json.loads(line)["answer"]) for line in
                 (work / "workspace/rag-gate-out/head/predictions.jsonl").read_text().splitlines()]) > 100
   and not {__import__("hashlib").sha256(s.encode()).hexdigest() for s in ("ci-token", "'"$CACHE_KEY"'")}
           & {h for f in found for h in f["hashes"]}
   and all(f["uid"] == 10001 and f["ppid"] == 1 and "/proc/1/environ" in f["unreadable"] and f["writable"] == []
           and __import__("hashlib").sha256(b"rag-gate-pipeline").hexdigest() in f["hashes"]  # it saw its own USER
           for f in found)'
check "nothing rag-gate wrote or printed holds the token, in any encoding" \
  'not any(form in text for form in ("ci-token", "Y2ktdG9rZW4", "63692d746f6b656e", "c i - t o k e n")
           for text in [summary, stdout.replace("::add-mask::ci-token", ""), (work / "stderr").read_text(),
                        json.dumps(comments)]
                       + [p.read_text(errors="replace") for p in (work / "workspace/rag-gate-out").rglob("*")
                          if p.is_file()])'

say "all container checks passed"
