import ast
import dataclasses
import inspect
import json
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import pytest

import gate
from gate.config import (
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    Config,
    GatePolicy,
    PipelineSpec,
    TrendPolicy,
    config_keys,
    default_gated,
    load_config,
)
from gate.errors import InputError
from gate.judges import JUDGES, get_judge
from gate.judges.llm.config import EndpointConfig
from gate.metrics import DEFAULT_METRICS

GOOD = "golden: golden.jsonl\npipeline: {python: 'a:b'}\n"


def write(tmp_path, text, golden=True):
    if golden:
        (tmp_path / "golden.jsonl").write_text('{"id": "a", "question": "q"}\n')
    path = tmp_path / "rag-gate.yml"
    path.write_text(text)
    return path


def problems(tmp_path, text, **kwargs):
    """The lines of the InputError that loading ``text`` raises, with the directory prefix removed."""
    with pytest.raises(InputError) as info:
        load_config(write(tmp_path, text), **kwargs)
    return [line.replace(f"{tmp_path}/rag-gate.yml", "rag-gate.yml") for line in str(info.value).splitlines()]


def test_minimal_config_gets_the_dataclass_defaults(tmp_path):
    config = load_config(write(tmp_path, "golden: golden.jsonl\npipeline:\n  python: rag:answer\n"))
    assert config.golden == (tmp_path / "golden.jsonl").resolve()
    assert config.pipeline == PipelineSpec(
        python="rag:answer", workdir=tmp_path.resolve(), origin=f"{tmp_path / 'rag-gate.yml'}:3"
    )
    assert config.policy == GatePolicy()
    assert config.repeats == 1 and config.policy.seed == 0
    assert config.policy.metrics == DEFAULT_METRICS
    assert "latency_ms" in config.policy.metrics and "latency_ms" not in config.policy.gated
    assert config.policy.gated == (
        "hit_rate@5",
        "mrr",
        "grounded_answer_rate",
        "contradiction_rate",
        "answer_f1",
        "refusal",
        "false_refusal",
        "error_rate",
    )
    assert config.policy.margin("hit_rate@5") == 0.03
    assert len(config.sha256) == 64


def test_overrides_and_margins(tmp_path):
    config = load_config(
        write(
            tmp_path,
            """
golden: golden.jsonl
pipeline: {python: "rag:answer", options: {top_k: 2}, concurrency: 3, timeout_s: 5}
metrics: [hit_rate@3, mrr, latency_ms]
gate: [mrr]
margins: {mrr: 0.1, latency_ms: 2.5}
repeats: 3
judge: lexical
refusal: {phrases: ["no idea"], use_field: false}
alpha: 0.01
""",
        ),
        repeats=5,
    )
    assert config.repeats == 5 and config.pipeline.options == {"top_k": 2}
    assert config.pipeline.concurrency == 3 and config.pipeline.timeout_s == 5
    assert config.policy.gated == ("mrr",) and config.policy.margin("mrr") == 0.1
    assert config.policy.margin("latency_ms") == 2.5  # relative: any increase can happen
    assert config.policy.judge == {"name": "lexical"}
    assert config.policy.refusal_phrases == ("no idea",) and config.policy.refusal_use_field is False
    assert config.policy.alpha == 0.01 and config.policy.error_budget == GatePolicy().error_budget


def test_gated_defaults_to_the_primary_families_of_the_metrics():
    assert GatePolicy(metrics=("ndcg@10", "hit_rate@3", "hit_rate@5", "latency_ms")).gated == ("hit_rate@3",)
    assert GatePolicy(metrics=("ndcg@10", "latency_ms")).gated == ("ndcg@10",)
    assert GatePolicy(metrics=("mrr",), gated=[]).gated == ()
    assert default_gated(("latency_ms", "cost_usd")) == ()


def test_evaluation_round_trips_through_its_manifest_form():
    policy = GatePolicy(metrics=("mrr", "refusal"), margins={"mrr": 0.2}, judge="lexical", seed=7, strict=True)
    data = json.loads(json.dumps(policy.to_dict()))
    assert set(data) == {f.name for f in dataclasses.fields(GatePolicy)}
    assert GatePolicy.from_dict(data) == policy
    assert GatePolicy.from_dict({}) == GatePolicy()
    assert GatePolicy.from_dict({"seed": 3, "from_a_newer_version": 1}).seed == 3


def _schema():
    return json.loads(resources.files("gate.schemas").joinpath("config.schema.json").read_text(encoding="utf-8"))


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_the_schema_states_no_defaults():
    assert not [n for n in _walk(_schema()) if "default" in n]
    for backend in JUDGES.values():
        assert not [n for n in _walk(backend.schema) if "default" in n]


