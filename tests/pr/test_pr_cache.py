"""gate.pr.cache: the base-results cache, its key and its signature."""

from __future__ import annotations

import json

import pytest

from gate.pr import cache


def key(**changes):
    fields = dict(
        base_sha="a" * 40,
        golden_sha256="b" * 64,
        config_sha256="c" * 64,
        judge_id=cache.judge_id({"name": "lexical"}),
        repeats=1,
        gate_version="0.1.0",
    )
    return cache.CacheKey(**(fields | changes))


def snapshot_of(tmp_path, **files):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    for name, text in files.items():
        (run / name.replace("__", ".")).write_text(text)
    return cache.Snapshot.of(run)


def test_cache_round_trip_and_every_key_field_matters(tmp_path):
    snapshot = snapshot_of(tmp_path, manifest__json="{}", scores__jsonl="x\n")
    stored = cache.store(tmp_path / "cache", key(), snapshot, b"k1")
    assert cache.lookup(tmp_path / "cache", key(), b"k1") == snapshot
    assert (stored / "scores.jsonl").read_text() == "x\n"
    for change in (
        {"base_sha": "d" * 40},
        {"golden_sha256": "e" * 64},
        {"config_sha256": "f" * 64},
        {"judge_id": cache.judge_id({"name": "nli"})},
        {"repeats": 3},
        {"gate_version": "0.2.0"},
    ):
        assert cache.lookup(tmp_path / "cache", key(**change), b"k1") is None
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [key().digest()]


def test_cache_refuses_incomplete_runs_and_tampered_keys(tmp_path):
    with pytest.raises(ValueError, match="incomplete"):
        cache.store(tmp_path / "cache", key(), snapshot_of(tmp_path, scores__jsonl="x\n"), b"k1")
    stored = cache.store(tmp_path / "cache", key(), snapshot_of(tmp_path, manifest__json="{}"), b"k1")
    (stored.parent / "key.json").write_text(json.dumps({"base_sha": "other"}))
    assert cache.lookup(tmp_path / "cache", key(), b"k1") is None


def test_judge_id_ignores_key_order():
    assert cache.judge_id({"name": "llm", "model": "m"}) == cache.judge_id({"model": "m", "name": "llm"})
    assert cache.judge_id({"name": "llm", "model": "m"}) != cache.judge_id({"name": "llm", "model": "n"})
    assert len(cache.judge_id(None)) == 16
