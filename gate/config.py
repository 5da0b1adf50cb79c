"""Load and validate ``rag-gate.yml`` (one side's pipeline and the gate's evaluation settings)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from gate.errors import InputError, located
from gate.jsonl import schema_validator
from gate.judges import JUDGES
from gate.metrics import DEFAULT_METRICS, resolve
from gate.metrics.generation import DEFAULT_REFUSAL_PHRASES
from gate.sandbox import check_passthrough

PRIMARY_METRICS = ("hit_rate@k", "mrr", "faithfulness", "answer_f1", "refusal", "false_refusal")
"""Metric families gated by default: one per question a user asks (found? ranked? grounded? correct? refuses?
over-refuses?). Holm–Bonferroni splits α across gated metrics, so gating near-duplicates (recall@k next to
hit rate@k, nDCG next to MRR) only costs power; they are still reported."""


def default_gated(metrics: tuple[str, ...]) -> tuple[str, ...]:
    """The gated subset of ``metrics`` when the config has no ``gate:`` key.

    The primary families (the first ``hit_rate@k`` only), or, when none is configured, every metric but latency
    and cost.
    """
    primary, seen = [], set()
    for name in metrics:
        family = resolve(name).spec.name
        if family in PRIMARY_METRICS and family not in seen:
            primary.append(name)
            seen.add(family)
    return tuple(primary) or tuple(m for m in metrics if resolve(m).spec.kind != "ratio")


TrendBlock = Literal["never", "warning", "critical"]


@dataclass(frozen=True)
class TrendPolicy:
    """The trend alarm's thresholds (``trend:`` in the config; DESIGN §9): base-side policy like the margins."""

    window: int = 4
    """How many previous comparable main-branch entries make the baseline (their mean)."""
    warning: float = 0.05
    """Relative drop from the baseline (0.05 = 5 % worse) at which a metric is in WARNING."""
    critical: float = 0.10
    """Relative drop from the baseline at which a metric is CRITICAL (≥ ``warning``)."""
    block: TrendBlock = "never"
    """Which trend level fails the check: ``never`` (default: the alarm warns only), ``critical`` or ``warning``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"window": self.window, "warning": self.warning, "critical": self.critical, "block": self.block}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrendPolicy:
        """Inverse of :meth:`to_dict` (missing keys take their defaults; ``block: true`` means ``critical``)."""
        block = data.get("block", "never")
        if isinstance(block, bool):
            block = "critical" if block else "never"
        return cls(
            window=int(data.get("window", 4)),
            warning=float(data.get("warning", 0.05)),
            critical=float(data.get("critical", 0.10)),
            block=block,
        )


@dataclass(frozen=True)
class Evaluation:
    """How predictions are scored and compared: the part of the config that defines the gate's policy."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    """Metric names, e.g. ``hit_rate@5`` (see ``gate.metrics.METRICS``)."""
    gated: tuple[str, ...] = default_gated(DEFAULT_METRICS)
    """The metrics whose regression fails the gate; the others are reported only."""
    margins: dict[str, float] = field(default_factory=dict)
    """Per-metric margins overriding the registry defaults (absolute; relative for latency and cost)."""
    judge: dict[str, Any] = field(default_factory=lambda: {"name": "lexical"})
    """Judge spec, e.g. ``{"name": "lexical"}``."""
    refusal_phrases: tuple[str, ...] = DEFAULT_REFUSAL_PHRASES
    """Phrases that mark an answer as a refusal (case-insensitive)."""
    refusal_use_field: bool = True
    """Trust an explicit ``refused`` field in predictions when present."""
    seed: int = 0
    alpha: float = 0.05
    strict: bool = False
    error_budget: float = 0.05
    cluster_by: str | None = None
    judge_concurrency: int = 4
    fail_on_new_ood: bool = True
    """Fail the gate on new out-of-domain failures (refused on base in every repeat, answered on head in every
    repeat) when the refusal metric shows a significant drop, whatever its margin (DESIGN §4)."""
    trend: TrendPolicy = TrendPolicy()
    """The trend alarm against the main-branch history (``trend:``)."""

    def margin(self, name: str) -> float:
        """The margin for a metric: configured, else the registry default."""
        return self.margins.get(name, resolve(name).spec.default_margin)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, stored in manifest.json so that ``compare`` can reuse it."""
        return {
            "metrics": list(self.metrics),
            "gated": list(self.gated),
            "margins": dict(self.margins),
            "judge": dict(self.judge),
            "refusal_phrases": list(self.refusal_phrases),
            "refusal_use_field": self.refusal_use_field,
            "seed": self.seed,
            "alpha": self.alpha,
            "strict": self.strict,
            "error_budget": self.error_budget,
            "cluster_by": self.cluster_by,
            "judge_concurrency": self.judge_concurrency,
            "fail_on_new_ood": self.fail_on_new_ood,
            "trend": self.trend.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        """Inverse of :meth:`to_dict`."""
        return cls(
            metrics=tuple(data["metrics"]),
            gated=tuple(data["gated"]),
            margins=dict(data.get("margins", {})),
            judge=dict(data.get("judge", {"name": "lexical"})),
            refusal_phrases=tuple(data.get("refusal_phrases", DEFAULT_REFUSAL_PHRASES)),
            refusal_use_field=data.get("refusal_use_field", True),
            seed=data.get("seed", 0),
            alpha=data.get("alpha", 0.05),
            strict=data.get("strict", False),
            error_budget=data.get("error_budget", 0.05),
            cluster_by=data.get("cluster_by"),
            judge_concurrency=data.get("judge_concurrency", 4),
            fail_on_new_ood=data.get("fail_on_new_ood", True),
            trend=TrendPolicy.from_dict(data.get("trend", {})),
        )


@dataclass(frozen=True)
class PipelineSpec:
    """How to produce predictions: exactly one of ``python``, ``command`` or ``predictions``."""

    python: str | None = None
    command: str | None = None
    predictions: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    workdir: Path = Path(".")
    env: dict[str, str] = field(default_factory=dict)
    env_passthrough: tuple[str, ...] = ()
    """Variables of rag-gate's environment given to the pipeline by name (on a PR, the base config's list)."""
    concurrency: int = 4
    timeout_s: float = 60.0
    startup_timeout_s: float = 120.0
    retries: int = 1


@dataclass(frozen=True)
class Config:
    """A loaded ``rag-gate.yml``."""

    path: Path
    """The config file."""
    golden: Path
    """The golden set, resolved against the config's directory."""
    pipeline: PipelineSpec
    evaluation: Evaluation
    repeats: int = 1
    sha256: str = ""
    """sha256 of the config file's bytes (part of manifests and cache keys)."""

    @property
    def root(self) -> Path:
        """The config file's directory."""
        return self.path.parent

    # Shortcuts used by the PR flow.
    @property
    def seed(self) -> int:
        """The evaluation seed."""
        return self.evaluation.seed

    @property
    def judge(self) -> dict[str, Any]:
        """The judge spec."""
        return self.evaluation.judge

    @property
    def strict(self) -> bool:
        """Strict mode: inconclusive counts as fail."""
        return self.evaluation.strict