def test_schema_keys_and_dataclass_fields_agree():
    schema = _schema()
    keys = set(schema["properties"])
    for nested in ("refusal", "scoring"):
        keys |= {f"{nested}.{k}" for k in schema["properties"][nested]["properties"]}
    fields = set(config_keys(Config)) | set(config_keys(GatePolicy))
    assert keys - {"refusal", "scoring"} == fields
    assert set(schema["properties"]["pipeline"]["properties"]) == set(config_keys(PipelineSpec))
    assert set(schema["properties"]["trend"]["properties"]) == set(config_keys(TrendPolicy))


def test_every_public_dataclass_field_is_documented():
    """Attribute docstrings under every public field of every public dataclass of the package."""
    undocumented = []
    for path in sorted(Path(gate.__file__).parent.rglob("*.py")):
        name = ".".join(path.relative_to(Path(gate.__file__).parent.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and not n.name.startswith("_")):
            if not any("dataclass" in ast.unparse(d) for d in cls.decorator_list):
                continue
            body = cls.body
            for i, stmt in enumerate(body):
                if not isinstance(stmt, ast.AnnAssign) or ast.unparse(stmt.target).startswith("_"):
                    continue
                if "ClassVar" not in ast.unparse(stmt.annotation):
                    follows = body[i + 1] if i + 1 < len(body) else None
                    if not (isinstance(follows, ast.Expr) and isinstance(follows.value, ast.Constant)):
                        undocumented.append(f"{name}.{cls.name}.{ast.unparse(stmt.target)}")
    assert undocumented == []


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD + "repeat: 3\n", "rag-gate.yml:3: repeat: unknown key; did you mean `repeats`?"),
        (
            "golden: golden.jsonl\npipeline:\n  python: a:b\n  timeout: 3\n",
            "rag-gate.yml:4: pipeline.timeout: unknown key; did you mean `timeout_s`?",
        ),
        (GOOD + "colour: red\n", "rag-gate.yml:3: colour: unknown key (allowed: adaptive, alpha, cluster_by,"),
        ("golden: golden.jsonl\npipeline: {}\n", "rag-gate.yml:2: pipeline: needs exactly one of"),
        (
            "golden: golden.jsonl\npipeline: {python: a:b, command: x}\n",
            "rag-gate.yml:2: pipeline: needs exactly one of 'python', 'command' or 'predictions'",
        ),
        ("pipeline: {python: 'a:b'}\n", "rag-gate.yml: golden: required key is missing"),
        (GOOD + "metrics: [hit_rate@5, bleu]\n", "rag-gate.yml:3: metrics.1: unknown metric 'bleu'"),
        (GOOD + "metrics:\n  - mrr\n  - mrr\n", "rag-gate.yml:5: metrics.1: 'mrr' is listed twice"),
        (GOOD + "metrics: [mrr]\nmargins: {mrr: .nan}\n", "rag-gate.yml:4: margins.mrr: must be a finite number"),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b', timeout_s: .inf}\n",
            "rag-gate.yml:2: pipeline.timeout_s: must be a finite number",
        ),
        (
            "golden: golden.jsonl\ngolden: other.jsonl\npipeline: {python: 'a:b'}\n",
            "rag-gate.yml:2: golden: duplicate key (first on line 1)",
        ),
        (GOOD + "repeats: 0\n", "rag-gate.yml:3: repeats: 0 is less than the minimum of 1"),
        (GOOD + "repeats: two\n", "rag-gate.yml:3: repeats: must be an integer, got 'two'"),
        ("golden: nope.jsonl\npipeline: {python: 'a:b'}\n", "rag-gate.yml:1: golden: file not found"),
        ("golden: golden.jsonl\npipeline: {python: 'a:b'\n", "rag-gate.yml:3: invalid YAML"),
        (
            "golden: golden.jsonl\npipeline: {python: 'a b'}\n",
            "rag-gate.yml:2: pipeline.python: 'a b' is not of the form module:function",
        ),
        (GOOD + "cluster_by: doc\n", "rag-gate.yml:3: cluster_by: 'doc' is not one of cluster, tag or tag:<prefix>"),
        (
            GOOD + "gate: [mrr]\nmetrics: [ndcg@5]\n",
            "rag-gate.yml:3: gate.0: 'mrr' is not in metrics (metrics: ndcg@5)",
        ),
        ("- a\n- b\n", "rag-gate.yml: expected a mapping of settings, got list"),
        (GOOD + "gate: [mrr, mrr]\n", "rag-gate.yml:3: gate.1: 'mrr' is listed twice"),
        ("golden: golden.jsonl\npipeline: null\n", "rag-gate.yml:2: pipeline: must be a mapping, got None"),
        (GOOD + "margins: {1: 0.1}\n", "rag-gate.yml:3: margins.1: '1' is not computed"),
        (GOOD + "7: x\n", "rag-gate.yml:3: 7: unknown key (allowed: "),
    ],
)
def test_config_errors_name_line_and_key(tmp_path, text, message):
    found = problems(tmp_path, text)
    assert len(found) == 1 and found[0].startswith(message), found


