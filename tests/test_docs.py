"""README.md is for users, CONTRIBUTING.md for developers: the two set-up commands stay in README (CONTRIBUTING
repeats them word for word), README links CONTRIBUTING, and CI runs README's test command."""

from __future__ import annotations

import re

from helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")


def commands(text: str) -> list[str]:
    """The commands of the first bash block under '## Developing rag-gate: two commands' (or the whole text)."""
    section = text.split("## Developing rag-gate: two commands", 1)[-1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_keeps_the_two_commands_and_links_contributing():
    example, tests = commands(README)
    assert example.endswith("examples/squad/run.sh out/example") and "pip install -e ." in example
    assert tests == '.venv/bin/python -m pip install ".[test]" && .venv/bin/python -m pytest'
    assert "](CONTRIBUTING.md)" in README
    assert commands(CONTRIBUTING) == [example, tests]


def test_ci_runs_the_readmes_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    _, tests = commands(README)
    # .ci/run activates ./.venv first, so README's ".venv/bin/python" is its "python"
    assert ". .venv/bin/activate" in ci
    assert re.sub(r"pip install ", "pip install -q ", tests.replace(".venv/bin/python", "python")) in ci


def test_the_developer_sections_left_readme():
    for heading in ("## Development", "## Benchmarks", "## Layout"):
        assert f"\n{heading}\n" not in README
    for heading in ("## Set up", "## Layout", "## Tests", "## CI", "## Benchmarks", "## Rules for a change"):
        assert f"\n{heading}\n" in CONTRIBUTING, heading
