"""manifest.json as a type (gate.manifest.Manifest): the same file format, old manifests, usage that adds up."""

import json
from importlib import resources

import jsonschema
import pytest

from gate.errors import InputError
from gate.manifest import Counts, JudgeUsage, Manifest
from gate.runs import read_manifest

SCHEMA = json.loads(resources.files("gate.schemas").joinpath("manifest.schema.json").read_text())
USAGE = {
    "requests": 6,
    "retries": 1,
    "failures": 1,
    "cache_hits": 2,
    "input_tokens": 37,
    "output_tokens": 16,
    "responses_without_usage": 1,
    "cost_usd": 0.0505,
    "stopped": None,
}
WRITTEN = {  # what `rag-gate run` writes, in its order
    "schema_version": 1,
    "golden_sha256": "a" * 64,
    "config_sha256": "b" * 64,
    "repeats": 2,
    "shard": [1, 2],
    "judge": {"id": "lexical", "version": "3", "config": {"name": "lexical"}},
    "scoring": {"refusal_phrases": ["I don't know"], "refusal_use_field": True},
    "gate_version": "0.1.0",
    "code": {"sha256": "c" * 64, "source": "git", "files": 3},
    "git_sha": None,
    "git_ref": "main",
    "config": "/repo/rag-gate.yml",
    "golden": "/repo/eval/golden.jsonl",
    "pipeline": {"python": "rag:answer", "options": {"top_k": 5}},
    "n_cases": 4,
    "evaluation": {"metrics": ["hit_rate@5", "faithfulness"], "gated": ["hit_rate@5"]},
    "status": "complete",
    "started": "2026-01-01T00:00:00+00:00",
    "finished": "2026-01-01T00:01:00+00:00",
    "counts": {"predictions": 8, "prediction_errors": 1, "scores": 16, "judge_failures": 0},
    "judge_usage": USAGE,
    "prediction_errors": [{"message": "Timeout after 30 s", "count": 1}],
}


def write(tmp_path, data):
    (tmp_path / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    return tmp_path


def test_a_written_manifest_reads_back_to_the_same_object_in_the_same_order(tmp_path):
    manifest = read_manifest(write(tmp_path, WRITTEN))
    assert manifest.shard == (1, 2) and manifest.counts == Counts(predictions=8, prediction_errors=1, scores=16)
    assert manifest.judge_usage == JudgeUsage(**USAGE) and manifest.prediction_errors[0].count == 1
    assert manifest.metrics == ["hit_rate@5", "faithfulness"] and manifest.gated == ["hit_rate@5"]
    assert manifest.code_sha256 == "c" * 64
    out = manifest.to_dict()
    assert out == WRITTEN and list(out) == list(WRITTEN)
    running = {k: v for k, v in WRITTEN.items() if k not in ("finished", "counts", "judge_usage", "prediction_errors")}
    assert Manifest.from_dict(running | {"status": "running"}).to_dict() == running | {"status": "running"}


def test_an_old_manifest_still_loads_and_its_identity_differs(tmp_path):
    old = {  # the schema's required keys only, repeats written as 1.0, a judge without its configuration
        "schema_version": 1,
        "status": "complete",
        "golden": "golden.jsonl",
        "golden_sha256": "a" * 64,
        "config_sha256": "b" * 64,
        "repeats": 1.0,
        "n_cases": 3,
        "judge": {"id": "lexical", "version": "1"},
        "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T00:01:00+00:00",
        "counts": {"predictions": 3, "prediction_errors": 0, "scores": 9},
    }
    manifest = read_manifest(write(tmp_path, old))
    assert manifest.repeats == 1 and isinstance(manifest.repeats, int)
    assert manifest.judge_usage is None and manifest.code is None and manifest.metrics == [] and manifest.gated is None
    identity = manifest.identity
    assert (identity.scoring, identity.gate_version, identity.judge) == ({}, "", {"id": "lexical", "version": "1"})
    out = manifest.to_dict()
    jsonschema.validate(out, SCHEMA)
    assert {k: out[k] for k in old} == old | {"counts": old["counts"] | {"judge_failures": 0}}


def test_a_manifest_the_schema_refuses_names_the_file(tmp_path):
    with pytest.raises(InputError, match=r"manifest\.json.*repeats"):
        read_manifest(write(tmp_path, WRITTEN | {"repeats": "two"}))


def test_judge_usage_adds_up_like_inspect_ais_model_usage():
    a = JudgeUsage(**USAGE)
    b = JudgeUsage(requests=4, input_tokens=3, cost_usd=0.01, stopped="circuit open")
    total = a + b
    assert (total.requests, total.input_tokens, total.cache_hits) == (10, 40, 2)
    assert total.cost_usd == pytest.approx(0.0605) and total.stopped == "circuit open"
    assert (a + JudgeUsage(cost_usd=None)).cost_usd is None  # a side without prices: the cost is unknown
    assert sum([b, b], start=a) == a + b + b
    assert JudgeUsage(requests=2).to_dict() == {**JudgeUsage().to_dict(), "requests": 2}