def test_a_misspelt_top_level_key_is_named_with_its_line_and_the_key_it_resembles(tmp_path):
    text = "golden: golden.jsonl\npipline:\n  python: rag:answer\n"
    assert problems(tmp_path, text) == ["rag-gate.yml:2: pipline: unknown key; did you mean `pipeline`?"]


YAML_TYPED = [  # (the config after its golden: line, the start of the one problem)
    (
        "pipeline: {python: 'a:b', options: {on: 1}}",
        "rag-gate.yml:2: pipeline.options.on: the key `on` is read by YAML as a boolean",
    ),
    (
        "pipeline: {python: 'a:b', options: {Off: 1}}",
        "rag-gate.yml:2: pipeline.options.Off: the key `Off` is read by YAML as a boolean",
    ),
    (
        "pipeline: {python: 'a:b', options: {~: 1}}",
        "rag-gate.yml:2: pipeline.options.~: the key `~` is read by YAML as null",
    ),
    (
        "pipeline: {python: 'a:b', options: {0x1F: 1}}",
        "rag-gate.yml:2: pipeline.options.0x1F: the key `0x1F` is read by YAML as an integer",
    ),
    (
        "pipeline: {python: 'a:b', options: {2024-01-01: 1}}",
        "rag-gate.yml:2: pipeline.options.2024-01-01: the key `2024-01-01` is read by YAML as a date",
    ),
    (
        "pipeline: {python: 'a:b', options: {since: 2024-01-01}}",
        "rag-gate.yml:2: pipeline.options.since: `2024-01-01` is read by YAML as a date",
    ),
    (
        "pipeline: {python: 'a:b', options: {at: 2024-01-01 10:00:00}}",
        "rag-gate.yml:2: pipeline.options.at: `2024-01-01 10:00:00` is read by YAML as a date or timestamp",
    ),
    (
        "pipeline: {python: 'a:b', options: {b: !!binary aGVsbG8=}}",
        "rag-gate.yml:2: pipeline.options.b: `aGVsbG8=` is read by YAML as binary data",
    ),
    (
        "pipeline: {python: 'a:b', options: {s: !!set {a, b}}}",
        "rag-gate.yml:2: pipeline.options.s: a set (!!set) is not a setting value; use a list",
    ),
    (
        "pipeline: {python: 'a:b', options: {o: !!omap [a: 1]}}",
        "rag-gate.yml:2: pipeline.options.o: an ordered map (!!omap) is not a setting value",
    ),
    (
        "pipeline: {python: 'a:b', options: {deep: {list: [1, {when: 2024-01-01}]}}}",
        "rag-gate.yml:2: pipeline.options.deep.list.1.when: `2024-01-01`",
    ),
    (
        "pipeline:\n  python: 'a:b'\n  env:\n    yes: '1'",
        "rag-gate.yml:5: pipeline.env.yes: the key `yes` is read by YAML as a boolean",
    ),
    (
        "pipeline: {python: 'a:b'}\njudge: {name: lexical, on: 1}",
        "rag-gate.yml:3: judge.on: the key `on` is read by YAML as a boolean",
    ),
    (
        "pipeline: {python: 'a:b'}\npairwise: {model: m, since: 2024-01-01}",
        "rag-gate.yml:3: pairwise.since: `2024-01-01` is read by YAML as a date",
    ),
]


@pytest.mark.parametrize("text, message", YAML_TYPED)
def test_a_key_or_value_that_yaml_types_by_itself_is_refused_with_its_line(tmp_path, text, message):
    """``on:``, dates, timestamps, !!binary, !!set: not JSON, so not something a pipeline can receive (exit 2)."""
    found = problems(tmp_path, "golden: golden.jsonl\n" + text + "\n")
    assert len(found) == 1 and found[0].startswith(message), found


