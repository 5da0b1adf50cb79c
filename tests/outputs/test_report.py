"""The typed comparison, report.json (schema, reader) and the renderers, on comparisons made by the real code."""

import dataclasses
import importlib.util
import json
import re
from importlib import resources

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gate import outputs
from gate.adaptive import AdaptiveRun, SequentialMetric
from gate.compare import compare
from gate.comparison import SCHEMA_VERSION, Comparison, load_report
from gate.config import GatePolicy, TrendPolicy
from gate.errors import InputError
from gate.judges import get_judge
from gate.models import Chunk, GoldenCase, Prediction
from gate.outputs import Output, RenderOptions
from gate.outputs.charts import CHART_FILE
from gate.outputs.escape import escape_markdown, neutralize_references
from gate.outputs.markdown import GITHUB_COMMENT_LIMIT, MARKER, render_comment
from gate.runs import Side
from gate.scoring import score_all
from gate.trends import MetricTrend, TrendReport

REPORT_SCHEMA = json.loads(resources.files("gate.schemas").joinpath("report.schema.json").read_text())
EVIL = "| <script>alert(1)</script> `rm -rf` @octocat [x](http://e.vil) <!-- hide -->\n# H"
POLICY = GatePolicy(metrics=("hit_rate@1", "faithfulness", "refusal"), gated=("hit_rate@1", "faithfulness", "refusal"))


def side(label: str, golden: list[GoldenCase], answers: dict[str, tuple[str, str]]) -> Side:
    """A scored side: each case answers ``answers[id] = (answer, retrieved doc id)``."""
    table = {
        (c.id, 0): Prediction(
            id=c.id,
            answer=answers[c.id][0],
            retrieved=(Chunk(answers[c.id][1], f"{c.question} The answer is {c.reference_answers[:1]}."),),
            latency_ms=10.0,
        )
        for c in golden
    }
    scores = score_all(golden, table, 1, POLICY, get_judge(POLICY.judge))
    manifest = {"git_sha": f"{label}-sha", "golden_sha256": "f" * 64, "judge": {"id": "lexical", "version": "1"}}
    return Side(label, golden, table, 1, scores, manifest)


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    """30 cases; head loses the expected document on eight (one with an untrusted question), answers one OOD."""
    golden = [
        GoldenCase(f"q{i}", EVIL if i == 0 else f"Question {i}?", (f"d{i}",), (f"answer {i}",), line=i + 1)
        for i in range(30)
    ] + [GoldenCase("ood", "Unanswerable?", (), (), out_of_domain=True, line=31)]
    base_answers = {f"q{i}": (f"The answer is answer {i}.", f"d{i}") for i in range(30)}
    base_answers["ood"] = ("I don't have that information.", "x")
    head_answers = dict(base_answers)
    for i in range(8):
        head_answers[f"q{i}"] = (EVIL, "elsewhere")
    head_answers["ood"] = (EVIL, "x")
    return compare(side("base", golden, base_answers), side("head", golden, head_answers), POLICY)


def test_comparison_holds_what_the_inputs_say(comparison):
    assert comparison.n_cases == 31 and comparison.n_out_of_domain == 1
    hit = next(m for m in comparison.metrics if m.name == "hit_rate@1")
    assert (hit.base_mean, hit.head_mean, hit.delta) == (1.0, pytest.approx(22 / 30), pytest.approx(-8 / 30))
    assert hit.p_value == pytest.approx(stats.binomtest(0, 8, alternative="less").pvalue)  # exact McNemar: 1/256
    assert hit.aggregates.base.mean == 1.0 and hit.aggregates.head.n == 30
    assert {c.id for c in comparison.regressed_cases} == {f"q{i}" for i in range(8)}
    q0 = next(c for c in comparison.regressed_cases if c.id == "q0")
    assert q0.line == 1 and q0.dropped_docs == ("d0",) and q0.question == EVIL
    assert [(f.id, f.new, f.line) for f in comparison.ood_failures] == [("ood", True, 31)]


