"""`rag-gate run` shows what it measured: the side's aggregates (a table or JSON), a warning when retrieved ids never
match the golden set's document ids, and every path it echoes with its hidden characters escaped."""

import json

import pytest
from click.testing import CliRunner
from helpers import read_jsonl, write_jsonl

from gate.cli import main
from gate.history.entries import run_aggregates

GOLDEN = [
    *(
        {
            "id": f"q{i}",
            "question": f"What is the capital of country {i}?",
            "expected_doc_ids": [f"doc-{i}"],
            "reference_answers": [f"City {i}"],
        }
        for i in range(1, 5)
    ),
    {"id": "ood", "question": "What is the airspeed of a swallow?", "out_of_domain": True},
]


def chunk(doc_id: str, i: int) -> dict:
    return {"id": doc_id, "text": f"The capital of country {i} is City {i}."}


def predictions(ids=("doc-1", "doc-2", "x")) -> list[dict]:
    """q1 and q2 retrieve their document, q3 another one, q4 fails, the out-of-domain question is refused."""
    return [
        *({"id": f"q{i}", "answer": f"City {i}", "retrieved": [chunk(d, i)], "latency_ms": 10.0 * i}
          for i, d in enumerate(ids, start=1)),
        {"id": "q4", "error": "boom", "latency_ms": 40.0},
        {"id": "ood", "answer": "I don't know.", "retrieved": [], "latency_ms": 50.0},
    ]  # fmt: skip


METRICS = "[hit_rate@5, answer_f1, refusal, error_rate, latency_ms]"


def project(tmp_path, rows, metrics=METRICS):
    write_jsonl(tmp_path / "golden.jsonl", GOLDEN)
    write_jsonl(tmp_path / "preds.jsonl", rows)
    config = tmp_path / "rag-gate.yml"
    config.write_text(f"golden: golden.jsonl\npipeline: {{predictions: preds.jsonl}}\nmetrics: {metrics}\n")
    return config


def run(config, out, *options):
    return CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(out), "--no-progress", *options])


def test_run_prints_the_side_s_aggregates_as_a_table(tmp_path):
    result = run(project(tmp_path, predictions()), tmp_path / "first")
    assert result.exit_code == 0, result.output
    # by hand: hit rate 2 of the 3 answered in-domain cases; answer F1 1 on each; the one out-of-domain case
    # refused; 1 failure in 5 cases; latency (10 + 20 + 30 + 40 + 50) / 5 = 30 ms (a failed call's too)
    assert result.stdout.splitlines() == [
        "metric       mean  n  failed",
        "hit_rate@5  0.667  3       0",
        "answer_f1   1.000  3       0",
        "refusal     1.000  1       0",
        "error_rate  0.200  5       0",
        "latency_ms     30  5       0",
    ]
    assert result.stderr.startswith(f"wrote {tmp_path / 'first'}: 5 predictions (1 failed), 25 scores")
    assert "warning" not in result.stderr