def test_quoted_yaml_typed_text_and_plain_number_keys_are_accepted(tmp_path):
    text = "golden: golden.jsonl\npipeline: {python: 'a:b', options: {'on': 'yes', since: '2024-01-01', 1: x, -2: y}}\n"
    config = load_config(write(tmp_path, text))
    assert config.pipeline.options == {"on": "yes", "since": "2024-01-01", 1: "x", -2: "y"}
    json.dumps(config.pipeline.options, sort_keys=False)  # what the worker protocol and the config hash need


def test_validate_and_run_refuse_a_yaml_typed_value_alike(tmp_path):
    """One check for both: run never starts (and never says "internal error") on what validate refuses."""
    path = write(tmp_path, "golden: golden.jsonl\npipeline: {python: 'a:b', options: {since: 2024-01-01}}\n")
    args = [sys.executable, "-m", "gate"]
    validate = subprocess.run([*args, "validate", str(path)], capture_output=True, text=True)
    run = subprocess.run([*args, "run", "--config", str(path), "--out", str(tmp_path / "out")], capture_output=True,
                         text=True)  # fmt: skip
    expected = f"{path}:2: pipeline.options.since: `2024-01-01` is read by YAML as a date or timestamp"
    assert validate.returncode == 2 and expected in validate.stdout + validate.stderr
    assert run.returncode == 2 and expected in run.stderr and "internal error" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_every_problem_is_reported_at_once_in_file_order(tmp_path):
    text = textwrap.dedent("""\
        golden: missing.jsonl
        pipline:
          python: rag:answer
        metrics: [hit_rate@5, mrr, bleu]
        margins: {hit_rate@3: 0.1, mrr: 3}
        judge: {name: llm, model: m, tmperature: 0}
        repeats: 1000000000
        repeats: 2
        alpha: .inf
        gate: [mrr, hit_rate@3]
        """)
    found = problems(tmp_path, text)
    assert [line.split(": ")[0] for line in found] == [
        "rag-gate.yml:1",
        "rag-gate.yml:2",
        "rag-gate.yml:4",
        "rag-gate.yml:5",
        "rag-gate.yml:5",
        "rag-gate.yml:6",
        "rag-gate.yml:8",
        "rag-gate.yml:9",
        "rag-gate.yml:10",
    ]
    assert found[0].startswith("rag-gate.yml:1: golden: file not found")
    assert found[1] == "rag-gate.yml:2: pipline: unknown key; did you mean `pipeline`?"
    assert found[2].startswith("rag-gate.yml:4: metrics.2: unknown metric 'bleu'")
    assert found[3] == (
        "rag-gate.yml:5: margins.hit_rate@3: 'hit_rate@3' is not computed (metrics: hit_rate@5, mrr, bleu); "
        "did you mean `hit_rate@5`?"
    )
    assert found[4] == (
        "rag-gate.yml:5: margins.mrr: 3 is outside the metric's range: must be < 1 (a difference of a metric in [0, 1])"
    )
    assert found[5] == "rag-gate.yml:6: judge.tmperature: unknown option of judge 'llm'; did you mean `temperature`?"
    assert found[6] == "rag-gate.yml:8: repeats: duplicate key (first on line 7)"
    assert found[7] == "rag-gate.yml:9: alpha: must be a finite number"
    assert found[8].startswith("rag-gate.yml:10: gate.1: 'hit_rate@3' is not in metrics")


@pytest.mark.parametrize(
    "margins, message",
    [
        (
            "{hit_rate@3: 0.1}",
            "margins.hit_rate@3: 'hit_rate@3' is not computed (metrics: hit_rate@5, mrr, latency_ms); "
            "did you mean `hit_rate@5`?",
        ),
        (
            "{hit_rate@5: 3}",
            "margins.hit_rate@5: 3 is outside the metric's range: must be < 1 (a difference of a metric in [0, 1])",
        ),
        ("{mrr: 1}", "margins.mrr: 1 is outside the metric's range: must be < 1 (a difference of a metric in [0, 1])"),
        ("{mrr: -0.1}", "margins.mrr: -0.1 is less than the minimum of 0"),
    ],
)
def test_margins_of_metrics_not_computed_or_outside_their_range_are_rejected(tmp_path, margins, message):
    text = GOOD + f"metrics: [hit_rate@5, mrr, latency_ms]\nmargins: {margins}\n"
    assert problems(tmp_path, text) == [f"rag-gate.yml:4: {message}"]


