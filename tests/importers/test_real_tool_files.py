"""Importers against files the real tools wrote (``fixtures/generate.py``; ``fixtures/*/VERSION`` names the tool).

ragas 0.4.3 (``to_jsonl``/``to_csv``/``to_pandas``), DeepEval 4.3.1 (``save_as`` json/jsonl/csv), promptfoo 0.121.20
(``promptfoo eval -o results.json`` with the ``echo`` provider, beside the config it ran) and BEIR 2.2.0
(``beir.util.write_to_json``/``write_to_tsv``, and what its ``GenericDataLoader`` reads back). ragas is in the test
extra, so its files are also written live here and must import as the committed ones do.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gate.cli.main import main
from gate.golden import load_golden
from gate.importers import import_golden
from gate.importers.common import Options, question_id

FIXTURES = Path(__file__).parent / "fixtures"
REFUSAL = "I don't have that information."


def run(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.stderr


def by_question(records: list[dict]) -> dict[str, dict]:
    return {r["question"]: r for r in records}


def test_the_fixtures_name_the_tool_versions_that_wrote_them():
    versions = {p.parent.name: p.read_text(encoding="utf-8").strip() for p in FIXTURES.glob("*/VERSION")}
    assert versions == {"ragas": "ragas 0.4.3", "deepeval": "deepeval 4.3.1", "promptfoo": "promptfoo 0.121.20",
                        "beir": "beir 2.2.0"}  # fmt: skip


# --- ragas ------------------------------------------------------------------------------------------------------------

RAGAS_EXPECTED = {
    "Where is Normandy?": (["normans"], ["In France."], False),
    'Who was "the Walker", and when did he rule?': (["rollo", "normans"], ["Rollo, from 911."], False),
    "What is the tower made of?": (["tower"], ["Wrought iron."], False),  # a chunk of one document
    "What will the stock market do next year?": ([], [REFUSAL], True),  # a refusal reference, no context
    "Who is the mayor of Le Havre?": ([], ["I don't know."], True),
    "How long is the Seine?": ([], ["About 777 km."], False),
}


def _summary(records: list[dict]) -> dict[str, tuple]:
    return {r["question"]: (r["expected_doc_ids"], r["reference_answers"], r["out_of_domain"]) for r in records}


def test_ragas_files_keep_out_of_domain_cases_by_their_refusal_references(tmp_path):
    folder = FIXTURES / "ragas"
    out = tmp_path / "golden.jsonl"
    code, err = run("import", "ragas", folder / "dataset.jsonl", "--corpus", folder / "corpus.jsonl", "--out", out)
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert _summary(records) == RAGAS_EXPECTED
    assert f"wrote {out}: 6 cases (2 out-of-domain, 1 in-domain without expected documents)" in err
    assert "2 × reference answer is a refusal (imported as out-of-domain" in err
    assert "out-of-domain: 2 by a reference answer that is a refusal" in err
    assert err.strip().splitlines()[-1] == (
        "rag-gate: warning: 1 of 6 cases are in-domain without expected documents: retrieval metrics skip them; "
        "mark them out-of-domain if the system should refuse them (--ood-without-documents)"
    )
    csv = import_golden("ragas", folder / "dataset.csv", Options(corpus=folder / "corpus.jsonl")).records
    assert csv == records  # the CSV ragas writes (Python list literals) imports as its JSONL
    assert len(load_golden(out)) == 6


def test_ragas_refusal_references_can_be_kept_in_domain_and_a_column_read_instead(tmp_path):
    folder = FIXTURES / "ragas"
    kept = import_golden("ragas", folder / "dataset.jsonl", Options(ood_refusals=False)).records
    assert not any(r["out_of_domain"] for r in kept)
    # a column added with pandas to ragas' to_pandas(): scope=out marks the case
    options = Options(corpus=folder / "corpus.jsonl", ood_from="scope=OUT", ood_refusals=False)
    result = import_golden("ragas", folder / "dataset_scope.csv", options)
    assert _summary(result.records) == RAGAS_EXPECTED
    assert result.ood_reasons == {"scope = OUT": 2}


def test_ragas_without_out_of_domain_cases_warns_loudly_with_the_count(tmp_path):
    source = tmp_path / "d.jsonl"
    lines = (FIXTURES / "ragas" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    source.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    code, err = run("import", "ragas", source, "--corpus", FIXTURES / "ragas" / "corpus.jsonl", "--out",
                    tmp_path / "g.jsonl")  # fmt: skip
    assert code == 0
    assert err.strip().splitlines()[-1] == (
        "rag-gate: warning: 0 of 3 cases are out-of-domain: the refusal metric cannot be computed and a head that "
        "answers what it should refuse goes unseen; mark them with a reference answer that is a refusal (\"I don't "
        'know"), or a column named by --ood-from KEY (README: Import from other tools)'
    )


def test_ragas_written_live_imports_as_the_committed_files(tmp_path):
    ragas = pytest.importorskip("ragas")
    rows = [json.loads(line) for line in (FIXTURES / "ragas" / "dataset.jsonl").read_text("utf-8").splitlines()]
    dataset = ragas.EvaluationDataset.from_list(rows)
    dataset.to_jsonl(tmp_path / "d.jsonl")
    dataset.to_csv(tmp_path / "d.csv")
    options = Options(corpus=FIXTURES / "ragas" / "corpus.jsonl")
    committed = import_golden("ragas", FIXTURES / "ragas" / "dataset.csv", options).records
    assert import_golden("ragas", tmp_path / "d.jsonl", options).records == committed
    assert import_golden("ragas", tmp_path / "d.csv", options).records == committed
    assert (tmp_path / "d.csv").read_bytes() == (FIXTURES / "ragas" / "dataset.csv").read_bytes()
    dataset.to_hf_dataset().to_json(tmp_path / "hf.json")  # Hugging Face datasets: JSON Lines named .json
    assert import_golden("ragas", tmp_path / "hf.json", options).records == committed


# --- deepeval ---------------------------------------------------------------------------------------------------------

DEEPEVAL_EXPECTED = {
    "Where is Normandy?": (["normans"], ["In France."], False),
    'Who was "the Walker", and when did he rule?': (["rollo", "normans"], ["Rollo, from 911."], False),
    "What will the stock market do next year?": ([], [], True),  # additional_metadata.out_of_domain
    "Who is the mayor of Le Havre?": ([], [REFUSAL], True),  # a refusal expected_output
    "How long is the Seine?": ([], ["About 777 km."], False),
    "What is the tower made of?": ([], ["Wrought iron."], False),  # retrieval_context only
}


@pytest.mark.parametrize("name", ["goldens.json", "goldens.jsonl", "goldens.csv"])
def test_deepeval_save_as_json_jsonl_and_csv_import_alike(tmp_path, name):
    folder = FIXTURES / "deepeval"
    out = tmp_path / "golden.jsonl"
    code, err = run("import", "deepeval", folder / name, "--corpus", folder / "corpus.jsonl", "--out", out)
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert _summary(records) == DEEPEVAL_EXPECTED
    first = by_question(records)["Where is Normandy?"]
    assert first["tags"] == ["geography"] and first["metadata"] == {"source": "deepeval", "topic": "history"}
    assert "contexts matched to corpus ids: 3 exact" in err  # the CSV's |-joined contexts split again
    assert "out-of-domain: 1 by additional_metadata.out_of_domain: true, 1 by a reference answer that is a refusal" in (
        err
    )
    assert "rag-gate: warning: 2 of 6 cases are in-domain without expected documents" in err
    retrieved = import_golden("deepeval", folder / name, Options(corpus=folder / "corpus.jsonl", contexts="retrieved"))
    assert by_question(retrieved.records)["What is the tower made of?"]["expected_doc_ids"] == ["tower"]


def test_deepeval_csv_bad_cells_name_file_line_and_field(tmp_path):
    header = (FIXTURES / "deepeval" / "goldens.csv").read_text(encoding="utf-8").splitlines()[0]
    n = len(header.split(","))
    cells = {c: i for i, c in enumerate(header.split(","))}

    def row(**values: str) -> str:
        out = [""] * n
        for key, value in values.items():
            out[cells[key]] = value
        return ",".join(out)

    source = tmp_path / "goldens.csv"
    source.write_text("\n".join([header, row(input="ok?"), row(expected_output="no input"),
                                 row(input="q", additional_metadata='"{""out_of_domain"": ""maybe""}"')]) + "\n",
                      encoding="utf-8")  # fmt: skip
    code, err = run("import", "deepeval", source, "--out", tmp_path / "g.jsonl")
    assert code == 2
    assert err.strip().splitlines() == [
        f"rag-gate: error: {source}:3: input: required: the question as text",
        f"{source}:4: additional_metadata.out_of_domain: must be true or false, got 'maybe' (--ood-from "
        "out_of_domain=VALUE marks a value)",
    ]
    source.write_text(header + "\n" + row(input="q", additional_metadata="{not json") + "\n", encoding="utf-8")
    code, err = run("import", "deepeval", source, "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (2, f"rag-gate: error: {source}:2: additional_metadata: not a JSON object")


def test_deepeval_multi_turn_goldens_are_refused_by_index(tmp_path):
    source = tmp_path / "goldens.json"
    source.write_text(json.dumps([{"input": "fine"}, {"scenario": "A user asks twice", "turns": []}]), "utf-8")
    code, err = run("import", "deepeval", source, "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (
        2,
        f"rag-gate: error: {source}: [1].scenario: a multi-turn golden: only single-turn goldens are imported",
    )


# --- promptfoo --------------------------------------------------------------------------------------------------------

PROMPTFOO_EXPECTED = {
    "Where is Normandy?": (["normans"], ["France"], False),  # icontains; vars.context matched
    "What is the capital of France?": (["paris"], ["Paris", "paris"], False),  # contains-any; a list var
    "Which city is France's capital?": (["paris"], ["Paris", "paris"], False),
    "What will the stock market do next year?": ([], [], True),  # is-refusal
    "Who is the mayor of Le Havre?": ([], ["I don't know"], True),  # icontains a refusal
    "How long is the Seine?": ([], ["About 777 km."], False),  # equals '{{expected}}'
    "What is the weather in Paris tomorrow?": ([], [], True),  # metadata.out_of_domain
    "What is the tower made of?": ([], ["iron"], False),  # contains inside an assert-set
}


@pytest.mark.parametrize("name", ["results.json", "results.yaml", "results.jsonl"])
def test_promptfoo_results_file_imports_as_the_config_that_produced_it(tmp_path, name):
    folder = FIXTURES / "promptfoo"
    out = tmp_path / "golden.jsonl"
    code, err = run("import", "promptfoo", folder / name, "--corpus", folder / "corpus.jsonl", "--out", out)
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert _summary(records) == PROMPTFOO_EXPECTED
    assert [r["question"] for r in records] == list(PROMPTFOO_EXPECTED)  # testIdx order, each test once
    assert f"wrote {out}: 8 cases (3 out-of-domain, 2 in-domain without expected documents)" in err
    if name == "results.json":
        index = [r["testIdx"] for r in json.loads((folder / name).read_text("utf-8"))["results"]["results"]].index(4)
        assert f"{folder / name}: results.results[{index}].testCase: 'I don't know'" in err
    else:
        assert re.search(rf"{re.escape(str(folder / name))}:\d+: testCase: 'I don't know'", err)
    from_config = import_golden("promptfoo", folder / "promptfooconfig.yaml", Options(corpus=folder / "corpus.jsonl"))
    assert from_config.records == records
    assert records[0]["metadata"] == {"source": "promptfoo", "suite": "handbook", "description": "normandy"}


def test_promptfoo_results_file_renders_templates_in_assertion_values(tmp_path):
    """A results file's test case as promptfoo ran it: its assertion values' templates rendered from its vars."""
    data = json.loads((FIXTURES / "promptfoo" / "results.json").read_text(encoding="utf-8"))
    index = {r["testIdx"]: n for n, r in enumerate(data["results"]["results"])}
    seine = data["results"]["results"][index[5]]["testCase"]  # vars.expected: About 777 km.
    assert seine["vars"]["expected"] == "About 777 km." and seine["assert"] == [
        {"type": "equals", "value": "{{expected}}"}
    ]
    seine["assert"] = [
        {"type": "equals", "value": "It is {{expected}}"},
        {"type": "contains", "value": "{{ question }} {{ expected }}"},
        {"type": "contains", "value": "{{ unknown }} km"},
    ]
    source = tmp_path / "results.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "golden.jsonl"
    code, err = run("import", "promptfoo", source, "--out", out)
    assert code == 0, err
    records = by_question([json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()])
    assert records["How long is the Seine?"]["reference_answers"] == [
        "It is About 777 km.",
        "How long is the Seine? About 777 km.",
    ]
    assert "note: 1 × reference answer whose template cannot be rendered from the test's vars (left out)" in err
    assert (
        f"  {source}: results.results[{index[5]}].testCase.assert: '{{{{ unknown }}}} km': {{{{ unknown }}}}: "
        "no such var" in err.splitlines()
    )


def test_promptfoo_results_file_problems_name_the_result_index(tmp_path):
    data = json.loads((FIXTURES / "promptfoo" / "results.json").read_text(encoding="utf-8"))
    data["results"]["results"][2]["testCase"]["vars"] = {"a": "x", "b": "y"}
    data["results"]["results"][3]["testCase"]["metadata"]["out_of_domain"] = "perhaps"
    source = tmp_path / "results.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    code, err = run("import", "promptfoo", source, "--out", tmp_path / "g.jsonl")
    lines = err.strip().splitlines()
    index = {r["testIdx"]: n for n, r in enumerate(data["results"]["results"])}
    assert code == 2
    assert f"{source}: results.results[{index[2]}].testCase.vars: no question var (have: a, b)" in lines[0]
    assert lines[1].startswith(f"{source}: results.results[{index[3]}].testCase.metadata.out_of_domain: must ")
    del data["results"]["results"][0]["testCase"]
    source.write_text(json.dumps(data), encoding="utf-8")
    code, err = run("import", "promptfoo", source, "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (
        2,
        f"rag-gate: error: {source}: results.results[0].testCase: required: the test case promptfoo ran",
    )


# --- beir -------------------------------------------------------------------------------------------------------------


def test_beir_imports_what_generic_data_loader_reads_and_counts_the_queries_left_out(tmp_path):
    folder = FIXTURES / "beir"
    view = json.loads((folder / "loader_view.json").read_text(encoding="utf-8"))
    out = tmp_path / "golden.jsonl"
    code, err = run("import", "beir", folder, "--out", out)
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # the oracle: BEIR's own loader; a query is a case when a judgment reaches 1, most relevant first
    expected = {
        q: sorted((d for d, s in judged.items() if s >= 1), key=lambda d: -judged[d])
        for q, judged in view["qrels"].items()
    }
    assert {r["id"]: r["expected_doc_ids"] for r in records} == {q: d for q, d in expected.items() if d}
    assert {r["id"]: r["question"] for r in records} == {q: view["queries"][q] for q in ("q1", "q2")}
    assert "note: 1 × query without a judgment in test but judged in another split (left out)" in err
    assert f"  {folder / 'queries.jsonl'}:3: 'q3' (in dev)" in err
    assert "note: 1 × query judged in no split (left out: no relevant document;" in err
    assert "note: 1 × query with no judgment ≥ 1 (left out: no relevant document)" in err
    assert "rag-gate: warning: 0 of 2 cases are out-of-domain" in err


def test_beir_out_of_domain_queries_from_a_field_or_from_having_no_relevant_document(tmp_path):
    folder = tmp_path / "beir"
    shutil.copytree(FIXTURES / "beir", folder)
    with_docs = import_golden("beir", folder, Options(ood_without_documents=True))
    assert {r["id"]: r["out_of_domain"] for r in with_docs.records} == {"q1": False, "q2": False, "q4": True,
                                                                        "q5": True}  # fmt: skip
    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    rows[3]["metadata"] = {"answerable": "no"}
    rows[0]["metadata"] = {"answerable": "no"}
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, err = run("import", "beir", folder, "--ood-from", "answerable=no", "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (
        2,
        f"rag-gate: error: {folder / 'queries.jsonl'}:1: 'q1': marked out-of-domain (metadata.answerable = no) but "
        "judged relevant: normans",
    )
    rows[0]["metadata"] = {}
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = import_golden("beir", folder, Options(ood_from="answerable=no"))
    assert {r["id"]: r["out_of_domain"] for r in result.records} == {"q1": False, "q2": False, "q4": True}
    assert result.ood_reasons == {"metadata.answerable = no": 1}


# --- the options ------------------------------------------------------------------------------------------------------


def test_ood_from_reads_flags_and_refuses_other_values_with_file_line_and_field(tmp_path):
    source = tmp_path / "d.jsonl"
    rows = [{"user_input": "a?", "oos": "Yes"}, {"user_input": "b?", "oos": 0}, {"user_input": "c?", "oos": True},
            {"user_input": "d?"}, {"user_input": "e?", "oos": 1.0}, {"user_input": "f?", "oos": None}]  # fmt: skip
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    records = import_golden("ragas", source, Options(ood_from="oos")).records
    assert [r["out_of_domain"] for r in records] == [True, False, True, False, True, False]
    rows[1]["oos"] = "sometimes"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, err = run("import", "ragas", source, "--ood-from", "oos", "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (
        2,
        f"rag-gate: error: {source}:2: oos: must be true or false, got 'sometimes' "
        "(--ood-from oos=VALUE marks a value)",
    )
    array = tmp_path / "d.json"
    array.write_text(json.dumps(rows), encoding="utf-8")
    code, err = run("import", "ragas", array, "--ood-from", "oos", "--out", tmp_path / "g.jsonl")
    assert code == 2 and err.startswith(f"rag-gate: error: {array}: [1].oos: must be true or false")
    code, err = run("import", "ragas", source, "--ood-from", "=x", "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (2, "rag-gate: error: --ood-from '=x': expected KEY or KEY=VALUE")


def test_a_refusal_reference_beside_expected_documents_stays_in_domain_and_is_reported(tmp_path):
    source = tmp_path / "d.jsonl"
    rows = [{"user_input": "a?", "reference": "I don't know.", "reference_context_ids": ["doc-1"]},
            {"user_input": "b?", "ground_truths": ["I don't know.", "Paris"]},
            {"user_input": "c?", "reference": "Sorry, I don't know."}]  # fmt: skip
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = import_golden("ragas", source)
    assert [r["out_of_domain"] for r in result.records] == [False, False, True]
    assert result.notes.kinds["reference answer is a refusal but the case names expected documents (kept in-domain)"]
    assert result.notes.count("reference answer is a refusal but other reference answers are not (kept in-domain)") == 1
    assert result.records[2]["id"] == question_id("c?")
    with_flag = import_golden("ragas", source, Options(ood_without_documents=True)).records
    assert [r["out_of_domain"] for r in with_flag] == [False, True, True]  # b? names no document


def test_validate_names_the_importer_for_each_real_tool_file():
    from gate.importers import sniff

    assert sniff(FIXTURES / "deepeval" / "goldens.csv") == ("deepeval", "a DeepEval CSV")
    assert sniff(FIXTURES / "deepeval" / "goldens.json")[0] == "deepeval"
    assert sniff(FIXTURES / "deepeval" / "goldens.jsonl")[0] == "deepeval"
    assert sniff(FIXTURES / "promptfoo" / "results.json") == ("promptfoo", "a promptfoo results file")
    assert sniff(FIXTURES / "promptfoo" / "results.yaml") == ("promptfoo", "a promptfoo results file")
    assert sniff(FIXTURES / "promptfoo" / "results.jsonl")[0] == "promptfoo"
    assert sniff(FIXTURES / "promptfoo" / "promptfooconfig.yaml")[0] == "promptfoo"
    assert sniff(FIXTURES / "ragas" / "dataset.csv")[0] == "ragas"
    assert sniff(FIXTURES / "ragas" / "dataset.jsonl")[0] == "ragas"
    assert sniff(FIXTURES / "beir")[0] == "beir"


def test_promptfoo_results_csv_is_refused_with_what_to_import_instead(tmp_path):
    source = tmp_path / "results.csv"
    source.write_text("Description,question,[echo] {{question}},Status\n,Where?,Where?,PASS\n", encoding="utf-8")
    code, err = run("import", "promptfoo", source, "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (
        2,
        f"rag-gate: error: {source}: a promptfoo results CSV holds no assertions (no refusal marks, no reference "
        "answers): import results.json (promptfoo eval -o results.json) or the config",
    )


def test_promptfoo_reference_answers_only_where_the_value_is_an_answer(tmp_path):
    source = tmp_path / "tests.yaml"
    source.write_text(
        """\
