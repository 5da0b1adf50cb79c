"""``manifest.json`` of a run directory as a type: :class:`Manifest`, its :class:`RunIdentity` and judge usage.

A contract module: it imports the standard library and msgspec only (import-linter checks it), so that any
module can read a manifest without loading the engine. ``gate/schemas/manifest.schema.json`` stays the format:
:func:`gate.runs.read_manifest` validates a file against it first, then decodes it into a :class:`Manifest`;
:meth:`Manifest.to_dict` writes the same keys in the same order as before the type existed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal

import msgspec

MANIFEST_SCHEMA_VERSION = 1
"""``schema_version`` of the manifests this rag-gate writes."""


@dataclass(frozen=True, kw_only=True)
class JudgeUsage:
    """What a judge's calls took: a side's scoring (or the pairwise judge's comparison), part of a check's cost.

    A judge that calls no API (lexical, nli) reports 0 requests and a cost of 0. Usages add up (``a + b``: the
    accounting of merged shards), as inspect_ai's ``ModelUsage`` does.
    """

    requests: int = 0
    """HTTP requests sent (first attempts, retries and re-asks); 0 for an offline judge."""
    retries: int = 0
    """Retries sent (after a 429, a 5xx or a timeout); one the circuit or the deadline stopped is not counted."""
    failures: int = 0
    """Calls that ended as a judge failure (including calls refused by an open circuit or the deadline)."""
    cache_hits: int = 0
    """Answers served from the judge cache (no request, no cost)."""
    input_tokens: int = 0
    """Prompt tokens, summed from the API's ``usage``."""
    output_tokens: int = 0
    """Completion tokens, summed from the API's ``usage``."""
    responses_without_usage: int = 0
    """Answered requests whose response had no ``usage`` (their tokens are unknown, not counted)."""
    cost_usd: float | None = None
    """Estimated cost in US dollars from the configured prices per 1,000 tokens; None without prices."""
    stopped: str | None = None
    """Why calls were refused (circuit open, deadline passed), or None."""

    COUNTERS: ClassVar[tuple[str, ...]] = (
        "requests",
        "retries",
        "failures",
        "cache_hits",
        "input_tokens",
        "output_tokens",
        "responses_without_usage",
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``judge_usage`` in manifest.json and report.json."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        """Counters summed; the cost None unless both are known; the first reason calls were refused."""
        if not isinstance(other, JudgeUsage):
            return NotImplemented
        cost = None if self.cost_usd is None or other.cost_usd is None else round(self.cost_usd + other.cost_usd, 6)
        return JudgeUsage(
            **{name: getattr(self, name) + getattr(other, name) for name in self.COUNTERS},
            cost_usd=cost,
            stopped=self.stopped or other.stopped,
        )


class JudgeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The judge that scored a run: ``judge`` in manifest.json."""

    id: str
    """Judge id (``lexical``, ``llm``, ...)."""
    version: str | None = None
    """Judge version."""
    config: dict[str, Any] | None = None
    """The judge configuration (every option): part of the run identity; None in manifests older than it."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``config`` left out when None)."""
        out: dict[str, Any] = {"id": self.id, "version": self.version}
        if self.config is not None:
            out["config"] = self.config
        return out


class Counts(msgspec.Struct, frozen=True, kw_only=True):
    """What a finished run produced: ``counts`` in manifest.json."""

    predictions: int
    """Prediction rows (case × repeat)."""
    prediction_errors: int
    """Of them, rows with an ``error``."""
    scores: int
    """Score rows (case × repeat × metric)."""
    judge_failures: int = 0
    """Score rows whose error is a judge failure."""

    def __add__(self, other: Counts) -> Counts:
        """Counts of two shards together."""
        if not isinstance(other, Counts):
            return NotImplemented
        return Counts(
            predictions=self.predictions + other.predictions,
            prediction_errors=self.prediction_errors + other.prediction_errors,
            scores=self.scores + other.scores,
            judge_failures=self.judge_failures + other.judge_failures,
        )


class CodeFingerprint(msgspec.Struct, frozen=True, kw_only=True):
    """Fingerprint of the pipeline's code (``code`` in manifest.json): a run resumes only when it matches."""

    sha256: str
    """sha256 over the fingerprinted files."""
    source: Literal["git", "files", "predictions"]
    """What was fingerprinted: git blob ids, walked files, or the predictions file."""
    files: int | None = None
    """How many files."""
    partial: bool | None = None
    """True when some files could not be read."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (absent fields left out)."""
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None}


class ErrorCount(msgspec.Struct, frozen=True):
    """A distinct pipeline failure and how many rows failed with it (``prediction_errors`` in manifest.json)."""

    message: str
    """The error message."""
    count: int
    """Rows with it (≥ 1)."""


@dataclass(frozen=True)
class RunIdentity:
    """Everything that changes what a run produced (DESIGN §8 "one identity key").

    Two runs with equal identities are interchangeable. The predictions depend on the first four fields (a run
    resumes, merges or is cached only when they match); the scores also depend on the judge, the scoring
    settings and the rag-gate version (scores are reused only when those match the policy's, else recomputed).
    """

    golden_sha256: str
    """sha256 of the golden set file the run answered."""
    config_sha256: str
    """sha256 of the side's config file (pipeline, options, metrics, judge options)."""
    repeats: int
    """Repeats per case (≥ 1)."""
    shard: tuple[int, int] | None
    """``(i, n)`` for ``run --shard i/n``, else None."""
    judge: dict[str, Any]
    """The judge that scored the run: its configuration (every option), id and version."""
    scoring: dict[str, Any]
    """Scoring settings besides the judge that change scores (refusal detection)."""
    gate_version: str
    """rag-gate version that scored the run."""

    PREDICTION_FIELDS = ("golden_sha256", "config_sha256", "repeats", "shard")
    SCORE_FIELDS = ("judge", "scoring", "gate_version")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: these keys are top-level keys of manifest.json."""
        return {
            "golden_sha256": self.golden_sha256,
            "config_sha256": self.config_sha256,
            "repeats": self.repeats,
            "shard": list(self.shard) if self.shard else None,
            "judge": self.judge,
            "scoring": self.scoring,
            "gate_version": self.gate_version,
        }

    def differences(self, other: RunIdentity, fields: tuple[str, ...]) -> list[str]:
        """The names of ``fields`` whose values differ."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [name for name in fields if mine[name] != theirs[name]]

    def digest(self) -> str:
        """sha256 of the canonical JSON of the whole identity (a cache key), 64 hex characters."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


Status = Literal["running", "complete", "partial", "failed"]
"""A run's status: written ``running`` first, rewritten last with the final one (``partial``: an adaptive
evaluation ran only a prefix of its order, ``n_cases`` of the golden set's cases)."""

_OMITTED_WHEN_NONE = frozenset(
    {"config", "pipeline", "scoring", "evaluation", "gate_version", "code", "finished", "counts", "judge_usage",
     "prediction_errors", "merged_from", "case_repeats", "upto_batch", "order_seed", "order_head_sha"}
)  # fmt: skip
"""Keys written only when set (``shard``, ``git_sha`` and ``git_ref`` are written as null)."""


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """``manifest.json`` of a run directory (``gate/schemas/manifest.schema.json`` as a type).

    The schema is what requires keys (:func:`gate.runs.read_manifest` checks it before decoding); the defaults
    here describe what a side without a run directory knows (a predictions file scored at compare time, or a
    side built in memory). Fields are in the order manifest.json has always listed its keys.
    """

    schema_version: int = MANIFEST_SCHEMA_VERSION
    """:data:`MANIFEST_SCHEMA_VERSION` of the writer."""
    golden_sha256: str | None = None
    """sha256 of the golden set file the run answered."""
    config_sha256: str | None = None
    """sha256 of the side's config file."""
    repeats: int = 1
    """Repeats per case (≥ 1)."""
    shard: tuple[int, int] | None = None
    """``(i, n)`` for ``run --shard i/n``, else None."""
    judge: JudgeRecord | None = None
    """The judge that scored the run."""
    scoring: dict[str, Any] | None = None
    """Scoring settings besides the judge (refusal detection): part of the run identity."""
    gate_version: str | None = None
    """rag-gate version that made the run."""
    code: CodeFingerprint | None = None
    """Fingerprint of the pipeline's code."""
    git_sha: str | None = None
    """Commit the run evaluated, when known."""
    git_ref: str | None = None
    """Ref the run evaluated, when known."""
    config: str | None = None
    """Path of the config file."""
    golden: str | None = None
    """Path of the golden set the run used."""
    pipeline: dict[str, Any] | None = None
    """The config's ``pipeline:`` settings that differ from the defaults (compared between base and head)."""
    n_cases: int = 0
    """Cases in the run (its shard's, for a shard)."""
    evaluation: dict[str, Any] | None = None
    """The evaluation policy the run was made with (:meth:`gate.config.GatePolicy.to_dict`)."""
    status: Status = "complete"
    """running, complete or failed."""
    started: str | None = None
    """ISO 8601 start time."""
    finished: str | None = None
    """ISO 8601 end time (a complete run has one)."""
    counts: Counts | None = None
    """What the run produced (a complete run has them)."""
    judge_usage: JudgeUsage | None = None
    """What the judge's calls took to score the run; None for a run recorded before rag-gate kept it."""
    prediction_errors: tuple[ErrorCount, ...] | None = None
    """Distinct pipeline failures with their counts, most frequent first."""
    merged_from: tuple[str, ...] | None = None
    """The shard directories a merged run was made of."""
    case_repeats: dict[str, int] | None = None
    """Case id → repeats run (the first ones), for the cases an adaptive evaluation ran fewer than ``repeats`` times
    (:mod:`gate.pr.adaptive`); their other repeats were skipped by plan, not lost. None: every case, every repeat."""
    upto_batch: int | None = None
    """K of ``rag-gate run --upto-batch K``: a stage of the staged adaptive evaluation, which ran the first cases and
    the first K batches of the adaptive order (``partial`` until they are every case). None: not a stage."""
    order_seed: str | None = None
    """A stage's adaptive order's seed in decimal (report.json's ``adaptive.seed``: the config's seed, with
    ``--head-sha`` combined by :func:`gate.compare.sequential.commit_seed`; a string: 63 bits are beyond the integers
    every JSON reader holds exactly). None: not a stage, or a stage run before it was kept."""
    order_head_sha: str | None = None
    """A stage's ``--head-sha`` (the PR's head commit its order was seeded with). None: not given, or not a stage."""

    @property
    def identity(self) -> RunIdentity:
        """The run's :class:`RunIdentity` (missing keys of older manifests read as empty, so they differ)."""
        return RunIdentity(
            golden_sha256=self.golden_sha256 or "",
            config_sha256=self.config_sha256 or "",
            repeats=self.repeats,
            shard=self.shard,
            judge=self.judge.to_dict() if self.judge else {},
            scoring=dict(self.scoring or {}),
            gate_version=self.gate_version or "",
        )

    @property
    def metrics(self) -> list[str]:
        """The metrics the run scored (its policy's ``metrics``), empty when not recorded."""
        return list((self.evaluation or {}).get("metrics") or [])

    @property
    def gated(self) -> list[str] | None:
        """The metrics the run's policy gated, None when not recorded."""
        gated = (self.evaluation or {}).get("gated")
        return None if gated is None else list(gated)

    @property
    def code_sha256(self) -> str | None:
        """The code fingerprint's sha256, None when not recorded."""
        return self.code.sha256 if self.code else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of manifest.json: the keys it has always had, in order (unset optional ones left out)."""
        out: dict[str, Any] = {}
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if value is None and name in _OMITTED_WHEN_NONE:
                continue
            if isinstance(value, JudgeRecord | CodeFingerprint | JudgeUsage):
                value = value.to_dict()
            elif name == "shard":
                value = None if value is None else list(value)
            elif isinstance(value, tuple):  # prediction_errors, merged_from
                value = [msgspec.to_builtins(item) for item in value]
            elif isinstance(value, Counts):
                value = msgspec.to_builtins(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """Decode a manifest's JSON object (validated by the schema first; 1.0 reads as the integer 1).

        Raises:
            msgspec.ValidationError: a key has a type the schema allows and the type does not.
        """
        return msgspec.convert(dict(data), cls, strict=False)