def test_margins_inside_the_range_are_accepted(tmp_path):
    text = GOOD + "metrics: [hit_rate@5, latency_ms]\nmargins: {hit_rate@5: 0.99, latency_ms: 4}\n"
    assert load_config(write(tmp_path, text)).policy.margins == {"hit_rate@5": 0.99, "latency_ms": 4.0}


@pytest.mark.parametrize(
    "judge, message",
    [
        ("{name: llm, model: m, tmperature: 0}", "judge.tmperature: unknown option of judge 'llm'; did you mean"),
        ("{name: llm, temperature: 0}", "judge.model: required option of judge 'llm' is missing"),
        ("{name: llm, model: m, temperature: 5}", "judge.temperature: 5 is greater than the maximum of 2"),
        ("{name: llm, model: m, max_tokens: '512'}", "judge.max_tokens: must be an integer, got '512'"),
        ("{name: llm, model: m, base_url: 'ftp://x'}", "judge.base_url: 'ftp://x' is not ^https?://"),
        ("{name: ragas, model: m, generator_model: g}", "judge.generator_model: unknown option of judge 'ragas'"),
        (
            "{name: ragas, model: m, concurrency: 100000}",
            "judge.concurrency: 100000 is greater than the maximum of 256",
        ),
        ("{name: nli, model_path: m, window: 0}", "judge.window: 0 is less than the minimum of 1"),
        ("{name: nli}", "judge.model_path: required option of judge 'nli' is missing"),
        ("{name: lexical, support: 1.5}", "judge.support: 1.5 is greater than the maximum of 1"),
        (
            "{name: lexial}",
            "judge.name: unknown judge 'lexial' (known: lexical, llm, nli, ragas); did you mean `lexical`?",
        ),
        ("oracle", "judge: unknown judge 'oracle' (known: lexical, llm, nli, ragas)"),
        ("{model: m}", "judge: needs a 'name' (known: lexical, llm, nli, ragas)"),
        ("[llm]", "judge: must be a string or a mapping, got ['llm']"),
    ],
)
def test_judge_options_are_checked_at_load_time_with_the_line(tmp_path, judge, message):
    found = problems(tmp_path, GOOD + f"judge: {judge}\n")
    assert len(found) == 1 and found[0].startswith(f"rag-gate.yml:3: {message}"), found


def test_judge_option_lines_point_at_the_option(tmp_path):
    text = GOOD + "judge:\n  name: llm\n  model: m\n  tmperature: 0\n"
    assert problems(tmp_path, text)[0].startswith("rag-gate.yml:6: judge.tmperature")


def test_valid_judge_options_load(tmp_path):
    config = load_config(write(tmp_path, GOOD + "judge: {name: llm, model: m, temperature: 0.5, cache_dir: false}\n"))
    assert config.policy.judge == {"name": "llm", "model": "m", "temperature": 0.5, "cache_dir": False}


def test_checking_judge_options_imports_no_backend(tmp_path):
    path = write(tmp_path, GOOD + "judge: {name: nli, model_path: /nowhere, windoww: 2}\n")
    code = (
        "import sys\nfrom gate.config import load_config\ntry:\n    load_config(sys.argv[1])\nexcept Exception as e:\n"
        "    print(e)\nheavy = ['torch', 'sentence_transformers', 'ragas', 'openai', 'sklearn', 'gate.judges.nli']\n"
        "print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        f"{path}:3: judge.windoww: unknown option of judge 'nli'; did you mean `window`?",
        "[]",
    ]


def _keyword_options(cls) -> set[str]:
    parameters = inspect.signature(cls.__init__).parameters.values()
    names = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD}
    if any(p.kind is p.VAR_KEYWORD for p in parameters):  # **endpoint: the EndpointConfig fields
        names |= {f.name for f in dataclasses.fields(EndpointConfig)}
    return names - {"self", "environ"}  # environ is for programs, not configs


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_declared_judge_options_are_the_constructor_keywords(name):
    backend = JUDGES[name]
    assert set(backend.options) == _keyword_options(backend.load())
    for option in backend.required:
        parameter = inspect.signature(backend.load().__init__).parameters.get(option)
        field = {f.name: f for f in dataclasses.fields(EndpointConfig)}.get(option)
        default = parameter.default if parameter is not None else field.default
        assert default is inspect.Parameter.empty or default is dataclasses.MISSING, option