def _line_of(text: str, keys: list[Any]) -> int | None:
    """1-based line of the YAML node at ``keys`` (mapping keys only), or of its deepest existing parent."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in keys:
        if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        for key_node, value_node in node.value:
            if key_node.value == str(key):
                line, node = key_node.start_mark.line + 1, value_node
                break
        else:
            break
    return line


def _reject_duplicate_keys(node: yaml.Node | None, path: Path) -> None:
    """YAML allows a repeated key and keeps the last value; in a config that is always a mistake."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                message = f"duplicate key (first on line {seen[key_node.value]})"
                raise InputError(located(path, line, key_node.value, message))
            seen[key_node.value] = line
            _reject_duplicate_keys(value_node, path)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _reject_duplicate_keys(item, path)


def _numbers(data: Any, keys: tuple[Any, ...] = ()) -> list[tuple[list[Any], float]]:
    """Every float in a loaded YAML document with its key path (to reject .nan and .inf)."""
    if isinstance(data, float):
        return [(list(keys), data)]
    if isinstance(data, dict):
        return [item for k, v in data.items() for item in _numbers(v, (*keys, k))]
    if isinstance(data, list):
        return [item for i, v in enumerate(data) for item in _numbers(v, (*keys, i))]
    return []


def _check_metric(name: str, path: Path, line: int | None, where: str) -> None:
    try:
        resolve(name)
    except ValueError as exc:
        raise InputError(located(path, line, where, str(exc))) from None


