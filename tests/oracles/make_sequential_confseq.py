"""Oracle values for tests/stats/test_sequential.py, computed with ``confseq`` (Howard & Waudby-Smith's package).

confseq 0.0.11 ships only a source distribution (a C++ extension built with cmake and pybind11), so it is not in
the ``test-base`` extra; this script made ``sequential_confseq.json`` with it:

    pip install confseq==0.0.11 && python tests/oracles/make_sequential_confseq.py

Inputs: fixed per-case differences d in [-1, 1] (binary, graded and tied values), rescaled x = (d + 1)/2. Values:
the predictable plug-in bets (``lambda_predmix_eb``), the one-sided betting capital processes (``betting_mart``
with theta 1 and 0, truncation 1/2 · 1/m), and the running one-sided bounds from the grid method
(``cs_from_martingale`` with 10,000 breaks and the running intersection), mapped back to the difference scale.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from confseq.betting import betting_mart, cs_from_martingale
from confseq.betting_strategies import lambda_predmix_eb
from confseq.misc import get_running_intersection

OUT = Path(__file__).with_name("sequential_confseq.json")
ALPHA = 0.05
BREAKS = 10_000


def _inputs() -> dict[str, list[float]]:
    rng = np.random.default_rng(20261202)
    binary = (rng.random(60) < 0.7).astype(float) - (rng.random(60) < 0.75).astype(float)
    graded = np.clip(rng.normal(-0.05, 0.2, 60), -1, 1).round(4)
    tied = np.array([0, 0, -0.5, 0, 0.25, 0, 0, -0.25, 0, 1, 0, 0, -1, 0, 0.5, 0, 0, 0, -0.25, 0], dtype=float)
    return {"binary": binary.tolist(), "graded": graded.tolist(), "tied": tied.tolist()}


def main() -> None:
    """Write the oracle JSON."""
    out: dict[str, object] = {"alpha": ALPHA, "breaks": BREAKS, "cases": {}}
    for name, d in _inputs().items():
        x = (np.asarray(d) + 1) / 2
        case: dict[str, object] = {"d": d}
        for target in (None, 100):
            key = "horizon" if target is None else f"n{target}"
            lam = lambda xs, m, t=target: lambda_predmix_eb(xs, alpha=ALPHA, fixed_n=t)  # noqa: E731
            case[f"bets_{key}"] = lam(x, 0.5).tolist()
            for m in (0.5, 0.485, 0.3):
                up = betting_mart(x, m, alpha=ALPHA, lambdas_fn_positive=lam, theta=1, trunc_scale=0.5)
                down = betting_mart(x, m, alpha=ALPHA, lambdas_fn_negative=lam, theta=0, trunc_scale=0.5)
                case[f"capital_above_{key}_{m}"] = up.tolist()
                case[f"capital_below_{key}_{m}"] = down.tolist()
            lower, _ = cs_from_martingale(
                x, lambda xs, m, f=lam: betting_mart(xs, m, ALPHA, f, theta=1, trunc_scale=0.5), BREAKS, ALPHA
            )
            _, upper = cs_from_martingale(
                x, lambda xs, m, f=lam: betting_mart(xs, m, ALPHA, f, f, theta=0, trunc_scale=0.5), BREAKS, ALPHA
            )
            lower, upper = get_running_intersection(lower, upper)
            case[f"lower_{key}"] = (2 * lower - 1).tolist()
            case[f"upper_{key}"] = (2 * upper - 1).tolist()
        out["cases"][name] = case  # type: ignore[index]
    OUT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