@pytest.mark.parametrize(
    "options",
    [{"temperature": 2.5}, {"temperature": -1}, {"max_tokens": 0}, {"concurrency": 0}, {"max_retries": -1},
     {"timeout_s": 0}, {"backoff_s": -1}, {"max_wait_s": 0}, {"base_url": "x"}, {"model": ""}, {"deadline_s": 0},
     {"max_consecutive_failures": 0}, {"cost_per_1k_input": -0.1}, {"cost_per_1k_output": -1}],
)  # fmt: skip
def test_option_ranges_the_endpoint_rejects_are_rejected_by_the_declaration_too(options):
    with pytest.raises(ValueError):
        EndpointConfig(**{"model": "m", **options})
    with pytest.raises(ValueError, match=f"judge 'llm': {next(iter(options))}: "):
        get_judge({"name": "llm", "model": "m", **options})


def test_get_judge_checks_options_before_building():
    with pytest.raises(ValueError, match="unknown judge 'oracle'; known judges: lexical, llm, nli, ragas"):
        get_judge({"name": "oracle"})
    with pytest.raises(ValueError, match=r"judge 'lexical': Additional properties .*'temperature' was unexpected"):
        get_judge({"name": "lexical", "temperature": 0})
    assert get_judge({"name": "lexical", "support": 0.5}).support == 0.5


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD + "repeats: 1000000000\n", "rag-gate.yml:3: repeats: 1000000000 is greater than the maximum of 100"),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b', concurrency: 100000}\n",
            "rag-gate.yml:2: pipeline.concurrency: 100000 is greater than the maximum of 256",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b', retries: 1000}\n",
            "rag-gate.yml:2: pipeline.retries: 1000 is greater than the maximum of 10",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'a:b', timeout_s: 1.0e+12}\n",
            "rag-gate.yml:2: pipeline.timeout_s: 1000000000000.0 is greater than the maximum of 86400",
        ),
        (
            GOOD + "judge_concurrency: 5000\n",
            "rag-gate.yml:3: judge_concurrency: 5000 is greater than the maximum of 256",
        ),
    ],
)
def test_counts_and_timeouts_are_capped(tmp_path, text, message):
    assert problems(tmp_path, text) == [f"{message} (the largest value rag-gate accepts)"]


def test_the_repeats_override_is_capped_like_the_key(tmp_path):
    assert problems(tmp_path, GOOD, repeats=10**9) == [
        "rag-gate.yml: --repeats: 1000000000 is greater than the maximum of 100 (the largest value rag-gate accepts)"
    ]
    assert load_config(write(tmp_path, GOOD), repeats=100).repeats == 100


def _load_in_subprocess(path: Path) -> subprocess.CompletedProcess:
    """Load a config in a child process, so that a loader that hangs fails the test instead of the suite."""
    code = (
        "import sys\nfrom gate.config import load_config\ntry:\n    load_config(sys.argv[1])\nexcept Exception as e:\n"
    )
    code += "    print(type(e).__name__, e)\n"
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)


def test_a_yaml_alias_bomb_is_rejected_without_expanding_it(tmp_path):
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefghi", "bcdefghij", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")  # 9^10 strings once expanded
    path = write(tmp_path, GOOD + "pipeline_options_: \n" + "\n".join("  " + line for line in levels) + "\n")
    done = _load_in_subprocess(path)
    assert done.stdout.strip() == (
        f"InputError {path}:9: more than {MAX_NODES} values once YAML aliases are expanded (an alias bomb?)"
    )


def test_modest_aliases_are_fine(tmp_path):
    text = "golden: golden.jsonl\npipeline:\n  python: a:b\n  options: &opts {top_k: 3, tags: [x, y]}\n"
    text += "refusal: {phrases: &p [no idea, not sure]}\n"
    config = load_config(write(tmp_path, text))
    assert config.pipeline.options == {"top_k": 3, "tags": ["x", "y"]}
    assert config.policy.refusal_phrases == ("no idea", "not sure")


@pytest.mark.parametrize("style", ["flow", "block"])
def test_deeply_nested_yaml_is_rejected_with_the_line(tmp_path, style):
    depth = 100_000 if style == "flow" else 200
    if style == "flow":
        nested = "[" * depth + "]" * depth
    else:
        nested = "\n" + "".join("  " * (i + 2) + f"k{i}:\n" for i in range(depth)) + "  " * (depth + 2) + "1"
    path = write(tmp_path, GOOD.replace("}", ", options: {x: PLACE}}") if style == "flow" else GOOD)
    if style == "flow":
        path.write_text(path.read_text().replace("PLACE", nested))
    else:
        path.write_text("golden: golden.jsonl\npipeline:\n  python: a:b\n  options:" + nested + "\n")
    done = _load_in_subprocess(path)
    if style == "flow":  # libyaml's own limit (1,000 levels) may stop the scan before the loader's
        assert done.stdout.startswith(f"InputError {path}:2: "), done.stderr
        assert "nested deeper than" in done.stdout or "exceeded maximum nesting depth" in done.stdout
    else:
        assert done.stdout.strip() == f"InputError {path}:{5 + MAX_DEPTH - 2}: nested deeper than {MAX_DEPTH} levels"


