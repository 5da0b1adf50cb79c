"""The package's shape: every module imports on its own, imports point one way, no cycles (import-linter)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
EACH_MODULE_ALONE = """
import importlib, pkgutil, sys
import gate
names = ["gate"] + [m.name for m in pkgutil.walk_packages(gate.__path__, "gate.")]
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == "gate" or m.startswith("gate.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print("\\n".join(failed))
"""


def test_every_module_imports_on_its_own():
    """``python -c "import gate.<module>"`` works for every module (each imported with no other gate module loaded)."""
    done = subprocess.run([sys.executable, "-c", EACH_MODULE_ALONE], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    count, *failures = done.stdout.strip().split("\n")
    assert int(count) > 40 and [f for f in failures if f] == []


def test_import_contracts_are_kept():
    """pyproject's [tool.importlinter] contracts: the engine never imports gate.pr, gate.cli or click (even inside
    functions), the layers import downwards only, no package has an import cycle among its modules, and the
    contract modules (comparison, caseview, models, runs, manifest, results, trends) import no engine module and no
    scipy, and the renderers (gate.outputs) import no run-directory reader, no policy and no comparing."""
    done = subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 kept, 0 broken" in done.stdout


CONTRACTS = (
    "gate.comparison",
    "gate.caseview",
    "gate.models",
    "gate.runs",
    "gate.manifest",
    "gate.results",
    "gate.trends",
)


def test_the_contracts_load_without_the_engine():
    """Reading a report or a run record loads neither scipy nor the statistics engine nor the judges."""
    code = (
        "import importlib, sys\n"
        f"for name in {CONTRACTS!r}: importlib.import_module(name)\n"
        "engine = ('scipy', 'gate.stats', 'gate.judges', 'gate.config')\n"
        "print(sorted(m for m in sys.modules if m.startswith(engine)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


MAX_MODULE_LINES = 700
"""A module longer than this does several jobs: split it along its seams (a package of modules with one job each)."""


def test_no_module_is_longer_than_the_limit():
    lengths = {
        path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in (REPO / "src" / "gate").rglob("*.py")
    }
    assert len(lengths) > 50  # the package is there
    assert {path: n for path, n in lengths.items() if n > MAX_MODULE_LINES} == {}
