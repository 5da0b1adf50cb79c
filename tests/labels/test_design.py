"""Labels that check the gated rule, weighted by the sampling design, and the judge's verdict corrected with them.

A real run of the example's pipeline with an invented sentence added to a known third of its in-domain answers
(so the truth is known: those answers are unfaithful, the others faithful), judged by the lexical judge, gated on
``hallucinated_claim_rate``.
"""

import hashlib
import json
import math
import shutil

import numpy as np
import ppi_py
import pytest
from click.testing import CliRunner
from helpers import REPO
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, confusion_matrix

from gate.cli import main
from gate.errors import InputError
from gate.labels.agreement import BINARY_CLASSES, agreement, check, load_labels
from gate.labels.sampling import JudgedAnswer, inclusion_probabilities, sample, to_label_row
from gate.manifest import Manifest
from gate.models import GoldenCase, Prediction

BADRAG = """
import hashlib
import rag


def corrupted(case_id):
    return int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 3 == 0


def answer(case, **options):
    out = rag.answer(case, **options)
    if not out["refused"] and not case.get("out_of_domain") and corrupted(case["id"]):
        out["answer"] += " It was founded in 1872 by Napoleon Bonaparte in Vienna."
    return out
"""

METRICS = "metrics: [hit_rate@5, faithfulness, hallucination_rate, hallucinated_claim_rate, answer_f1, refusal]\n"


