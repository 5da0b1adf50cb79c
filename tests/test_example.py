"""README command 1: the bundled example runs end to end and shows the planted regression."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLE


def test_bundled_example_end_to_end(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(EXAMPLE / "run.sh"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    comment = done.stdout
    assert comment.startswith("<!-- rag-gate -->\n## ❌ rag-gate: **fail**")
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert (tmp_path / "out" / "report" / "comment.md").read_text() + "\n" == comment
    metrics = {m["name"]: m for m in report["metrics"]}
    # The example pipeline is deterministic: these are its exact figures (examples/squad/README.md).
    assert (metrics["hit_rate@5"]["base_mean"], metrics["hit_rate@5"]["head_mean"]) == (0.87, 0.68)
    assert metrics["hit_rate@5"]["status"] == "fail"
    assert report["n_cases"] == 148 and report["n_out_of_domain"] == 48
    assert len(report["regressed_cases"]) >= 19
    assert report["new_ood_failures"] == 6
    assert "### Regressed cases" in comment and "### Out-of-domain failures" in comment
    first_ood = next(f for f in report["ood_failures"] if f["new"])
    assert first_ood["id"] in comment
    for side in ("base", "head"):
        manifest = json.loads((tmp_path / "out" / side / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["counts"]["prediction_errors"] == 0
