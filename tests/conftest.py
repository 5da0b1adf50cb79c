import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gate.cli import main

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "squad"
sys.path.insert(0, str(REPO / "benchmarks"))  # judgeeval: the judge evaluation lives with the benchmarks
SHARED_DATA = Path(os.environ.get("RAG_GATE_SHARED_DATA", REPO.parent / "shared" / "data"))
"""The team's labelled data sets (not shipped: licences and size). Tests that read them carry
``@pytest.mark.shared_data("<data set>")`` and skip when it is absent, as on a fresh clone."""


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``shared_data(name, ...)`` whose data sets are not under :data:`SHARED_DATA`."""
    for item in items:
        for mark in item.iter_markers("shared_data"):
            missing = [name for name in mark.args if not (SHARED_DATA / name).exists()]
            if missing:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"needs the team's data set(s) {', '.join(missing)} under {SHARED_DATA} "
                        "(not shipped with the repo; set RAG_GATE_SHARED_DATA to their directory)"
                    )
                )


REPORT_SCHEMA = json.loads((REPO / "gate" / "schemas" / "report.schema.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _every_report_matches_its_schema(request):
    """After each test, every report.json it wrote under its tmp_path validates against the report schema."""
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None:
        return
    import jsonschema

    for path in tmp.rglob("report.json"):
        jsonschema.validate(json.loads(path.read_text(encoding="utf-8")), REPORT_SCHEMA)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def compare(tmp: Path, base: str, head: str, out: str, *options: str):
    """``rag-gate compare --golden tmp/golden.jsonl tmp/base tmp/head --out tmp/out [options]``: (result, report)."""
    result = CliRunner().invoke(
        main,
        [
            "compare",
            "--golden",
            str(tmp / "golden.jsonl"),
            *options,
            str(tmp / base),
            str(tmp / head),
            "--out",
            str(tmp / out),
        ],
    )
    report_path = tmp / out / "report.json"
    return result, json.loads(report_path.read_text()) if report_path.exists() else None


@pytest.fixture
def tiny_golden(tmp_path: Path) -> Path:
    """Four cases: three in-domain, one out-of-domain."""
    return write_jsonl(
        tmp_path / "golden.jsonl",
        [
            {"id": "q1", "question": "Where is Paris?", "expected_doc_ids": ["d1"], "reference_answers": ["France"]},
            {
                "id": "q2",
                "question": "When was the bridge built?",
                "expected_doc_ids": ["d2"],
                "reference_answers": ["1889"],
            },
            {
                "id": "q3",
                "question": "Who wrote Hamlet?",
                "expected_doc_ids": ["d3"],
                "reference_answers": ["William Shakespeare", "Shakespeare"],
            },
            {
                "id": "q4",
                "question": "What is the airspeed of a swallow?",
                "expected_doc_ids": [],
                "out_of_domain": True,
            },
        ],
    )
