"""Run directories: validated manifest and scores, inputs never overwritten, previous runs kept, atomic rewrites."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate.cli import main
from gate.config import load_config
from gate.errors import InputError
from gate.produce import run_side
from gate.runs import RUN_FILES, load_scores, read_manifest
from gate.shards import merge_runs


def preds(ids=("q1", "q2", "q3", "q4"), error_on=()):
    rows = []
    for i in ids:
        if i in error_on:
            rows.append({"id": i, "error": "boom"})
        else:
            rows.append({"id": i, "answer": f"answer {i}", "retrieved": [{"id": "d1", "text": "t"}], "latency_ms": 3})
    return rows


@pytest.fixture
def precomputed(tmp_path, tiny_golden):
    """A config whose pipeline is a precomputed predictions file in tmp/data/."""
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "predictions.jsonl", preds())
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline:\n  predictions: data/predictions.jsonl\nmetrics: [hit_rate@5, mrr]\n"
    )
    return load_config(tmp_path / "rag-gate.yml")


@pytest.fixture
def run_dir(tmp_path, precomputed):
    return run_side(precomputed, tmp_path / "run")


# ------------------------------------------------------------------------------------------ manifest


def edit_manifest(run: Path, change) -> Path:
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps(change(manifest)) if callable(change) else change)
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        ("{}", r"manifest.json: \w+: required field is missing"),
        ("", r"manifest.json:1: invalid JSON: Expecting value"),
        ("[1, 2]", r"manifest.json: expected a JSON object, got list"),
        ('{"repeats": NaN}', r"manifest.json: repeats: NaN is not a valid JSON number"),
        (lambda m: m | {"status": "done"}, r"manifest.json: status: 'done' is not one of"),
        (lambda m: m | {"repeats": "2"}, r"manifest.json: repeats: must be an integer, got str"),
        (lambda m: {k: v for k, v in m.items() if k != "golden"}, r"manifest.json: golden: required field is missing"),
        (lambda m: {k: v for k, v in m.items() if k != "counts"}, r"manifest.json: counts: required field is missing"),
        (lambda m: m | {"evaluation": {"gated": []}}, r"manifest.json: evaluation.metrics: required field is missing"),
        (lambda m: m | {"judge": "lexical"}, r"manifest.json: judge: must be an object, got str"),
    ],
)
def test_junk_manifest_is_input_error_naming_the_key(run_dir, change, message):
    path = edit_manifest(run_dir, change)
    with pytest.raises(InputError, match=rf"^{path.parent}/{message}"):
        read_manifest(run_dir)


def test_compare_with_an_empty_manifest_exits_2(tmp_path, run_dir):
    head = tmp_path / "head"
    head.mkdir()
    for name in ("predictions.jsonl", "scores.jsonl", "manifest.json"):
        (head / name).write_bytes((run_dir / name).read_bytes())
    (run_dir / "manifest.json").write_text("{}")
    result = CliRunner().invoke(main, ["compare", str(run_dir), str(head), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"rag-gate: error: {run_dir}/manifest.json: ") and "Traceback" not in result.output


# ------------------------------------------------------------------------------------------- scores


@pytest.mark.parametrize(
    "row, message",
    [
        ('{"id": "q1", "repeat": 0, "value": 1.0}', "metric: required field is missing"),
        ('{"id": "q1", "repeat": 0, "metric": "mrr"}', "value: required field is missing"),
        ('{"id": "q1", "repeat": "0", "metric": "mrr", "value": 1}', "repeat: must be an integer, got str"),
        ('{"id": 1, "repeat": 0, "metric": "mrr", "value": 1}', "id: must be a string, got int"),
        ('{"id": "q1", "repeat": 0, "metric": "mrr", "value": "high"}', "value: must be a number or null, got str"),
        ('{"id": "q1", "repeat": 0, "metric": "mrr", "value": true}', "value: must be a number or null, got bool"),
        ('{"id": "q1", "repeat": 0, "metric": "mrr", "value": Infinity}', "value: Infinity is not a valid JSON"),
        ('["q1", 0, "mrr", 1]', "expected a JSON object, got list"),
    ],
)
def test_junk_score_rows_name_file_line_and_field(run_dir, row, message):
    path = run_dir / "scores.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = row
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        load_scores(path)
    assert str(info.value).startswith(f"{path}:3: {message}")


def test_valid_scores_round_trip_null_as_nan(run_dir):
    scores = load_scores(run_dir / "scores.jsonl")
    assert len(scores) == 8 and {s.metric for s in scores} == {"hit_rate@5", "mrr"}
    ood = [s for s in scores if s.id == "q4"]  # retrieval metrics do not apply to the out-of-domain case
    assert all(s.value != s.value for s in ood)


# ------------------------------------------------------------------------------------ output safety


@pytest.mark.parametrize("out", ["data", ".", "data/.."])
def test_out_dir_holding_an_input_is_refused_before_writing(tmp_path, precomputed, out):
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match=r"the directory holds the run's own input"):
        run_side(precomputed, tmp_path / out)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before


def test_cli_run_into_the_input_directory_exits_2_and_keeps_the_input(tmp_path, precomputed):
    original = (tmp_path / "data" / "predictions.jsonl").read_bytes()
    config = str(tmp_path / "rag-gate.yml")
    result = CliRunner().invoke(main, ["run", "--config", config, "--out", str(tmp_path / "data"), "--no-progress"])
    assert result.exit_code == 2 and "holds the run's own input (pipeline.predictions" in result.stderr
    assert (tmp_path / "data" / "predictions.jsonl").read_bytes() == original
    assert not (tmp_path / "data" / "manifest.json").exists()


def test_reused_run_directory_keeps_every_previous_run_numbered(tmp_path, precomputed, tiny_golden):
    run = tmp_path / "run"
    seen = []
    for n in range(3):  # three different configs into the same directory
        write_jsonl(tmp_path / "data" / "predictions.jsonl", preds(error_on=("q2",) if n == 1 else ()))
        (tmp_path / "rag-gate.yml").write_text(
            f"golden: golden.jsonl\npipeline:\n  predictions: data/predictions.jsonl\nmetrics: [hit_rate@{n + 1}]\n"
        )
        run_side(load_config(tmp_path / "rag-gate.yml"), run)
        seen.append(
            {name: (run / name).read_bytes() for name in ("predictions.jsonl", "scores.jsonl", "manifest.json")}
        )
    for k in (1, 2):  # run k-1's files, moved aside with number k
        for name in RUN_FILES:
            stem, ext = name.split(".")
            assert (run / f"{stem}.previous-{k}.{ext}").read_bytes() == seen[k - 1][name]
    assert json.loads((run / "manifest.json").read_text())["evaluation"]["metrics"] == ["hit_rate@3"]


def test_foreign_files_without_manifest_are_moved_aside_not_truncated(tmp_path, precomputed):
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text("someone's own file\n")
    run_side(precomputed, run)
    assert (run / "predictions.previous-1.jsonl").read_text() == "someone's own file\n"
    assert len((run / "predictions.jsonl").read_text().splitlines()) == 4


def test_merge_into_a_shard_directory_is_refused(tmp_path, precomputed):
    shards = [run_side(precomputed, tmp_path / f"s{i}", shard_spec=(i, 2)) for i in (1, 2)]
    before = (shards[0] / "predictions.jsonl").read_bytes()
    with pytest.raises(InputError, match="holds the run's own input"):
        merge_runs(shards, shards[0])
    assert (shards[0] / "predictions.jsonl").read_bytes() == before
    merged = merge_runs(shards, tmp_path / "merged")
    assert len((merged / "predictions.jsonl").read_text().splitlines()) == 4


# ------------------------------------------------------------------------------------ atomic rewrite

RUN = "import sys; from gate.cli import main; main(['run', '--config', *sys.argv[1:2], '--out', *sys.argv[2:]])"


def run_limited(config: Path, out: Path, max_bytes: int) -> subprocess.CompletedProcess:
    """`rag-gate run` in a subprocess whose writes fail beyond ``max_bytes`` per file (as a full disk does)."""

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", RUN, str(config), str(out)], preexec_fn=limit, capture_output=True, text=True, env=env
    )


def test_resume_rewrite_interrupted_by_a_full_disk_keeps_every_row(tmp_path, tiny_golden):
    big = "lorem ipsum " * 4000
    rows = [
        {"id": i, "answer": big, "retrieved": [{"id": "d1", "text": big}], "latency_ms": 1} for i in ("q1", "q3", "q4")
    ] + [{"id": "q2", "error": "crashed"}]
    write_jsonl(tmp_path / "p.jsonl", rows)
    config = tmp_path / "rag-gate.yml"
    config.write_text("golden: golden.jsonl\npipeline:\n  predictions: p.jsonl\nmetrics: [hit_rate@5]\n")
    out = run_side(load_config(config), tmp_path / "run")
    before = (out / "predictions.jsonl").read_bytes()
    # the resume drops the failed q2 row, so it rewrites predictions.jsonl: that write fails half-way
    done = run_limited(config, out, len(before) // 2)
    assert done.returncode == 3 and "predictions.jsonl: cannot write: File too large" in done.stderr
    assert (out / "predictions.jsonl").read_bytes() == before
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"  # not "complete"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    run_side(load_config(config), out)  # and the next run resumes it
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
