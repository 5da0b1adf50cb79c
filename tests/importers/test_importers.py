"""``rag-gate import`` (gate.importers): ragas, DeepEval, promptfoo and BEIR datasets become golden sets.

The inputs are written here from each tool's documented schema (ragas ``SingleTurnSample`` / ``EvaluationDataset``,
DeepEval ``Golden``, promptfoo test cases, the BEIR folder layout), one ragas file by ragas itself, with their edge
cases: missing fields, graded qrels, integer ids, duplicate questions, unmatched and ambiguous contexts.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import EXAMPLE

from gate.cli.main import main
from gate.errors import InputError
from gate.golden import load_golden
from gate.importers import import_golden, sniff
from gate.importers.common import Corpus, Options, normalise, question_id

DOCS = [
    {"id": "normans", "title": "Normans", "text": "The Normans gave their name to Normandy, a region in France."},
    {"id": "paris", "text": "Paris is the capital and most populous city of France, on the river Seine."},
    {"id": "tower", "text": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris."},
    {"id": "copy-a", "text": "This paragraph appears twice in the corpus."},
    {"id": "copy-b", "text": "This paragraph appears twice in the corpus."},
]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "corpus.jsonl", DOCS)


def read_out(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- context matching -----------------------------------------------------------------------------------------------


def test_contexts_resolve_exact_then_normalised_then_as_a_chunk_of_one_document(corpus):
    index = Corpus.load(corpus)
    assert index.resolve(DOCS[1]["text"]) == ("exact", ["paris"])
    assert index.resolve("PARIS is the capital and most  populous city of France on the river Seine") == (
        "normalised",
        ["paris"],
    )
    assert index.resolve("Normans\n" + DOCS[0]["text"]) == ("exact", ["normans"])  # title + text
    assert index.resolve("a wrought-iron lattice tower on the Champ") == ("contained", ["tower"])
    assert index.resolve("This paragraph appears twice in the corpus.") == ("ambiguous", ["copy-a", "copy-b"])
    assert index.resolve("in Paris") == ("unmatched", [])  # too short to match as a chunk
    assert index.resolve("Nothing like this sentence is in the corpus anywhere.") == ("unmatched", [])


def test_question_ids_are_stable_hashes_of_the_question():
    assert question_id("Where is Paris?") == question_id("  Where   is Paris? ")
    assert question_id("Where is Paris?") != question_id("Where is Rome?")
    assert question_id("Where is Paris?").startswith("q-") and len(question_id("x")) == 18
    assert normalise("Héllo,  WORLD!") == "héllo world"


# --- ragas ------------------------------------------------------------------------------------------------------------


def test_ragas_jsonl_matches_contexts_and_reports_what_it_cannot(tmp_path, corpus):
    source = write_jsonl(
        tmp_path / "testset.jsonl",
        [
            {"user_input": "Where is Normandy?", "reference": "In France", "reference_contexts": [DOCS[0]["text"]],
             "synthesizer_name": "single_hop_specific_query_synthesizer"},
            {"user_input": "What is the capital of France?", "reference": "Paris",
             "reference_contexts": ["paris is the capital and most populous city of france, on the river seine"]},
            {"user_input": "What is the tower made of?",
             "reference_contexts": ["wrought-iron lattice tower on the Champ"]},
            {"user_input": "Who won in 2030?", "reference_contexts": ["Nothing like this sentence is in the corpus."]},
            {"user_input": "Which paragraph?", "reference_contexts": ["This paragraph appears twice in the corpus."]},
            {"user_input": "Where is Normandy?", "reference": "In France", "reference_contexts": [DOCS[0]["text"]],
             "synthesizer_name": "single_hop_specific_query_synthesizer"},
            {"user_input": "Where is Normandy?", "reference": "Northern France", "reference_context_ids": [7]},
            {"user_input": "What did the system retrieve?", "retrieved_contexts": [DOCS[1]["text"]], "response": "x"},
        ],
    )  # fmt: skip
    out = tmp_path / "golden.jsonl"
    code, _, err = run("import", "ragas", source, "--corpus", corpus, "--out", out)
    assert code == 0, err
    cases = read_out(out)
    by_question = {}
    for case in cases:
        by_question.setdefault(case["question"], []).append(case)
    assert [c["expected_doc_ids"] for c in by_question["Where is Normandy?"]] == [["normans"], ["7"]]
    assert by_question["Where is Normandy?"][0]["tags"] == ["single_hop_specific_query_synthesizer"]
    assert by_question["Where is Normandy?"][1]["id"] == question_id("Where is Normandy?") + "-2"
    assert by_question["What is the capital of France?"][0]["expected_doc_ids"] == ["paris"]
    assert by_question["What is the capital of France?"][0]["reference_answers"] == ["Paris"]
    assert by_question["What is the tower made of?"][0]["expected_doc_ids"] == ["tower"]
    assert by_question["Who won in 2030?"][0]["expected_doc_ids"] == []
    assert by_question["Which paragraph?"][0]["expected_doc_ids"] == []  # ambiguous: no id chosen
    assert by_question["What did the system retrieve?"][0]["expected_doc_ids"] == []  # retrieved ≠ ground truth
    assert len(cases) == 7  # the exact duplicate (line 6) dropped
    assert "contexts matched to corpus ids: 2 exact, 1 normalised, 1 contained; left out: 1 unmatched, 1 ambiguous" in (
        err
    )
    assert "1 × unmatched context (left out)" in err and "testset.jsonl:4: context 1:" in err
    assert "1 × ambiguous context (left out)" in err and "(in copy-a, copy-b)" in err
    assert "1 × duplicate case (dropped)" in err and "testset.jsonl:6: same as" in err
    assert "duplicate question with other expectations (kept as <id>-N)" in err
    assert "expected id not in the corpus (can never be retrieved)" in err  # the integer id 7
    assert "retrieved contexts only (not used: pass --contexts retrieved" in err
    assert len(load_golden(out)) == 7  # it validates


def test_ragas_retrieved_contexts_are_used_only_when_asked(tmp_path, corpus):
    source = write_jsonl(tmp_path / "d.jsonl", [{"user_input": "Capital?", "retrieved_contexts": [DOCS[1]["text"]]}])
    result = import_golden("ragas", source, Options(corpus=corpus, contexts="retrieved"))
    assert result.records[0]["expected_doc_ids"] == ["paris"]


def test_ragas_csv_written_by_ragas_itself(tmp_path, corpus):
    ragas = pytest.importorskip("ragas")
    dataset = ragas.EvaluationDataset.from_list(
        [
            {"user_input": "Where is Normandy?", "reference": "France", "reference_contexts": [DOCS[0]["text"]]},
            {"user_input": 'Say "Paris", please', "reference": "Paris, France",
             "reference_contexts": [DOCS[1]["text"], DOCS[2]["text"]]},
        ]
    )  # fmt: skip
    dataset.to_csv(tmp_path / "d.csv")  # lists as Python literals, as ragas writes them
    dataset.to_jsonl(tmp_path / "d.jsonl")
    from_csv = import_golden("ragas", tmp_path / "d.csv", Options(corpus=corpus)).records
    from_jsonl = import_golden("ragas", tmp_path / "d.jsonl", Options(corpus=corpus)).records
    assert [c["expected_doc_ids"] for c in from_csv] == [["normans"], ["paris", "tower"]]
    assert from_csv == from_jsonl
    assert from_csv[1]["question"] == 'Say "Paris", please' and from_csv[1]["reference_answers"] == ["Paris, France"]


def test_ragas_legacy_field_names(tmp_path, corpus):
    source = write_jsonl(
        tmp_path / "v01.jsonl",
        [{"question": "Capital?", "ground_truth": "Paris", "contexts": [DOCS[1]["text"]], "answer": "Paris"}],
    )
    record = import_golden("ragas", source, Options(corpus=corpus, contexts="retrieved")).records[0]
    assert (record["question"], record["reference_answers"], record["expected_doc_ids"]) == (
        "Capital?",
        ["Paris"],
        ["paris"],
    )


def test_ragas_bad_rows_are_listed_with_file_line_and_field_and_nothing_is_written(tmp_path):
    source = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"reference": "no question"},
            {"user_input": [{"content": "hi", "type": "human"}]},
            {"user_input": "ok?", "reference_contexts": "not a list is fine"},
            {"user_input": "bad contexts", "reference_contexts": [1, 2]},
        ],
    )
    out = tmp_path / "golden.jsonl"
    code, _, err = run("import", "ragas", source, "--out", out)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0] == "rag-gate: error: " + f"{source}:1: user_input: required: the question as text"
    assert f"{source}:2: user_input: a multi-turn sample: only single-turn is imported" in lines[1]
    assert f"{source}:4: reference_contexts: must be a string or a list of strings" in lines[2]
    assert len(lines) == 3 and not out.exists()


def test_text_contexts_without_a_corpus_are_reported_not_dropped_silently(tmp_path):
    source = write_jsonl(tmp_path / "d.jsonl", [{"user_input": "Capital?", "reference_contexts": ["Paris is..."]}])
    code, _, err = run("import", "ragas", source, "--out", tmp_path / "g.jsonl")
    assert code == 0
    assert "1 × case with text contexts but no --corpus to match them to ids" in err
    assert "1 in-domain without expected documents" in err


# --- deepeval ---------------------------------------------------------------------------------------------------------


def test_deepeval_goldens_json_array(tmp_path, corpus):
    goldens = [
        {"input": "Where is Normandy?", "expected_output": "In France", "context": [DOCS[0]["text"]],
         "retrieval_context": None, "additional_metadata": {"topic": "history"}, "source_file": "normans.txt"},
        {"input": "What is the weather on Mars tomorrow?", "additional_metadata": {"out_of_domain": True}},
        {"input": "Capital?", "expected_output": "Paris", "context": ["unknown text that the corpus does not have"]},
        {"input": "Tower?", "retrieval_context": [DOCS[2]["text"]]},
    ]  # fmt: skip
    source = tmp_path / "goldens.json"
    source.write_text(json.dumps(goldens, indent=2), encoding="utf-8")
    out = tmp_path / "golden.jsonl"
    code, _, err = run("import", "deepeval", source, "--corpus", corpus, "--out", out)
    assert code == 0, err
    cases = read_out(out)
    assert [c["question"] for c in cases] == [g["input"] for g in goldens]
    assert cases[0]["expected_doc_ids"] == ["normans"] and cases[0]["reference_answers"] == ["In France"]
    assert cases[0]["metadata"] == {"source": "deepeval", "topic": "history"}
    assert cases[1]["out_of_domain"] is True and cases[1]["expected_doc_ids"] == []
    assert cases[2]["expected_doc_ids"] == [] and f"{source}: [2].context 1: 'unknown text" in err
    assert cases[3]["expected_doc_ids"] == [] and "golden with retrieval_context only" in err
    with_retrieved = import_golden("deepeval", source, Options(corpus=corpus, contexts="retrieved")).records
    assert with_retrieved[3]["expected_doc_ids"] == ["tower"]


def test_deepeval_missing_input_and_wrong_types_name_the_item(tmp_path):
    source = tmp_path / "goldens.json"
    goldens = [{"expected_output": "x"}, {"input": "q", "context": "fine"}, {"input": "q2", "context": {"a": 1}},
               "text", {"input": "q3", "expected_output": 3}]  # fmt: skip
    source.write_text(json.dumps(goldens), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_golden("deepeval", source)
    assert caught.value.problems == (
        f"{source}: [0].input: required: the question as text",
        f"{source}: [2].context: must be a string or a list of strings",
        f"{source}: [3]: expected an object (one golden)",
        f"{source}: [4].expected_output: must be a string or a list of strings",
    )


def test_deepeval_jsonl_and_ids_from_metadata(tmp_path):
    source = write_jsonl(
        tmp_path / "goldens.jsonl",
        [
            {"input": "One?", "additional_metadata": {"id": "case-1"}},
            {"input": "Two?", "additional_metadata": {"id": 2}},
        ],
    )
    assert [r["id"] for r in import_golden("deepeval", source).records] == ["case-1", "2"]


# --- promptfoo --------------------------------------------------------------------------------------------------------

PROMPTFOO_CONFIG = """\
description: RAG over the handbook
prompts:
  - 'Answer from the context. Context: {{context}} Question: {{question}}'
