"""Answers labelled by hand, to check a judge against and to correct its verdict (``rag-gate label``, ``judge-check``).

- **Rules** (:mod:`gate.labels.rules`): the per-answer rule of each judged metric the gate averages (e.g.
  ``hallucinated_claim_rate > 0``), so the judge is checked on what is gated; ``faithfulness < 1`` beside it.
- **Sampling** (:mod:`gate.labels.sampling`): answers of a run to label, seeded, a simple random sample by default or
  stratified by the judge's call and the case's domain, each row with its inclusion probability, never the same
  answer twice.
- **The labels format and agreement** (:mod:`gate.labels.agreement`; ``gate/schemas/labels.schema.json``): one row
  per labelled answer (``id``, ``repeat``, ``faithful`` suffice); the confusion matrix, balanced accuracy, Cohen's κ,
  sensitivity and specificity of the judge against the labels, weighted by 1/π (Horvitz–Thompson), each with a
  95 % bootstrap interval resampled within strata (seeded), and a plain verdict; a sentence, not a number, where a
  sample cannot measure one.
- **Corrected estimates** (:mod:`gate.labels.corrected`): the share of unfaithful answers judge only, labels only
  and prediction-powered (PPI++, :mod:`gate.stats.ppi`), and head − base against the margin.
- **Re-judging** (:mod:`gate.labels.rejudge`): the labelled answers judged again with another judge.

An answer is **flagged** (the judge calls it unfaithful: the positive class) by a rule of :mod:`gate.labels.rules`;
sampling and the stored ``judge.flagged`` use ``faithfulness < 1``: a claim the judge did not find supported
(lexical, nli, ragas), or a rubric faithfulness grade of 2 or 1 on the 1–3 scale (llm). An answer without a
faithfulness value (a refusal or an answer with no checkable claim, a judge failure) has no call and is never
sampled. For the pairwise judge the label says which of two answers is better (base, head or tie) and the judge's
call is its outcome.
"""
