"""The two sides of a PR run: the base's config, golden set and results, and the sandbox each side's pipeline runs in.

The base is evaluated in a ``git worktree`` of the merge base, or its results come from the verified cache.

Contracts (DESIGN §8): the base's config and golden set are files of the base commit, read from git objects; the
base's golden cases are evaluated on both sides; the base results the comparison uses are the ones computed, held
in memory while the head's code runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from gate import __version__
from gate.config import Config, load_config
from gate.errors import InputError
from gate.files import make_dirs, remove_tree
from gate.golden import GoldenDiff, contract, diff_golden, file_sha256, load_golden
from gate.jsonl import dumps, write_text_atomic
from gate.outputs.annotations import annotation
from gate.pr import cache, envs, git
from gate.pr.run import NotGatedYet, PrRun
from gate.produce import run_side
from gate.sandbox import Sandbox

log = logging.getLogger("rag-gate")


def base_config(repo: Path, base_sha: str, worktree: Path, config_rel: Path, repeats: int | None) -> Config:
    """The base side's config from its worktree (with the base's own golden set), checked against git objects.

    The config and the files it names inside the repository (golden set, precomputed predictions) must be files
    of the base commit, links followed only inside it (:func:`gate.pr.git.file_at`): a link committed in the
    base that leads out of it (e.g. into the PR's checkout) is refused (exit 2), so the policy and the golden set
    are the base commit's own.

    Raises:
        NotGatedYet: the base commit has no config (exit 0).
        InputError: the config names a file that is not the base commit's (exit 2).
    """
    if git.file_at(repo, base_sha, config_rel.as_posix()) is None:
        raise NotGatedYet(
            f"{config_rel} is not in the base commit {base_sha[:12]}: this pull request adds rag-gate, so there is "
            "no base to compare with yet (the base's config is the policy); nothing was evaluated and the check "
            "passes. The gate compares the pull requests that come after this one is merged."
        )
    config = load_config(worktree / config_rel, repeats=repeats)
    raw = yaml.safe_load((worktree / config_rel).read_text(encoding="utf-8")) or {}
    pipeline = raw.get("pipeline")
    if not isinstance(pipeline, dict):
        pipeline = {}
    root = worktree.resolve()
    for field, named in (("golden", raw.get("golden")), ("pipeline.predictions", pipeline.get("predictions"))):
        if not isinstance(named, str):
            continue
        lexical = os.path.normpath(config.path.parent / named)
        relative = os.path.relpath(lexical, root)
        if relative.startswith(".."):
            continue  # named outside the repository by the base config itself
        if git.file_at(repo, base_sha, relative) is None:
            raise InputError(f"{config_rel}: {field}: {named} is not a file of the base commit")
    return config


def golden_contract(base: Config, head: Config, out: Path) -> tuple[Path, GoldenDiff, dict[str, int]]:
    """The golden set both sides are evaluated on (written to ``out/golden.jsonl``) and how the PR changed it.

    Also returns the line of each case in the PR's own golden file (for reviewers and annotations). By default
    (the base config's ``golden_changes: base``) it is the contract: every base case with its base definition,
    then the cases the PR adds (DESIGN §8); with ``golden_changes: head``, the PR's own set.
    """
    base_cases, head_cases = load_golden(base.golden), load_golden(head.golden)
    diff = diff_golden(base_cases, head_cases)
    if base.policy.golden_changes == "head":
        text = head.golden.read_text(encoding="utf-8")
    else:  # the base's file as it is (an unchanged golden set keeps its sha256, and its cached base results)
        text = base.golden.read_text(encoding="utf-8")
        text += ("" if not text or text.endswith("\n") else "\n") + "".join(
            dumps(case.to_dict()) + "\n" for case in contract(base_cases, diff)[len(base_cases) :]
        )
    path = out / "golden.jsonl"
    make_dirs(out)
    write_text_atomic(path, text)
    return path, diff, {case.id: case.line for case in head_cases}


def base_results(
    run: PrRun,
    config: Config,
    base_sha: str,
    base_label: str,
    sandbox: Sandbox,
    setup: envs.Setup | None = None,
) -> tuple[cache.Snapshot, bool]:
    """The base's results in ``out/base``, from the verified cache or evaluated now; returns (snapshot, cached).

    With a setup command, the base is evaluated in its own environment (:func:`gate.pr.envs.side_sandbox`), whose
    key is part of the cache key. The snapshot (every file, in memory) is what the comparison will use: see
    :func:`intact`.
    """
    hit, sandbox, key = cached_base(run, config, base_sha, sandbox, setup)
    if hit is not None:
        return hit, True
    run_dir = run.out / "base"
    remove_tree(run_dir)  # never resume a run of another commit; a link there is removed, not followed
    run_side(config, run_dir, progress=run.options.progress, git_sha=base_sha, git_ref=base_label, sandbox=sandbox)
    snapshot = cache.Snapshot.of(run_dir)
    caching = run.caching
    if caching.writable:
        assert caching.directory is not None and caching.signing_key is not None
        cache.store(caching.directory, key, snapshot, caching.signing_key)
    return snapshot, False


def cached_base(
    run: PrRun, config: Config, base_sha: str, sandbox: Sandbox, setup: envs.Setup | None = None
) -> tuple[cache.Snapshot | None, Sandbox, cache.CacheKey]:
    """The base's full results from the verified cache, restored into ``out/base``, or None and the sandbox to run it.

    Returns:
        (the cached snapshot or None, the base's sandbox: its own environment with a setup command, the cache key).
    """
    caching = run.caching
    env_id = envs.env_key(setup.repo, base_sha, setup.command, sandbox.python) if setup else ""
    key = cache.CacheKey(
        base_sha=base_sha,
        golden_sha256=file_sha256(config.golden),
        config_sha256=config.sha256,
        judge_id=cache.judge_id(config.policy.judge),
        repeats=config.repeats,
        gate_version=__version__,
        environment=env_id,
    )
    if caching.readable:
        assert caching.directory is not None and caching.signing_key is not None
        hit = cache.lookup(caching.directory, key, caching.signing_key)
        if hit is not None:
            hit.restore(run.out / "base")
            return hit, sandbox, key
    if setup is not None:
        sandbox = envs.side_sandbox(setup, sandbox, config.pipeline.env_passthrough, caching, env_id)
    return None, sandbox, key


def intact(snapshot: cache.Snapshot, run: PrRun) -> Path:
    """The base run directory (``out/base``) as it was computed.

    When its files differ from the snapshot held in memory (the head's code rewrote them), warn and restore them.
    """
    run_dir = run.out / "base"
    if not snapshot.matches(run_dir):
        message = (
            f"{run_dir}: the base results changed after they were computed (the PR's code wrote to them?); "
            "the copy rag-gate kept in memory is used"
        )
        log.warning(message)
        if run.context.in_actions:
            run.emit(annotation("warning", message, title="rag-gate: base results were modified"))
        snapshot.restore(run_dir)
    return run_dir


def make_sandbox(environ: Mapping[str, str], configs: Iterable[Config], secrets: Iterable[str | None]) -> Sandbox:
    """The pipeline's sandbox; the judges' key variables and ``secrets`` (tokens) are redacted too."""
    names = {str(c.policy.judge[k]) for c in configs for k in ("api_key_env",) if c.policy.judge.get(k)}
    return Sandbox.from_environ(environ, secrets=secrets, secret_names=names)