def test_report_json_validates_and_round_trips(comparison, tmp_path):
    texts = outputs.write(comparison, tmp_path, [Output.JSON])
    data = json.loads(texts[Output.JSON])
    jsonschema.validate(data, REPORT_SCHEMA)
    assert data["schema_version"] == SCHEMA_VERSION and (tmp_path / "report.json").read_text() == texts[Output.JSON]
    again = load_report(tmp_path / "report.json")
    assert again.to_json() == comparison.to_json()  # NaN ↔ null and tuples ↔ lists round-trip


def test_reader_names_the_path_of_an_unknown_or_mistyped_field(comparison, tmp_path):
    data = comparison.to_dict()
    data["metrics"][1]["p_valeu"] = 0.5
    (tmp_path / "typo.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"typo.json: .*unknown field `p_valeu` - at `\$.metrics\[1\]`"):
        load_report(tmp_path / "typo.json")
    del data["metrics"][1]["p_valeu"]
    data["regressed_cases"][0]["line"] = "1"
    (tmp_path / "mistyped.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"Expected `int`, got `str` - at `\$.regressed_cases\[0\].line`"):
        load_report(tmp_path / "mistyped.json")


BOUNDED = ("alpha", "error_rate", "error_budget", "share_below_0_5", "confidence", "p_value", "p_adjusted",
           "base_refusal_rate", "head_refusal_rate", "rate", "win_rate")  # fmt: skip
"""Probabilities, shares and rates: the schema holds each in [0, 1] wherever it occurs."""


def test_the_schema_bounds_every_p_value_share_and_rate(comparison, tmp_path):
    data = json.loads(outputs.write(comparison, tmp_path, [Output.JSON])[Output.JSON])
    found = []

    def places(node, path=()):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in BOUNDED and isinstance(value, int | float) and not isinstance(value, bool):
                    found.append((*path, key))
                places(value, (*path, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                places(value, (*path, i))

    places(data)
    assert {path[-1] for path in found} >= set(BOUNDED) - {"rate", "win_rate"}  # this comparison has no pairwise
    for path in found:
        for bad, good in ((1.5, 1.0), (-0.01, 0.0)):
            changed = json.loads(json.dumps(data))
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = good
            jsonschema.validate(changed, REPORT_SCHEMA)
            node[path[-1]] = bad
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(changed, REPORT_SCHEMA)


def test_schema_lists_every_field_of_the_model():
    """Drift check: each object in the schema has exactly the fields of its dataclass, all required."""
    from gate import comparison as model
    from gate.adaptive import AdaptiveRun, SequentialMetric

    pairs = {
        "": model.Comparison,
        "metric": model.MetricRow,
        "aggregate": model.Aggregate,
        "side_aggregates": model.SideAggregates,
        "case_metric": model.CaseMetric,
        "claim": model.Claim,
        "case": model.CaseEntry,
        "ood_failure": model.OodFailure,
        "error": model.ErrorEntry,
        "judge": model.JudgeInfo,
        "judge_usage": model.JudgeUsage,
        "pairwise": model.PairwiseReport,
        "pairwise_case": model.PairwiseCase,
        "side": model.SideInfo,
        "repeats": model.Repeats,
        "budget_use": model.ErrorBudgetUse,
        "changes": model.Changes,
        "changed_file": model.ChangedFile,
        "trend": TrendReport,
        "metric_trend": MetricTrend,
        "trend_policy": TrendPolicy,
        "golden_changes": model.GoldenChanges,
        "edited_case": model.EditedCase,
        "definition_score": model.DefinitionScore,
        "adaptive": AdaptiveRun,
        "sequential_metric": SequentialMetric,
    }
    for key, cls in pairs.items():
        node = REPORT_SCHEMA["$defs"][key] if key else REPORT_SCHEMA
        names = [f.name for f in dataclasses.fields(cls)]
        assert sorted(node["properties"]) == sorted(names), key
        assert sorted(node["required"]) == sorted(names), key


def test_reader_migrates_schema_5_without_non_inferiority(comparison, tmp_path):
    old = comparison.to_dict() | {"schema_version": 5}
    old["metrics"] = [{k: v for k, v in row.items() if k != "non_inferior"} for row in old["metrics"]]
    (tmp_path / "v5.json").write_text(json.dumps(old))
    migrated = load_report(tmp_path / "v5.json")
    assert [m.non_inferior for m in migrated.metrics] == [None] * len(comparison.metrics)
    assert migrated.must_pass_failures == comparison.must_pass_failures and migrated.verdict == comparison.verdict
    assert dataclasses.replace(migrated, metrics=comparison.metrics).to_json() == comparison.to_json()


def test_reader_migrates_schema_6_whose_adaptive_block_ran_every_repeat(comparison, tmp_path):
    adaptive = AdaptiveRun(
        seed=3, batch=10, n_first=1, n_sequence=30, cases_run=21, looks=2, stopped="decided", reason="21 of 31",
        alpha_sequential=0.01, alpha_final=0.04, beta_sequential=0.05,
        metrics=(SequentialMetric("hit_rate@1", "non_inferior", 20, 0.0),),
        not_run=("q29",), repeats=3, repeats_run_base=40, repeats_run_head=40, repeats_fixed=93, repeats_audited=6,
    )  # fmt: skip
    current = dataclasses.replace(comparison, adaptive=adaptive)
    old = current.to_dict() | {"schema_version": 6}
    old["adaptive"] = {k: v for k, v in old["adaptive"].items() if not k.startswith("repeats")}
    (tmp_path / "v6.json").write_text(json.dumps(old))
    migrated = load_report(tmp_path / "v6.json").adaptive
    assert migrated is not None and migrated.repeats == 1 and migrated.repeats_audited == 0
    assert migrated.repeats_run_base is migrated.repeats_run_head is migrated.repeats_fixed is None
    assert dataclasses.replace(migrated, repeats=3, repeats_run_base=40, repeats_run_head=40, repeats_fixed=93,
                               repeats_audited=6) == adaptive  # fmt: skip
    (tmp_path / "v7.json").write_text(current.to_json())
    assert load_report(tmp_path / "v7.json").adaptive == adaptive
    jsonschema.validate(json.loads(current.to_json()), REPORT_SCHEMA)


def test_reader_migrates_schema_1_and_rejects_the_unknown(comparison, tmp_path):
    old = comparison.to_dict() | {"schema_version": 1}
    for key in ("regressed_cases", "suspected_cases", "improved_cases", "flaky_cases", "ood_failures"):
        old[key] = [{k: v for k, v in entry.items() if k != "line"} for entry in old[key]]
    (tmp_path / "v1.json").write_text(json.dumps(old))
    migrated = load_report(tmp_path / "v1.json")
    assert migrated.regressed_cases[0].line == 0 and migrated.verdict == comparison.verdict
    (tmp_path / "v9.json").write_text(json.dumps(old | {"schema_version": 9}))
    with pytest.raises(InputError, match="schema_version 9 is not supported"):
        load_report(tmp_path / "v9.json")
    broken = comparison.to_dict()
    del broken["verdict"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(InputError, match="verdict"):
        load_report(tmp_path / "broken.json")


def test_every_output_renders(comparison, tmp_path):
    for output in Output:
        text = outputs.render(comparison, output, RenderOptions(golden_file="eval/golden.jsonl"))
        assert text.strip(), output
    written = outputs.write(comparison, tmp_path, list(Output), junit=tmp_path / "rag-gate.xml")
    assert set(written) == set(Output)
    chart = [CHART_FILE] if importlib.util.find_spec("matplotlib") else []  # the plot extra draws it
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["comment.md", "rag-gate.xml", "report.json", *chart])
    assert (tmp_path / "rag-gate.xml").read_text(encoding="utf-8") == written[Output.JUNIT]


def test_escape_markdown_neutralises_markup():
    out = escape_markdown(EVIL)
    assert "<" not in out and ">" not in out and "\n" not in out
    assert "@octocat" not in out and "@\u2060octocat" in out
    assert re.search(r"(?<!\\)[|`\[\]]", out) is None  # every pipe, backtick and bracket is escaped
    assert escape_markdown("x" * 500, limit=10) == "x" * 9 + "…"
    assert escape_markdown("see #12 and a\u202eb\u200bc, rate@5") == "see #\u206012 and abc, rate@5"


def test_comment_starts_with_marker_and_verdict(comparison):
    text = render_comment(comparison)
    lines = text.splitlines()
    assert lines[0] == MARKER
    assert lines[1] == "## ❌ rag-gate: **fail**"
    assert "| Hit rate@1 | 1.000 | 0.733 | -0.267 |" in text
    assert "a regressed case is one observation per side" in text


def test_untrusted_text_cannot_break_the_comment(comparison):
    body = render_comment(comparison).split("\n", 1)[1]
    assert EVIL.split("\n")[0] not in body  # the raw text never appears
    assert "<script>" not in body and "<!-- hide" not in body
    assert "@octocat" not in body
    assert re.search(r"(?<!\\)\]\(http", body) is None  # no live markdown link
    table_rows = [row for row in body.splitlines() if row.startswith("| Hit rate")]
    assert [row.count("|") - row.count("\\|") for row in table_rows] == [9, 9]  # the table, the run details


def test_comment_is_capped_with_a_note(comparison):
    entry = comparison.regressed_cases[0]
    many = tuple(dataclasses.replace(entry, id=f"case-{i}", question="long question " * 20) for i in range(2000))
    text = render_comment(dataclasses.replace(comparison, regressed_cases=many))
    assert len(text) <= 60_000 < GITHUB_COMMENT_LIMIT
    m = re.search(r"…and (\d+) more not shown: the full list is in `report.json` and `report.html`", text)
    assert m is not None
    shown = text.count("- **case-")
    assert shown + int(m.group(1)) == 2000 and shown > 10
    assert len(text) > 0.8 * 60_000  # the lists are cut in proportion to the excess: the room is used
    listed = [int(i) for i in re.findall(r"- \*\*case-(\d+)", text)]
    assert listed == list(range(shown))  # the first cases, in order


def test_annotations_point_at_golden_lines(comparison):
    lines = outputs.render(comparison, Output.ANNOTATIONS, RenderOptions(golden_file="eval/golden.jsonl")).splitlines()
    assert lines[0].startswith("::error file=eval/golden.jsonl,line=31,title=rag-gate%3A out-of-domain case ood")
    assert sum(line.startswith("::error") for line in lines) == 9  # 1 new OOD failure + 8 regressed cases
    assert any(",line=1,title=rag-gate%3A case q0 regressed::" in line for line in lines)


@pytest.mark.parametrize(
    "text, inert",
    [
        ("ping @octocat", "ping @\u2060octocat"),
        ("x@user and a.b@team", "x@\u2060user and a.b@\u2060team"),
        ("x@5user, @5, (@42", "x@\u20605user, @\u20605, (@\u206042"),
        ("hit_rate@5 and ndcg@10", "hit_rate@5 and ndcg@10"),
        ("@org/reviewers", "@\u2060org/reviewers"),
        ("fixes acme/rag#12, #7", "fixes acme/rag#\u206012, #\u20607"),
        ("see GH-33 or gh-4", "see GH\u2060-33 or gh\u2060-4"),
        ("commit acme/rag@1a2b3c4", "commit acme/rag@\u20601a2b3c4"),
        ("https://github.com/acme/rag/issues/12", "https:\u2060//github.com/acme/rag/issues/12"),
        ("HTTP://github.com/acme/rag/pull/3", "HTTP:\u2060//github.com/acme/rag/pull/3"),
        ("www.github.com/acme/rag/issues/1", "www\u2060.github.com/acme/rag/issues/1"),
        ("ugh-5, #tag, issue # 4, @ alone", "ugh-5, #tag, issue # 4, @ alone"),
    ],
)
def test_mentions_references_and_issue_links_are_neutralised(text, inert):
    assert neutralize_references(text) == inert
    assert neutralize_references(text).replace("\u2060", "") == text  # it reads the same


MENTION = re.compile(r"(?:^|[^\w`])@[A-Za-z0-9-]")  # the shape GitHub turns into a mention
REFERENCE = re.compile(r"#\d|\bGH-\d|https?://|\bwww\.", re.IGNORECASE)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab1_-/.:@#GHhtpsw ")), max_size=60))
def test_no_mention_or_reference_survives_escaping(text):
    out = escape_markdown(text, limit=1000)
    assert not MENTION.search(out) and not REFERENCE.search(out)
    assert re.search(r"@[\w-]*[A-Za-z_]", out) is None  # no @ directly before a name with a letter


def test_case_lists_do_not_depend_on_how_many_cases_are_read_at_a_time(squad_runs, tmp_path):
    """The listed cases' answers and claims, and the out-of-domain cases' answers, are read in batches (to
    bound memory at 100k cases); a batch of one case gives the lists of one batch for all."""
    from gate.compare import cases as case_lists
    from gate.compare.inputs import metric_inputs
    from gate.sides import compare_sides

    base, head = squad_runs
    compared = compare_sides(base, head, tmp_path / "out")
    sides, policy = (compared.base, compared.head), compared.policy
    golden = compared.head.golden
    inputs, _ = metric_inputs(*sides, golden, policy)
    broke = np.zeros(len(golden), dtype=bool)
    per_case = case_lists.case_results(inputs, broke)
    whole = case_lists.case_lists(*sides, golden, per_case, 5, batch=len(golden))
    listed = [e.id for entries in whole.values() for e in entries]
    assert len(listed) > 20
    claims = compared.head.scores.claims_many(listed)  # read from the file in one pass, nothing kept
    assert any(claims[i] for i in listed) and claims == {i: compared.head.scores.claims(i) for i in listed}
    assert case_lists.case_lists(*sides, golden, per_case, 5, batch=1) == whole
    assert case_lists.case_lists(*sides, golden, per_case, 5, batch=3) == whole
    ood = case_lists.ood_failures(*sides, golden, policy)
    assert len(ood) == 12 and case_lists.ood_failures(*sides, golden, policy, batch=1) == ood
    assert {e.id for e in compared.comparison.regressed_cases} == {e.id for e in whole["regressed"]}


def test_the_comment_says_repeats_were_skipped_only_when_some_were(comparison):
    """The adaptive line names the skipping only when a side ran fewer (case, repeat) pairs than every repeat of the
    cases run (21 × 3 = 63); the fixed design runs every case of the order (31 × 3 = 93), not only those."""
    adaptive = AdaptiveRun(
        seed=3, batch=10, n_first=1, n_sequence=30, cases_run=21, looks=2, stopped="decided", reason="21 of 31",
        alpha_sequential=0.01, alpha_final=0.04, beta_sequential=0.05,
        metrics=(SequentialMetric("hit_rate@1", "non_inferior", 20, 0.0),),
        not_run=("q29",), repeats=3, repeats_run_base=63, repeats_run_head=40, repeats_fixed=93, repeats_audited=6,
    )  # fmt: skip
    skipped = render_comment(dataclasses.replace(comparison, adaptive=adaptive))
    run = "of 63 for the 21 cases run (3 repeats), against 93 each in the fixed design (every case, every repeat)"
    assert f"base 63, head 40 {run}" in skipped and "at repeat 0 ran it only" in skipped
    full = dataclasses.replace(adaptive, repeats_run_head=63)
    every = render_comment(dataclasses.replace(comparison, adaptive=full))
    assert f"base 63, head 63 {run}" in every and "every case ran every repeat" in every
    assert "ran it only" not in every
