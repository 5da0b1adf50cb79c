"""The nli judge's plumbing with tiny randomly initialised cross-encoders saved during the test.

No NLI weights can be downloaded here, so quality is not tested: label order (read from id2label), softmax,
column reordering, batching, premise windows and the aggregation rule are, against transformers run directly
and hand-made probabilities.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gate.judges.base import ClaimVerdict
from gate.judges.nli import (
    LABELS,
    NLIJudge,
    Premise,
    aggregate,
    build_premises,
    canonical_label,
    label_columns,
    model_fingerprint,
)
from gate.models import Chunk

WORDS = "the eiffel tower is 330 metres tall it opened in 1889 paris blue not a of rome lifts has".split()
CHUNKS = (
    Chunk("doc-7", "The Eiffel Tower is 330 metres tall. It is in Paris. It opened in 1889."),
    Chunk("doc-2", "Rome has blue lifts."),
)
ANSWER = "The Eiffel Tower is 330 metres tall. It opened in 1889. It is blue."


def save_model(directory, id2label, *, seed=0, bias=None, init=0.02):
    """A 1-layer BERT classifier with a word-level vocabulary; ``bias`` set → that constant output."""
    import torch
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = transformers.BertTokenizer(str(vocab))
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=256, num_labels=len(id2label), id2label=id2label,
        label2id={v: k for k, v in id2label.items()}, initializer_range=init,
    )  # fmt: skip
    model = transformers.BertForSequenceClassification(config)
    with torch.no_grad():
        if bias is not None:
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor(bias, dtype=torch.float32))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    for module in ("torch", "transformers", "sentence_transformers"):  # the [nli] extra
        pytest.importorskip(module)
    root = tmp_path_factory.mktemp("nli")
    return {
        # the order of cross-encoder/nli-deberta-v3-*: contradiction, entailment, neutral
        "random": save_model(root / "random", {0: "contradiction", 1: "entailment", 2: "neutral"}, init=0.5),
        "always_index2_ecn": save_model(
            root / "ecn", {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}, bias=[0.0, 0.0, 6.0]
        ),
        "always_index2_cen": save_model(
            root / "cen", {0: "contradiction", 1: "entailment", 2: "neutral"}, bias=[0.0, 0.0, 6.0]
        ),
        "always_index1_cen": save_model(
            root / "cen1", {0: "contradiction", 1: "entailment", 2: "neutral"}, bias=[0.0, 6.0, 0.0]
        ),
        "generic": save_model(root / "generic", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, bias=[5.0, 0.0, 0.0]),
    }


@pytest.fixture(scope="module")
def random_judge(models):
    return NLIJudge(model_path=models["random"], batch_size=4)


def oracle_probabilities(path, pairs):
    """Softmax of the logits from transformers directly, columns reordered by the config's id2label."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        rows = []
        for premise, hypothesis in pairs:
            encoded = tokenizer(premise, hypothesis, return_tensors="pt", truncation=True, max_length=512)
            rows.append(torch.softmax(model(**encoded).logits[0], dim=-1).numpy())
    order = [label_columns(model.config.id2label).index(label) for label in LABELS]
    return np.array(rows)[:, order]


PAIRS = [
    ("The Eiffel Tower is 330 metres tall.", "The tower is tall."),
    ("It opened in 1889.", "It opened in 1889."),
    ("Rome has blue lifts.", "The Eiffel Tower is in Paris."),
    ("a", "not a"),
    ("paris", "the eiffel tower is 330 metres tall it opened in 1889 paris blue not a of rome lifts"),
]


def test_probabilities_are_the_softmax_in_canonical_order(models, random_judge):
    got = random_judge.probabilities(PAIRS)
    expected = oracle_probabilities(models["random"], PAIRS)
    assert got.shape == (5, 3)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-6)
    assert len(set(got.argmax(axis=1))) > 1  # with init=0.5 the random model depends on its input


