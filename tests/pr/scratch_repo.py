"""Helpers for the PR-flow tests: a scratch git repository with a base commit and a PR commit that regresses.

The pipeline is a real, tiny, deterministic RAG function (``rag:answer``): 24 "code word" facts and 4
out-of-domain questions. On ``main`` it retrieves the right fact and refuses out-of-domain questions; the
``feature`` commit breaks retrieval for half of the cases and answers the out-of-domain ones.

Also a script, for the container test: ``python tests/pr/scratch_repo.py DIR`` builds the repository in DIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from helpers import SCRATCH_CONFIG as CONFIG
from helpers import code_word_repo, git  # noqa: F401 - code_word_repo: re-exported for the PR tests

N_FACTS = 24
WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kelp",
    "lotus",
    "maple",
    "nectar",
    "onyx",
    "pepper",
    "quartz",
    "raven",
    "saffron",
    "tundra",
    "umber",
    "violet",
    "walnut",
    "yarrow",
]
OOD = [
    "What is the weather on Mars today?",
    "Who will win the next election?",
    "What is your favourite colour?",
    "How do I bake sourdough bread?",
]

RAG_TEMPLATE = '''"""Tiny deterministic RAG pipeline for the PR-flow tests."""
import json
import re
from pathlib import Path
from typing import Any

DOCS = {{d["id"]: d["text"] for d in map(json.loads, (Path(__file__).parent / "docs.jsonl").read_text().splitlines())}}
BROKEN = {broken}


def answer(case, **options):
    match = re.search(r"item (\\d+)", case["question"])
    if not match:
        if BROKEN:
            return {{"answer": "It is sunny and warm, with light wind.", "retrieved": []}}
        return {{"answer": "I don't have that information.", "retrieved": [], "refused": True}}
    i = int(match.group(1))
    j = (i + 1) % {n} if BROKEN and i % 2 == 0 else i
    doc = f"d{{j}}"
    return {{"answer": DOCS[doc], "retrieved": [{{"id": doc, "text": DOCS[doc], "score": 1.0}}]}}
'''


def make_scratch_repo(repo: Path) -> dict[str, str]:
    """Create the repository: ``main`` (base) and ``feature`` (the regressing PR, checked out).

    Returns:
        ``{"base": sha of main, "head": sha of feature}``.
    """
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "ci")
    docs = [{"id": f"d{i}", "text": f"The code word for item {i} is {WORDS[i]}."} for i in range(N_FACTS)]
    golden = [
        {
            "id": f"q{i}",
            "question": f"What is the code word for item {i}?",
            "expected_doc_ids": [f"d{i}"],
            "reference_answers": [WORDS[i]],
        }
        for i in range(N_FACTS)
    ] + [{"id": f"ood{k}", "question": q, "expected_doc_ids": [], "out_of_domain": True} for k, q in enumerate(OOD)]
    (repo / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (repo / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden))
    (repo / "rag-gate.yml").write_text(CONFIG)
    (repo / ".gitignore").write_text("rag-gate-out/\n.rag-gate-cache/\n__pycache__/\n")
    (repo / "rag.py").write_text(RAG_TEMPLATE.format(broken=False, n=N_FACTS))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "rag.py").write_text(RAG_TEMPLATE.format(broken=True, n=N_FACTS))
    git(repo, "commit", "-q", "-am", "a PR that breaks retrieval")
    return {"base": base, "head": git(repo, "rev-parse", "HEAD")}


GITHUB_VARS = (
    "GITHUB_EVENT_NAME GITHUB_EVENT_PATH GITHUB_REPOSITORY GITHUB_API_URL GITHUB_ACTIONS GITHUB_STEP_SUMMARY "
    "GITHUB_OUTPUT GITHUB_WORKSPACE GITHUB_TOKEN GITHUB_RUN_ID GITHUB_REF GITHUB_SHA OPENAI_API_KEY "
    "RAG_GATE_CACHE_KEY RAG_GATE_EVENT_PATH RAG_GATE_API_URL"
).split()
"""Variables a test run must not inherit from the caller's environment (set to None = unset in CliRunner)."""


def actions_env(
    tmp_path: Path, api_url: str, token: str, workspace: Path, event: dict, event_name: str = "pull_request"
) -> dict[str, str | None]:
    """The environment of a GitHub Actions step on ``event`` (written to ``tmp_path/event.json``) against a fake
    GitHub at ``api_url``; the summary and outputs go to ``tmp_path/summary.md`` and ``tmp_path/output.txt``."""
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event))
    return dict.fromkeys(GITHUB_VARS) | {
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": "octo/rag",
        "GITHUB_API_URL": api_url,
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_TOKEN": token,
        "GITHUB_RUN_ID": "42",
    }


def pull_request_event(shas: dict[str, str], *, repo: str = "octo/rag", number: int = 7, fork: bool = False) -> dict:
    """A ``pull_request`` webhook payload (the fields rag-gate reads)."""
    head_repo = "fork-owner/rag" if fork else repo
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "base": {"sha": shas["base"], "ref": "main", "repo": {"full_name": repo}},
            "head": {"sha": shas["head"], "ref": "feature", "repo": {"full_name": head_repo}},
        },
        "repository": {"full_name": repo},
    }


if __name__ == "__main__":
    print(json.dumps(make_scratch_repo(Path(sys.argv[1]))))


def run_pr(repo: Path, out: Path, *extra: str) -> Any:
    """``rag-gate pr`` on ``repo`` against ``main``, no comment, outside Actions (click's ``Result``)."""
    from click.testing import CliRunner

    from gate.cli import main

    args = ["pr", "--base-ref", "main", "--working-directory", str(repo), "--out-dir", str(out), "--comment", "off"]
    return CliRunner().invoke(main, [*args, *extra], env=dict.fromkeys(GITHUB_VARS), catch_exceptions=False)


def calls(path: Path) -> list[str]:
    """The case ids a scratch pipeline logged, one per call (none when it never ran)."""
    return path.read_text().split() if path.exists() else []
