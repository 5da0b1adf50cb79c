#!/usr/bin/env bash
# The framework recipes (examples/frameworks/: LangChain, LlamaIndex, Haystack) with the frameworks really installed:
# a fresh venv with the built wheel and the test tools (`test-base`), plus each recipe's pinned requirements.txt;
# `pip check` (the frameworks must not break rag-gate's own dependencies), then tests/e2e/test_frameworks.py: each recipe's
# rag-gate.yml on a shard of the bundled golden set (document ids kept through chunking, hit rate far above 0), and
# the gate's framework-id check (chunk ids on both sides: verdict error, exit 3) with real retrievers.
# The frameworks are not in the core test extra; without them those tests skip, so this script refuses to run them
# unless every framework imports. Offline at run time: BM25 retrievers, extractive answers, no model downloads.
# Usage (from the repository, any venv active): bash .ci/frameworks-test.sh dist/rag_gate-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL="$(realpath "$1")"
say() { printf '[frameworks-test] %s\n' "$*"; }
scratch="$(mktemp -d /tmp/rag-gate-frameworks.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 HAYSTACK_TELEMETRY_ENABLED=False RAG_GATE_WHEEL="$WHEEL" RAG_GATE_TEST_INSTALLED=1

say "install the wheel, the test tools and the three recipes' requirements into a fresh venv"
python3 -m venv "$scratch/venv"
py="$scratch/venv/bin/python"
time "$py" -m pip install -q "$WHEEL[test-base]" \
  -r examples/frameworks/langchain-bm25/requirements.txt \
  -r examples/frameworks/llamaindex-bm25/requirements.txt \
  -r examples/frameworks/haystack-bm25/requirements.txt
"$py" -m pip check
du -sh "$scratch/venv" | sed 's/^/[frameworks-test] venv size: /'
"$py" -m pip list --format=freeze 2>/dev/null \
  | grep -iE '^(langchain-core|langchain-community|langchain-text-splitters|rank-bm25|llama-index-core|llama-index-retrievers-bm25|bm25s|haystack-ai)==' \
  | tr '\n' ' '; echo
# Every framework must import here: a missing one would only make its tests skip.
"$py" -W ignore -c 'import langchain_community.retrievers, langchain_text_splitters, rank_bm25, llama_index.retrievers.bm25, Stemmer, haystack'

say "tests/e2e/test_frameworks.py"
time "$py" -m pytest tests/e2e/test_frameworks.py -p no:cacheprovider -rs
say "frameworks passed"
