"""Answers labelled by hand: sampling, the labels format, the agreement maths, ``rag-gate label`` / ``judge-check``."""

import json
import math
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import REPO
from scipy import stats
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, confusion_matrix

from gate.cli import main
from gate.errors import InputError
from gate.labels.agreement import BINARY_CLASSES, PAIR_CLASSES, agreement, check, load_labels, recorded_calls, stale
from gate.labels.sampling import JudgedAnswer, sample
from gate.models import GoldenCase, Prediction


def _answers(n_in=30, n_ood=10, flagged_every=5):
    out = []
    for i in range(n_in + n_ood):
        ood = i >= n_in
        case = GoldenCase(id=f"c{i}", question=f"q{i}", out_of_domain=ood)
        flagged = (i % flagged_every == 0) if i % 7 else None  # every 7th: no call
        pred = Prediction(id=case.id, repeat=0, answer=f"answer {i}")
        out.append(JudgedAnswer(case, pred, flagged, math.nan if flagged is None else (0.5 if flagged else 1.0)))
    return out


# ------------------------------------------------------------------------------------------------ sampling


def test_sample_is_seeded_stratified_and_never_repeats():
    answers = _answers()
    first = sample(answers, 12, seed=3, design="stratified")
    assert [a.key for a in first] == [a.key for a in sample(answers, 12, seed=3, design="stratified")]
    assert [a.key for a in first] != [a.key for a in sample(answers, 12, seed=4, design="stratified")]
    strata = {(a.flagged, a.case.out_of_domain) for a in first}
    assert strata == {(True, False), (False, False), (True, True), (False, True)}
    assert all(a.flagged is not None for a in first)
    assert len({a.key for a in first}) == 12
    more = sample(answers, 100, seed=3, exclude=[a.key for a in first], design="stratified")
    assert not {a.key for a in more} & {a.key for a in first}
    assert len(first) + len(more) == sum(a.flagged is not None for a in answers)


def test_sample_skips_repeats_with_the_same_answer():
    case = GoldenCase(id="c", question="q")
    answers = [JudgedAnswer(case, Prediction(id="c", repeat=r, answer="same"), False, 1.0) for r in range(3)]
    answers.append(JudgedAnswer(case, Prediction(id="c", repeat=3, answer="other"), True, 0.0))
    assert [a.key for a in sample(answers, 10, seed=0)] in ([("c", 0), ("c", 3)], [("c", 3), ("c", 0)])


# ------------------------------------------------------------------------------------------------ the maths


@pytest.mark.parametrize("seed", range(6))
def test_kappa_balanced_accuracy_and_matrix_match_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    k = 2 if seed % 2 else 3
    truth = rng.integers(0, k, 40)
    calls = np.where(rng.random(40) < 0.7, truth, rng.integers(0, k, 40))
    result = agreement(truth, calls, (BINARY_CLASSES if k == 2 else PAIR_CLASSES), seed=1, resamples=200)
    assert result.kappa.value == pytest.approx(cohen_kappa_score(truth, calls))
    assert result.balanced_accuracy.value == pytest.approx(balanced_accuracy_score(truth, calls))
    assert np.array_equal(np.array(result.matrix), confusion_matrix(truth, calls, labels=list(range(k))))
    assert result.balanced_accuracy.low <= result.balanced_accuracy.value <= result.balanced_accuracy.high


def test_fixed_binary_inputs_give_the_known_counts_and_kappa():
    # 10 unfaithful (positive) labels: judge flags 8; 10 faithful: judge flags 2
    truth = [1] * 10 + [0] * 10
    calls = [1] * 8 + [0] * 2 + [1] * 2 + [0] * 8
    result = agreement(truth, calls, BINARY_CLASSES)
    assert result.counts() == {"tp": 8, "fn": 2, "fp": 2, "tn": 8}
    assert result.kappa.value == pytest.approx(0.6)
    assert result.balanced_accuracy.value == pytest.approx(0.8)