def corrupted(case_id: str) -> bool:
    """Whether BADRAG added the invented sentence to the case's answer (in-domain answers only)."""
    return int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 3 == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real runs on 40 cases: ``good`` (the example's extractive pipeline) and ``bad`` (a third corrupted)."""
    root = tmp_path_factory.mktemp("design")
    shutil.copytree(REPO / "examples" / "squad", root / "squad")
    golden = (root / "squad" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    ood = [line for line in golden if '"out_of_domain": true' in line]
    keep = [line for line in golden[:40] if line not in ood[:10]] + ood[:10]
    (root / "squad" / "golden.jsonl").write_text("\n".join(keep) + "\n", encoding="utf-8")
    (root / "squad" / "badrag.py").write_text(BADRAG, encoding="utf-8")
    base = (root / "squad" / "base.yml").read_text(encoding="utf-8")
    base = "\n".join(line for line in base.splitlines() if not line.startswith("metrics:")) + "\n"
    for name, module in (("good", "rag:answer"), ("bad", "badrag:answer")):
        text = base.replace("rag:answer", module) + METRICS + "gate: [hit_rate@5, hallucinated_claim_rate]\n"
        (root / "squad" / f"{name}.yml").write_text(text, encoding="utf-8")
        result = CliRunner().invoke(
            main, ["run", "--config", str(root / "squad" / f"{name}.yml"), "--out", str(root / name), "--no-progress"]
        )
        assert result.exit_code == 0, result.output
    return root


def _label_by_hand(path, truth=corrupted):
    """Fill in ``faithful`` in the JSONL that ``rag-gate label`` wrote (as a person would in an editor)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["faithful"] = not (truth(row["id"]) and not row["out_of_domain"])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def _run_calls(run_dir, metric, op):
    """Every answer's call by a rule, read from the run's scores.jsonl: (id, repeat) → 0/1."""
    calls = {}
    for line in (run_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["metric"] == metric and row["value"] is not None and not row.get("error"):
            calls[(row["id"], row["repeat"])] = int(op(row["value"]))
    return calls


def test_judge_check_checks_the_gated_rule_with_the_labels_file_label_wrote(runs, tmp_path):
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    done = runner.invoke(main, ["label", str(runs / "bad"), "--n", "24", "--out", str(out), "--stratify"])
    assert done.exit_code == 0, done.output
    rows = _label_by_hand(out)
    assert {r["design"] for r in rows} == {"stratified"} and {r["stratified_by"] for r in rows} == {
        "hallucinated_claim_rate"
    }
    report = runner.invoke(main, ["judge-check", "--labels", str(out), "--run", str(runs / "bad"), "--format", "json"])
    assert report.exit_code == 0, report.output
    found = json.loads(report.stdout)
    assert found["rule"] == "hallucinated_claim_rate > 0" and [r["rule"] for r in found["rules"]] == [
        "hallucinated_claim_rate > 0",
        "faithfulness < 1",
    ]
    assert [r["gated"] for r in found["rules"]] == [True, False]
    calls = _run_calls(runs / "bad", "hallucinated_claim_rate", lambda v: v > 0)
    truth = [int(not r["faithful"]) for r in rows]
    judge = [calls[(r["id"], r["repeat"])] for r in rows]
    weight = [1 / r["inclusion_probability"] for r in rows]
    assert 0 < sum(judge) < len(judge) and 0 < sum(truth) < len(truth) and len(set(weight)) > 1
    assert found["confusion_matrix"] == confusion_matrix(truth, judge, labels=[0, 1]).tolist()
    assert found["kappa"]["value"] == pytest.approx(cohen_kappa_score(truth, judge, sample_weight=weight), abs=1e-6)
    assert found["balanced_accuracy"]["value"] == pytest.approx(
        balanced_accuracy_score(truth, judge, sample_weight=weight), abs=1e-6
    )
    # the prediction-powered share of unfaithful answers: ppi-python on the same labels, weights and judge calls
    share = found["share_unfaithful"]
    y, f, f_all = np.array(truth, float), np.array(judge, float), np.array(list(calls.values()), float)
    low, high = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.05, w=np.array(weight))
    point = ppi_py.ppi_mean_pointestimate(y, f, f_all, w=np.array(weight))
    ppi = share["prediction_powered"]
    assert (ppi["value"], ppi["low"], ppi["high"]) == pytest.approx((point[0], low[0], high[0]), abs=1e-6)
    assert share["judge_only"]["value"] == pytest.approx(f_all.mean(), abs=1e-6)
    text = runner.invoke(main, ["judge-check", "--labels", str(out), "--run", str(runs / "bad")]).stdout
    assert (
        "rule checked: an answer is flagged (unfaithful) when hallucinated_claim_rate > 0 — the rule the gate uses"
        in (text)
    )
    assert "secondary, not what the gate decides on: faithfulness < 1:" in text
    assert "share of unfaithful answers in the run: prediction-powered " in text and "judge only " in text


def test_min_kappa_checks_every_gated_rule_not_only_the_first(runs, tmp_path):
    """Two gated judged rules: the first agrees with the labels (κ 1), the second less (κ 0.54); both checked.

    The lexical judge finds a contradiction in few of the bad run's answers (the invented sentence is mostly
    unsupported, not contradicted), so ``contradiction_rate > 0`` agrees less with the labels than
    ``hallucinated_claim_rate > 0``: --min-kappa 0.6 fails on the second rule and names it.
    """
    squad = runs / "squad"
    config = squad / "two-gated.yml"
    text = (squad / "bad.yml").read_text(encoding="utf-8")
    text = text.replace(METRICS, METRICS.replace("refusal]", "refusal, contradiction_rate]"))
    text = text.replace(
        "gate: [hit_rate@5, hallucinated_claim_rate]", "gate: [hallucinated_claim_rate, contradiction_rate]"
    )
    assert "contradiction_rate]" in text.split("gate:")[1]
    config.write_text(text, encoding="utf-8")
    runner = CliRunner()
    run_dir = tmp_path / "run"
    done = runner.invoke(main, ["run", "--config", str(config), "--out", str(run_dir), "--no-progress"])
    assert done.exit_code == 0, done.output
    out = tmp_path / "to-label.jsonl"
    assert runner.invoke(main, ["label", str(run_dir), "--n", "20", "--out", str(out), "--stratify"]).exit_code == 0
    rows = _label_by_hand(out)
    checked = runner.invoke(main, ["judge-check", "--labels", str(out), "--run", str(run_dir), "--format", "json"])
    assert checked.exit_code == 0, checked.output
    found = json.loads(checked.stdout)
    assert [(r["rule"], r["gated"]) for r in found["rules"]] == [
        ("hallucinated_claim_rate > 0", True),
        ("contradiction_rate > 0", True),
        ("faithfulness < 1", False),
    ]
    # each gated rule's κ against scikit-learn (weighted by 1/π), from the run's own scores
    truth = [int(not r["faithful"]) for r in rows]
    weight = [1 / r["inclusion_probability"] for r in rows]
    kappas = []
    for i, metric in enumerate(("hallucinated_claim_rate", "contradiction_rate")):
        calls = _run_calls(run_dir, metric, lambda v: v > 0)
        kappa = cohen_kappa_score(truth, [calls[(r["id"], r["repeat"])] for r in rows], sample_weight=weight)
        assert found["rules"][i]["kappa"]["value"] == pytest.approx(kappa, abs=1e-6)
        kappas.append(kappa)
    assert kappas[0] > 0.6 > kappas[1] > 0.5  # the first rule passes 0.6, the second does not; both pass 0.5
    args = ["judge-check", "--labels", str(out), "--run", str(run_dir), "--min-kappa"]
    floor = runner.invoke(main, [*args, "0.6"])
    assert floor.exit_code == 1, floor.output
    assert floor.stderr.strip() == (
        "rag-gate: κ below --min-kappa 0.6 (or undefined) on 1 of 2 rule(s) the gate uses: "
        f"contradiction_rate > 0: κ {kappas[1]:.3f} on 20 labelled answer(s)"
    )
    assert runner.invoke(main, [*args, "0.5"]).exit_code == 0
    # the first rule agrees on every label (κ 1): at --min-kappa 1 it is not below, the second still is
    assert kappas[0] == pytest.approx(1.0)
    top = runner.invoke(main, [*args, "1"])
    assert top.exit_code == 1 and "on 1 of 2 rule(s) the gate uses: contradiction_rate > 0: κ 0." in top.stderr


def test_a_degenerate_sample_gives_a_sentence_not_a_zero_width_interval(runs, tmp_path):
    """The good run: the judge flags no answer and every answer is faithful; nothing can be measured, and it says so."""
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    assert runner.invoke(main, ["label", str(runs / "good"), "--n", "20", "--out", str(out)]).exit_code == 0
    _label_by_hand(out, truth=lambda _: False)
    text = runner.invoke(main, ["judge-check", "--labels", str(out), "--run", str(runs / "good")])
    assert text.exit_code == 0, text.output
    assert "all labels are of one class (faithful): the judge's sensitivity is unknown" in text.stdout
    assert "the judge passed every sampled answer: its sensitivity is unknown" in text.stdout
    assert "balanced accuracy n/a" in text.stdout and "Cohen's kappa     n/a" in text.stdout
    assert "0.000 to 0.000" not in text.stdout and "CI 0.000 to 0.000" not in text.stdout
    assert "prediction-powered 0.000 (no interval: every value it rests on is the same" in text.stdout
    floor = runner.invoke(
        main, ["judge-check", "--labels", str(out), "--run", str(runs / "good"), "--min-kappa", "0.5"]
    )
    assert floor.exit_code == 1 and "κ undefined" in floor.stderr


def test_agreement_of_a_judge_that_flags_every_sampled_answer_says_so():
    result = agreement([1, 1, 0, 1, 0] * 4, [1] * 20, BINARY_CLASSES)
    assert result.undefined == (
        "the judge flagged every sampled answer: its specificity is unknown (sample answers it passed: "
        "rag-gate label --stratify)",
    )
    assert all(math.isnan(v) for v in (result.kappa.value, result.balanced_accuracy.value, result.specificity.value))
    assert result.sensitivity.value == 1.0 and math.isnan(result.sensitivity.low)  # 1.0 in every resample
    assert result.verdict == "too_few"
    one_class = agreement([1] * 20, [1] * 12 + [0] * 8, BINARY_CLASSES)
    assert one_class.undefined[0].startswith("all labels are of one class (unfaithful): the judge's specificity")
    assert math.isnan(one_class.kappa.value) and one_class.sensitivity.value == pytest.approx(0.6)
    assert one_class.sensitivity.low < 0.6 < one_class.sensitivity.high


def _population():
    """A fixed run of 100 answers: 10 the judge flags (6 truly unfaithful), 90 it passes (9 truly unfaithful)."""
    answers, truth = [], {}
    for i in range(100):
        flagged = i < 10
        unfaithful = i < 6 or 10 <= i < 19
        case = GoldenCase(id=f"c{i:03d}", question=f"q{i}")
        answers.append(JudgedAnswer(case, Prediction(id=case.id, repeat=0, answer=f"a{i}"), flagged, 0.5 if flagged
                                    else 1.0))  # fmt: skip
        truth[case.id] = unfaithful
    return answers, truth


def test_weights_on_a_stratified_sample_reproduce_the_population_figures():
    """A stratified sample in the run's proportions within each stratum, weighted by 1/π, gives the run's figures."""
    answers, truth = _population()
    manifest = Manifest()
    picked = [a for a in answers if a.case.id in {"c000", "c001", "c002", "c006", "c007"}]  # 3 of 6, 2 of 4
    picked += [a for a in answers if a.case.id in {f"c{i:03d}" for i in (10, *range(19, 28))}]  # 1 of 9, 9 of 81
    rows = [to_label_row(a, manifest, design="stratified") for a in picked]
    pis = inclusion_probabilities(rows, answers, "stratified")
    assert pis == [0.5] * 5 + [10 / 90] * 10
    labels = [
        load_labels_row(r, pi, line, truth[r["id"]]) for line, (r, pi) in enumerate(zip(rows, pis, strict=True), 1)
    ]
    calls = {a.key: ("unfaithful" if a.flagged else "faithful", (), None) for a in answers}
    result = check(labels, calls, judge="j").agreement
    y_all = [int(truth[a.case.id]) for a in answers]
    f_all = [int(a.flagged) for a in answers]
    population = confusion_matrix(y_all, f_all, labels=[0, 1]) / len(answers)
    assert np.allclose(result.weighted, population)
    assert result.kappa.value == pytest.approx(cohen_kappa_score(y_all, f_all))
    assert result.balanced_accuracy.value == pytest.approx(balanced_accuracy_score(y_all, f_all))
    assert result.sensitivity.value == pytest.approx(6 / 15) and result.specificity.value == pytest.approx(81 / 85)
    unweighted = agreement([int(truth[a.case.id]) for a in picked], [int(a.flagged) for a in picked], BINARY_CLASSES)
    assert abs(unweighted.kappa.value - result.kappa.value) > 0.1  # what the old sampler reported


def load_labels_row(row, pi, line, unfaithful):
    """A :class:`Label` as ``load_labels`` builds it from a row of ``rag-gate label`` with ``faithful`` filled in."""
    from gate.labels.agreement import Label

    return Label(id=row["id"], repeat=row["repeat"], line=line, faithful=not unfaithful, design=row["design"],
                 stratum=row["stratum"], inclusion_probability=pi)  # fmt: skip


def test_the_stratified_sampler_weighted_is_unbiased_over_seeds():
    """Over many seeds the weighted share of each cell averages to the run's (Horvitz–Thompson is unbiased)."""
    answers, truth = _population()
    manifest = Manifest()
    weighted, unweighted = [], []
    for seed in range(400):
        rows = [to_label_row(a, manifest, design="stratified") for a in sample(answers, 12, seed, design="stratified")]
        pis = inclusion_probabilities(rows, answers, "stratified")
        y = [int(truth[r["id"]]) for r in rows]
        w = [1 / p for p in pis]
        weighted.append(np.average(np.array(y) == 1, weights=w))
        unweighted.append(np.mean(y))
    assert np.mean(weighted) == pytest.approx(0.15, abs=3 * np.std(weighted) / 20)
    assert abs(np.mean(unweighted) - 0.15) > 0.1  # half the sample from the 10 flagged answers


ROW = {"id": "c1", "repeat": 0, "faithful": True}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_minimal_label_rows_are_enough(tmp_path):
    labels = load_labels(_write(tmp_path / "l.jsonl", [ROW, {"id": "c2", "repeat": 1, "faithful": False}]))
    assert [(x.id, x.repeat, x.faithful, x.labeller, x.weight) for x in labels] == [
        ("c1", 0, True, "", 1.0),
        ("c2", 1, False, "", 1.0),
    ]
    pairs = load_labels(_write(tmp_path / "p.jsonl", [{"id": "c1", "repeat": 0, "better": "head"}]))
    assert pairs[0].pairwise and pairs[0].better == "head"


def test_the_jsonl_label_writes_is_a_labels_file(tmp_path):
    case = GoldenCase(id="c1", question="q?")
    answer = JudgedAnswer(case, Prediction(id="c1", repeat=0, answer="a"), True, 0.5, {}, {"faithfulness": 0.5})
    row = to_label_row(answer, Manifest(), design="stratified")
    row["inclusion_probability"] = 0.25
    unlabelled = {**row, "id": "c2"}
    path = _write(tmp_path / "to-label.jsonl", [{**row, "faithful": False}, unlabelled])
    (label,) = load_labels(path)  # the row still null is not labelled yet: skipped
    assert (label.faithful, label.judge_flagged, label.judge, label.weight, label.stratum) == (
        False,
        True,
        row["judge"]["key"],
        4.0,
        "flagged, in-domain",
    )
    with pytest.raises(InputError, match=r"u\.jsonl: no labels \(1 row\(s\) with faithful or better still null"):
        load_labels(_write(tmp_path / "u.jsonl", [unlabelled]))


def test_label_refusals_name_file_line_and_field(tmp_path):
    bad_pi = _write(tmp_path / "b.jsonl", [ROW, {**ROW, "id": "c2", "inclusion_probability": 0}])
    with pytest.raises(InputError, match=r"b\.jsonl:2: inclusion_probability: "):
        load_labels(bad_pi)
    typo = _write(tmp_path / "t.jsonl", [{**ROW, "faithfull": True}])
    with pytest.raises(InputError, match=r"t\.jsonl:1: faithfull: unknown field"):
        load_labels(typo)
    missing = _write(tmp_path / "m.jsonl", [{"id": "c1", "faithful": True}])
    with pytest.raises(InputError, match=r"m\.jsonl:1: repeat: required field is missing"):
        load_labels(missing)


def test_compare_with_labels_reports_the_corrected_difference_against_the_margin(runs, tmp_path):
    runner = CliRunner()
    sides = {}
    for name in ("good", "bad"):
        out = tmp_path / f"{name}.jsonl"
        assert runner.invoke(main, ["label", str(runs / name), "--n", "20", "--out", str(out)]).exit_code == 0
        sides[name] = (out, _label_by_hand(out, truth=corrupted if name == "bad" else lambda _: False))
    labels = [str(sides["good"][0]), str(sides["bad"][0])]
    done = runner.invoke(main, ["compare", str(runs / "good"), str(runs / "bad"), "--out", str(tmp_path / "report"),
                                "--format", "json", "--labels", *labels])  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("labels: ")]
    estimates = []
    for name in ("good", "bad"):
        calls = _run_calls(runs / name, "hallucinated_claim_rate", lambda v: v > 0)
        rows = sides[name][1]
        y = np.array([float(not r["faithful"]) for r in rows])
        f = np.array([float(calls[(r["id"], r["repeat"])]) for r in rows])
        f_all = np.array(list(calls.values()), float)
        # ppi_py's λ is 0/0 (NaN) when the judge's calls do not vary (the good run); ours is then 0: the labels alone
        lam = 0.0 if f_all.std() == 0 else None
        point = ppi_py.ppi_mean_pointestimate(y, f, f_all, lam=lam)[0]
        low, high = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.05, lam=lam)
        estimates.append((point, (high[0] - low[0]) / (2 * 1.959963984540054)))
    (base, se_b), (head, se_h) = estimates
    diff, se = head - base, math.hypot(se_b, se_h)
    expected = f"prediction-powered {diff:+.3f} (95 % CI {diff - 1.959964 * se:+.3f} to {diff + 1.959964 * se:+.3f}"
    assert line.startswith("labels: share of unfaithful answers, head − base, by hallucinated_claim_rate > 0: ")
    assert expected in line and "margin 0.02: " in line
    verdict = "worse by more than the margin" if diff - 1.959964 * se > 0.02 else "cannot tell"
    assert verdict in line