def test_run_format_json_prints_only_json_on_stdout(tmp_path):
    result = run(project(tmp_path, predictions()), tmp_path / "first", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["run"] == str(tmp_path / "first")
    assert document["counts"] == {"predictions": 5, "prediction_errors": 1, "scores": 25, "judge_failures": 0}
    assert list(document["metrics"]) == ["hit_rate@5", "answer_f1", "refusal", "error_rate", "latency_ms"]
    hit = document["metrics"]["hit_rate@5"]
    assert hit["mean"] == pytest.approx(2 / 3) and hit["n"] == 3 and hit["failed"] == 0
    assert hit["sd"] == pytest.approx(0.5773502691896258)  # statistics.stdev([1, 1, 0])
    assert document["metrics"]["latency_ms"]["mean"] == pytest.approx(30.0)
    assert "wrote" in result.stderr and "wrote" not in result.stdout


def test_a_score_the_judge_could_not_give_is_failed_a_failed_prediction_is_not(tmp_path):
    assert run(project(tmp_path, predictions()), tmp_path / "first").exit_code == 0
    scores = tmp_path / "first" / "scores.jsonl"
    rows = read_jsonl(scores)
    for row in rows:
        if (row["id"], row["metric"]) == ("q1", "answer_f1"):
            row.update(value=None, error="judge failed: timeout")
    write_jsonl(scores, rows)
    aggregates = run_aggregates(tmp_path / "first")
    assert aggregates["answer_f1"]["failed"] == 1 and aggregates["answer_f1"]["n"] == 2
    # q4's prediction failed: its hit_rate@5 row has an error, but that is error_rate's count, not a scoring failure
    assert any(r["id"] == "q4" and r["metric"] == "hit_rate@5" and r.get("error") for r in rows)
    assert aggregates["hit_rate@5"]["failed"] == 0 and aggregates["hit_rate@5"]["n"] == 3


def test_history_add_prints_the_same_table(tmp_path):
    first = run(project(tmp_path, predictions()), tmp_path / "first")
    args = ["history", "add", str(tmp_path / "first"), "--history", str(tmp_path / "h"), "--sha", "abc"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == f"appended abc to {tmp_path / 'h'}:"
    # the entry has no failure counts: the same table without that column
    assert [line.strip() for line in lines[1:]] == [
        line.rsplit("  ", 1)[0].rstrip() for line in first.stdout.splitlines()
    ]


def test_history_add_outside_git_says_the_entry_has_no_commit(tmp_path, monkeypatch):
    run(project(tmp_path, predictions()), tmp_path / "first")
    monkeypatch.chdir(tmp_path)  # no git repository above tmp_path, and the run's manifest names no commit
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    result = CliRunner().invoke(main, ["history", "add", "first", "--history", "h.jsonl"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "appended an entry without a git commit (the run's manifest names none and not in a git repository; "
        "--sha sets one) to h.jsonl:"
    )
    assert json.loads((tmp_path / "h.jsonl").read_text())["sha"] is None


def test_run_warns_when_no_retrieved_id_ever_matches_an_expected_id(tmp_path):
    chunks = ("doc-1#chunk-0003", "doc-2#chunk-0001", "x#chunk-0001")
    result = run(project(tmp_path, predictions(chunks)), tmp_path / "first")
    assert result.exit_code == 0, result.output
    (warning,) = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warning == (
        "rag-gate: warning: no retrieved id of the 3 in-domain predictions with chunks matches any of the golden "
        'set\'s 4 expected document ids, so every retrieval metric is 0; e.g. "q1" expects "doc-1", got '
        '"doc-1#chunk-0003". Chunk ids? Keep the document id (LangChain metadata, LlamaIndex node.ref_doc_id, '
        "Haystack meta['source_id']; README: Retrieved ids)"
    )
    assert "hit_rate@5  0.000  3" in result.stdout  # the table still shows the (meaningless) zero


def test_a_match_anywhere_or_no_retrieval_metric_means_no_warning(tmp_path):
    # q3 retrieves q1's document at rank 7 (beyond hit_rate@5's cut-off): ids do match the golden set
    rows = predictions(("doc-1#c", "doc-2#c", "x#c"))
    rows[2]["retrieved"] = [chunk(f"n{j}", 3) for j in range(6)] + [chunk("doc-1", 3)]
    result = run(project(tmp_path, rows), tmp_path / "deep")
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output
    result = run(project(tmp_path, predictions(("a", "b", "c")), "[answer_f1]"), tmp_path / "nore")
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output


def test_the_mismatch_example_shows_long_and_hidden_ids_whole_or_both_ends(tmp_path):
    long = "https://docs.example.com/library/" + "a" * 80 + "/os.path.html#chunk-17"
    result = run(project(tmp_path, predictions((long, "doc-2\u200b", "x"))), tmp_path / "first")
    assert result.exit_code == 0, result.output
    warning = next(line for line in result.stderr.splitlines() if "warning" in line)
    # 60 characters: the first 30 and the last 29 around the ellipsis
    assert 'expects "doc-1", got "https://docs.example.com/libra…aaaaaaa/os.path.html#chunk-17"' in warning
    result = run(project(tmp_path, predictions(("doc-1\x01", "doc-2\u200b", "x"))), tmp_path / "hidden")
    warning = next(line for line in result.stderr.splitlines() if "warning" in line)
    assert 'expects "doc-1", got "doc-1\\x01"' in warning  # the invisible difference is what the user must see


def test_paths_are_echoed_with_control_characters_escaped(tmp_path):
    config = project(tmp_path, predictions())
    result = run(config, tmp_path / "x\x01y")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"wrote {tmp_path}/x\\x01y: 5 predictions")
    assert f"all kept in {tmp_path}/x\\x01y/predictions.jsonl:" in result.stderr
    assert "x\x01y" not in result.output and "xy" not in result.output
