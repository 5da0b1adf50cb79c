"""``rag-gate import``: a golden set from a ragas, DeepEval, promptfoo or BEIR dataset."""

from __future__ import annotations

from pathlib import Path

import click

from gate.cli.common import handle_errors
from gate.errors import InputError
from gate.sanitize import one_line, print_line

FORMATS = ("ragas", "deepeval", "promptfoo", "beir")


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(FORMATS))
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The golden set to write.")
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Corpus JSONL (id or _id, text, title?) to match text contexts to document ids (ragas, deepeval, promptfoo).",
)
@click.option(
    "--min-relevance",
    type=int,
    default=1,
    show_default=True,
    help="beir: a judgment scoring at least this is relevant (graded qrels are binarised).",
)
@click.option("--split", default="test", show_default=True, help="beir: the qrels split (qrels/SPLIT.tsv).")
@click.option(
    "--contexts",
    type=click.Choice(["reference", "retrieved"]),
    default="reference",
    show_default=True,
    help="ragas, deepeval: which contexts are the expected documents (the ground truth, or a system's retrieval).",
)
@click.option("--question-var", help="promptfoo: the var holding the question (default: question/query/input/prompt).")
@click.option("--force", is_flag=True, help="Replace OUT when it exists (by default an existing golden set is kept).")
@handle_errors
def import_(
    fmt: str,
    source: Path,
    out: Path,
    corpus: Path | None,
    min_relevance: int,
    split: str,
    contexts: str,
    question_var: str | None,
    force: bool,
) -> None:
    """Write a golden set (OUT) from another tool's dataset (SOURCE) in FORMAT.

    \b
    ragas      EvaluationDataset / testset, JSONL, JSON or CSV: user_input, reference,
               reference_contexts (or reference_context_ids)
    deepeval   goldens, a JSON array: input, expected_output, context
    promptfoo  tests YAML or promptfooconfig.yaml: vars, assert (is-refusal: out-of-domain)
    beir       a folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv

    Contexts given as text are matched to document ids in --corpus (exact text, then
    normalised text, then as a chunk of exactly one document); what cannot be matched is
    counted and listed, never guessed. Cases get the source's id, else q- and a hash of
    the question. The written file is validated. Exit 2 on bad input, nothing written.

    \b
    Example:
      rag-gate import ragas testset.jsonl --corpus corpus.jsonl --out eval/golden.jsonl
      rag-gate import beir datasets/scifact --split test --out eval/golden.jsonl
    """
    from gate.files import prepare_output_file
    from gate.importers import import_golden, write
    from gate.importers.common import Options

    if fmt == "beir" and corpus is not None:
        raise InputError("--corpus: not used by beir (it reads SOURCE/corpus.jsonl)")
    for name, given in (("SOURCE", source), ("--corpus", corpus)):
        if given is not None and given.is_file() and out.resolve() == given.resolve():
            raise InputError(f"--out {out}: is the {name} file; write the golden set elsewhere")
    if out.exists() and not force:
        raise InputError(f"--out {out}: exists; rag-gate never overwrites a golden set unasked (--force replaces it)")
    prepare_output_file(out, f"--out {out}")
    options = Options(corpus=corpus, min_relevance=min_relevance, split=split, contexts=contexts,
                      question_var=question_var)  # fmt: skip
    result = import_golden(fmt, source, options)
    write(result, out)
    records = result.records
    n_ood = sum(r["out_of_domain"] for r in records)
    bare = sum(not r["out_of_domain"] and not r["expected_doc_ids"] for r in records)
    print_line(
        one_line(
            f"wrote {out}: {len(records)} cases ({n_ood} out-of-domain, {bare} in-domain without expected "
            f"documents) from {fmt} {source}"
        ),  # fmt: skip
        err=True,
    )
    if result.matched:
        matched = result.matched
        found = ", ".join(f"{matched[k]} {k}" for k in ("exact", "normalised", "contained") if k in matched)
        lost = ", ".join(f"{matched[k]} {k}" for k in ("unmatched", "ambiguous") if k in matched)
        shown = f"contexts matched to corpus ids: {found or 'none'}" + (f"; left out: {lost}" if lost else "")
        print_line(shown, err=True)
    for line in result.notes.lines():
        print_line(one_line(f"note: {line.strip()}" if not line.startswith("  ") else f"  {line.strip()}"), err=True)