- vars: {question: 'How many?', answer: 'Forty-two'}
  assert:
    - {type: contains, value: 42}
    - {type: icontains, value: '{{answer}}'}
    - {type: contains, value: '...'}
    - {type: contains, value: 'Answer: {{answer}}'}
    - {type: not-contains, value: 'no'}
    - {type: contains-all, value: [a, b]}
    - {type: regex, value: '\\d+'}
- vars: {question: 'Csv?'}
  assert: [{type: equals, value: {json: true}}]
""",
        encoding="utf-8",
    )
    records = import_golden("promptfoo", source).records
    assert [r["reference_answers"] for r in records] == [["42", "Forty-two", "Answer: Forty-two"], []]
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts: ['{{question}}']\nproviders: [echo]\ntests: file://tests.csv\n", encoding="utf-8")
    code, err = run("import", "promptfoo", config, "--out", tmp_path / "g.jsonl")
    assert (code, err.strip()) == (
        2,
        f"rag-gate: error: {config}: tests: file://tests.csv: only YAML or JSON test files are read (import the "
        "results.json that promptfoo eval -o writes: it holds them)",
    )


def test_cli_switches_the_refusal_rule_off_and_the_no_documents_rule_on(tmp_path):
    folder = FIXTURES / "deepeval"
    out = tmp_path / "g.jsonl"
    code, err = run("import", "deepeval", folder / "goldens.csv", "--corpus", folder / "corpus.jsonl",
                    "--no-ood-refusals", "--ood-without-documents", "--out", out)  # fmt: skip
    assert code == 0, err
    records = by_question([json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()])
    assert [q for q, r in records.items() if r["out_of_domain"]] == [
        "What will the stock market do next year?",
        "Who is the mayor of Le Havre?",
        "How long is the Seine?",
        "What is the tower made of?",
    ]
    assert err.strip().splitlines()[-1] == (
        "out-of-domain: 1 by additional_metadata.out_of_domain: true, 3 by no expected document "
        "(--ood-without-documents)"
    )
    assert "warning" not in err
