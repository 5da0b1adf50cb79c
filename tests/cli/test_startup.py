"""Which heavy libraries each command imports: only those its work needs.

``--help`` and ``validate`` need none (not even jsonschema, which only explains a bad record); ``run`` needs
scikit-learn only when the lexical judge judges an answer, and jinja2 never; ``compare`` of run directories whose
scores are reused needs scipy (the statistics) and jinja2 (the comment), never scikit-learn or pandas (no judge
runs). Each command runs in a fresh interpreter that prints the heavy top-level packages in ``sys.modules`` when it
exits. Timings are in benchmarks/perf.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_jsonl

HEAVY = ("sklearn", "scipy", "pandas", "jinja2", "ragas", "openai", "torch", "github", "matplotlib")
PROBE = f"""
import atexit, sys
heavy = {HEAVY!r}
def report():
    found = sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy))
    sys.stderr.write("HEAVY " + " ".join(found) + "\\n")
atexit.register(report)
sys.argv = ["rag-gate", *sys.argv[1:]]
from gate.cli import main
main()
"""


def imported(cwd: Path, *args: str) -> set[str]:
    """The heavy packages ``rag-gate ARGS`` imported (it must exit 0 or 1)."""
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("HEAVY"))
    return set(line.split()[1:])


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A golden set, a pipeline whose answers the lexical judge must judge, and two configs."""
    root = tmp_path_factory.mktemp("startup")
    write_jsonl(
        root / "golden.jsonl",
        [
            {
                "id": f"q{i}",
                "question": f"Where is item {i}?",
                "expected_doc_ids": [f"d{i}"],
                "reference_answers": [f"in box {i}"],
            }
            for i in range(6)
        ]  # fmt: skip
        + [{"id": "ood", "question": "What will the weather be?", "out_of_domain": True}],
    )
    (root / "pipe.py").write_text(
        "def answer(case):\n"
        "    text = f\"The item is kept in box {case['id'][1:]}. Box {case['id'][1:]} is blue.\"\n"
        "    return {'answer': text, 'retrieved': [{'id': 'd' + case['id'][1:], 'text': text}]}\n"
    )
    (root / "retrieval.yml").write_text(
        "golden: golden.jsonl\npipeline:\n  python: pipe:answer\nmetrics: [hit_rate@5, mrr, answer_f1, latency_ms]\n"
    )
    (root / "full.yml").write_text("golden: golden.jsonl\npipeline:\n  python: pipe:answer\n")
    return root


def test_help_and_validate_import_no_heavy_library(project):
    assert imported(project, "--help") == set()
    assert imported(project, "validate", "golden.jsonl") == set()
    assert imported(project, "validate", "full.yml") == set()  # a config too: its too-few-cases check needs no scipy
    probe = PROBE.replace("heavy = ", "heavy = ('jsonschema',) + ")
    result = subprocess.run([sys.executable, "-c", probe, "validate", "golden.jsonl"], cwd=project, capture_output=True)
    assert b"HEAVY \n" in result.stderr  # a valid golden set is checked by the compiled schema alone


def test_run_without_judged_metrics_imports_no_heavy_library(project):
    assert imported(project, "run", "--config", "retrieval.yml", "--out", "runs/retrieval") == set()
    # nor what a valid config, a progress bar not shown and a judge that grades nothing would need (the
    # overhead of a run): jsonschema explains bad input only, tqdm draws the bar, snowballstemmer stems for the judge
    probe = PROBE.replace("heavy = ", "heavy = ('jsonschema', 'tqdm', 'snowballstemmer') + ")
    args = ["run", "--config", "retrieval.yml", "--out", "runs/retrieval-2", "--no-progress"]
    result = subprocess.run([sys.executable, "-c", probe, *args], cwd=project, capture_output=True, text=True)
    assert "HEAVY \n" in result.stderr, result.stderr


def test_run_with_the_lexical_judge_imports_scikit_learn_only_for_it(project):
    found = imported(project, "run", "--config", "full.yml", "--out", "runs/full")
    assert "sklearn" in found  # the lexical judge's TF-IDF attribution (scikit-learn brings scipy and pandas)
    assert found.isdisjoint({"jinja2", "ragas", "openai", "torch", "github"}), found
    scores = [json.loads(line) for line in (project / "runs/full/scores.jsonl").read_text().splitlines()]
    assert any(s["metric"] == "faithfulness" and s["value"] is not None for s in scores)  # the judge did judge


def test_compare_with_reused_scores_needs_no_judge(project):
    if not (project / "runs" / "full").exists():  # the run of the test above, when it did not run first
        imported(project, "run", "--config", "full.yml", "--out", "runs/full")
    found = imported(project, "compare", "runs/full", "runs/full", "--out", "report")
    assert {"scipy", "jinja2"} <= found  # the statistics and the comment
    assert found.isdisjoint({"sklearn", "pandas", "ragas", "openai", "torch"}), found
