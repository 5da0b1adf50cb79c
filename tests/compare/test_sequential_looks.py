"""The adaptive evaluation's order and per-batch looks (gate.compare.sequential) against phase 1's replay.

The oracle is :func:`gate.stats.sequential.stopping_point` (tested against confseq in tests/stats): replayed on the
same per-case differences in the same order, it must stop at the batch where :class:`Looks`, fed the two sides
batch by batch as the PR flow does, stops, with the same decisions.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from gate.compare.sequential import Looks, adaptive_order, policy_order
from gate.config import GatePolicy
from gate.models import GoldenCase, Prediction, Score
from gate.predictions import PredictionTable
from gate.runs import Side
from gate.stats import numbers
from gate.stats.detectable import design_mde
from gate.stats.inputs import MetricInput
from gate.stats.sequential import HORIZON_SHARE, stopping_point

POLICY = GatePolicy(metrics=("hit_rate@5",), gated=("hit_rate@5",), margins={"hit_rate@5": 0.05}, seed=3)


def cases(n: int) -> list[GoldenCase]:
    return [GoldenCase(f"c{i}", f"question {i}?", (f"d{i}",)) for i in range(n)] + [
        GoldenCase("ood", "out of scope?", (), out_of_domain=True),
        GoldenCase("vip", "must pass?", ("d0",), must_pass=True),
    ]


def scored(label: str, golden: list[GoldenCase], by_metric: dict[str, dict[str, float]]) -> Side:
    """A side with one repeat: metric → (case id → value; NaN for the cases it does not hold)."""
    table = PredictionTable.from_mapping(golden, 1, {(c.id, 0): Prediction(c.id, 0, answer="a") for c in golden})
    scores = [Score(c.id, 0, m, values.get(c.id, math.nan)) for c in golden for m, values in by_metric.items()]
    return Side(label, golden, table, 1, scores, {})  # type: ignore[arg-type]


def side(label: str, golden: list[GoldenCase], values: dict[str, float]) -> Side:
    """A side scoring hit_rate@5 only."""
    return scored(label, golden, {"hit_rate@5": values})


def looks_until_stop(policy: GatePolicy, order, base: Side, head: Side) -> Looks:
    """The looks after each batch of ``order``, up to the first that stops."""
    looks = Looks(policy, order)
    for end in order.ends:
        looks.update(base, head, end)
        if looks.stop() is not None:
            break
    return looks


def test_the_order_is_seeded_and_puts_must_pass_and_out_of_domain_cases_first():
    golden = cases(50)
    order = adaptive_order(golden, POLICY, seed=3)
    assert order.first == ("ood", "vip") and len(order.sequence) == 50 and order.batch == 5
    ids = [f"c{i}" for i in range(50)]
    assert list(order.sequence) == [ids[i] for i in np.random.default_rng(3).permutation(50)]
    assert adaptive_order(golden, POLICY, seed=3) == order and adaptive_order(golden, POLICY, seed=4) != order
    assert order.ends == tuple(range(5, 51, 5))
    assert order.prefix(0) == ["ood", "vip", *order.sequence[:5]]
    assert adaptive_order(golden, POLICY, seed=3, batch=20).ends == (20, 40, 50)


def test_a_prs_order_is_seeded_by_its_head_commit_too_so_it_cannot_be_known_before_committing():
    """A fixed seed tells a PR's author which cases an adaptive run leaves out; with the head commit in the seed
    every commit gets another order (the same commit the same one)."""
    golden, sha = cases(50), "8f" * 20
    seeded = policy_order(golden, POLICY, sha)
    key = int.from_bytes(hashlib.sha256(f"{POLICY.seed}:{sha}".encode()).digest()[:8], "big") >> 1
    assert seeded.seed == key and seeded == adaptive_order(golden, POLICY, seed=key)
    assert policy_order(golden, POLICY, sha) == seeded and policy_order(golden, POLICY) == adaptive_order(
        golden, POLICY, seed=POLICY.seed
    )
    others = {policy_order(golden, POLICY, f"{i:040x}").sequence[:10] for i in range(20)}
    assert len(others) == 20  # 20 commits, 20 different first batches


@pytest.mark.parametrize(
    ("n", "broken", "expected"),
    [(200, 0.3, "fail"), (400, 0.0, "decided")],  # a clear regression; no change at all on a large set
)
def test_the_looks_stop_where_the_replay_of_phase_1_stops(n, broken, expected):
    golden = cases(n)
    rng = np.random.default_rng(11)
    base = {c.id: 1.0 for c in golden if not c.out_of_domain}
    head = {i: (0.0 if rng.random() < broken else v) for i, v in base.items()}
    sides = side("base", golden, base), side("head", golden, head)
    order = adaptive_order(golden, POLICY, seed=3)
    looks = looks_until_stop(POLICY, order, *sides)
    stopped = looks.stop()
    d = np.array([head[i] - base[i] for i in order.sequence])
    seen = looks.rule_outs["hit_rate@5"]  # the MDE at N of each look (the replay's rule_out), the last one kept after
    rule_out = np.array(seen + seen[-1:] * (len(order.ends) - len(seen)))
    batch = order.sequence[: order.ends[0]]
    b, no = (np.array([[v[i]] for i in batch]) for v in (base, head)), np.zeros((len(batch), 1), bool)
    first = MetricInput("hit_rate@5", "binary", "higher", 0.05, True, *b, no, no)
    assert seen[0] == design_mde(first, level=0.9 * 0.05, n=n) > 0.05  # M = 1 at α_final: beyond the margin
    oracle = stopping_point(
        [d], [0.05], looks.split.sequential, np.array(order.ends), target_n=math.ceil(HORIZON_SHARE * n),
        rule_out=[rule_out], early_pass=looks.split.early_pass,
    )  # fmt: skip
    assert stopped == expected and not oracle.exhausted
    assert order.ends[looks.looks - 1] == oracle.n < n  # stopped early, at the replay's batch
    assert looks.metrics()[0].decision == oracle.decisions[0] == ("fail" if expected == "fail" else "non_inferior")
    assert looks.metrics()[0].decided_at == oracle.n
    status, reason = looks.decided()["hit_rate@5"]
    assert status == ("fail" if expected == "fail" else "pass") and reason.startswith(
        f"sequential test at look {looks.looks} (after {oracle.n} cases of the order): "
    )
    if expected == "decided":  # ruled out the MDE at N (beyond the margin of 0.05), and the reason says so
        mde = looks.ruled_out["hit_rate@5"]
        assert mde == rule_out[looks.looks - 1] > 0.05
        ruled = f"a drop of hit_rate@5 beyond {mde:.3f} (the fixed design's MDE at N = {n}) is ruled out"
        assert reason.endswith(ruled)
    assert looks.split.sequential == pytest.approx(0.1 * 0.05) and looks.split.final == pytest.approx(0.9 * 0.05)
    assert looks.split.early_pass == 0.05  # the pass looks' own level, outside α


def test_a_pr_that_turns_the_adaptive_mode_on_is_shown_as_a_policy_change():
    """`adaptive:` is base-side policy: the PR's own setting applies after merge and the comment says so."""
    from gate.compare.notes import policy_changes

    moved = policy_changes(GatePolicy(), GatePolicy(adaptive={"batch": 40}))
    assert [(c.key, c.base, c.head) for c in moved] == [
        ("adaptive.batch", "null", "40"),
        ("adaptive.enabled", "false", "true"),
    ]
    assert GatePolicy(adaptive=True).adaptive.enabled and not GatePolicy().adaptive.enabled


