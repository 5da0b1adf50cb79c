"""Which cases of an adaptive evaluation skip repeats (gate.compare.repeats), and how often the audit misses.

The audit's chance of catching a stochastic head in one batch is computed exactly (scipy's binomial and
hypergeometric laws) and compared with the real functions run on in-memory sides.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from gate.compare.repeats import AUDIT_LEAST, audit_sample, candidates, varying
from gate.models import Chunk, GoldenCase, Prediction, Score
from gate.runs import Side

R = 3


def side(label, golden, rows, planned=None, scores=()):
    """A side over ``rows`` ((case id, repeat) → doc id answered); ``planned`` marks skipped repeats."""
    table = {
        (c, r): Prediction(id=c, repeat=r, answer=f"about {doc}", retrieved=(Chunk(doc, score=1.0),))
        for (c, r), doc in rows.items()
    }
    out = Side(label, golden, table, R, list(scores), {"golden_sha256": "0" * 64})
    if planned:
        out.table.skip(planned)
    return out


def golden(n):
    return [GoldenCase(id=f"q{i}", question=f"question {i}") for i in range(n)]


def test_audit_sample_is_a_seeded_draw_made_before_the_outcomes():
    batch = [f"q{i}" for i in range(40)]
    permuted = [batch[i] for i in np.random.default_rng([5, 2]).permutation(40)]
    # every case a candidate: the first max(3, ceil(0.1 · 40)) = 4 of numpy's permutation
    assert audit_sample(batch, batch, 5, 2) == [c for c in batch if c in set(permuted[:4])]
    chosen = batch[::2]  # 20 candidates: 3 of them, the first candidates in the same permutation
    assert audit_sample(batch, chosen, 5, 2) == [c for c in batch if c in set([c for c in permuted if c in chosen][:3])]
    assert audit_sample(batch, chosen, 5, 2) == audit_sample(batch, chosen, 5, 2)
    assert audit_sample(batch, chosen, 5, 3) != audit_sample(batch, chosen, 5, 2)
    assert audit_sample(batch, batch[:2], 5, 2) == batch[:2]  # fewer candidates than the audit's least: all
    assert AUDIT_LEAST == 3


def test_candidates_and_varying_read_answers_retrieval_and_scores_and_ignore_skipped_repeats():
    cases = golden(4)
    base = side("base", cases, {(f"q{i}", r): f"d{i}" for i in range(4) for r in range(R)})
    head_rows = {(f"q{i}", 0): f"d{i}" for i in range(4)} | {("q1", 0): "d9", ("q2", 1): "d2", ("q2", 2): "d7"}
    scores = [Score("q0", 0, "faithfulness", 1.0), Score("q3", 0, "faithfulness", 0.5)]
    head = side("head", cases, head_rows, planned={"q0": 1, "q1": 1, "q3": 1}, scores=scores)
    ids = [c.id for c in cases]
    assert head.table.n_errors == 0  # skipped repeats are not missing rows
    assert head.table.skipped_mask(ids).sum() == 6
    # q1 answers another document; q0 and q3 have a score the base has not (NaN there)
    assert candidates(base, head, ids, ()) == ["q0", "q2", "q3"]
    assert candidates(base, head, ids, ("faithfulness",)) == ["q2"]
    assert varying(head, ids, ()) == ["q2"] and varying(base, ids, ()) == []


def _miss_probability(n, k, q, repeats=R):
    """P(the audit sees no variation in a batch of n cases, k of them wrong w.p. q per call on the head).

    An affected case wrong at repeat 0 (w of the k, binomial) differs from the base and runs every repeat: it shows
    no variation only when every later repeat is wrong too (q^(R−1)). The m = n − w candidates include k − w
    affected ones; the audit runs max(3, ceil(m / 10)) candidates in full (hypergeometric count a of affected
    ones), each showing no variation only when every later repeat is right ((1 − q)^(R−1)).
    """
    total = 0.0
    for w in range(k + 1):
        m = n - w
        size = min(m, max(AUDIT_LEAST, math.ceil(0.1 * m)))
        audited = (
            sum(stats.hypergeom.pmf(a, m, k - w, size) * ((1 - q) ** (repeats - 1)) ** a for a in range(size + 1))
            if size
            else 1.0
        )
        total += stats.binom.pmf(w, k, q) * (q ** (repeats - 1)) ** w * audited
    return total


def _missed_once(n, k, q, rng):
    """One batch through the real functions: whether the audit missed a head wrong w.p. q on k of n cases."""
    cases = golden(n)
    ids = [c.id for c in cases]
    base = side("base", cases, {(c, r): c for c in ids for r in range(R)})
    draws = {(c, r): ids[(i + 1) % n] if i < k and rng.random() < q else c for i, c in enumerate(ids) for r in range(R)}
    first = side("head", cases, {(c, 0): draws[(c, 0)] for c in ids}, planned=dict.fromkeys(ids, 1))
    chosen = candidates(base, first, ids, ())
    skip = set(chosen) - set(audit_sample(ids, chosen, rng.randrange(2**32), 0))
    head = side("head", cases, {key: doc for key, doc in draws.items() if key[0] not in skip or key[1] == 0},
                planned=dict.fromkeys(skip, 1))  # fmt: skip
    return not varying(head, ids, ())


@pytest.mark.parametrize(("k", "q"), [(3, 0.3), (1, 0.5)])
def test_the_audits_miss_rate_matches_its_exact_probability(k, q):
    trials, rng = 400, random.Random(11)
    missed = sum(_missed_once(20, k, q, rng) for _ in range(trials))
    p = _miss_probability(20, k, q)
    low, high = stats.binomtest(missed, trials).proportion_ci(0.999)
    assert low <= p <= high, (missed / trials, p)


def test_a_head_worse_beyond_a_margin_of_005_is_caught_before_the_looks_can_pass_it():
    """The issue's trap: a head wrong 30 % of the time on the cases it touches (the base right). Touching 4 of each
    batch of 20 (a drop of 0.06) escapes one batch's audit w.p. about 0.20, the 6 batches a no-change PR of 200
    cases needs before its looks pass (tests/pr/test_pr_adaptive_repeats.py) w.p. < 1e-4; touching every case
    (a drop of 0.3), one batch w.p. about 2e-4."""
    assert _miss_probability(20, 4, 0.3) == pytest.approx(0.2029, abs=1e-4)
    assert _miss_probability(20, 4, 0.3) ** 6 < 1e-4
    assert _miss_probability(20, 20, 0.3) == pytest.approx(2.0e-4, rel=0.01)
    # one touched case per batch, wrong half the time: a drop of 0.025 that one batch misses w.p. 0.57
    assert _miss_probability(20, 1, 0.5) == pytest.approx(0.5 * 0.25 + 0.5 * (1 - 3 / 20 * 0.75), abs=1e-12)
