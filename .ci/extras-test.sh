#!/usr/bin/env bash
# The built wheel with its extras at the dependency versions users get today, and at the lowest its ranges allow:
#  - newest: a fresh venv with the wheel's core and `llm` extra as pip resolves them now (openai, aiohttp and every
#    core dependency at their newest), plus the test tools (`test-base`); the whole default suite runs (the ragas and
#    nli tests skip: those extras are pinned and tested in the main venv, plot's newest matplotlib there too);
#  - lowest: uv's `--resolution lowest-direct` over pyproject's dependencies and the llm and plot extras (every
#    direct dependency at its lower bound), then the test tools at their newest, then the wheel without
#    dependencies; the whole default suite again.
# A dependency release that breaks rag-gate fails here before a user meets it.
# Usage (from the repository, any venv active): bash .ci/extras-test.sh dist/rag_gate-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL="$(realpath "$1")"
say() { printf '[extras-test] %s\n' "$*"; }
scratch="$(mktemp -d /tmp/rag-gate-extras.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
export RAG_GATE_WHEEL="$WHEEL" RAG_GATE_TEST_INSTALLED=1

say "newest: the llm extra alone, as pip resolves it today"
python3 -m venv "$scratch/newest"
"$scratch/newest/bin/python" -m pip install -q "$WHEEL[llm,test-base]"
"$scratch/newest/bin/python" -m pip list --format=freeze 2>/dev/null | grep -iE '^(openai|aiohttp|numpy|scipy|scikit-learn|pygithub|tenacity|msgspec|click)==' | tr '\n' ' '; echo
time "$scratch/newest/bin/python" -m pytest -q

say "lowest: every direct dependency at its lower bound (uv --resolution lowest-direct)"
"$scratch/newest/bin/python" -m pip install -q uv
uv="$scratch/newest/bin/uv"
"$uv" venv -q -p "$(command -v python3)" "$scratch/lowest"
export VIRTUAL_ENV="$scratch/lowest"
"$uv" pip install -q --resolution lowest-direct -r pyproject.toml --extra llm --extra plot
"$uv" pip install -q -r pyproject.toml --extra test-base  # the test tools; keeps the lowest versions above
"$uv" pip install -q --no-deps "$WHEEL"
"$uv" pip list 2>/dev/null | grep -iE '^(openai|aiohttp|numpy|scipy|scikit-learn|pygithub|tenacity|msgspec|click) ' | tr -s ' ' | tr '\n' ';'; echo
# tests/test_action_lint.py lints this repository's action.yml, workflows and Dockerfile with external tools
# (check-jsonschema, actionlint, hadolint): it does not depend on rag-gate's dependency versions, and the newest
# check-jsonschema needs a newer click than rag-gate's lowest bound. It runs in every other suite run.
time "$scratch/lowest/bin/python" -m pytest -q --ignore=tests/test_action_lint.py
unset VIRTUAL_ENV
say "extras passed"