def test_batching_does_not_change_probabilities(models, random_judge):
    one_by_one = NLIJudge(model_path=models["random"], batch_size=1).probabilities(PAIRS)
    np.testing.assert_allclose(random_judge.probabilities(PAIRS), one_by_one, atol=1e-5)
    assert random_judge.probabilities([]).shape == (0, 3)


@pytest.mark.parametrize(
    ("model", "verdict", "column"),
    [
        ("always_index2_ecn", "contradicted", 2),  # index 2 is CONTRADICTION in this model
        ("always_index2_cen", "unverifiable", 1),  # index 2 is neutral in this one
        ("always_index1_cen", "supported", 0),  # index 1 is entailment
    ],
)
def test_label_order_is_read_from_id2label(models, model, verdict, column):
    judge = NLIJudge(model_path=models[model])
    probs = judge.probabilities(PAIRS[:1])
    expected = np.full(3, 1 / (2 + np.exp(6.0)))
    expected[column] = np.exp(6.0) / (2 + np.exp(6.0))
    np.testing.assert_allclose(probs[0], expected, atol=1e-6)
    judgment = judge.judge("How tall?", ANSWER, CHUNKS)
    assert len(judgment.claims) == 3 and {c.verdict for c in judgment.claims} == {verdict}
    if verdict == "contradicted":
        assert {c.contradiction_level for c in judgment.claims} == {"ALL"} and judgment.contradiction_rate == 1.0
    if verdict == "supported":
        assert judgment.faithfulness == 1.0


def test_generic_labels_need_the_labels_option(models):
    with pytest.raises(ValueError, match=r"id2label \['LABEL_0', 'LABEL_1', 'LABEL_2'\].*'labels'"):
        NLIJudge(model_path=models["generic"])
    judge = NLIJudge(model_path=models["generic"], labels=["entailment", "neutral", "contradiction"])
    assert {c.verdict for c in judge.judge("q", ANSWER, CHUNKS).claims} == {"supported"}
    with pytest.raises(ValueError, match="the model has 3 outputs, got 2 names"):
        NLIJudge(model_path=models["generic"], labels=["entailment", "contradiction"])


def test_judge_matches_the_aggregation_of_oracle_probabilities(models, random_judge):
    judgment = random_judge.judge("How tall?", ANSWER, CHUNKS)
    claims = [c.claim for c in judgment.claims]
    assert claims == ["The Eiffel Tower is 330 metres tall.", "It opened in 1889.", "It is blue."]
    premises = build_premises(CHUNKS, 2)
    for verdict in judgment.claims:
        probs = oracle_probabilities(models["random"], [(p.text, verdict.claim) for p in premises])
        expected = aggregate(verdict.claim, CHUNKS, premises, probs)
        assert (verdict.verdict, verdict.chunk_id, verdict.chunk_text, verdict.contradiction_level) == (
            expected.verdict, expected.chunk_id, expected.chunk_text, expected.contradiction_level,
        )  # fmt: skip
        assert verdict.similarity == pytest.approx(expected.similarity, abs=1e-5)


def test_claims_are_judged_without_markers_and_shown_as_written(models, random_judge):
    """The model reads "It opened in 1889." (no "[doc-7]", which would read as the number 7); the verdict shows the
    claim as the answer wrote it, a span the labelling page can highlight."""
    answer = "The Eiffel Tower is 330 metres tall [doc-7].\nIt opened in  1889 (source: doc-2)."
    judgment = random_judge.judge("How tall?", answer, CHUNKS)
    assert [c.claim for c in judgment.claims] == [
        "The Eiffel Tower is 330 metres tall [doc-7].",
        "It opened in  1889 (source: doc-2).",
    ]
    premises = build_premises(CHUNKS, 2)
    for verdict, judged in zip(
        judgment.claims, ["The Eiffel Tower is 330 metres tall.", "It opened in 1889."], strict=True
    ):
        probs = oracle_probabilities(models["random"], [(p.text, judged) for p in premises])
        expected = aggregate(judged, CHUNKS, premises, probs)
        assert (verdict.verdict, verdict.chunk_text) == (expected.verdict, expected.chunk_text)
        assert verdict.similarity == pytest.approx(expected.similarity, abs=1e-5)


