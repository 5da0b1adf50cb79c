import pytest

from gate.config import load_config
from gate.errors import InputError


def write(tmp_path, text, golden=True):
    if golden:
        (tmp_path / "golden.jsonl").write_text('{"id": "a", "question": "q"}\n')
    path = tmp_path / "rag-gate.yml"
    path.write_text(text)
    return path


def test_minimal_config_gets_defaults(tmp_path):
    config = load_config(write(tmp_path, "golden: golden.jsonl\npipeline:\n  python: rag:answer\n"))
    assert config.golden == (tmp_path / "golden.jsonl").resolve()
    assert config.pipeline.python == "rag:answer" and config.pipeline.workdir == tmp_path.resolve()
    assert config.repeats == 1 and config.evaluation.seed == 0
    assert "latency_ms" in config.evaluation.metrics and "latency_ms" not in config.evaluation.gated
    assert config.evaluation.margin("hit_rate@5") == 0.03
    assert len(config.sha256) == 64


def test_overrides_and_margins(tmp_path):
    config = load_config(
        write(
            tmp_path,
            """
golden: golden.jsonl
pipeline: {python: "rag:answer", options: {top_k: 2}, concurrency: 3}
metrics: [hit_rate@3, mrr]
gate: [mrr]
margins: {mrr: 0.1}
repeats: 3
judge: lexical
""",
        ),
        repeats=5,
    )
    assert config.repeats == 5 and config.pipeline.options == {"top_k": 2}
    assert config.evaluation.gated == ("mrr",) and config.evaluation.margin("mrr") == 0.1
    assert config.evaluation.judge == {"name": "lexical"}


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\nrepeat: 3\n",
            "rag-gate.yml:3: repeat: unknown key",
        ),
        (
            "golden: golden.jsonl\npipeline:\n  python: a:b\n  timeout: 3\n",
            "rag-gate.yml:4: pipeline.timeout: unknown key",
        ),
        ("golden: golden.jsonl\npipeline: {}\n", "rag-gate.yml:2: pipeline: needs exactly one of"),
        ("pipeline: {python: 'a:b'}\n", "rag-gate.yml: golden: required key is missing"),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\nmetrics: [hit_rate@5, bleu]\n",
            "rag-gate.yml:3: metrics.1: unknown metric",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\nmetrics:\n  - mrr\n  - mrr\n",
            "rag-gate.yml:5: metrics.1: 'mrr' is listed twice",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\nmetrics: [mrr]\nmargins: {mrr: .nan}\n",
            "rag-gate.yml:4: margins.mrr: must be a finite number",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b', timeout_s: .inf}\n",
            "rag-gate.yml:2: pipeline.timeout_s: inf is greater than the maximum",
        ),
        (
            "golden: golden.jsonl\ngolden: other.jsonl\npipeline: {python: 'a:b'}\n",
            "rag-gate.yml:2: golden: duplicate key (first on line 1)",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\njudge: {name: oracle}\n",
            "rag-gate.yml:3: judge: unknown judge 'oracle' (lexical, llm, nli, ragas)",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\nrepeats: 0\n",
            "rag-gate.yml:3: repeats: 0 is less than",
        ),
        ("golden: nope.jsonl\npipeline: {python: 'a:b'}\n", "rag-gate.yml:1: golden: file not found"),
        ("golden: golden.jsonl\npipeline: {python: 'a:b'\n", "rag-gate.yml:3: invalid YAML"),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b'}\ngate: [mrr]\nmetrics: [ndcg@5]\n",
            "rag-gate.yml:3: gate: 'mrr' is not in metrics",
        ),
    ],
)
def test_config_errors_name_line_and_key(tmp_path, text, message):
    with pytest.raises(InputError) as info:
        load_config(write(tmp_path, text))
    assert str(info.value).startswith(str(tmp_path / message)), str(info.value)
    assert "\n" not in str(info.value)


def test_non_utf8_config_names_the_line(tmp_path):
    path = write(tmp_path, "golden: golden.jsonl\n")
    path.write_bytes(b"golden: golden.jsonl\npipeline: {python: 'a:b'}\n# caf\xe9\n")
    with pytest.raises(InputError, match=r"rag-gate.yml:3: not UTF-8 text"):
        load_config(path)


def test_trend_policy_defaults_overrides_and_round_trip(tmp_path):
    from gate.config import Evaluation, TrendPolicy

    default = load_config(write(tmp_path, "golden: golden.jsonl\npipeline: {python: 'a:b'}\n"))
    assert default.evaluation.trend == TrendPolicy(window=4, warning=0.05, critical=0.10, block="never")
    text = "golden: golden.jsonl\npipeline: {python: 'a:b'}\ntrend: {window: 6, warning: 0.03, block: true}\n"
    config = load_config(write(tmp_path, text))
    assert config.evaluation.trend == TrendPolicy(window=6, warning=0.03, critical=0.10, block="critical")
    assert Evaluation.from_dict(config.evaluation.to_dict()) == config.evaluation


@pytest.mark.parametrize(
    "trend, message",
    [
        ("{window: 0}", "rag-gate.yml:3: trend.window: 0 is less than the minimum of 1"),
        ("{warning: 0.2, critical: 0.1}", "rag-gate.yml:3: trend.critical: must be ≥ trend.warning"),
        ("{block: sometimes}", "rag-gate.yml:3: trend.block: 'sometimes' is not valid"),
        ("{windows: 3}", "rag-gate.yml:3: trend.windows: unknown key"),
    ],
)
def test_trend_policy_errors_name_line_and_key(tmp_path, trend, message):
    with pytest.raises(InputError) as info:
        load_config(write(tmp_path, f"golden: golden.jsonl\npipeline: {{python: 'a:b'}}\ntrend: {trend}\n"))
    assert str(info.value).startswith(str(tmp_path / message)), str(info.value)
