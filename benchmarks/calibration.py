"""Calibration of the gate by simulation: A/A false-fail rate, power, per-case FDR and the printed MDE.

The simulation lives in ``tests/calibration_sim.py`` (its model and rows are described there), shared with the
reduced CI version in ``tests/stats/test_calibration.py``; this script runs the full grid. About 15 minutes on a
shared 2-core machine; ``--quick``: about 3. Then the adaptive evaluation's rows (7): the simulation of
``tests/adaptive_sim.py`` (``benchmarks/adaptive_calibration.py`` runs it alone, with its own options).

usage: python benchmarks/calibration.py [--quick] [--must-pass] [--skip-adaptive | --adaptive-only]
       [--adaptive-parts 123456]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from calibration_sim import main  # noqa: E402

if __name__ == "__main__":
    main()
