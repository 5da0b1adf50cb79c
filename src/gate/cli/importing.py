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
@click.option(
    "--ood-from",
    metavar="KEY[=VALUE]",
    help="The field that marks a case out-of-domain: a flag (true/false, yes/no, 1/0), or equal to VALUE "
    "(default: out_of_domain; see README for where each format looks).",
)
@click.option(
    "--ood-refusals/--no-ood-refusals",
    default=True,
    show_default=True,
    help='A case whose reference answers are all refusals ("I don\'t know") and that names no document is '
    "out-of-domain.",
)
@click.option(
    "--ood-without-documents",
    is_flag=True,
    help="A case whose source names no expected document is out-of-domain (beir: a query with no relevant "
    "judgment and none in another split).",
)
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
    ood_from: str | None,
    ood_refusals: bool,
    ood_without_documents: bool,
    force: bool,
) -> None:
    """Write a golden set (OUT) from another tool's dataset (SOURCE) in FORMAT.

    \b
    ragas      EvaluationDataset / testset, JSONL, JSON or CSV: user_input, reference,
               reference_contexts (or reference_context_ids)
    deepeval   goldens (save_as json, jsonl or csv): input, expected_output, context
    promptfoo  tests YAML, promptfooconfig.yaml or results.json (eval -o): vars,
               assert (is-refusal: out-of-domain; equals/contains: reference answers)
    beir       a folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv

    \b
    Out-of-domain cases (the refusal metric's) come from a field (--ood-from),
    a reference answer that is a refusal, promptfoo's is-refusal, or (asked)
    from cases without documents; an import with none, or with in-domain cases
    without expected documents, ends with a warning and the count.

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
                      question_var=question_var, ood_from=ood_from, ood_refusals=ood_refusals,
                      ood_without_documents=ood_without_documents)  # fmt: skip
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
    if result.ood_reasons:
        marked = ", ".join(f"{n} by {reason}" for reason, n in result.ood_reasons.items())
        print_line(one_line(f"out-of-domain: {marked}"), err=True)
    for warning in import_warnings(fmt, len(records), n_ood, bare, corpus is not None):
        print_line(one_line(f"rag-gate: warning: {warning}"), err=True)


OOD_HINTS = {
    "ragas": 'a reference answer that is a refusal ("I don\'t know"), or a column named by --ood-from KEY',
    "deepeval": "additional_metadata.out_of_domain: true, an expected_output that is a refusal, or --ood-from KEY",
    "promptfoo": "an is-refusal assertion, metadata.out_of_domain: true, or --ood-from KEY",
    "beir": "--ood-from KEY (a field of queries.jsonl) or --ood-without-documents",
}


def import_warnings(fmt: str, n_cases: int, n_ood: int, bare: int, has_corpus: bool) -> list[str]:
    """The warnings of an import that leaves the gate without what it needs (each one line, with its count)."""
    warnings = []
    if n_ood == 0:
        warnings.append(
            f"0 of {n_cases} cases are out-of-domain: the refusal metric cannot be computed and a head that answers "
            f"what it should refuse goes unseen; mark them with {OOD_HINTS[fmt]} (README: Import from other tools)"
        )
    if bare:
        corpus_hint = "" if has_corpus else "give --corpus to match their contexts, or "
        warnings.append(
            f"{bare} of {n_cases} cases are in-domain without expected documents: retrieval metrics skip them; "
            f"{corpus_hint}mark them out-of-domain if the system should refuse them (--ood-without-documents)"
        )
    return warnings