providers: [openai:gpt-4o-mini]
defaultTest:
  assert:
    - type: latency
      threshold: 5000
tests:
  - description: capital
    vars:
      question: What is the capital of France?
      context: Paris is the capital and most populous city of France, on the river Seine.
    assert:
      - type: factuality
        value: Paris is the capital of France
      - type: llm-rubric
        value: Names the city without hedging
      - type: not-is-refusal
    metadata: {topic: geography, reviewed: 2024-05-01}
  - vars:
      question: What will the stock market do next year?
      context: Paris is the capital and most populous city of France, on the river Seine.
    assert:
      - type: is-refusal
  - vars:
      question: [Where is Normandy?, Where do the Normans come from?]
    metadata:
      expected_doc_ids: [normans]
  - file://more_tests.yaml
"""
MORE_TESTS = """\
- vars: {question: 'Is this an assert-set refusal?'}
  assert:
    - type: assert-set
      assert: [{type: is-refusal}]
"""


def test_promptfoo_config_with_refusals_file_tests_and_list_vars(tmp_path, corpus):
    (tmp_path / "more_tests.yaml").write_text(MORE_TESTS, encoding="utf-8")
    source = tmp_path / "promptfooconfig.yaml"
    source.write_text(PROMPTFOO_CONFIG, encoding="utf-8")
    out = tmp_path / "golden.jsonl"
    code, _, err = run("import", "promptfoo", source, "--corpus", corpus, "--out", out)
    assert code == 0, err
    cases = read_out(out)
    assert [c["question"] for c in cases] == [
        "What is the capital of France?",
        "What will the stock market do next year?",
        "Where is Normandy?",
        "Where do the Normans come from?",
        "Is this an assert-set refusal?",
    ]
    assert [c["out_of_domain"] for c in cases] == [False, True, False, False, True]
    assert cases[0]["expected_doc_ids"] == ["paris"]
    assert cases[0]["reference_answers"] == ["Paris is the capital of France"]
    assert cases[0]["criteria"] == "Names the city without hedging"
    assert cases[0]["metadata"] == {"source": "promptfoo", "topic": "geography", "reviewed": "2024-05-01",
                                    "description": "capital"}  # fmt: skip
    assert cases[1]["expected_doc_ids"] == [] and "out-of-domain case with a context var" in err
    assert cases[2]["expected_doc_ids"] == cases[3]["expected_doc_ids"] == ["normans"]


PROMPTFOO_TEMPLATES = """\
- vars: {question: What is the capital of Spain?, city: Madrid}
  assert:
    - {type: equals, value: 'It is {{city}}'}
    - {type: contains, value: '{{ city }} city'}
    - {type: icontains-any, value: ['{{city}}', 'Spain: {{ city }}']}
