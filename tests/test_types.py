"""Types: mypy finds no error in the core (statistics, metrics, contracts) and no more than the baseline elsewhere.

The command CI runs is `python -m mypy` from the repository root (pyproject's [tool.mypy]: files, strictness).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / "tests" / "mypy-baseline.txt"
CORE = ("src/gate/stats/", "src/gate/metrics/", "src/gate/comparison.py", "src/gate/models.py", "src/gate/runs.py",
        "src/gate/manifest.py", "src/gate/results.py", "src/gate/trends.py")  # fmt: skip
"""The files that must stay clean (pyproject's mypy override also makes them type every function)."""
ERROR = re.compile(r"^(?P<path>[^:\n]+):\d+: error: ", re.MULTILINE)


@pytest.fixture(scope="module")
def errors() -> list[str]:
    """The path of each error ``python -m mypy`` reports on the package."""
    done = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: mypy itself failed (config, crash)
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith(("Success", "Found")), done.stdout + done.stderr
    return [m["path"].replace("\\", "/") for m in ERROR.finditer(done.stdout)]


def test_the_core_has_no_type_error(errors):
    core = [path for path in errors if path.startswith(CORE)]
    assert core == [], f"mypy errors in the core: {core}"


def test_the_rest_has_no_more_errors_than_the_baseline(errors):
    baseline = int(next(line for line in BASELINE.read_text().splitlines() if line and not line.startswith("#")))
    assert len(errors) <= baseline, (
        f"mypy reports {len(errors)} errors, the baseline allows {baseline}: type the new code "
        f"(by file: {sorted(set(errors))})"
    )
