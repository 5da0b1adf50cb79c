"""Calibration of adaptive (sequential) evaluation against the fixed-N gate, by simulation (issue 33, phase 1).

The simulation lives in ``tests/adaptive_sim.py`` (its model and targets are described there) and
``tests/adaptive_repeats_sim.py`` (part 6), shared with the reduced CI version in
``tests/stats/test_adaptive_calibration.py``; this script prints the four targets' figures (parts 1-4), a gated
metric with margin 0 (part 5) and the A/A false-fail with adaptive repeats (part 6).

usage: python benchmarks/adaptive_calibration.py [--quick] [--share S] [--only 123456]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from adaptive_sim import main  # noqa: E402

if __name__ == "__main__":
    main()