def test_a_certain_must_pass_failure_stops_the_run_and_is_named_as_the_reason():
    """No metric is decided after one batch of an unchanged PR, yet a certain must-pass flip stops the run: the
    reason says so (it was reported as a metric's failure)."""
    golden = cases(200)
    values = {c.id: 1.0 for c in golden if not c.out_of_domain}
    order = adaptive_order(golden, POLICY, seed=3)
    looks = Looks(POLICY, order)
    looks.update(side("base", golden, values), side("head", golden, values), order.ends[0])
    assert looks.stop() is None and looks.metrics()[0].decision == "continue"
    looks.update(side("base", golden, values), side("head", golden, values), order.ends[1], must_pass_failed=True)
    assert looks.stop() == "must_pass" and looks.decided() == {}


def test_at_an_early_fail_stop_undecided_metrics_keep_a_fixed_n_fail_and_are_otherwise_not_decided():
    """hit_rate@5 breaks on half the cases and stops the run; exact_match and mrr do not move, so the looks have
    not decided them yet: a fixed-N fail on the cases run is kept (named as such), a fixed-N pass is not a decision."""
    policy = GatePolicy(
        metrics=("hit_rate@5", "exact_match", "mrr", "refusal"),
        gated=("hit_rate@5", "exact_match", "mrr", "refusal"),
        margins=dict.fromkeys(("hit_rate@5", "exact_match", "mrr"), 0.05),
        seed=3,
    )
    golden = cases(200)
    rng = np.random.default_rng(11)
    base = {c.id: 1.0 for c in golden if not c.out_of_domain}
    head = {i: (0.0 if rng.random() < 0.5 else v) for i, v in base.items()}

    def two(label, hits):
        return scored(label, golden, {"hit_rate@5": hits, "exact_match": base, "mrr": base})

    order = adaptive_order(golden, policy, seed=3)
    looks = looks_until_stop(policy, order, two("base", base), two("head", head))
    assert looks.stop() == "fail" and looks.names == ("hit_rate@5", "exact_match", "mrr")  # refusal: fixed-N
    n = order.ends[looks.looks - 1]
    assert [m.decision for m in looks.metrics()] == ["fail", "continue", "continue"] and n < 200
    fixed = {
        "hit_rate@5": ("fail", "fell beyond the margin"),
        "exact_match": ("pass", "non-inferior: Δ = +0.000"),
        "mrr": ("fail", "fell beyond the margin of 0.050, significantly (worse)"),
        "refusal": ("inconclusive", "fell beyond the margin, but not significant"),
    }
    statuses = looks.at_stop(fixed, n)
    stop = f"the run stopped at look {looks.looks} (after {n} cases of the order)"
    assert statuses["hit_rate@5"][0] == "fail"
    assert statuses["hit_rate@5"][1].startswith(f"sequential test at look {looks.looks} (after {n} cases of the order)")
    assert statuses["exact_match"] == ("inconclusive", f"not decided (stopped early): {stop} before the sequential "
                                       "test decided it")  # fmt: skip
    assert statuses["mrr"] == (
        "fail",
        f"fixed-N analysis of the cases run ({stop}, undecided by the looks): fell beyond the margin of 0.050, "
        "significantly (worse)",
    )
    assert "refusal" not in statuses  # out-of-domain cases run in full: the fixed-N analysis decides it


