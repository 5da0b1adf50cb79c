"""Antonyms for the lexical judge: WordNet's direct antonym pairs, as Snowball stems, with irregular forms.

``data/antonyms.tsv`` holds 700 or so pairs derived from WordNet 3.1 (Princeton University; WordNet 3.0 licence,
reproduced in the file's header) by ``scripts/wordnet_antonyms.py``: direct antonym pointers between single-word
lemmas whose senses are both attested in the SemCor sense-tagged corpus, less a few polysemous pairs. English
only. Irregular inflections ("rose", "fell", "won", "sold") are mapped to their lemmas by
:func:`gate.judges.text.stem` before stemming.
"""

from __future__ import annotations

import functools
from importlib import resources

from gate.judges.text import stem


@functools.cache
def antonyms() -> dict[str, frozenset[str]]:
    """Stem → stems of its antonyms (symmetric), from ``data/antonyms.tsv``.

    Returns:
        E.g. ``antonyms()["rise"] == frozenset({"fall"})``; pairs whose two words share a stem are left out.

    Source: WordNet 3.1 (Miller 1995, "WordNet: a lexical database for English", doi:10.1145/219717.219748),
    direct antonymy ("!" pointers).

    """
    table: dict[str, set[str]] = {}
    text = resources.files("gate.judges").joinpath("data/antonyms.tsv").read_text(encoding="utf-8")
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        first, second, _ = line.split("\t")
        a, b = stem(first), stem(second)
        if a != b:
            table.setdefault(a, set()).add(b)
            table.setdefault(b, set()).add(a)
    return {key: frozenset(values) for key, values in table.items()}