def load_config(path: Path | str, *, repeats: int | None = None) -> Config:
    """Read and validate a config file.

    Args:
        path: the ``rag-gate.yml`` file.
        repeats: overrides ``repeats:`` when given (``--repeats``).

    Raises:
        InputError: ``file:line: field: message`` for invalid YAML, an unknown key, a mistyped value, an unknown
            metric, or a missing golden set.

    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: config file not found") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise InputError(located(path, line, None, f"not UTF-8 text ({exc.reason})")) from None
    try:
        _reject_duplicate_keys(yaml.compose(text), path)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise InputError(located(path, mark.line + 1 if mark else None, None, f"invalid YAML: {problem}")) from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    import jsonschema  # local: only for best_match

    error = jsonschema.exceptions.best_match(schema_validator("config").iter_errors(data))
    if error is not None:
        keys = [str(p) for p in error.absolute_path]
        if error.validator == "additionalProperties":
            unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            keys.append(unknown[0])
            message = "unknown key (allowed: " + ", ".join(sorted(error.schema["properties"])) + ")"
        elif error.validator == "oneOf" and keys == ["pipeline"]:
            message = "needs exactly one of 'python', 'command' or 'predictions'"
        elif error.validator == "required":
            keys.append(error.message.split("'")[1])
            message = "required key is missing"
        else:
            message = error.message
        raise InputError(located(path, _line_of(text, keys), ".".join(keys) or None, message))

    for keys, value in _numbers(data):
        if not math.isfinite(value):
            raise InputError(located(path, _line_of(text, keys), ".".join(map(str, keys)), "must be a finite number"))
    root = path.parent
    metrics = tuple(data.get("metrics", DEFAULT_METRICS))
    for i, name in enumerate(metrics):
        _check_metric(name, path, _line_of(text, ["metrics", i]), f"metrics.{i}")
        if name in metrics[:i]:
            raise InputError(located(path, _line_of(text, ["metrics", i]), f"metrics.{i}", f"'{name}' is listed twice"))
    gated = tuple(data.get("gate", default_gated(metrics)))
    for name in gated:
        if name not in metrics:
            raise InputError(located(path, _line_of(text, ["gate"]), "gate", f"'{name}' is not in metrics"))
    for name in data.get("margins", {}):
        if name not in metrics:
            raise InputError(located(path, _line_of(text, ["margins", name]), f"margins.{name}", "not in metrics"))
    judge = data.get("judge", {"name": "lexical"})
    judge = {"name": judge} if isinstance(judge, str) else dict(judge)
    if judge["name"] not in JUDGES:
        known = ", ".join(sorted(JUDGES))
        raise InputError(
            located(path, _line_of(text, ["judge"]), "judge", f"unknown judge '{judge['name']}' ({known})")
        )
    refusal = data.get("refusal", {})
    trend = TrendPolicy.from_dict(data.get("trend", {}))
    if trend.critical < trend.warning:
        raise InputError(
            located(path, _line_of(text, ["trend", "critical"]), "trend.critical", "must be ≥ trend.warning")
        )
    evaluation = Evaluation(
        metrics=metrics,
        gated=gated,
        margins={k: float(v) for k, v in data.get("margins", {}).items()},
        judge=judge,
        refusal_phrases=tuple(refusal.get("phrases", DEFAULT_REFUSAL_PHRASES)),
        refusal_use_field=refusal.get("use_field", True),
        seed=data.get("seed", 0),
        alpha=data.get("alpha", 0.05),
        strict=data.get("strict", False),
        error_budget=data.get("error_budget", 0.05),
        cluster_by=data.get("cluster_by"),
        judge_concurrency=data.get("judge_concurrency", 4),
        fail_on_new_ood=data.get("fail_on_new_ood", True),
        trend=trend,
    )
    raw = data["pipeline"]
    for i, name in enumerate(raw.get("env_passthrough", ())):
        reason = check_passthrough(name)
        if reason is not None:
            keys = ["pipeline", "env_passthrough", i]
            raise InputError(located(path, _line_of(text, keys), f"pipeline.env_passthrough.{i}", reason))
    pipeline = PipelineSpec(
        python=raw.get("python"),
        command=raw.get("command"),
        predictions=(root / raw["predictions"]) if "predictions" in raw else None,
        options=dict(raw.get("options", {})),
        workdir=(root / raw.get("workdir", ".")).resolve(),
        env=dict(raw.get("env", {})),
        env_passthrough=tuple(raw.get("env_passthrough", ())),
        concurrency=raw.get("concurrency", 4),
        timeout_s=float(raw.get("timeout_s", 60)),
        startup_timeout_s=float(raw.get("startup_timeout_s", 120)),
        retries=raw.get("retries", 1),
    )
    golden = (root / data["golden"]).resolve()
    if not golden.is_file():
        raise InputError(located(path, _line_of(text, ["golden"]), "golden", f"file not found: {golden}"))
    return Config(
        path=path.resolve(),
        golden=golden,
        pipeline=pipeline,
        evaluation=evaluation,
        repeats=repeats if repeats is not None else data.get("repeats", 1),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
