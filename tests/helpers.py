"""Plain helpers the tests import (``from helpers import …``; pyproject puts tests/ on the path). Fixtures live in
the conftest.py of the folder whose tests share them."""

import base64
import codecs
import hashlib
import json
import os
import subprocess
import urllib.parse
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np
from click.testing import CliRunner

from gate.cli import main
from gate.stats import MetricInput

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "squad"
SHARED_DATA = Path(os.environ.get("RAG_GATE_SHARED_DATA", REPO.parent / "shared" / "data"))
"""The team's labelled data sets (not shipped: licences and size). Tests that read them carry
``@pytest.mark.shared_data("<data set>")`` and skip when it is absent, as on a fresh clone."""
REPORT_SCHEMA = json.loads(resources.files("gate.schemas").joinpath("report.schema.json").read_text(encoding="utf-8"))
REFUSAL = "I don't have that information."
GIT_IDENTITY = ("-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false")
"""Who the tests' own commits are by (a fresh machine has no identity), unsigned (a user's signing config is not
the tests')."""


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
    if not report_path.exists():
        return result, None
    report = json.loads(report_path.read_text())
    jsonschema.validate(report, REPORT_SCHEMA)  # also outside tmp_path (session fixtures)
    return result, report


def git(repo: Path | str, *args: str, date: str | None = None) -> str:
    """``git -C repo ARGS`` as :data:`GIT_IDENTITY`; the tests' one way to run git (rag-gate runs its own).

    ``date``: the author and committer date of the commits it makes (ISO 8601), so that their ids do not depend on
    the clock (the adaptive order is seeded by the head commit).

    Returns:
        Its standard output, stripped.

    Raises:
        subprocess.CalledProcessError: git failed (its stderr is on the exception); TimeoutExpired after 120 s.
    """
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else None
    done = subprocess.run(
        ["git", "-C", str(repo), *GIT_IDENTITY, *args], capture_output=True, text=True, check=True, timeout=120, env=env
    )
    return done.stdout.strip()


def pr_order(repo: Path, n: int, seed: int = 7) -> list[str]:
    """The order `rag-gate pr --adaptive on` runs the cases q0…q{n-1} of ``repo``'s checked-out head in.

    numpy's permutation seeded by the config's seed and the head commit: the first 63 bits of SHA-256("seed:sha").
    """
    head = git(repo, "rev-parse", "HEAD").strip()
    key = int.from_bytes(hashlib.sha256(f"{seed}:{head}".encode()).digest()[:8], "big") >> 1
    return [f"q{i}" for i in np.random.default_rng(key).permutation(n)]


def metric_input(
    name: str,
    kind: str,
    base,
    head,
    *,
    margin: float = 0.05,
    direction: str = "higher",
    gated: bool = True,
    clusters=None,
    failed_base=None,
    failed_head=None,
) -> MetricInput:
    """A :class:`~gate.stats.MetricInput` of per-case values: a 1-D ``base``/``head`` is one repeat per case (shape
    (N, 1)); no evaluation failure unless ``failed_base``/``failed_head`` say so."""
    base = np.asarray(base, dtype=float)
    head = np.asarray(head, dtype=float)
    base = base[:, None] if base.ndim == 1 else base
    head = head[:, None] if head.ndim == 1 else head
    return MetricInput(
        name,
        kind,
        direction,
        margin,
        gated,
        base,
        head,
        np.zeros(base.shape, bool) if failed_base is None else np.asarray(failed_base, dtype=bool),
        np.zeros(head.shape, bool) if failed_head is None else np.asarray(failed_head, dtype=bool),
        clusters,
    )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def scipy_rng(seed):
    """scipy's keyword for a resampling test's generator: ``rng`` from scipy 1.15, ``random_state`` before it (the
    lowest scipy rag-gate allows is 1.13, and .ci/extras-test.sh runs the oracles there too)."""
    import inspect

    from scipy import stats

    name = "rng" if "rng" in inspect.signature(stats.permutation_test).parameters else "random_state"
    return {name: seed}


def readable_form(secret: str, encoded: str) -> bool:
    """Whether ``encoded`` still yields ``secret`` by the matching decoding (the oracle)."""
    candidates = {encoded, encoded.replace(" ", ""), encoded[::-1], urllib.parse.unquote_plus(encoded)}
    for text in list(candidates):
        for alphabet in (base64.b64decode, base64.urlsafe_b64decode):
            for start in range(4):
                chunk = text[start:]
                try:
                    candidates.add(alphabet(chunk + "=" * (-len(chunk) % 4)).decode("utf-8", "replace"))
                except ValueError:
                    pass
        try:
            candidates.add(codecs.decode(text.replace("0x", "").replace(" ", ""), "hex").decode("utf-8", "replace"))
        except ValueError:
            pass
    return any(secret in c or secret[::-1] in c for c in candidates)


GOLDEN_SIZE = 40
"""How many in-domain cases :func:`golden` writes by default."""


