"""Write tests/oracles/lexical_squad_example.json: the lexical judge's full output on answers built from SQuAD.

The lexical judge is optimised for speed under one rule: not a single verdict, reason, score or attributed sentence
may change. tests/judges/test_lexical.py re-judges the stored answers and compares everything the judge returns
(every field of the Judgment, floats to the last bit) with what the judge gave when this file was written.

The answers come from the bundled example's SQuAD 2.0 paragraphs (examples/squad, CC BY-SA 4.0), one or two
sentences of the question's paragraph per answer, rewritten by rule so that every kind of verdict occurs: verbatim,
a number changed, a negation added, a name replaced by a name of another article, a sentence of another article
added, and the reference answer restated. The chunks are the question's paragraph and the next two paragraphs of
the corpus. Inputs are stored by paragraph id (the text is read from examples/squad/corpus.jsonl).

Usage (from the repository root): ``python tests/oracles/make_lexical_squad.py``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLE = REPO / "examples" / "squad"
FIXTURE = HERE / "lexical_squad_example.json"
N_CHUNKS = 3


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if len(s.split()) >= 4]


def _rewrite(sentence: str, kind: int, other: str) -> str:
    """``sentence`` with one change: 0 none, 1 a number, 2 a negation, 3 a name taken from ``other``."""
    if kind == 1 and re.search(r"\d+", sentence):
        return re.sub(r"\d+", lambda m: str(int(m.group()) + 7), sentence, count=1)
    if kind in (1, 2):
        return re.sub(r"\b(is|was|are|were|has|had)\b", r"\1 not", sentence, count=1)
    names = re.findall(r"(?<=\s)[A-Z][a-z]{3,}", other)
    if kind == 3 and names:
        return re.sub(r"(?<=\s)[A-Z][a-z]{3,}", names[-1], sentence, count=1)
    return sentence


def cases() -> list[dict]:
    """The inputs: question, answer and chunk ids, one case per golden question of the example."""
    corpus = read_jsonl(EXAMPLE / "corpus.jsonl")
    position = {p["id"]: k for k, p in enumerate(corpus)}
    out = []
    for k, golden in enumerate(read_jsonl(EXAMPLE / "golden.jsonl")):
        first = position[golden["expected_doc_ids"][0]] if golden["expected_doc_ids"] else (37 * k) % len(corpus)
        chunks = [corpus[(first + j) % len(corpus)] for j in range(N_CHUNKS)]
        far = corpus[(first + len(corpus) // 2) % len(corpus)]  # another article
        sentences = _sentences(chunks[0]["text"])[: 1 + k % 2] or [chunks[0]["text"]]
        kind = k % 6
        answer = [_rewrite(s, kind if j == 0 else 0, far["text"]) for j, s in enumerate(sentences)]
        if kind == 4:
            answer.append((_sentences(far["text"]) or [far["text"]])[0])
        if kind == 5 and golden.get("reference_answers"):
            answer.insert(0, f"{golden['question'].rstrip(' ?')}: {golden['reference_answers'][0]}.")
        out.append(
            {
                "id": golden["id"],
                "question": golden["question"],
                "answer": " ".join(answer),
                "chunk_ids": [c["id"] for c in chunks],
            }
        )
    return out


def judgment_json(judgment) -> dict:
    """Everything a Judgment holds, as JSON values (tuples become lists; floats keep every bit)."""
    return json.loads(json.dumps(dataclasses.asdict(judgment), ensure_ascii=False))


def main() -> None:
    sys.path.insert(0, str(REPO / "src"))
    from gate.judges.lexical import LexicalJudge
    from gate.models import Chunk

    judge = LexicalJudge()
    texts = {p["id"]: p["text"] for p in read_jsonl(EXAMPLE / "corpus.jsonl")}
    rows = []
    for case in cases():
        chunks = [Chunk(i, texts[i]) for i in case["chunk_ids"]]
        rows.append(case | {"judgment": judgment_json(judge.judge(case["question"], case["answer"], chunks))})
    lines = ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows)  # one case per line
    FIXTURE.write_text(f'{{"judge": {json.dumps(judge.identity)}, "cases": [\n{lines}\n]}}\n', encoding="utf-8")
    print(f"wrote {FIXTURE} ({len(rows)} cases)")


if __name__ == "__main__":
    main()