def test_intervals_match_scipy_bootstrap():
    """The percentile bootstrap against scipy.stats.bootstrap (an independent implementation) on fixed inputs."""
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, 60)
    calls = np.where(rng.random(60) < 0.8, truth, 1 - truth)
    ours = agreement(truth, calls, BINARY_CLASSES, seed=0, resamples=4000)
    for stat, mine in ((cohen_kappa_score, ours.kappa), (balanced_accuracy_score, ours.balanced_accuracy)):
        ref = stats.bootstrap(
            (truth, calls), lambda t, c, stat=stat: stat(t, c), paired=True, vectorized=False, n_resamples=4000,
            method="percentile", random_state=np.random.default_rng(1),
        ).confidence_interval  # fmt: skip
        assert mine.low == pytest.approx(ref.low, abs=0.03)
        assert mine.high == pytest.approx(ref.high, abs=0.03)


def test_verdicts_follow_the_documented_thresholds():
    perfect = agreement([1] * 10 + [0] * 10, [1] * 10 + [0] * 10, BINARY_CLASSES)
    # every resample agrees perfectly: κ 1 with no interval (never a zero-width one), and the judge agrees
    assert (perfect.kappa.value, perfect.verdict) == (1.0, "agrees") and math.isnan(perfect.kappa.low)
    few = agreement([1] * 5 + [0] * 5, [1] * 5 + [0] * 5, BINARY_CLASSES)
    assert few.verdict == "too_few"  # 10 < 15 labels
    one_class = agreement([0] * 20, [0] * 18 + [1] * 2, BINARY_CLASSES)
    assert one_class.verdict == "too_few" and math.isnan(one_class.kappa.value) is False or True
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 60)
    coin = agreement(truth, rng.integers(0, 2, 60), BINARY_CLASSES)
    assert coin.kappa.high < 0.6 and coin.verdict == "disagrees"


# ------------------------------------------------------------------------------------------------ the labels format


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ROW = {"id": "c1", "repeat": 0, "faithful": True, "correct": None, "note": "", "labeller": "ada",
       "labelled_at": "2026-01-01T00:00:00Z"}  # fmt: skip


def test_labels_schema_errors_name_file_line_and_field(tmp_path):
    bad = _write(tmp_path / "l.jsonl", [ROW, {**ROW, "id": "c2", "faithful": "yes"}])
    with pytest.raises(InputError, match=r"l\.jsonl:2: faithful: must be true or false"):
        load_labels(bad)
    missing = _write(tmp_path / "m.jsonl", [{k: v for k, v in ROW.items() if k != "faithful"}])
    with pytest.raises(InputError, match=r"m\.jsonl:1: faithful: required field is missing"):
        load_labels(missing)
    unknown = _write(tmp_path / "u.jsonl", [{**ROW, "faithfull": True}])
    with pytest.raises(InputError, match=r"u\.jsonl:1: faithfull: unknown field"):
        load_labels(unknown)
    dup = _write(tmp_path / "d.jsonl", [ROW, {**ROW, "id": "c2"}, {**ROW, "faithful": False}])
    with pytest.raises(
        InputError, match=r"d\.jsonl:3: id: duplicate label of answer 'c1' repeat 0 \(first at line 1\)"
    ):
        load_labels(dup)
    mixed = _write(tmp_path / "x.jsonl", [ROW, {**{k: v for k, v in ROW.items() if k != "faithful"}, "id": "c2",
                                                "better": "head"}])  # fmt: skip
    with pytest.raises(InputError, match=r"x\.jsonl:2: better: mixes pairwise rows"):
        load_labels(mixed)


def test_labels_of_answers_not_in_the_run_are_reported_and_skipped(tmp_path):
    labels = load_labels(
        _write(tmp_path / "l.jsonl", [ROW, {**ROW, "id": "gone"}, {**ROW, "id": "c2", "answer_sha256": "x"}])
    )
    calls = {("c1", 0): ("faithful", (), "a"), ("c2", 0): ("unfaithful", (), "y")}
    result = check(labels, calls, judge="lexical")
    assert result.agreement.n == 1
    assert result.skipped == (
        "line 2: 'gone' repeat 0: not in the run",
        "line 3: 'c2' repeat 0: the run's answer is not the one labelled",
    )


def test_stale_labels_warn_about_judge_and_golden(tmp_path):
    labels = load_labels(_write(tmp_path / "l.jsonl", [{**ROW, "judge": "k1", "golden_sha256": "g1"}]))
    assert stale(labels, "k1", "g1") == []
    warnings = stale(labels, "k2", "g2")
    assert len(warnings) == 2 and "another judge identity" in warnings[0] and "another golden set" in warnings[1]


