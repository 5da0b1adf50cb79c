import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "squad"
SHARED_DATA = Path(os.environ.get("RAG_GATE_SHARED_DATA", REPO.parent / "shared" / "data"))


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


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