def golden(n: int = GOLDEN_SIZE, ood: int = 0, references: bool = True) -> list[dict]:
    """A golden set of ``n`` in-domain cases ``q00``… (document ``d<i>``, answer "Item i is blue.") and ``ood``
    out-of-domain ones ``o0``… (the end-to-end tests of tests/e2e)."""
    rows = [
        {
            "id": f"q{i:02d}",
            "question": f"What colour is item {i}?",
            "expected_doc_ids": [f"d{i}"],
            **({"reference_answers": [f"Item {i} is blue."]} if references else {}),
        }
        for i in range(n)
    ]
    rows += [{"id": f"o{i}", "question": f"Who won match {i}?", "out_of_domain": True} for i in range(ood)]
    return rows


def answer(case: dict, *, repeat: int = 0, doc: str | None = None, text: str | None = None, error: str | None = None):
    """A prediction row: by default the right document first and a supported, correct answer."""
    i = case["id"][1:]
    if error is not None:
        return {"id": case["id"], "repeat": repeat, "error": error}
    if case.get("out_of_domain"):
        text = text or "I don't have that information."
        retrieved = [{"id": "d0", "text": "Item 0 is blue."}]
    else:
        retrieved = [{"id": doc or f"d{int(i)}", "text": f"Item {int(i)} is blue."}]
        retrieved += [{"id": f"x{j}", "text": f"Filler {j}."} for j in range(4)]
    return {
        "id": case["id"],
        "repeat": repeat,
        "answer": text or f"Item {int(i)} is blue.",
        "retrieved": retrieved,
        "latency_ms": 10.0,
    }


def write_pair(tmp: Path, cases: list[dict], base: list[dict], head: list[dict]) -> None:
    """Write ``tmp/golden.jsonl``, ``tmp/base.jsonl`` and ``tmp/head.jsonl``."""
    write_jsonl(tmp / "golden.jsonl", cases)
    write_jsonl(tmp / "base.jsonl", base)
    write_jsonl(tmp / "head.jsonl", head)


CODE_WORD_OOD = ["What is the weather on Mars today?", "Who will win the next election?"]
"""The out-of-domain questions of :func:`code_word_repo`."""


SCRATCH_CONFIG = """golden: golden.jsonl
pipeline:
  python: rag:answer
  concurrency: 2
  timeout_s: 30
repeats: 1
seed: 7
"""
"""The scratch repositories' rag-gate.yml: the ``rag:answer`` pipeline, seed 7."""

COUNTING_TEMPLATE = '''"""Deterministic code-word RAG pipeline that counts its calls (adaptive tests)."""
import json
import re
import time
from pathlib import Path

DOCS = {{d["id"]: d["text"] for d in map(json.loads, (Path(__file__).parent / "docs.jsonl").read_text().splitlines())}}
BROKEN_EVERY = {broken}
CALLS = {calls!r}
HANG = Path(CALLS + ".hang")


def answer(case, **options):
    with open(CALLS, "a", encoding="utf-8") as sink:
        sink.write(case["id"] + "\\n")
    while HANG.exists() and len(Path(CALLS).read_text().split()) > int(HANG.read_text()):
        time.sleep(0.05)  # the test kills rag-gate meanwhile: an interrupted run
    match = re.search(r"item (\\d+)", case["question"])
    if not match:
        if BROKEN_EVERY == 2:
            return {{"answer": "It is sunny and warm, with light wind.", "retrieved": []}}
        return {{"answer": "I don't have that information.", "retrieved": [], "refused": True}}
    i = int(match.group(1))
    j = (i + 1) % {n} if BROKEN_EVERY and i % BROKEN_EVERY == 0 else i
    doc = f"d{{j}}"
    return {{"answer": DOCS[doc], "retrieved": [{{"id": doc, "text": DOCS[doc], "score": 1.0}}]}}
'''
"""A pipeline to format with ``broken`` (every broken-th item retrieves the wrong document; 2: out-of-domain
questions answered too), ``n`` (items) and ``calls`` (the file each call appends its case id to; ``calls + ".hang"``
holding a count makes the calls after it wait while it exists)."""


def code_word_repo(repo: Path, n: int, config: str, base_code: str, head_code: str) -> None:
    """A repository of ``n`` code-word facts and :data:`CODE_WORD_OOD`, for adaptive PR runs.

    ``docs.jsonl`` holds one document per fact, ``golden.jsonl`` the questions (fact i expects ``d{i}``);
    ``main`` commits ``rag-gate.yml`` (``config``) and ``rag.py`` (``base_code``), the ``feature`` branch changes
    ``rag.py`` to ``head_code``.
    """
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    words = [f"zq{i:03d}{'abcdefghij'[i % 10]}" for i in range(n)]
    docs = [{"id": f"d{i}", "text": f"The code word for item {i} is {words[i]}."} for i in range(n)]
    golden = [
        {"id": f"q{i}", "question": f"What is the code word for item {i}?", "expected_doc_ids": [f"d{i}"],
         "reference_answers": [words[i]]}
        for i in range(n)
    ]  # fmt: skip
    golden += [{"id": f"ood{k}", "question": q, "out_of_domain": True} for k, q in enumerate(CODE_WORD_OOD)]
    (repo / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (repo / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden))
    (repo / "rag-gate.yml").write_text(config)
    (repo / ".gitignore").write_text("rag-gate-out/\n__pycache__/\n")
    (repo / "rag.py").write_text(base_code)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base", date="2026-01-01T00:00:00Z")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "rag.py").write_text(head_code)
    git(repo, "commit", "-q", "-am", "the PR", date="2026-01-01T00:01:00Z")