# ------------------------------------------------------------------------------------------------ the commands


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
    """A real run of the example's base config (lexical judge) on its first 40 cases plus its out-of-domain ones."""
    root = tmp_path_factory.mktemp("squad")
    shutil.copytree(REPO / "examples" / "squad", root / "squad")
    golden = (root / "squad" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    ood = [line for line in golden if '"out_of_domain": true' in line]
    keep = [line for line in golden[:40] if line not in ood[:10]] + ood[:10]
    (root / "squad" / "golden.jsonl").write_text("\n".join(keep) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        main, ["run", "--config", str(root / "squad" / "base.yml"), "--out", str(root / "run"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    return root


def test_label_command_appends_without_repeats_and_writes_the_page(squad_run, tmp_path):
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    first = runner.invoke(main, ["label", str(squad_run / "run"), "--n", "8", "--out", str(out)])
    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8 and all(r["faithful"] is None and r["chunks"] and r["judge"]["id"] == "lexical" for r in rows)
    second = runner.invoke(main, ["label", str(squad_run / "run"), "--n", "5", "--out", str(out)])
    assert second.exit_code == 0, second.output
    more = [json.loads(line) for line in out.read_text().splitlines()]
    pi = {r["inclusion_probability"] for r in more}
    assert len(pi) == 1 and all(r["design"] == "simple" for r in more)  # a simple random sample: one π
    assert [{**r, "inclusion_probability": 0} for r in more[:8]] == [{**r, "inclusion_probability": 0} for r in rows]
    assert len({(r["id"], r["repeat"]) for r in more}) == 13
    page = out.with_suffix(".html").read_text(encoding="utf-8")
    assert page.count('"kind":"answer"') == 13 and "http" not in page.split("<script id")[1].split("</script>")[1]


def _labels_from(rows, flip=()):
    """Labels that agree with the judge's calls, except on the ids in ``flip``."""
    out = []
    for r in rows:
        unfaithful = r["judge"]["flagged"] != (r["id"] in flip)
        out.append({"id": r["id"], "repeat": r["repeat"], "faithful": not unfaithful, "correct": None, "note": "",
                    "labeller": "t", "labelled_at": "2026-01-01T00:00:00Z", "judge": r["judge"]["key"],
                    "judge_flagged": r["judge"]["flagged"], "golden_sha256": r["golden_sha256"],
                    "answer_sha256": r["answer_sha256"], "design": r["design"], "stratum": r["stratum"],
                    "stratified_by": r["stratified_by"],
                    "inclusion_probability": r["inclusion_probability"]})  # fmt: skip
    return out


def test_judge_check_reports_agreement_and_min_kappa(squad_run, tmp_path):
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    assert (
        runner.invoke(main, ["label", str(squad_run / "run"), "--n", "20", "--out", str(out), "--stratify"]).exit_code
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    flip = {rows[0]["id"]}
    labels = _write(tmp_path / "labels.jsonl", _labels_from(rows, flip))
    done = runner.invoke(
        main, ["judge-check", "--labels", str(labels), "--run", str(squad_run / "run"), "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    weight = [1 / r["inclusion_probability"] for r in rows]  # a stratified sample: each answer counts 1/π
    assert report["n"] == 20 and report["rule"] == "faithfulness < 1"
    assert len(set(weight)) > 1 and report["weights"].startswith("Horvitz–Thompson")
    # the example's extractive pipeline: the judge flags no answer, so κ and balanced accuracy are undefined (said,
    # not shown as 0 or 0.5); tests/labels/test_design.py checks them against scikit-learn on a run where it flags
    assert report["kappa"]["value"] is None and report["balanced_accuracy"]["value"] is None
    assert report["undefined"] == [
        "the judge passed every sampled answer: its sensitivity is unknown (sample answers it flagged: "
        "rag-gate label --stratify)"
    ]
    # every faithful label passed: specificity 1 in every resample, so no interval rather than [1, 1]
    assert report["specificity"] == {"value": 1.0, "low": None, "high": None}
    assert [d["id"] for d in report["disagreements"]] == [rows[0]["id"]]
    text = runner.invoke(main, ["judge-check", "--labels", str(labels), "--run", str(squad_run / "run")])
    assert "confusion matrix (positive = unfaithful" in text.stdout and "disagreement(s):" in text.stdout
    floor = runner.invoke(
        main, ["judge-check", "--labels", str(labels), "--run", str(squad_run / "run"), "--min-kappa", "0.99"]
    )
    assert floor.exit_code == 1 and "κ undefined" in floor.stderr and "below --min-kappa" in floor.stderr


def test_min_kappa_names_every_gated_rule_below_or_undefined(tmp_path):
    """kappa_failures: every gated rule is checked, a secondary one is not; the failures are named, escaped."""
    from gate.cli.labels import kappa_failures

    truth = [i % 2 for i in range(20)]  # 1 = unfaithful
    rows = [{"id": f"c{i}", "repeat": 0, "faithful": not truth[i]} for i in range(20)]
    labels = load_labels(_write(tmp_path / "l.jsonl", rows))
    agree = {(r["id"], 0): ("unfaithful" if t else "faithful", (), None) for r, t in zip(rows, truth, strict=True)}
    weak_calls = [1 - t if i < 6 else t for i, t in enumerate(truth)]  # 6 of 20 disagree
    weak = {(r["id"], 0): ("unfaithful" if c else "faithful", (), None) for r, c in zip(rows, weak_calls, strict=True)}
    passes_all = {(r["id"], 0): ("faithful", (), None) for r in rows}
    no_call = {(r["id"], 0): (None, (), None) for r in rows}
    good = check(labels, agree, judge="j", rule="hallucinated_claim_rate > 0")
    low = check(labels, weak, judge="j", rule="contradiction_rate > 0")
    flat = check(labels, passes_all, judge="j", rule="grounded_answer_rate < 0.5")
    none = check(labels, no_call, judge="j", rule="evil\x1b[31m\nrule > 0")
    assert good.agreement.kappa.value == pytest.approx(cohen_kappa_score(truth, truth))
    kappa = cohen_kappa_score(truth, weak_calls)
    assert low.agreement.kappa.value == pytest.approx(kappa) and kappa == pytest.approx(0.4)
    assert math.isnan(flat.agreement.kappa.value)  # the judge passes every answer: κ undefined, not sklearn's 0
    assert none.agreement.n == 0 and math.isnan(none.agreement.kappa.value)
    failed, checked = kappa_failures(
        [(good, None, True), (low, None, True), (flat, None, True), (none, None, True)], 0.6
    )
    assert checked == 4
    assert failed == [
        "contradiction_rate > 0: κ 0.400 on 20 labelled answer(s)",
        "grounded_answer_rate < 0.5: κ undefined (the labels or the judge's calls are all one class) on 20 labelled "
        "answer(s)",
        "evil\\x1b[31m\\nrule > 0: κ undefined (no labelled answer has a call by this rule) on 0 labelled answer(s)",
    ]
    # a secondary rule (not gated) is shown, not checked; without a gated rule the first one shown is
    assert kappa_failures([(good, None, True), (low, None, False)], 0.6) == ([], 1)
    assert kappa_failures([(low, None, False)], 0.6) == (
        ["contradiction_rate > 0: κ 0.400 on 20 labelled answer(s)"],
        1,
    )
    assert kappa_failures([(good, None, True), (low, None, True)], 0.4) == ([], 2)  # at the minimum is not below


def test_judge_check_of_labels_from_another_run_is_an_error_not_a_pass(squad_run, tmp_path):
    """No labelled answer in the run (labels of another run): nothing was checked, so exit 2, never 0."""
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    assert runner.invoke(main, ["label", str(squad_run / "run"), "--n", "5", "--out", str(out)]).exit_code == 0
    rows = [
        {**r, "id": f"elsewhere-{r['id']}"}
        for r in _labels_from(json.loads(line) for line in out.read_text().splitlines())
    ]
    labels = _write(tmp_path / "labels.jsonl", rows)
    done = runner.invoke(main, ["judge-check", "--labels", str(labels), "--run", str(squad_run / "run")])
    assert done.exit_code == 2, done.output
    assert f"{labels}: no labelled answer is in {squad_run / 'run'}" in done.stderr


def test_judge_check_rejudges_with_another_judge(squad_run, tmp_path):
    """--config names a stricter lexical judge: its calls, not the run's, are compared with the labels."""
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    assert (
        runner.invoke(main, ["label", str(squad_run / "run"), "--n", "20", "--out", str(out), "--stratify"]).exit_code
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    labels = _write(tmp_path / "labels.jsonl", _labels_from(rows))
    config = squad_run / "squad" / "strict.yml"
    text = (
        (squad_run / "squad" / "base.yml")
        .read_text()
        .replace("judge: {name: lexical}", "judge: {name: lexical, support: 1.0, cover: 1.0}")
    )
    config.write_text(text)
    same = json.loads(
        runner.invoke(
            main, ["judge-check", "--labels", str(labels), "--run", str(squad_run / "run"), "--format", "json"]
        ).stdout
    )
    other = runner.invoke(
        main,
        [
            "judge-check",
            "--labels",
            str(labels),
            "--run",
            str(squad_run / "run"),
            "--config",
            str(config),
            "--format",
            "json",
        ],
    )
    assert other.exit_code == 0, other.output
    other = json.loads(other.stdout)
    assert same["accuracy"] == 1.0 and same["disagreements"] == []
    from gate.config import load_config
    from gate.judges import get_judge
    from gate.labels.sampling import judged_answers
    from gate.scoring import call_judge

    policy = load_config(config).policy
    judge = get_judge(policy.judge)
    _, answers = judged_answers(squad_run / "run")
    by_key = {a.key: a for a in answers}
    expected = []
    for r in rows:
        value = call_judge(
            judge, by_key[(r["id"], r["repeat"])].case, by_key[(r["id"], r["repeat"])].prediction, policy
        ).faithfulness
        if not math.isnan(value):
            expected.append((int(r["judge"]["flagged"]), int(value < 1)))
    assert other["n"] == len(expected)
    kappa = cohen_kappa_score(*zip(*expected, strict=True))
    assert other["kappa"]["value"] == (None if math.isnan(kappa) else pytest.approx(kappa, abs=1e-6))
    assert other["judge"] == "lexical"
    assert other["confusion_matrix"] == confusion_matrix(*zip(*expected, strict=True), labels=[0, 1]).tolist()


def test_recorded_calls_read_the_judge_shown_when_labelling(tmp_path):
    labels = load_labels(_write(tmp_path / "l.jsonl", [{**ROW, "judge_flagged": True}, {**ROW, "id": "c2"}]))
    assert recorded_calls(labels) == {("c1", 0): ("unfaithful", (), None)}


def test_compare_prints_agreement_in_run_details_and_warns_when_stale(squad_run, tmp_path):
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    assert (
        runner.invoke(main, ["label", str(squad_run / "run"), "--n", "20", "--out", str(out), "--stratify"]).exit_code
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    labels = _labels_from(rows)
    labels[0]["judge"] = "another-judge-key"
    _write(squad_run / "squad" / "labels.jsonl", labels)
    config = squad_run / "squad" / "labelled.yml"
    config.write_text((squad_run / "squad" / "base.yml").read_text() + "judge_labels: labels.jsonl\n")
    done = runner.invoke(main, ["compare", str(squad_run / "run"), str(squad_run / "run"), "--config", str(config),
                                "--out", str(tmp_path / "report"), "--format", "markdown"])  # fmt: skip
    assert done.exit_code == 0, done.output
    details = done.stdout.split("Run details")[1]
    assert "Judge against your labels (`judge_labels:`): " in details
    line = details.split("Judge against your labels (`judge_labels:`): ")[1].split("\n")[0]
    assert line.startswith("too few labels to tell on faithfulness &lt; 1 (20 labels): κ n/a, balanced accuracy n/a ")
    # every label faithful, no answer flagged: undefined, and no zero-width interval anywhere
    assert "(undefined: all labels are of one class (faithful); the judge passed every sampled answer)" in line
    # the judge's share is a proportion: Wilson's interval has width when no answer is flagged (tests/stats/test_ppi)
    assert "; share of unfaithful answers PPI++ 0.00, judge alone 0.00 (95 % CI 0.00 to 0.0" in line
    assert "0.00 to 0.00" not in line
    assert line.endswith("· stale: 1 of 20 labels were made with another judge identity")
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["judge_labels"].startswith(("agrees", "too few", "disagrees"))
    assert any(w.startswith("judge_labels: 1 of 20 labels") for w in report["warnings"])
