#!/usr/bin/env bash
# The bundled example, end to end: run the golden set through the base and the head configuration, score both,
# compare them, print the PR comment. Exit code: 0 pass, 1 regression (expected here: head is worse), 2 / 3 errors.
# Usage: examples/squad/run.sh [OUT_DIR]   (default: rag-gate-example)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-rag-gate-example}"
rag-gate run --config "$here/base.yml" --out "$out/base" || exit $?
rag-gate run --config "$here/head.yml" --out "$out/head" || exit $?
rag-gate compare "$out/base" "$out/head" --out "$out/report"