def test_the_bootstrap_resamples_within_strata():
    from gate.labels.agreement import design_resamples

    strata = ["a"] * 3 + ["b"] * 7
    rows = design_resamples(strata, 500, np.random.default_rng(0))
    assert rows.shape == (500, 10)
    assert np.isin(rows[:, :3], [0, 1, 2]).all() and np.isin(rows[:, 3:], range(3, 10)).all()  # each stratum's size
    assert len(np.unique(rows[:, 3:])) == 7  # every member of b drawn somewhere
    same = design_resamples(strata, 500, np.random.default_rng(0))
    assert (rows == same).all()


def test_label_keeps_one_design_per_file_and_recomputes_pi(runs, tmp_path):
    out = tmp_path / "to-label.jsonl"
    runner = CliRunner()
    assert runner.invoke(main, ["label", str(runs / "bad"), "--n", "5", "--out", str(out)]).exit_code == 0
    assert (
        runner.invoke(main, ["label", str(runs / "bad"), "--n", "4", "--out", str(out), "--seed", "1"]).exit_code == 0
    )
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    calls = _run_calls(runs / "bad", "faithfulness", lambda v: v < 1)  # the answers with a call: the population
    answers = {json.loads(line)["answer"] for line in (runs / "bad" / "predictions.jsonl").read_text().splitlines()}
    assert len(answers) >= len(calls)  # no two answers share a text here, so N is the number with a call
    assert [r["inclusion_probability"] for r in rows] == pytest.approx([9 / len(calls)] * 9)
    mixed = runner.invoke(main, ["label", str(runs / "bad"), "--n", "4", "--out", str(out), "--stratify"])
    assert mixed.exit_code == 2
    assert f"{out}: holds answers of another sampling design; write this sample to another file" in mixed.stderr


