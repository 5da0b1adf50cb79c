"""Answers labelled by hand, to check a judge against (``rag-gate label`` and ``rag-gate judge-check``).

- **Sampling** (:mod:`gate.labels.sampling`): answers of a run to label, seeded and stratified by the judge's call
  (flagged or not) and by the case's domain (in-domain, out-of-domain), never the same answer twice.
- **The labels format and agreement** (:mod:`gate.labels.agreement`; ``gate/schemas/labels.schema.json``): one row
  per labelled answer; the confusion matrix, balanced accuracy and Cohen's κ of the judge against the labels, each
  with a 95 % percentile bootstrap interval (seeded), and a plain verdict.
- **Re-judging** (:mod:`gate.labels.rejudge`): the labelled answers judged again with another judge.

An answer counts as **flagged** (the judge calls it unfaithful: the positive class) when its ``faithfulness``
score is below 1: a claim the judge did not find supported (lexical, nli, ragas), or a rubric faithfulness grade of
2 or 1 on the 1–3 scale (llm). An answer without a faithfulness value (a refusal or an answer with no checkable
claim, a judge failure) has no call and is never sampled. For the pairwise judge the label says which of two
answers is better (base, head or tie) and the judge's call is its outcome.
"""
