"""Rebuild golden.jsonl from the squad2-rag golden set (SQuAD 2.0, CC BY-SA 4.0): a deterministic selection.

Rule: for each article in ARTICLES, order its questions by the sha256 of their id and keep the first
IN_DOMAIN answerable and the first OUT_OF_DOMAIN unanswerable ones; write them in source-file order.

Usage: python make_golden.py SOURCE_GOLDEN.jsonl > golden.jsonl
"""

from __future__ import annotations

import hashlib
import json
import sys

ARTICLES = ("Normans", "Computational_complexity_theory", "French_and_Indian_War", "Imperialism")
IN_DOMAIN = 25
OUT_OF_DOMAIN = 12
FIELDS = ("id", "question", "expected_doc_ids", "reference_answers", "out_of_domain", "tags")


def select(rows: list[dict]) -> list[dict]:
    """Select the rows by the rule above; return them in source order."""
    keep: set[str] = set()
    for article in ARTICLES:
        for ood, n in ((False, IN_DOMAIN), (True, OUT_OF_DOMAIN)):
            pool = [r for r in rows if r["tags"] == [article] and r["out_of_domain"] is ood]
            pool.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
            keep.update(r["id"] for r in pool[:n])
    return [{f: r[f] for f in FIELDS} for r in rows if r["id"] in keep]


def main(path: str) -> None:
    """Print the selected golden cases as JSONL."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in select(rows):
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
