#!/usr/bin/env bash
# The README's test command from a fresh copy of the repository placed where ../shared does not exist: tests that
# need the team's data sets (../shared/data) must skip, all others must pass.
#
# Copies the working tree without its venv, drops what git ignores (build and cache files), and runs
# `python -m pip install ".[test]" && python -m pytest` there with the active venv (the package installed from the
# copy for that run; on exit it is installed from this repository again).
# Usage (with the venv active): bash .ci/fresh-clone-test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
say() { printf '[fresh-clone-test] %s\n' "$*"; }

copy_root="$(mktemp -d)"
restore() {
  python -m pip install -q --no-deps "$ROOT" >/dev/null 2>&1 || say "WARNING: could not re-install $ROOT"
  rm -rf "$copy_root"
}
trap restore EXIT
mkdir "$copy_root/repo"
tar --exclude=./.venv -cf - . | tar -xf - -C "$copy_root/repo"
if [ -d "$copy_root/repo/.git" ]; then git -C "$copy_root/repo" clean -fdXq; fi
test ! -e "$copy_root/shared"
say "running the README test command in $copy_root/repo (no ../shared)"
cd "$copy_root/repo"
unset RAG_GATE_SHARED_DATA
python -m pip install -q ".[test]" && python -m pytest "$@"
