#!/usr/bin/env bash
# The bundled example, end to end: run the golden set through the base and the head configuration, score both,
# compare them, print the PR comment. Exit code: 0 pass, 1 regression (expected here: head is worse), 2 / 3 errors.
# Usage: examples/squad/run.sh [OUT_DIR]   (default: rag-gate-example)
#
# rag-gate runs as `python -m gate` with the first Python that has it installed: $RAG_GATE_PYTHON, then `python`
# and `python3` on PATH (an activated virtual environment), then the repository's .venv — so it works right after
# `pip install`, whether or not the environment is activated and whether or not its scripts are on PATH.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-rag-gate-example}"

py=""
for candidate in "${RAG_GATE_PYTHON:-}" python python3 "$repo/.venv/bin/python"; do
  # -P: the current directory is not searched, so a source checkout without the dependencies does not count
  if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -P -c "import gate.cli" >/dev/null 2>&1; then
    py="$candidate"
    break
  fi
done
if [ -z "$py" ]; then
  echo "run.sh: no Python with rag-gate installed (tried \$RAG_GATE_PYTHON, python, python3, $repo/.venv)." >&2
  echo "Install it first: python3 -m venv .venv && .venv/bin/python -m pip install -e ." >&2
  exit 2
fi
rag_gate() { "$py" -P -m gate "$@"; }

rag_gate run --config "$here/base.yml" --out "$out/base" || exit $?
rag_gate run --config "$here/head.yml" --out "$out/head" || exit $?
rag_gate compare "$out/base" "$out/head" --out "$out/report"