- vars: {question: [Where?, Which city?], city: Madrid, year: 1561}
  assert:
    - {type: equals, value: 'Madrid is {{question}}'}
    - {type: contains, value: 'since {{year}}'}
- vars: {question: Broken?, city: Madrid, tags: [a, b]}
  assert:
    - {type: contains, value: "{{ tags }} \\x1b[2J"}
    - {type: equals, value: 'It is {{town}}'}
    - {type: contains, value: '{{ city | upper }}'}
    - {type: contains, value: 'It is {{ city'}
    - {type: contains, value: '{{ city.__class__ }}'}
    - {type: contains, value: 'still {{ city }}'}
"""


def test_promptfoo_assertion_values_are_rendered_from_the_vars(tmp_path):
    """``{{ var }}`` inside a longer value is rendered as promptfoo does; what cannot be is left out and counted."""
    source = tmp_path / "tests.yaml"
    source.write_text(PROMPTFOO_TEMPLATES, encoding="utf-8")
    out = tmp_path / "golden.jsonl"
    code, _, err = run("import", "promptfoo", source, "--out", out)
    assert code == 0, err
    cases = read_out(out)
    assert [(c["question"], c["reference_answers"]) for c in cases] == [
        ("What is the capital of Spain?", ["It is Madrid", "Madrid city", "Madrid", "Spain: Madrid"]),
        ("Where?", ["Madrid is Where?", "since 1561"]),  # a list question var: rendered with each question
        ("Which city?", ["Madrid is Which city?", "since 1561"]),
        ("Broken?", ["still Madrid"]),
    ]
    lines = err.splitlines()
    head = "note: 5 × reference answer whose template cannot be rendered from the test's vars (left out)"
    assert head in lines
    shown = lines[lines.index(head) + 1 : lines.index(head) + 5]
    assert shown == [  # the control character escaped where printed
        f"  {source}:10: assert: '{{{{ tags }}}} \\x1b[2J': {{{{ tags }}}}: the var is not text or a number",
        f"  {source}:10: assert: 'It is {{{{town}}}}': {{{{ town }}}}: no such var",
        f"  {source}:10: assert: '{{{{ city | upper }}}}': only {{{{ var }}}} is rendered, not a filter",
        "  … and 2 more",
    ]
    result = import_golden("promptfoo", source)  # every left-out value is counted, the last two included
    kind = "reference answer whose template cannot be rendered from the test's vars (left out)"
    assert result.notes.count(kind) == 5
    assert result.notes.kinds[kind][0].endswith("'{{ tags }} \x1b[2J': {{ tags }}: the var is not text or a number")
    assert result.notes.kinds[kind][3:] == [
        f"{source}:10: assert: 'It is {{{{ city': template syntax error: unexpected end of template, expected "
        "'end of print statement'.",
        f"{source}:10: assert: '{{{{ city.__class__ }}}}': only {{{{ var }}}} is rendered, not an attribute",
    ]
    assert "\x1b" not in err and "\\x1b[2J" in err  # untrusted text escaped where printed


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ range(10) }}", "only {{ var }} is rendered, not a call"),
        ("{{ city.__class__.__mro__ }}", "only {{ var }} is rendered, not an attribute"),
        ("{{ city['x'] }}", "only {{ var }} is rendered, not an item"),
        ("{{ 'text' }}", "only {{ var }} is rendered, not a literal"),
        ("{% for c in city %}{{ c }}{% endfor %}", "only {{ var }} is rendered, not a tag or an expression"),
        ("{% set city = 'Rome' %}{{ city }}", "only {{ var }} is rendered, not a tag or an expression"),
        ("{{ lipsum }}", "{{ lipsum }}: no such var"),  # jinja2's globals are not vars
        ("{{ missing }}", "{{ missing }}: no such var"),
    ],
)
def test_promptfoo_templates_render_variables_and_nothing_else(template, why):
    from gate.importers.promptfoo import render

    with pytest.raises(ValueError) as caught:
        render(template, {"city": "Madrid"})
    assert str(caught.value) == why


def test_promptfoo_template_output_is_not_rendered_again():
    from gate.importers.promptfoo import render

    variables = {"city": "{{ secret }}", "n": 3, "x": 2.5}
    assert render("It is {{city}} ({{ n }}, {{x}}) {# a comment #}", variables) == "It is {{ secret }} (3, 2.5) "


def test_promptfoo_tests_file_without_a_question_var_names_the_line(tmp_path):
    source = tmp_path / "tests.yaml"
    source.write_text("- vars: {topic: a, tone: b}\n- vars: {topic: c}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_golden("promptfoo", source)
    message = f"{source}:1: vars: no question var (have: topic, tone); pass --question-var NAME"
    assert caught.value.problems == (message,)
    chosen = import_golden("promptfoo", source, Options(question_var="topic")).records
    assert [c["question"] for c in chosen] == ["a", "c"]


def test_promptfoo_fields_of_the_wrong_type_are_problems_with_their_line(tmp_path):
    source = tmp_path / "tests.yaml"
    source.write_text(
        "- vars: file://vars.yaml\n- vars: {question: q}\n  assert: {type: is-refusal}\n"
        "- vars: {question: q}\n  metadata: [a]\n- vars: {question: [q, 3]}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        import_golden("promptfoo", source)
    assert caught.value.problems == (
        f"{source}:1: vars: must be an object (vars from a file:// are not read)",
        f"{source}:2: assert: must be a list of assertions",
        f"{source}:4: metadata: must be an object",
        f"{source}:6: vars.question: must be text (or a list of texts)",
    )


def test_promptfoo_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    source = tmp_path / "tests.yaml"
    source.write_text("\n".join(lines) + "\ntests: []\n", encoding="utf-8")
    with pytest.raises(InputError, match="more than 5000000 values once YAML aliases are expanded"):
        import_golden("promptfoo", source)


# --- beir -------------------------------------------------------------------------------------------------------------


def make_beir(root: Path, qrels: str, *, queries=None, docs=None) -> Path:
    (root / "qrels").mkdir(parents=True)
    write_jsonl(root / "corpus.jsonl", docs or [{"_id": i, "title": f"T{i}", "text": f"doc {i}"} for i in range(1, 9)])
    write_jsonl(root / "queries.jsonl", queries or [{"_id": i, "text": f"question {i}?"} for i in range(1, 6)])
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


GRADED = "query-id\tcorpus-id\tscore\n1\t1\t1\n1\t2\t2\n2\t3\t1\n3\t4\t2\n3\t5\t0\n4\t5\t0\n5\t6\t1\n5\t99\t1\n"


def test_beir_graded_qrels_are_binarised_at_min_relevance(tmp_path):
    source = make_beir(tmp_path / "beir", GRADED)
    out = tmp_path / "golden.jsonl"
    code, _, err = run("import", "beir", source, "--out", out)
    assert code == 0, err
    cases = read_out(out)
    assert [(c["id"], c["expected_doc_ids"]) for c in cases] == [
        ("1", ["2", "1"]),  # most relevant first
        ("2", ["3"]),
        ("3", ["4"]),
        ("5", ["6", "99"]),
    ]
    assert cases[0]["question"] == "question 1?" and cases[0]["metadata"]["relevance"] == {"1": 1, "2": 2}
    assert "1 × query with no judgment ≥ 1 (left out: no relevant document)" in err and "'4'" in err
    assert "1 × relevant document not in corpus.jsonl (can never be retrieved)" in err and "'99'" in err
    strict = import_golden("beir", source, Options(min_relevance=2)).records
    assert [(c["id"], c["expected_doc_ids"]) for c in strict] == [("1", ["2"]), ("3", ["4"])]


def test_beir_missing_split_names_the_splits_there_and_bad_scores_the_line(tmp_path):
    source = make_beir(tmp_path / "beir", GRADED)
    with pytest.raises(InputError, match=r"qrels/dev.tsv: file not found \(splits here: test; choose one with --split"):
        import_golden("beir", source, Options(split="dev"))
    (source / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t1\thigh\n1\t2\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_golden("beir", source)
    qrels = source / "qrels" / "test.tsv"
    assert caught.value.problems == (
        f"{qrels}:2: score: must be an integer, got 'high'",
        f"{qrels}:3: expected 3 tab-separated columns, got 2",
    )


def test_beir_trec_qrels_without_header_and_duplicate_queries(tmp_path):
    queries = [{"_id": "q1", "text": "one?"}, {"_id": "q1", "text": "again?"}, {"_id": "q2", "text": "one?"}]
    source = make_beir(tmp_path / "beir", "q1 0 1 1\nq2 0 2 3\n", queries=queries)
    result = import_golden("beir", source)
    assert [(r["id"], r["question"], r["expected_doc_ids"]) for r in result.records] == [
        ("q1", "one?", ["1"]),
        ("q2", "one?", ["2"]),
    ]
    assert result.notes.count("duplicate query id (first kept)") == 1
    assert result.notes.count("duplicate question under another id (both kept)") == 1


def _ranked(rnd: random.Random, n_docs: int) -> list[str]:
    ids = [str(i) for i in range(1, n_docs + 1)]
    rnd.shuffle(ids)
    return ids[:10]


def test_beir_round_trip_compare_gives_the_metrics_of_the_original_qrels(tmp_path):
    """BEIR → golden → ``rag-gate compare`` of two runs: hit rate@5 and nDCG@5 equal pytrec_eval's and ranx's on the
    original graded qrels binarised at --min-relevance."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ranx = pytest.importorskip("ranx")
    rnd = random.Random(7)
    n_docs, n_queries = 30, 40
    lines = ["query-id\tcorpus-id\tscore"]
    for q in range(1, n_queries + 1):
        for doc in rnd.sample(range(1, n_docs + 1), rnd.randint(1, 4)):
            lines.append(f"{q}\t{doc}\t{rnd.choice([0, 1, 1, 2])}")
    queries = [{"_id": q, "text": f"query number {q}?"} for q in range(1, n_queries + 1)]
    docs = [{"_id": d, "text": f"document {d}"} for d in range(1, n_docs + 1)]
    source = make_beir(tmp_path / "beir", "\n".join(lines) + "\n", queries=queries, docs=docs)
    golden = tmp_path / "golden.jsonl"
    code, _, err = run("import", "beir", source, "--min-relevance", 1, "--out", golden)
    assert code == 0, err
    imported = {c["id"] for c in read_out(golden)}
    qrels: dict[str, dict[str, int]] = {}
    for line in lines[1:]:
        q, d, s = line.split("\t")
        if int(s) >= 1:
            qrels.setdefault(q, {})[d] = 1
    assert imported == set(qrels)  # queries whose judgments are all 0 are left out
    runs = {}
    for side in ("base", "head"):
        ranking = {q: _ranked(rnd, n_docs) for q in sorted(imported, key=int)}
        runs[side] = ranking
        write_jsonl(
            tmp_path / f"{side}.jsonl",
            [{"id": q, "repeat": 0, "answer": "an answer", "latency_ms": 1.0,
              "retrieved": [{"id": d, "text": "t"} for d in ids]} for q, ids in ranking.items()],
        )  # fmt: skip
    code, _, err = run(
        "compare", "--golden", golden, tmp_path / "base.jsonl", tmp_path / "head.jsonl", "--out", tmp_path / "r"
    )
    assert code in (0, 1), err
    metrics = {m["name"]: m for m in json.loads((tmp_path / "r" / "report.json").read_text())["metrics"]}
    for side in ("base", "head"):
        run_scores = {q: {d: float(10 - r) for r, d in enumerate(ids)} for q, ids in runs[side].items()}
        trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_5", "success_5"}).evaluate(run_scores)
        trec_ndcg = sum(v["ndcg_cut_5"] for v in trec.values()) / len(trec)
        trec_hit = sum(v["success_5"] for v in trec.values()) / len(trec)
        by_ranx = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run_scores), ["hit_rate@5", "ndcg@5"])
        assert metrics["ndcg@5"][f"{side}_mean"] == pytest.approx(trec_ndcg, abs=1e-9)
        assert metrics["hit_rate@5"][f"{side}_mean"] == pytest.approx(trec_hit, abs=1e-9)
        assert metrics["ndcg@5"][f"{side}_mean"] == pytest.approx(by_ranx["ndcg@5"], abs=1e-9)
        assert metrics["hit_rate@5"][f"{side}_mean"] == pytest.approx(by_ranx["hit_rate@5"], abs=1e-9)
        assert metrics["ndcg@5"]["n_cases"] == len(qrels)