def test_a_ratio_metric_rules_out_its_mde_at_n_on_the_looks_clipped_log_ratio_scale():
    """latency_ms gated with a 2 % margin, head and base equally fast up to a symmetric ±20 % jitter: the look's
    rule_out is the MDE at N (a log-ratio, from the power model's sign-flip variance) over B = log 4, and the
    reason prints it back as a relative slow-down."""
    policy = GatePolicy(metrics=("latency_ms",), gated=("latency_ms",), margins={"latency_ms": 0.02}, seed=3)
    golden = cases(400)
    rng = np.random.default_rng(5)
    ids = [c.id for c in golden if not c.out_of_domain]
    base = dict(zip(ids, rng.uniform(100, 1000, len(ids)), strict=True))
    head = {i: v * math.exp(rng.choice([-0.2, 0.2])) for i, v in base.items()}

    order = adaptive_order(golden, policy, seed=3)
    looks = looks_until_stop(
        policy, order, *(scored(s, golden, {"latency_ms": v}) for s, v in (("base", base), ("head", head)))
    )
    first = order.sequence[: order.ends[0]]
    log_ratios = np.array([[-math.log(head[i] / base[i])] for i in first])  # oriented: slower is worse
    # the sign-flip model's variance n·SE² is the sample variance of the log-ratios (ddof = 1), ±0.2 each
    var0 = float(np.var(log_ratios, ddof=1))
    assert var0 == pytest.approx(0.04, rel=0.05)
    from gate.stats.power import detectable_drop

    expected = detectable_drop(400, level=0.045, margin=math.log1p(0.02), var0=var0, power=0.8, largest=math.log(10))
    assert looks.rule_outs["latency_ms"][0] == pytest.approx(expected / math.log(4.0), rel=1e-9)
    assert expected > math.log1p(0.02) + 0.005  # the MDE, not the margin, is what the look rules out
    assert looks.metrics()[0].decision == "non_inferior"
    mde = looks.ruled_out["latency_ms"]
    status, reason = looks.decided()["latency_ms"]
    shown = numbers.percent(math.expm1(mde))
    assert status == "pass" and reason.endswith(
        f"a rise of latency_ms beyond {shown} (the fixed design's MDE at N = 400) is ruled out"
    )


def test_a_fail_of_a_lower_is_better_metric_reads_as_a_rise():
    """latency_ms three times slower on every case fails at the first look; its reason says "a rise" (a drop of
    latency would be better) and prints the look's estimate: the oriented log-ratio −log 3 over B = log 4."""
    policy = GatePolicy(metrics=("latency_ms",), gated=("latency_ms",), margins={"latency_ms": 0.02}, seed=3)
    golden = cases(400)
    rng = np.random.default_rng(5)
    ids = [c.id for c in golden if not c.out_of_domain]
    base = dict(zip(ids, rng.uniform(100, 1000, len(ids)), strict=True))
    head = {i: 3.0 * v for i, v in base.items()}
    order = adaptive_order(golden, policy, seed=3)
    looks = looks_until_stop(
        policy, order, *(scored(s, golden, {"latency_ms": v}) for s, v in (("base", base), ("head", head)))
    )
    assert looks.stop() == "fail" and looks.looks == 1
    expected = -math.log(3.0) / math.log(4.0)
    assert looks.metrics()[0].estimate == pytest.approx(expected, rel=1e-9)
    status, reason = looks.decided()["latency_ms"]
    assert (status, reason) == (
        "fail",
        f"sequential test at look 1 (after {order.ends[0]} cases of the order): a rise beyond the margin "
        f"(oriented mean difference {expected:+.3f}: negative is worse)",
    )