def test_every_share_of_judge_check_has_its_interval_inside_0_1():
    """1 unfaithful label in 30, 2 flagged answers in 100: the normal intervals of the labels' share
    (1/30 ± 1.96·0.033) and of the judge's (0.02 ± 1.96·0.014) go below 0; a share's interval stays in [0, 1]:
    the labels' cut there, the judge's Wilson's (statsmodels)."""
    from statsmodels.stats.proportion import proportion_confint

    from gate.labels.agreement import Label
    from gate.labels.corrected import corrected
    from gate.labels.rules import Rule
    from gate.labels.sampling import JudgedAnswer
    from gate.models import GoldenCase, Prediction
    from gate.stats.ppi import classical_mean

    answers = [
        JudgedAnswer(GoldenCase(f"q{i}", "Q?"), Prediction(id=f"q{i}", answer="A."), None, math.nan,
                     values={"hallucinated_claim_rate": 1.0 if i < 2 else 0.0})
        for i in range(100)
    ]  # fmt: skip
    labels = [Label(id=f"q{i}", repeat=0, line=i + 1, faithful=i != 1) for i in range(30)]
    share = corrected(labels, answers, Rule("hallucinated_claim_rate", ">", 0.0))
    raw = classical_mean([float(i == 1) for i in range(30)])
    assert raw.low < 0 and share.labels_only.low == 0.0 and share.labels_only.high == pytest.approx(raw.high)
    assert share.judge_only.estimate == pytest.approx(0.02)
    low, high = proportion_confint(2, 100, alpha=0.05, method="wilson")
    assert (share.judge_only.low, share.judge_only.high) == pytest.approx((low, high), abs=1e-12) and low > 0
    assert 0.0 <= share.ppi.low <= share.ppi.high <= 1.0
