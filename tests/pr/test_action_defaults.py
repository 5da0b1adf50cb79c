"""The PR defaults in the package agree with action.yml's input defaults (parsed with PyYAML, as the runner reads it).

A user who reads action.yml, one who runs ``rag-gate pr`` locally and one whose workflow leaves an input out must
get the same config path, output directory and policy; the one intended difference (the action turns the base
cache on) is named here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from helpers import REPO

from gate.cli import main
from gate.pr.history_store import DEFAULT_BRANCH
from gate.pr.report import Reporter
from gate.pr.run import PrOptions
from gate.scaffold import CONFIG

INPUTS = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))["inputs"]
DEFAULT = {name: spec["default"] for name, spec in INPUTS.items()}
ACTION_ONLY = {"cache-dir": ".rag-gate-cache"}
"""Defaults the action sets on purpose and the command does not: in Actions the base cache is on (persisted with
actions/cache); locally ``rag-gate pr`` uses no cache unless asked."""
SECRETS = {"github-token", "cache-signing-key"}
"""Inputs that reach the container in the environment, never as a flag (tests/test_action_lint.py)."""
PR = main.commands["pr"]


def parsed(args: list[str]) -> dict:
    """The ``rag-gate pr`` parameters click makes of ``args`` (after the callbacks that read on/off and counts)."""
    return PR.make_context("pr", list(args)).params


def test_the_actions_defaults_are_the_commands_defaults():
    passed = [part for name, value in DEFAULT.items() if name not in SECRETS for part in (f"--{name}", value)]
    assert len(INPUTS) >= 14 and len(passed) == 2 * (len(INPUTS) - len(SECRETS))  # every input but the secrets
    from_action, bare = parsed(passed), parsed([])
    differ = {key for key in bare if from_action[key] != bare[key]}
    assert differ == {"cache_dir"}
    assert from_action["cache_dir"] == ACTION_ONLY["cache-dir"] and bare["cache_dir"] == ""


def test_each_default_has_its_value_in_the_package():
    options = PrOptions()
    assert DEFAULT["config"] == "rag-gate.yml" == CONFIG  # `rag-gate init` writes the file the action reads
    assert Path(DEFAULT["config"]) == options.config and DEFAULT["config"] == declared("config")
    assert DEFAULT["config"] == _field_default(Reporter, "config")  # the sticky comment's marker
    assert DEFAULT["out-dir"] == "rag-gate-out" == declared("out_dir")
    assert Path(DEFAULT["out-dir"]) == options.out_dir
    assert DEFAULT["fail-on"] == "fail" == options.fail_on == declared("fail_on")
    assert DEFAULT["comment"] == "on" and options.comment is True
    assert DEFAULT["allow-privileged-event"] == "false" and options.allow_privileged_event is False
    # empty inputs mean "the package's default": None in PrOptions
    for name in ("repeats", "working-directory", "setup-command", "history", "history-branch", "junit"):
        assert DEFAULT[name] == "", name
        assert getattr(options, name.replace("-", "_")) is None, name
    assert options.cache_dir is None and DEFAULT["cache-dir"] == ACTION_ONLY["cache-dir"]
    assert f"empty means {DEFAULT_BRANCH}." in INPUTS["history-branch"]["description"]
    assert DEFAULT["github-token"] == "${{ github.token }}" and declared("github_token") in (None, "")
    assert DEFAULT["cache-signing-key"] == ""  # no key: the cache is not used (gate.pr.trust.CachePolicy)


def declared(name: str):
    """The default of ``rag-gate pr``'s parameter ``name`` as declared (before any callback)."""
    return next(p.default for p in PR.params if p.name == name)


def _field_default(cls: type, name: str):
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)