# --- validate on foreign files, and the command's guards --------------------------------------------------------------


def test_validate_names_the_importer_for_foreign_files_in_one_line(tmp_path):
    deepeval = tmp_path / "goldens.json"
    deepeval.write_text(json.dumps([{"input": f"q{i}", "expected_output": "a"} for i in range(500)]), encoding="utf-8")
    ragas = write_jsonl(tmp_path / "testset.jsonl", [{"user_input": "q", "reference_contexts": ["c"]}] * 3)
    promptfoo = tmp_path / "promptfooconfig.yaml"
    promptfoo.write_text(PROMPTFOO_CONFIG, encoding="utf-8")
    beir = make_beir(tmp_path / "beir", GRADED)
    plain_array = tmp_path / "cases.json"
    plain_array.write_text(json.dumps([{"id": "1", "q": "x"}]), encoding="utf-8")
    for path, fmt in ((deepeval, "deepeval"), (ragas, "ragas"), (promptfoo, "promptfoo"), (beir, "beir")):
        code, _, err = run("validate", path)
        assert code == 2
        assert err.count("\n") == 1, err  # one line, not one error per record
        assert f"convert it with `rag-gate import {fmt} {path} --out golden.jsonl`" in err
    code, _, err = run("validate", plain_array)
    assert code == 2 and err.count("\n") == 1 and "a JSON array, not JSON Lines" in err
    assert sniff(beir / "queries.jsonl")[0] == "beir"


