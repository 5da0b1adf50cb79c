"""Load and validate ``rag-gate.yml`` (one side's pipeline and the gate's evaluation settings).

The dataclasses below are the one source of every setting's default. ``gate/schemas/config.schema.json``
describes structure, types and ranges only; :func:`load_config` checks the file against it and against what
the schema cannot say (known metrics, margins within a metric's range, the judge's options, files that exist),
reports every problem at once in file order, then builds the dataclasses from the keys that are present.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from gate.adaptive import AdaptivePolicy
from gate.errors import InputError, located
from gate.judges import JUDGES, PAIRWISE
from gate.metrics import DEFAULT_METRICS, resolve
from gate.metrics.refusal import DEFAULT_REFUSAL_PHRASES
from gate.models import FormRules
from gate.sandbox import check_passthrough
from gate.trends import TrendBlock as TrendBlock  # re-exported: the config's ``trend:`` block
from gate.trends import TrendPolicy
from gate.yamlsafe import (
    LOADER,
    KeyPath,
    Problems,
    check_yaml_size,
    key_lines,
    non_json,
    nul_bytes,
    yaml_error,
)

log = logging.getLogger("rag-gate")

PRIMARY_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("hit_rate@k",), ("mrr",),
    ("grounded_answer_rate", "hallucinated_claim_rate", "hallucination_rate", "faithfulness"), ("contradiction_rate",),
    ("answer_f1",), ("refusal",), ("false_refusal",), ("error_rate",), ("head_win_rate",),
)  # fmt: skip
"""Metric families gated by default: one per question a user asks (found? ranked? grounded? contradicts its sources?
correct? refuses? over-refuses? breaks? does a pairwise judge prefer base's answers?), by preference; Holm–Bonferroni
splits α across them, so near-duplicates (recall@k, nDCG) are only reported. Why ``grounded_answer_rate`` answers
"grounded?" and ``contradiction_rate`` is asked apart: README, "How good is the lexical judge?"."""


MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than 1 MiB is rejected before it is parsed."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists in a config."""
MAX_NODES = 100_000
"""Most values a config may hold once YAML aliases are expanded (a few hundred bytes of aliases can expand to
billions: the "billion laughs" attack)."""


def default_gated(metrics: tuple[str, ...]) -> tuple[str, ...]:
    """The gated subset of ``metrics`` when the config has no ``gate:`` key.

    One metric per primary family, the family's most preferred one among ``metrics`` (the first ``hit_rate@k`` when
    several cut-offs are listed), in ``metrics`` order; when no family is configured, every metric but latency and
    cost.
    """
    by_name = {}
    for name in metrics:
        by_name.setdefault(resolve(name).spec.name, name)
    chosen = {next((by_name[o] for o in family if o in by_name), None) for family in PRIMARY_FAMILIES} - {None}
    return tuple(m for m in metrics if m in chosen) or tuple(m for m in metrics if resolve(m).spec.kind != "ratio")


def _key(name: str) -> dict[str, Any]:
    """Field metadata: the field is read from config key ``name`` (dotted for nested keys), or not at all."""
    return {"key": name}


@dataclass(frozen=True)
class MustPassPolicy:
    """Which golden cases are must-pass by default, and what passing an in-domain one means (``must_pass:``)."""

    out_of_domain: bool = True
    """Out-of-domain cases are must-pass unless their own ``must_pass`` says otherwise (passed = refused)."""
    metrics: tuple[str, ...] | None = None
    """Binary metrics an in-domain must-pass case must score 1 on in a repeat to pass it (besides answering without
    error and not refusing); None: the gated binary higher-is-better in-domain metrics (e.g. ``hit_rate@5``)."""

    def __post_init__(self) -> None:
        """Lists as tuples."""
        if self.metrics is not None:
            object.__setattr__(self, "metrics", tuple(self.metrics))


RELATIVE = "relative"
"""The key of a margin given relative to the base's value: ``margins: {hallucinated_claim_rate: {relative: 0.5}}``."""


@dataclass(frozen=True)
class GatePolicy:
    """How predictions are scored and compared: the part of the config that defines the gate's policy."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    """Metric names, e.g. ``hit_rate@5`` (see ``gate.metrics.METRICS``)."""
    gated: tuple[str, ...] = field(default=None, metadata=_key("gate"))  # type: ignore[arg-type]
    """The metrics whose regression fails the gate; the others are reported only. Not given: the primary
    families among ``metrics`` (:func:`default_gated`)."""
    margins: Mapping[str, float | Mapping[str, float]] = field(default_factory=dict)
    """Per-metric margins overriding the registry defaults (absolute; relative for latency and cost). A binary or
    graded metric's margin may be a mapping ``{relative: r, min: m}``: r times the base's value, at least m
    (default 0), for rates whose base is near 0."""
    judge: Mapping[str, Any] = field(default_factory=lambda: {"name": "lexical"})
    """Judge spec, e.g. ``{"name": "lexical"}`` (a bare name is accepted and wrapped)."""
    pairwise: Mapping[str, Any] | None = None
    """The pairwise judge's options (``pairwise:``, e.g. ``{"model": "gpt-4o-mini"}``); when set, the
    ``head_win_rate`` metric is computed at compare time (and added to ``metrics`` if absent). None: no pairwise
    judge."""
    form: FormRules = field(default_factory=FormRules)
    """Form rules of every case (``form:``; a golden case's ``form`` overrides them key by key)."""
    refusal_phrases: tuple[str, ...] = field(default=DEFAULT_REFUSAL_PHRASES, metadata=_key("refusal.phrases"))
    """Phrases that mark an answer as a refusal (see :func:`gate.metrics.refusal.is_refusal`)."""
    refusal_use_field: bool = field(default=True, metadata=_key("refusal.use_field"))
    """Trust an explicit ``refused`` field in predictions when present."""
    seed: int = 0
    """Seed of the bootstrap and permutation tests (the same seed gives the same report)."""
    alpha: float = 0.05
    """Significance level of the gate, in (0, 0.5)."""
    strict: bool = False
    """Treat an inconclusive verdict as a failure."""
    error_budget: float = 0.05
    """Share of failed scores per gated metric and side, in [0, 1], beyond which the evaluation is an error."""
    cluster_by: str | None = None
    """Group dependent cases for the standard error: ``cluster``, ``tag`` or ``tag:<prefix>``; None: none."""
    judge_concurrency: int = 4
    """Judge calls in flight at once while scoring: the cases judged at once and, for a judge that calls an endpoint
    (``llm``, ``ragas``, the pairwise judge), its requests in flight (see :meth:`judge_spec`). The judges' own
    ``concurrency`` option is a deprecated alias in a config file (:func:`load_config`)."""
    fail_on_new_ood: bool = True
    """Fail the gate on new out-of-domain failures (refused on base in every repeat, answered on head in every
    repeat) when the refusal metric shows a significant drop, whatever its margin (DESIGN §4)."""
    must_pass: MustPassPolicy = field(default_factory=MustPassPolicy)
    """Must-pass cases (``must_pass:``): which are must-pass by default and what passing an in-domain one means."""
    trend: TrendPolicy = field(default_factory=TrendPolicy)
    """The trend alarm against the main-branch history (``trend:``; a mapping is accepted and converted)."""
    golden_changes: Literal["base", "head"] = "base"
    """Which golden set a PR is evaluated on (base-side policy): ``base``, the contract — every base case with its
    base definition, plus the cases the PR adds — or ``head``, the PR's own set (removals and edits allowed)."""
    judge_labels: str | None = None
    """Answers labelled by hand (``judge_labels: labels.jsonl``, relative to the config file): ``compare`` and ``pr``
    show the judge's agreement with them in the comment's run details, and warn when they are stale."""
    adaptive: AdaptivePolicy = field(default_factory=AdaptivePolicy)
    """Adaptive evaluation (``adaptive:``; ``true`` or ``{batch, seed}``; base-side policy): :mod:`gate.adaptive`."""

    def __post_init__(self) -> None:
        """Normalise containers (lists → tuples, a bare judge name → a mapping) and fill ``gated``."""
        set_ = object.__setattr__
        set_(self, "metrics", tuple(self.metrics))
        if self.pairwise is not None:
            set_(self, "pairwise", dict(self.pairwise))
            if "head_win_rate" not in self.metrics:
                set_(self, "metrics", (*self.metrics, "head_win_rate"))
        if isinstance(self.form, Mapping):
            set_(self, "form", FormRules(**self.form))
        set_(self, "gated", default_gated(self.metrics) if self.gated is None else tuple(self.gated))
        set_(self, "margins", {name: _margin_value(value) for name, value in self.margins.items()})
        if isinstance(self.must_pass, Mapping):
            set_(self, "must_pass", MustPassPolicy(**self.must_pass))
        set_(self, "judge", {"name": self.judge} if isinstance(self.judge, str) else dict(self.judge))
        set_(self, "refusal_phrases", tuple(self.refusal_phrases))
        set_(self, "trend", TrendPolicy(**self.trend) if isinstance(self.trend, Mapping) else self.trend)
        set_(self, "adaptive", AdaptivePolicy.of(self.adaptive))

    def judge_spec(self) -> dict[str, Any]:
        """The ``judge:`` mapping to build the judge from: an endpoint judge's ``concurrency`` is ``judge_concurrency``.

        ``judge`` itself is left as configured (it is part of a run's identity).
        """
        return _with_concurrency(self.judge, JUDGES.get(str(self.judge.get("name"))), self.judge_concurrency)

    def pairwise_spec(self) -> dict[str, Any]:
        """The ``pairwise:`` options to build the pairwise judge from, its ``concurrency`` ``judge_concurrency``."""
        return _with_concurrency(self.pairwise or {}, PAIRWISE, self.judge_concurrency)

    def margin(self, name: str, base: float = math.nan) -> float:
        """The margin for a metric: configured, else the registry default.

        A relative margin (``{relative: r, min: m}``) is max(m, r·base) with ``base`` the base's value of the
        metric (metric units, ≥ 0); m when ``base`` is NaN (unknown).
        """
        value = self.margins.get(name, resolve(name).spec.default_margin)
        if isinstance(value, Mapping):
            floor = value.get("min", 0.0)
            return floor if math.isnan(base) else max(floor, value[RELATIVE] * abs(base))
        return value

    def relative_margin(self, name: str) -> float | None:
        """The factor r of a margin given relative to the base's value, None for an absolute margin."""
        value = self.margins.get(name)
        return value[RELATIVE] if isinstance(value, Mapping) else None

    @property
    def must_pass_metrics(self) -> tuple[str, ...]:
        """The binary metrics an in-domain must-pass case must score 1 on in a repeat.

        ``must_pass.metrics``, else the gated binary higher-is-better in-domain metrics scored per answer.
        """
        if self.must_pass.metrics is not None:
            return self.must_pass.metrics
        return tuple(
            name
            for name in self.gated
            if (spec := resolve(name).spec).kind == "binary"
            and spec.direction == "higher"
            and not spec.out_of_domain
            and not spec.paired
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, stored in manifest.json so that ``compare`` can reuse it (one key per field)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @property
    def paired_metrics(self) -> tuple[str, ...]:
        """The configured metrics scored at compare time from both sides (``head_win_rate``)."""
        return tuple(name for name in self.metrics if resolve(name).spec.paired)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GatePolicy:
        """Inverse of :meth:`to_dict`; absent keys take the field defaults, keys that are no field are ignored."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class PipelineSpec:
    """How to produce predictions: exactly one of ``python``, ``command`` or ``predictions``."""

    python: str | None = None
    """``module:function`` called once per case in a worker process."""
    command: str | None = None
    """Shell template run once per repeat that writes ``{predictions}``."""
    predictions: Path | None = None
    """A precomputed predictions file (resolved against the config's directory by :func:`load_config`)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments passed to the python function."""
    workdir: Path = Path(".")
    """Directory the pipeline runs in (resolved against the config's directory by :func:`load_config`)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Literal environment variables set for the pipeline (values written in the config)."""
    env_passthrough: tuple[str, ...] = ()
    """Variables of rag-gate's environment given to the pipeline by name (on a PR, the base config's list)."""
    concurrency: int = 4
    """Calls in flight at once (python pipelines)."""
    timeout_s: float = 60.0
    """Seconds per case before the call is abandoned (a command gets this times the number of cases)."""
    startup_timeout_s: float = 120.0
    """Seconds for a worker to import the module."""
    retries: int = 1
    """Retries of a failed call (never counted as repeats)."""
    origin: str = field(default="", metadata=_key(""))
    """Where the pipeline is configured, ``file:line`` (for error messages); not a config key."""

    def __post_init__(self) -> None:
        """Paths as :class:`~pathlib.Path`, mappings as dicts."""
        if self.predictions is not None:
            object.__setattr__(self, "predictions", Path(self.predictions))
        object.__setattr__(self, "workdir", Path(self.workdir))
        object.__setattr__(self, "options", dict(self.options))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "env_passthrough", tuple(self.env_passthrough))


@dataclass(frozen=True)
class Config:
    """A loaded ``rag-gate.yml``."""

    path: Path = field(metadata=_key(""))
    """The config file."""
    golden: Path
    """The golden set, resolved against the config's directory."""
    pipeline: PipelineSpec
    """How this side's predictions are produced."""
    policy: GatePolicy = field(default_factory=GatePolicy, metadata=_key(""))
    """Scoring and comparison settings (read from the top-level keys)."""
    repeats: int = 1
    """Runs per case (``--repeats`` overrides it)."""
    scoring_jobs: int | None = field(default=None, metadata=_key("scoring.jobs"))
    """Worker processes that score (``scoring.jobs``; ``--jobs`` overrides it): 1 scores in rag-gate's own process;
    None: every core it may use, when there are enough answers (see :func:`gate.scoring.use_processes`). The scores
    are the same either way."""
    sha256: str = field(default="", metadata=_key(""))
    """sha256 of the config file's bytes (part of manifests and cache keys)."""

    @property
    def root(self) -> Path:
        """The config file's directory."""
        return self.path.parent


def _margin_value(value: Any) -> float | dict[str, float]:
    """A configured margin: a number, or ``{relative: r, min: m}`` kept as a mapping of floats."""
    if isinstance(value, Mapping):
        return {key: float(v) for key, v in value.items()}
    return float(value)


def config_keys(cls: type) -> dict[str, str]:
    """Config key (dotted for nested keys) → field name, for the fields of ``cls`` read from the config."""
    return {f.metadata.get("key", f.name): f.name for f in fields(cls) if f.metadata.get("key", f.name)}


def _plain(value: Any) -> Any:
    """Tuples as lists, mappings and dataclasses as dicts (JSON-ready)."""
    if is_dataclass(value):
        return asdict(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _with_concurrency(spec: Mapping[str, Any], backend: Any, concurrency: int) -> dict[str, Any]:
    """``spec`` with ``concurrency`` set when ``backend`` takes that option (the endpoint judges), else as it is."""
    if backend is None or "concurrency" not in backend.options:
        return dict(spec)
    return {**spec, "concurrency": concurrency}


def _deprecated_concurrency(data: dict[str, Any], problems: Problems) -> None:
    """Read the judges' deprecated ``concurrency`` option as ``judge_concurrency``, with a warning (stderr).

    ``judge.concurrency`` (or ``pairwise.concurrency``) used to cap an endpoint judge's requests in flight below
    ``judge_concurrency``; one setting now decides both. Alone, its value becomes ``judge_concurrency``; beside
    ``judge_concurrency`` it is ignored.
    """
    for section in ("judge", "pairwise"):
        spec = data.get(section)
        if not isinstance(spec, Mapping) or "concurrency" not in spec:
            continue
        where = f"{problems.path}:{problems.line((section, 'concurrency'))}: {section}.concurrency"
        if "judge_concurrency" in data:
            log.warning("%s is deprecated and ignored: judge_concurrency: %s sets the requests in flight", where,
                        data["judge_concurrency"])  # fmt: skip
        else:
            data["judge_concurrency"] = spec["concurrency"]
            log.warning("%s is deprecated: read as judge_concurrency: %s (the requests in flight); set that instead",
                        where, spec["concurrency"])  # fmt: skip


def _present(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``cls`` for the config keys present in ``data`` (absent keys keep the defaults)."""
    out = {}
    for key, name in config_keys(cls).items():
        value: Any = data
        for part in key.split("."):
            if not isinstance(value, Mapping) or part not in value:
                break
            value = value[part]
        else:
            out[name] = value
    return out


def _default(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls``."""
    f = next(f for f in fields(cls) if f.name == name)
    return f.default if f.default_factory is MISSING else f.default_factory()


def _read_text(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: config file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the config: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise InputError(f"{path}: config file larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(located(path, line, None, f"not UTF-8 text ({exc.reason})")) from None


# --- checking ------------------------------------------------------------------------------------------------------

_TYPES = {"string": "a string", "array": "a list", "object": "a mapping", "boolean": "true or false",
          "integer": "an integer", "number": "a number", "null": "null"}  # fmt: skip


def _short(value: Any) -> str:
    """``repr`` of a value, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def did_you_mean(word: Any, choices: Any) -> str:
    """``"; did you mean `x`?"`` for the closest of ``choices`` (difflib), or ``""``."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


def _schema_problems(
    schema: Mapping[str, Any],
    instance: Any,
    problems: Problems,
    prefix: KeyPath = (),
    skip: set[KeyPath] = frozenset(),
    noun: str = "key",
) -> set[KeyPath]:
    """Add every JSON Schema error of ``instance`` to ``problems``; return the top-level keys that had one.

    Errors at a key path in ``skip`` are left out (already reported, e.g. a non-finite number).

    Unknown keys get a "did you mean"; a required key is not reported missing when an unknown key next to it
    is a likely misspelling of it.
    """
    from gate.jsonl import accepts

    if accepts(instance, schema):  # jsonschema (slow to import) only explains what the compiled check refuses
        return set()
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    errors = [e for e in errors if e.validator == "type" or tuple(e.absolute_path) not in mistyped]  # the type says it
    bad: set[KeyPath] = set()
    suggested: set[KeyPath] = set()
    missing: list[tuple[KeyPath, str]] = []
    for error in errors:
        keys = (*prefix, *error.absolute_path)
        if keys in skip:
            continue
        bad.add(keys[:1])
        if error.validator == "additionalProperties":
            known = list(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - set(known), key=str):
                if (*keys, key) in skip:
                    continue
                close = difflib.get_close_matches(str(key), known, n=1)
                if close:
                    suggested.add((*keys, close[0]))
                    message = f"unknown {noun}; did you mean `{close[0]}`?"
                else:
                    message = f"unknown {noun} (allowed: {', '.join(sorted(known))})"
                problems.add((*keys, key), message)
        elif error.validator == "required":
            missing.extend(
                ((*keys, k), f"required {noun} is missing") for k in error.validator_value if k not in error.instance
            )
        elif error.validator == "oneOf" and error.schema.get("description"):
            problems.add(keys, error.schema["description"])
        elif error.validator == "type":
            wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
            problems.add(keys, f"must be {' or '.join(_TYPES[t] for t in wanted)}, got {_short(error.instance)}")
        elif error.validator == "pattern":
            problems.add(
                keys, f"{_short(error.instance)} is not {error.schema.get('description', error.validator_value)}"
            )
        elif error.validator == "maximum":
            problems.add(keys, f"{error.message} (the largest value rag-gate accepts)")
        else:
            problems.add(keys, error.message)
    for keys, message in missing:
        if keys not in suggested:
            problems.add(keys, message, problems.line(keys[:-1]) if len(keys) > 1 else None)
    return bad


def _check_metrics(data: Mapping[str, Any], bad: set[KeyPath], problems: Problems) -> tuple[str, ...]:
    """Check ``metrics``, ``gate`` and ``margins`` against the registry; return the metrics computed."""
    metrics: tuple[str, ...] = _default(GatePolicy, "metrics")
    pairwise = "pairwise" in data and ("pairwise",) not in bad
    if "metrics" in data and ("metrics",) not in bad:
        metrics = tuple(data["metrics"])
        for i, name in enumerate(metrics):
            try:
                paired = resolve(name).spec.paired
            except ValueError as exc:
                problems.add(("metrics", i), str(exc))
            else:
                if paired and "pairwise" not in data:
                    problems.add(("metrics", i), f"'{name}' is scored by the pairwise judge: configure `pairwise:`")
            if name in metrics[:i]:
                problems.add(("metrics", i), f"'{name}' is listed twice")
    if pairwise and "head_win_rate" not in metrics:
        metrics = (*metrics, "head_win_rate")
    computed = f" (metrics: {', '.join(metrics)})"
    if "gate" in data and ("gate",) not in bad:
        for i, name in enumerate(data["gate"]):
            if name not in metrics:
                problems.add(("gate", i), f"'{name}' is not in metrics{computed}{did_you_mean(name, metrics)}")
            elif name in data["gate"][:i]:
                problems.add(("gate", i), f"'{name}' is listed twice")
    if "margins" in data and ("margins",) not in bad:
        for name, value in data["margins"].items():
            if name not in metrics:
                message = f"'{name}' is not computed{computed}{did_you_mean(name, metrics)}"
                problems.add(("margins", name), message)
                continue
            spec = resolve(name).spec
            if isinstance(value, Mapping):
                if spec.kind == "ratio":
                    problems.add(("margins", name), "a ratio metric's margin is relative already: give a number")
                value = value.get("min", 0.0)
            if math.isfinite(value) and value >= spec.margin_limit:
                scale = "relative drop" if spec.kind == "ratio" else "difference of a metric in [0, 1]"
                message = f"{value:g} is outside the metric's range: must be < {spec.margin_limit:g} (a {scale})"
                problems.add(("margins", name), message)
    must_pass = data.get("must_pass") if ("must_pass",) not in bad else None
    for i, name in enumerate((must_pass or {}).get("metrics", ())):
        if name not in metrics:
            problems.add(
                ("must_pass", "metrics", i), f"'{name}' is not in metrics{computed}{did_you_mean(name, metrics)}"
            )
        elif (spec := resolve(name).spec).kind != "binary" or spec.paired or spec.out_of_domain:
            problems.add(
                ("must_pass", "metrics", i), f"'{name}' is not a binary metric of one answer (e.g. hit_rate@5)"
            )
    return metrics


def _check_judge(data: Mapping[str, Any], bad: set[KeyPath], problems: Problems) -> None:
    """Check the judge's name and options against its backend's declared options."""
    if "judge" not in data or ("judge",) in bad:
        return
    judge = data["judge"]
    spec = {"name": judge} if isinstance(judge, str) else judge
    name = spec.get("name")
    if "name" not in spec:
        problems.add(("judge",), f"needs a 'name' (known: {', '.join(sorted(JUDGES))})")
        return
    if name not in JUDGES:
        keys = ("judge",) if isinstance(judge, str) else ("judge", "name")
        known = ", ".join(sorted(JUDGES))
        problems.add(keys, f"unknown judge {name!r} (known: {known}){did_you_mean(name, JUDGES)}")
        return
    _schema_problems(JUDGES[name].schema, spec, problems, ("judge",), noun=f"option of judge {name!r}")


def _check_pairwise(data: Mapping[str, Any], bad: set[KeyPath], problems: Problems) -> None:
    """Check the pairwise judge's options against its backend's declared options."""
    if "pairwise" not in data or ("pairwise",) in bad:
        return
    if "name" in data["pairwise"]:
        problems.add(("pairwise", "name"), "the pairwise judge takes no name (its options only: model, base_url, ...)")
    spec = {**data["pairwise"], "name": "pairwise"}
    _schema_problems(PAIRWISE.schema, spec, problems, ("pairwise",), noun="option of the pairwise judge")


def _check_files(data: Mapping[str, Any], root: Path, bad: set[KeyPath], problems: Problems) -> None:
    """The golden set, a precomputed predictions file and the pipeline's workdir must exist."""
    if ("golden",) not in bad and "golden" in data and not (root / data["golden"]).is_file():
        problems.add(("golden",), f"file not found: {(root / data['golden']).resolve()}")
    pipeline = data.get("pipeline")
    if ("pipeline",) in bad or not isinstance(pipeline, Mapping):
        return
    if "predictions" in pipeline and not (root / pipeline["predictions"]).is_file():
        problems.add(("pipeline", "predictions"), f"file not found: {(root / pipeline['predictions']).resolve()}")
    if "workdir" in pipeline and not (root / pipeline["workdir"]).is_dir():
        problems.add(("pipeline", "workdir"), f"directory not found: {(root / pipeline['workdir']).resolve()}")


def _check_policies(data: Mapping[str, Any], bad: set[KeyPath], problems: Problems) -> None:
    """What the schema cannot say about the trend thresholds and the variables passed to the pipeline."""
    trend = data.get("trend", {}) if ("trend",) not in bad else {}
    limits = {key: trend.get(key, _default(TrendPolicy, key)) for key in ("warning", "critical")}
    if limits["critical"] < limits["warning"] and "critical" in trend:
        problems.add(("trend", "critical"), f"must be ≥ trend.warning ({limits['warning']:g})")
    elif limits["critical"] < limits["warning"]:
        problems.add(("trend", "warning"), f"must be ≤ trend.critical ({limits['critical']:g}, the default)")
    pipeline = data.get("pipeline") if ("pipeline",) not in bad else None
    for i, name in enumerate(pipeline.get("env_passthrough", ()) if isinstance(pipeline, Mapping) else ()):
        reason = check_passthrough(name)
        if reason is not None:
            problems.add(("pipeline", "env_passthrough", i), reason)


NUL_MESSAGE = "holds a NUL byte (\\x00), which no path, environment value or command can hold; remove it"
"""The problem reported for a setting whose text holds a NUL byte."""


def _schema() -> Mapping[str, Any]:
    from gate.jsonl import shipped_schema

    return shipped_schema("config")


def load_config(path: Path | str, *, repeats: int | None = None) -> Config:
    """Read and validate a config file.

    Args:
        path: the ``rag-gate.yml`` file.
        repeats: overrides ``repeats:`` when given (``--repeats``); same range as the key.

    Returns:
        The config; settings that are absent take the dataclass defaults.

    Raises:
        InputError: every problem at once, one ``file:line: key: message`` line each, in file order: invalid or
            oversized YAML (too deep, too many values after alias expansion), duplicate keys, unknown keys (with
            the closest known key), mistyped or out-of-range values, unknown metrics, margins of metrics not
            computed or outside the metric's range, unknown judges or judge options, and missing files
            (golden set, predictions, workdir).

    """
    path = Path(path)
    text = _read_text(path)
    check_yaml_size(text, path, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
    try:
        node = yaml.compose(text, Loader=LOADER)
        data = yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    problems = Problems(path)
    problems.lines = dict(key_lines(node, problems)) if node is not None else {}
    if not isinstance(data, dict):
        problems.add((), f"expected a mapping of settings, got {type(data).__name__}")
        problems.raise_if_any()
    from gate.jsonl import number_problems  # NaN, ±inf, an integer beyond gate.jsonl.MAX_INTEGER

    for keys, message in (bad_numbers := dict(number_problems(data))).items():
        problems.add(keys, message)
    not_finite = set(bad_numbers)
    for keys in (with_nul := set(nul_bytes(data))):
        shown = tuple(k.replace("\x00", "\\x00") if isinstance(k, str) else k for k in keys)
        problems.add(shown, NUL_MESSAGE, problems.line(keys))
    not_finite |= with_nul  # not checked further: a path or command with a NUL byte cannot reach the OS
    yaml_typed: set[KeyPath] = set()
    for keys, data_keys, line, message in non_json(node) if node is not None else ():
        problems.add(keys, message, line)
        yaml_typed.add(data_keys)
    bad = _schema_problems(_schema(), data, problems, skip=not_finite | yaml_typed)
    bad |= {keys[:1] for keys in not_finite | yaml_typed | problems.duplicates}
    _check_metrics(data, bad, problems)
    _check_judge(data, bad, problems)
    _check_pairwise(data, bad, problems)
    _check_files(data, path.parent, bad, problems)
    _check_policies(data, bad, problems)
    if repeats is not None:
        _schema_problems({"properties": {"--repeats": _schema()["properties"]["repeats"]}}, {"--repeats": repeats},
                         problems)  # fmt: skip
    problems.raise_if_any()
    _deprecated_concurrency(data, problems)

    root = path.parent
    pipeline = PipelineSpec(**_present(PipelineSpec, data["pipeline"]))
    target = next(k for k in ("python", "command", "predictions") if k in data["pipeline"])
    pipeline = replace(
        pipeline,
        workdir=(root / pipeline.workdir).resolve(),
        predictions=root / pipeline.predictions if pipeline.predictions is not None else None,
        origin=f"{path}:{problems.line(('pipeline', target))}",
    )
    settings = _present(Config, data) | ({"repeats": repeats} if repeats is not None else {})
    settings |= {
        "path": path.resolve(),
        "golden": (root / data["golden"]).resolve(),
        "pipeline": pipeline,
        "policy": GatePolicy(**_present(GatePolicy, data)),
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }
    return Config(**settings)


def check_config(path: Path | str) -> tuple[Config | None, list[str]]:
    """Validate a config and every file it names (golden set, precomputed predictions); collect every problem.

    Args:
        path: the ``rag-gate.yml`` file.

    Returns:
        The config (None when the config itself is invalid) and the problems, one ``file:line: field: message``
        string each: the config's own first, then the golden set's, then the predictions file's.

    """
    from gate.golden import check_golden
    from gate.predictions import REPEATS_SOURCE, align, load_predictions

    try:
        config = load_config(path)
    except InputError as exc:
        return None, str(exc).splitlines()
    try:
        cases, problems = check_golden(config.golden)
    except InputError as exc:
        return config, [str(exc)]
    if (predictions := config.pipeline.predictions) is not None:
        try:
            align(cases, load_predictions(predictions), predictions, config.repeats, source=REPEATS_SOURCE)
        except InputError as exc:
            problems.append(str(exc))
    return config, problems
