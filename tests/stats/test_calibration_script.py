"""``benchmarks/calibration.py`` (tests/calibration_sim.py's ``main``) prints the adaptive evaluation's rows too."""

from __future__ import annotations

import calibration_sim as calibration


def test_the_calibration_script_prints_the_adaptive_rows_of_adaptive_sim(capsys):
    """``benchmarks/calibration.py --adaptive-only`` runs tests/adaptive_sim.py's simulation (no part here: its
    header, with the α split of the design, 0.1 α for the early fail looks and 0.9 α at the end, and the early
    passes' own level β_seq = 0.05)."""
    calibration.main(["--adaptive-only", "--quick", "--adaptive-parts", ""])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("(7) adaptive evaluation")
    assert out[1] == (
        f"α = 0.05, early fail looks at α_seq = {0.1 * 0.05:.4f}, early pass looks at β_seq = 0.0500, end at "
        f"α_final = {0.9 * 0.05:.4f}, looks every 10% of N; 150 PRs per row, B = 500"
    )
    assert not any(line.startswith("(1) metric-level") for line in out)