def test_validate_on_deeply_nested_input_reports_it_without_crashing(tmp_path):
    deep_json = tmp_path / "deep.jsonl"
    deep_json.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("tests: " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    assert sniff(deep_json) == (None, "a JSON array")
    assert sniff(deep_yaml) == (None, "")
    with pytest.raises(InputError, match=r"deep\.yaml:1: "):
        import_golden("promptfoo", deep_yaml)  # libyaml's own nesting limit, or ours
    deep_yaml.write_text("tests: " + "[" * 70 + "]" * 70 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="deep.yaml:1: nested deeper than 64 levels"):
        import_golden("promptfoo", deep_yaml)
    code, _, err = run("validate", deep_json)
    assert code == 2 and "internal error" not in err


def test_validate_still_checks_a_real_golden_set(tmp_path):
    good = write_jsonl(tmp_path / "golden.jsonl", [{"id": "1", "question": "q?", "expected_doc_ids": ["d"]}])
    assert run("validate", good)[0] == 0
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "1"}, {"id": "2", "question": "q?"}])
    code, _, err = run("validate", bad)
    assert code == 2 and f"{bad}:1: question: required field is missing" in err


def test_import_refuses_to_overwrite_its_source_and_corpus(tmp_path, corpus):
    source = write_jsonl(tmp_path / "d.jsonl", [{"user_input": "q?"}])
    before = source.read_text()
    code, _, err = run("import", "ragas", source, "--out", source)
    assert code == 2 and "is the SOURCE file" in err and source.read_text() == before
    code, _, err = run("import", "ragas", source, "--corpus", corpus, "--out", corpus)
    assert code == 2 and "is the --corpus file" in err
    code, _, err = run("import", "beir", tmp_path, "--corpus", corpus, "--out", tmp_path / "g.jsonl")
    assert code == 2 and "--corpus: not used by beir" in err