def test_threads_get_the_same_verdicts(random_judge):
    expected = random_judge.judge("q", ANSWER, CHUNKS)
    results = []
    threads = [threading.Thread(target=lambda: results.append(random_judge.judge("q", ANSWER, CHUNKS)))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [[c.verdict for c in r.claims] for r in results] == [[c.verdict for c in expected.claims]] * 4


def test_refusal_and_empty_answer_have_no_claims(random_judge):
    for answer in ("", "I don't have that information."):
        judgment = random_judge.judge("q", answer, CHUNKS)
        assert judgment.claims == () and judgment.error is None


def test_id_describe_and_option_validation(models, random_judge, tmp_path):
    assert random_judge.id == "nli:random" and random_judge.version == "nli-v2"
    assert random_judge.identity["labels"] == ["contradiction", "entailment", "neutral"]
    with pytest.raises(ValueError, match="option 'model_path': no config.json"):
        NLIJudge(model_path=tmp_path)
    (tmp_path / "config.json").write_text((models["random"] / "config.json").read_text())
    with pytest.raises(ValueError, match="option 'model_path': cannot load the model"):
        NLIJudge(model_path=tmp_path)  # a config without weights
    with pytest.raises(ValueError, match="option 'batch_size' must be an integer ≥ 1"):
        NLIJudge(model_path=models["random"], batch_size=0)
    with pytest.raises(ValueError, match="option 'window' must be an integer ≥ 1"):
        NLIJudge(model_path=models["random"], window=True)


# pure parts: no model needed


def test_build_premises_windows():
    chunks = (Chunk("a", "One. Two. Three."), Chunk("b", "Solo."), Chunk("c", "  "))
    assert build_premises(chunks, 2) == [
        Premise(0, "One. Two. Three."),
        Premise(0, "One. Two."),
        Premise(0, "Two. Three."),
        Premise(1, "Solo."),
    ]
    assert build_premises(chunks, 3) == [Premise(0, "One. Two. Three."), Premise(1, "Solo.")]
    assert [p.text for p in build_premises(chunks[:1], 1)] == ["One. Two. Three.", "One.", "Two.", "Three."]


@pytest.mark.parametrize(
    ("name", "label"),
    [("ENTAILMENT", "entailment"), ("entails", "entailment"), ("Contradiction", "contradiction"),
     ("neutral", "neutral"), ("not_entailment", "neutral"), ("non-entailment", "neutral"), ("LABEL_0", None)],
)  # fmt: skip
def test_canonical_label(name, label):
    assert canonical_label(name) == label


CH = (Chunk("a", "A."), Chunk("b", "B."), Chunk("c", "C."))
PREMISES = [Premise(0, "A."), Premise(0, "A. more"), Premise(1, "B."), Premise(2, "C.")]


def rows(*labels_and_p):
    """One probability row per premise: (label column, its probability), the rest split evenly."""
    out = []
    for column, p in labels_and_p:
        row = np.full(3, (1 - p) / 2)
        row[column] = p
        out.append(row)
    return np.array(out)


@pytest.mark.parametrize(
    ("probs", "verdict", "chunk", "text", "similarity", "level"),
    [
        # one window of chunk a entails (0.7) beating a's whole text (neutral); c contradicts → SOMETIMES
        (rows((1, 0.6), (0, 0.7), (1, 0.5), (2, 0.9)), "supported", "a", "A. more", 0.7, "SOMETIMES"),
        # the most probable entailing premise is chosen among two
        (rows((0, 0.6), (1, 0.7), (0, 0.8), (1, 0.5)), "supported", "b", "B.", 0.8, "NONE"),
        # chunks b and c contradict, none entails → ALL; attributed to the stronger contradiction
        (rows((1, 0.9), (1, 0.9), (2, 0.6), (2, 0.95)), "contradicted", "c", "C.", 0.95, "ALL"),
        # a chunk that entails in one window and contradicts in another counts as entailing
        (rows((2, 0.9), (0, 0.5), (1, 0.5), (1, 0.5)), "supported", "a", "A. more", 0.5, "NONE"),
        # all neutral → unverifiable, closest by entailment probability
        (rows((1, 0.5), (1, 0.9), (1, 0.4), (1, 0.6)), "unverifiable", "b", "B.", 0.3, "NONE"),
    ],
)
def test_aggregate(probs, verdict, chunk, text, similarity, level):
    result = aggregate("claim", CH, PREMISES, probs)
    assert (result.verdict, result.chunk_id, result.chunk_text, result.contradiction_level) == (
        verdict, chunk, text, level,
    )  # fmt: skip
    assert result.similarity == pytest.approx(similarity)


def test_aggregate_without_premises():
    assert aggregate("c", (), [], np.zeros((0, 3))) == ClaimVerdict(
        "c", "unverifiable", reason="no retrieved text to check against"
    )


def test_identity_names_the_model_by_its_files_not_its_path(models, tmp_path):
    import shutil

    judge = NLIJudge(model_path=models["random"], batch_size=4, window=3)
    identity = judge.identity
    assert identity == {
        "name": "nli",
        "version": "nli-v2",
        "model": "random",
        "model_sha256": model_fingerprint(models["random"]),
        "labels": ["contradiction", "entailment", "neutral"],
        "max_length": 512,
        "window": 3,
    }
    copy = shutil.copytree(models["random"], tmp_path / "random")
    assert NLIJudge(model_path=copy, batch_size=16, device="cpu", window=3).identity == identity
    other = NLIJudge(model_path=models["always_index2_cen"], window=3).identity
    assert other["model_sha256"] != identity["model_sha256"]
    assert NLIJudge(model_path=models["random"], window=2).identity != identity


def make_model_dir(path, weights: bytes):
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"id2label": {"0": "entailment"}}')
    (path / "model.safetensors").write_bytes(weights)
    return path