def test_nesting_up_to_the_limit_is_fine(tmp_path):
    value = "[" * (MAX_DEPTH - 3) + "1" + "]" * (MAX_DEPTH - 3)
    config = load_config(
        write(tmp_path, f"golden: golden.jsonl\npipeline: {{python: 'a:b', options: {{x: {value}}}}}\n")
    )
    inner = config.pipeline.options["x"]
    for _ in range(MAX_DEPTH - 4):
        inner = inner[0]
    assert inner == [1]


def test_an_oversized_config_is_rejected_before_parsing(tmp_path):
    path = write(tmp_path, GOOD + "# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(InputError, match=f"rag-gate.yml: config file larger than {MAX_CONFIG_BYTES} bytes"):
        load_config(path)


def test_a_missing_workdir_or_predictions_file_is_named_with_its_key_and_line(tmp_path):
    text = "golden: golden.jsonl\npipeline:\n  python: pipe:answer\n  workdir: no/such/dir\n"
    assert problems(tmp_path, text) == [
        f"rag-gate.yml:4: pipeline.workdir: directory not found: {tmp_path.resolve()}/no/such/dir"
    ]
    text = "golden: golden.jsonl\npipeline:\n  predictions: preds.jsonl\n"
    assert problems(tmp_path, text) == [
        f"rag-gate.yml:3: pipeline.predictions: file not found: {tmp_path.resolve()}/preds.jsonl"
    ]
    (tmp_path / "sub").mkdir()
    text = "golden: golden.jsonl\npipeline:\n  python: pipe:answer\n  workdir: sub\n"
    assert load_config(write(tmp_path, text)).pipeline.workdir == (tmp_path / "sub").resolve()


def test_non_utf8_config_names_the_line(tmp_path):
    path = write(tmp_path, "golden: golden.jsonl\n")
    path.write_bytes(b"golden: golden.jsonl\npipeline: {python: 'a:b'}\n# caf\xe9\n")
    with pytest.raises(InputError, match=r"rag-gate.yml:3: not UTF-8 text"):
        load_config(path)


def test_trend_policy_defaults_overrides_and_round_trip(tmp_path):
    default = load_config(write(tmp_path, "golden: golden.jsonl\npipeline: {python: 'a:b'}\n"))
    assert default.policy.trend == TrendPolicy(window=4, warning=0.05, critical=0.10, block="never")
    text = "golden: golden.jsonl\npipeline: {python: 'a:b'}\ntrend: {window: 6, warning: 0.03, block: true}\n"
    config = load_config(write(tmp_path, text))
    assert config.policy.trend == TrendPolicy(window=6, warning=0.03, critical=0.10, block="critical")
    assert GatePolicy.from_dict(config.policy.to_dict()) == config.policy


@pytest.mark.parametrize(
    "trend, message",
    [
        ("{window: 0}", "rag-gate.yml:3: trend.window: 0 is less than the minimum of 1"),
        ("{warning: 0.2, critical: 0.1}", "rag-gate.yml:3: trend.critical: must be ≥ trend.warning (0.2)"),
        ("{block: sometimes}", "rag-gate.yml:3: trend.block: 'sometimes' is not one of"),
        ("{warning: 0.2}", "rag-gate.yml:3: trend.warning: must be ≤ trend.critical (0.1, the default)"),
        ("{windows: 3}", "rag-gate.yml:3: trend.windows: unknown key"),
    ],
)
def test_trend_policy_errors_name_line_and_key(tmp_path, trend, message):
    with pytest.raises(InputError) as info:
        load_config(write(tmp_path, f"golden: golden.jsonl\npipeline: {{python: 'a:b'}}\ntrend: {trend}\n"))
    assert str(info.value).startswith(str(tmp_path / message)), str(info.value)


def test_the_config_module_is_cheap_to_import():
    code = "import sys, gate.config; print([m for m in ('scipy', 'sklearn', 'jsonschema') if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert gate.load_config is load_config


@pytest.mark.parametrize(
    "names, message",
    [
        ("[GITHUB_TOKEN]", "rag-gate.yml:4: pipeline.env_passthrough.0: 'GITHUB_TOKEN' is never given to the pipeline"),
        (
            "[OPENAI_API_KEY, 1X]",
            "rag-gate.yml:4: pipeline.env_passthrough.1: '1X' is not an environment variable name",
        ),
    ],
)
def test_env_passthrough_names_are_checked_with_the_line(tmp_path, names, message):
    found = problems(tmp_path, f"golden: golden.jsonl\npipeline:\n  python: a:b\n  env_passthrough: {names}\n")
    assert len(found) == 1 and found[0].startswith(message), found
    config = load_config(write(tmp_path, GOOD.replace("}", ", env_passthrough: [OPENAI_API_KEY]}")))
    assert config.pipeline.env_passthrough == ("OPENAI_API_KEY",)


def test_the_readme_config_block_loads_and_states_the_defaults(tmp_path):
    from helpers import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Configuration (`rag-gate.yml`)", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "golden.jsonl").write_text('{"id": "a", "question": "q"}\n')
    config = load_config(write(tmp_path, block, golden=False))
    pipeline, policy = config.pipeline, config.policy
    defaults, default_pipeline = GatePolicy(), PipelineSpec()
    for name in ("concurrency", "timeout_s", "startup_timeout_s", "retries"):
        assert getattr(pipeline, name) == getattr(default_pipeline, name), name
    assert pipeline.workdir == tmp_path.resolve()  # `.`: the config's directory
    for name in ("seed", "alpha", "strict", "error_budget", "fail_on_new_ood", "must_pass", "trend", "golden_changes",
                 "metrics", "judge_concurrency"):  # fmt: skip
        assert getattr(policy, name) == getattr(defaults, name), name
    assert config.repeats == next(f.default for f in dataclasses.fields(Config) if f.name == "repeats") == 1
    assert policy.judge == defaults.judge
    assert all(policy.margin(m) == defaults.margin(m) for m in policy.margins)


def test_scoring_jobs_is_read_and_checked(tmp_path):
    (tmp_path / "g.jsonl").write_text('{"id": "a", "question": "q?", "expected_doc_ids": []}\n')
    config = tmp_path / "rag-gate.yml"
    config.write_text("golden: g.jsonl\npipeline: {python: m:f}\nscoring: {jobs: 3}\n")
    assert load_config(config).scoring_jobs == 3
    config.write_text("golden: g.jsonl\npipeline: {python: m:f}\n")
    assert load_config(config).scoring_jobs is None  # every core
    config.write_text("golden: g.jsonl\npipeline: {python: m:f}\nscoring: {jobs: 0}\n")
    with pytest.raises(InputError, match=r"rag-gate.yml:3: scoring.jobs"):
        load_config(config)


def test_a_relative_margin_and_must_pass_settings_are_read(tmp_path):
    text = GOOD + "margins: {false_refusal: {relative: 0.5, min: 0.01}}\nmust_pass: {out_of_domain: false}\n"
    policy = load_config(write(tmp_path, text)).policy
    assert policy.margin("false_refusal", 0.1) == pytest.approx(0.05)  # 50 % of a base of 0.1
    assert policy.margin("false_refusal", 0.0) == 0.01  # never below its min
    assert policy.relative_margin("false_refusal") == 0.5 and policy.relative_margin("refusal") is None
    assert policy.must_pass.out_of_domain is False and policy.must_pass_metrics == ("hit_rate@5",)


BAD_SETTINGS = [
    ("margins: {false_refusal: {relativ: 0.5}}", "margins.false_refusal.relativ: unknown key; did you mean "
     "`relative`?"),
    ("margins: {false_refusal: {relative: 0}}", "margins.false_refusal.relative: 0 is less than or equal to the "
     "minimum of 0"),
    ("metrics: [latency_ms, hit_rate@5]\nmargins: {latency_ms: {relative: 0.5}}",
     "margins.latency_ms: a ratio metric's margin is relative already: give a number"),
    ("must_pass: {metrics: [mrr]}", "must_pass.metrics.0: 'mrr' is not a binary metric of one answer (e.g. "
     "hit_rate@5)"),
    ("must_pass: {cases: true}", "must_pass.cases: unknown key (allowed: metrics, out_of_domain)"),
]  # fmt: skip


@pytest.mark.parametrize(("setting", "message"), BAD_SETTINGS)
def test_bad_relative_margins_and_must_pass_settings_name_their_key(tmp_path, setting, message):
    (line,) = problems(tmp_path, GOOD + setting + "\n")
    assert line.endswith(message), line
