"""`rag-gate pr --adaptive on` with ``repeats: 3``: repeats spent only where answers vary (issue 33, item 2).

A real scratch repository and pipeline whose calls are counted per case: (a) a deterministic pipeline and a PR
that changes nothing: the cases identical on both sides at repeat 0 run it only, but for the audit's 3 per batch,
and the verdict is the fixed design's; the same seed gives the same order, audit and verdict; (b) a head that
answers wrongly at random (seeded): the audit sees answers vary, every case runs every repeat on both sides, and
the PR fails.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import pr_order
from scratch_repo import CONFIG, calls, code_word_repo, run_pr

TEMPLATE = '''"""Code-word RAG pipeline that counts its calls per case; wrong at random (seeded) with WRONG_RATE > 0."""
import json
import random
import re
from pathlib import Path

DOCS = {{d["id"]: d["text"] for d in map(json.loads, (Path(__file__).parent / "docs.jsonl").read_text().splitlines())}}
WRONG_RATE = {wrong}
CALLS = {calls!r}


def answer(case, **options):
    before = Path(CALLS).read_text().split().count(case["id"]) if Path(CALLS).exists() else 0
    with open(CALLS, "a", encoding="utf-8") as sink:
        sink.write(case["id"] + "\\n")
    match = re.search(r"item (\\d+)", case["question"])
    if not match:
        return {{"answer": "I don't have that information.", "retrieved": [], "refused": True}}
    i = int(match.group(1))
    wrong = random.Random(f"{{case['id']}}:{{before}}").random() < WRONG_RATE
    doc = f"d{{(i + 1) % {n} if wrong else i}}"
    return {{"answer": DOCS[doc], "retrieved": [{{"id": doc, "text": DOCS[doc], "score": 1.0}}]}}
'''
N = 200
SETTINGS = "repeats: 3\ngate: [hit_rate@5]\nmargins: {hit_rate@5: 0.05}\nadaptive: true\n"


def make_repo(repo: Path, wrong: float, calls: Path, n: int = N) -> None:
    """``main``: the right document for each of ``n`` facts; ``feature``: wrong with probability ``wrong``.

    Also the repository of ``benchmarks/perf.py --only adaptive`` (its R = 3 row).
    """
    assert "repeats: 1\n" in CONFIG
    code = {side: TEMPLATE.format(wrong=w, n=n, calls=str(calls.with_suffix(f".{side}")))
            for side, w in (("base", 0.0), ("head", wrong))}  # fmt: skip
    code_word_repo(repo, n, CONFIG.replace("repeats: 1\n", "") + SETTINGS, code["base"], code["head"])


@pytest.fixture(scope="module")
def unchanged(tmp_path_factory):
    """A PR that changes nothing the pipeline answers (deterministic), run adaptively twice and fixed once."""
    root = tmp_path_factory.mktemp("repeats")
    make_repo(root / "repo", 0.0, root / "calls")
    counts = []
    for name, extra in (("first", ()), ("again", ()), ("fixed", ("--adaptive", "off"))):
        before = {side: len(calls((root / "calls").with_suffix(side))) for side in (".base", ".head")}
        result = run_pr(root / "repo", root / name, *extra)
        assert result.exit_code == 0, result.output
        counts.append({s: Counter(calls((root / "calls").with_suffix(s))[n:]) for s, n in before.items()})
    return root, counts


def test_a_deterministic_pipeline_runs_repeat_0_only_but_for_the_audit(unchanged):
    root, (first, _, fixed) = unchanged
    report = json.loads((root / "first" / "report.json").read_text())
    adaptive = report["adaptive"]
    assert report["verdict"] == "pass" and adaptive["stopped"] == "decided" and adaptive["repeats"] == 3
    assert adaptive["repeats_varied"] is None
    ran = adaptive["cases_run"]
    seq = pr_order(root / "repo", N)[: ran - 2]  # the order of the config's seed and the head commit
    for side in (".base", ".head"):
        per_case = first[side]
        assert set(per_case) == {"ood0", "ood1", *seq}
        assert per_case["ood0"] == per_case["ood1"] == 3  # out-of-domain cases run in full
        # per batch of 20 (in the seeded order), exactly the audit's 3 cases ran 3 times, the others once
        for start in range(0, len(seq), 20):
            batch = seq[start : start + 20]
            assert sorted(per_case[c] for c in batch) == [1] * 17 + [3] * 3
    audited = {c for c in seq if first[".head"][c] == 3}
    assert audited == {c for c in seq if first[".base"][c] == 3}
    assert adaptive["repeats_audited"] == len(audited) == 3 * adaptive["looks"]
    pairs = sum(first[".head"].values())
    assert adaptive["repeats_run_head"] == adaptive["repeats_run_base"] == pairs == 6 + (ran - 2) + 2 * len(audited)
    assert adaptive["repeats_fixed"] == sum(fixed[".head"].values()) == 3 * (N + 2)  # every case, every repeat
    # the goal: at most half of the fixed design's calls (here far fewer: the looks stop early, too)
    assert sum(first[".head"].values()) + sum(first[".base"].values()) <= 0.5 * (
        sum(fixed[".head"].values()) + sum(fixed[".base"].values())
    )
    assert sum(fixed[".head"].values()) == 3 * (N + 2)
    # the same verdict and gated status as the fixed design; skipped repeats are no errors
    plain = json.loads((root / "fixed" / "report.json").read_text())
    assert plain["verdict"] == "pass" and plain["adaptive"] is None
    gated = [[(m["name"], m["status"]) for m in r["metrics"] if m["gated"]] for r in (report, plain)]
    assert gated[0] == gated[1] == [("hit_rate@5", "pass")]
    assert report["head"]["n_prediction_errors"] == report["base"]["n_prediction_errors"] == 0
    error_rate = {m["name"]: m for m in report["metrics"]}["error_rate"]
    assert error_rate["base_value"] == error_rate["head_value"] == 0
    manifest = json.loads((root / "first" / "head" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["counts"]["prediction_errors"] == 0
    assert manifest["case_repeats"] == {c: 1 for c in seq if c not in audited}
    assert manifest["counts"]["predictions"] == pairs
    comment = (root / "first" / "comment.md").read_text()
    assert (
        f"base {pairs}, head {pairs} of {3 * ran} for the {ran} cases run (3 repeats), against {3 * (N + 2)} each in "
        "the fixed design (every case, every repeat)"
    ) in comment
    assert f"no answer varied across repeats (audit of {len(audited)} case(s))" in comment


def test_the_same_seed_gives_the_same_order_audit_and_verdict(unchanged):
    root, (first, again, _) = unchanged
    assert first == again
    reports = [json.loads((root / d / "report.json").read_text()) for d in ("first", "again")]
    assert reports[0]["adaptive"] == reports[1]["adaptive"] and reports[0]["verdict"] == reports[1]["verdict"]


def test_a_head_wrong_at_random_is_caught_by_the_audit_and_every_case_runs_every_repeat(tmp_path):
    make_repo(tmp_path / "repo", 0.3, tmp_path / "calls")
    result = run_pr(tmp_path / "repo", tmp_path / "out")
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    adaptive = report["adaptive"]
    assert report["verdict"] == "fail" and adaptive["stopped"] == "fail"
    assert adaptive["repeats_varied"].startswith("head: case 'q")
    ran = adaptive["cases_run"]
    for side in (".base", ".head"):
        per_case = Counter(calls((tmp_path / "calls").with_suffix(side)))
        assert len(per_case) == ran and set(per_case.values()) == {3}
    assert adaptive["repeats_run_head"] == adaptive["repeats_run_base"] == 3 * ran
    assert adaptive["repeats_fixed"] == 3 * (N + 2) and ran < N + 2  # stopped early; the fixed design runs all
    manifest = json.loads((tmp_path / "out" / "head" / "manifest.json").read_text())
    assert "case_repeats" not in manifest
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "answers varied across repeats, so every case ran every repeat" in comment