def test_model_fingerprint_tells_apart_models_not_places(tmp_path):
    weights = bytes(range(256)) * 64  # 16 KiB
    fingerprint = model_fingerprint(make_model_dir(tmp_path / "a", weights))
    assert len(fingerprint) == 64
    assert model_fingerprint(make_model_dir(tmp_path / "b", weights)) == fingerprint
    changed = bytearray(weights)
    changed[8000] ^= 1
    assert model_fingerprint(make_model_dir(tmp_path / "c", bytes(changed))) != fingerprint
    (tmp_path / "a" / "config.json").write_text('{"id2label": {"0": "ENTAILMENT"}}')
    assert model_fingerprint(tmp_path / "a") != fingerprint


def test_model_fingerprint_of_large_files_reads_their_ends_and_size(tmp_path):
    weights = bytes(range(256)) * 64
    small = {"whole_below": 1024, "edge": 512}  # the 16 KiB weights count as large here
    fingerprint = model_fingerprint(make_model_dir(tmp_path / "a", weights), **small)
    for offset in (0, len(weights) - 1):
        changed = bytearray(weights)
        changed[offset] ^= 1
        assert model_fingerprint(make_model_dir(tmp_path / f"end{offset}", bytes(changed)), **small) != fingerprint
    assert model_fingerprint(make_model_dir(tmp_path / "longer", weights + b"\0"), **small) != fingerprint
    middle = bytearray(weights)
    middle[8000] ^= 1  # not read: the price of fingerprinting gigabytes in milliseconds
    assert model_fingerprint(make_model_dir(tmp_path / "middle", bytes(middle)), **small) == fingerprint