def test_a_golden_set_exported_to_ragas_and_beir_imports_back_to_its_questions_and_ids(tmp_path):
    """The bundled SQuAD golden set, written as a ragas testset (contexts as text) and as a BEIR folder, imports back
    to the same questions (as written, spaces included) and the same expected document ids, in order."""
    squad = EXAMPLE
    golden = [json.loads(line) for line in (squad / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    docs = {d["id"]: d for d in map(json.loads, (squad / "corpus.jsonl").read_text(encoding="utf-8").splitlines())}
    ragas = write_jsonl(
        tmp_path / "testset.jsonl",
        [{"user_input": g["question"], "reference": (g["reference_answers"] or [""])[0],
          "reference_contexts": [docs[i]["text"] for i in g["expected_doc_ids"]]} for g in golden],
    )  # fmt: skip
    records = import_golden("ragas", ragas, Options(corpus=squad / "corpus.jsonl")).records
    assert [(r["question"], r["expected_doc_ids"]) for r in records] == [
        (g["question"], g["expected_doc_ids"]) for g in golden
    ]
    qrels = "".join(f"{g['id']}\t{d}\t1\n" for g in golden for d in g["expected_doc_ids"])
    beir = make_beir(
        tmp_path / "beir",
        "query-id\tcorpus-id\tscore\n" + qrels,
        queries=[{"_id": g["id"], "text": g["question"]} for g in golden],
        docs=[{"_id": d["id"], "title": d.get("title", ""), "text": d["text"]} for d in docs.values()],
    )
    records = import_golden("beir", beir).records
    in_domain = [g for g in golden if g["expected_doc_ids"]]
    assert [(r["id"], r["question"], r["expected_doc_ids"]) for r in records] == [
        (g["id"], g["question"], g["expected_doc_ids"]) for g in in_domain
    ]


def test_a_csv_with_an_unterminated_quote_is_refused_with_its_line(tmp_path):
    """csv's lenient reader would take the rest of the file as one cell (a question ending in a newline): exit 2."""
    source = tmp_path / "testset.csv"
    source.write_text('user_input,reference\nWhat is the capital of France?,Paris\n"unterminated,x\n')
    code, _, err = run("import", "ragas", str(source), "--out", str(tmp_path / "golden.jsonl"))
    assert code == 2 and f"{source}:3: invalid CSV: unexpected end of data" in err
    assert not (tmp_path / "golden.jsonl").exists()


def test_import_keeps_an_existing_golden_set_unless_forced(tmp_path, corpus):
    source = write_jsonl(
        tmp_path / "ragas.jsonl", [{"user_input": "What is the capital of France?", "reference": "Paris"}]
    )
    out = tmp_path / "golden.jsonl"
    out.write_text('{"id": "mine", "question": "kept?"}\n')
    code, _, err = run("import", "ragas", str(source), "--out", str(out))
    assert code == 2 and "exists; rag-gate never overwrites a golden set unasked" in err
    assert out.read_text() == '{"id": "mine", "question": "kept?"}\n'
    code, _, _ = run("import", "ragas", str(source), "--out", str(out), "--force")
    assert code == 0 and [c.question for c in load_golden(out)] == ["What is the capital of France?"]
