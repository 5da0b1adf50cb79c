"""Fast at every size: one table of rag-gate's figures next to a reference's, measured in one run.

Every row is measured here, side by side with its reference, as the median of ``--runs`` interleaved runs (this is
a shared machine: the ratios are the claim, not the seconds). Rows:

1. ``compare`` of two run directories, scores reused (``tests/perfdata.py``: R = 3, 15 metrics), as a child
   process: wall time and peak RSS (``os.wait4``'s ``ru_maxrss`` of that child). Reference: the same tests as plain
   scipy calls on the per-case means, per metric: ``scipy.stats.bootstrap`` (BCa, 10,000 resamples) of the
   per-case differences, ``scipy.stats.permutation_test`` (paired samples, 10,000) and, for binary metrics,
   ``scipy.stats.binomtest`` on the cases that moved; the files are read beforehand (not timed). The reference is
   measured up to ``--reference-max`` cases and extrapolated linearly above (labelled so; a lower bound: scipy's
   BCa jackknife is quadratic in N).
2. Retrieval metrics through the product's scoring path (``gate.scoring.score_all``, batched) at 100k queries ×
   100 retrieved documents, 5 metrics, against ``pytrec_eval`` on the same data (values compared).
3. Startup: ``rag-gate --help`` and ``rag-gate validate`` of a 10-case golden set against ``python -c "import click"``.
   Before any row, ``gate`` is compiled to bytecode as an installed package is (:func:`compile_package`).
4. ``rag-gate run`` overhead per case × repeat with a trivial Python pipeline and metrics that need no judge.
5. ``rag-gate run`` with a pipeline that sleeps 100 ms per case against the bound N × 0.1 s / concurrency.
6. LLM judges against a 200 ms local endpoint (``benchmarks/judge_speed.py``'s stub and runners): efficiency
   (ideal / measured) of the rubric (llm) judge and the ragas judge, and the ragas judge against ragas' own
   ``ascore``.
6b. The rubric (llm) judge through a whole ``rag-gate run`` (section ``judges-cli``, about two minutes alone):
    400 answers (``pipeline: predictions:``, the default metrics), the 200 ms stub on 127.0.0.1, ``judge_concurrency``
    C = 8 and 32, the answer cache on (a fresh directory per run). Headline: requests-span efficiency =
    ceil(requests / C) × latency / the stub's first request to its last answer (goal ≥ 0.95), with the most requests
    in flight at the stub; beside it the judge phase (the run's wall time − the same run with the lexical judge);
    the load average over the row; both runs at this process's priority.
7. ``rag-gate pr`` with the base cache: a push to main stores the base, then two pushes to a PR (fake GitHub on
   127.0.0.1, the tests' scratch repository); base cases run each time are counted by the pipeline itself.
8. Scoring on every core, on ``perfdata.make_project``'s answers (default metrics, lexical judge):
   ``score_all`` with ``jobs=1`` against ``jobs=2`` (speed-up, scores compared), and the lexical judge alone,
   answers per second of CPU time on one core (from cold text caches).
9. ``compare`` at N = 2,000, R = 3 against the scipy calls (row 1's measure at a smaller size).
10. End to end at 100,000 cases: ``rag-gate run`` of both sides (``pipeline: predictions:``, so no pipeline time;
    default metrics, lexical judge) and ``rag-gate compare``: total wall time and the largest peak RSS of the
    three commands. One run (minutes on a shared machine): ``--only e2e`` and ``--e2e-cases`` to choose.
11. ``rag-gate pr --adaptive on`` against every case (section ``adaptive``): pipeline calls (the pipeline's own
    log, both sides) and wall on a clear regression at R = 1, (11c) on a PR that changes nothing at R = 1 (the
    default gate, every answer the same), and (11b) on a PR that changes nothing at R = 3 with a deterministic
    pipeline (repeats spent only where answers vary; ``--quick``: 200 cases, else 2,000).

usage: python benchmarks/perf.py [--quick] [--skip-judges] [--only compare,retrieval,...] [--e2e-cases N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests"), str(ROOT / "tests" / "pr")]  # judge_speed; the tests' helpers
# (perfdata, measure, fake GitHub); the tests' scratch repository (tests/pr/scratch_repo.py)
from measure import (  # noqa: E402
    Row,
    child,
    child_tree,
    interleaved,
    markdown_table,
    median_of,
    megabytes,
    reference_inputs,
    runs_at,
    seconds,
)

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

RAG_GATE = str(Path(sys.executable).with_name("rag-gate"))
SECTIONS = (
    "compare",
    "retrieval",
    "startup",
    "run",
    "sleep",
    "judges",
    "judges-cli",
    "cache",
    "scoring",
    "compare2k",
    "e2e",
    "adaptive",
)
NO_JUDGE_METRICS = (
    "hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5", "answer_f1", "exact_match", "refusal",
    "false_refusal", "error_rate", "latency_ms", "cost_usd",
)  # fmt: skip
RETRIEVAL = {  # rag-gate metric → pytrec_eval measure (and its result key)
    "hit_rate@10": ("success.10", "success_10"),
    "recall@10": ("recall.10", "recall_10"),
    "precision@10": ("P.10", "P_10"),
    "mrr": ("recip_rank", "recip_rank"),
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10"),
}


def say(message: str) -> None:
    """Progress on stderr."""
    print(f"[perf {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def compile_package() -> None:
    """Compile ``gate`` to bytecode, as ``pip install`` does for the installed package (and the action's image).

    An editable checkout under ``PYTHONDONTWRITEBYTECODE=1`` (as on this project's machines) would otherwise
    compile every module from source in every child: about 70 ms of CPU per ``rag-gate`` start that no user pays.
    """
    import compileall

    compileall.compile_dir(ROOT / "src" / "gate", quiet=1)


# ------------------------------------------------------------------------------------------------ 1. compare
def scipy_reference(inputs: Sequence[tuple[str, np.ndarray, np.ndarray, bool]], resamples: int = 10_000) -> float:
    """Seconds the plain scipy tests take on every metric (bootstrap BCa + permutation + binomtest if binary)."""
    from scipy import stats

    def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(x - y, axis=axis)

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate metrics (a constant cost) warn and give NaN intervals
        for _, base, head, binary in inputs:
            rng = np.random.default_rng(0)
            d = head - base
            stats.bootstrap((d,), np.mean, n_resamples=resamples, method="BCa", rng=rng)
            stats.permutation_test(
                (head, base), mean_difference, permutation_type="samples", n_resamples=resamples, rng=rng
            )
            if binary:
                worse, better = int(np.sum(d < 0)), int(np.sum(d > 0))
                if worse + better:
                    stats.binomtest(better, worse + better, 0.5)
    return time.perf_counter() - start


def compare_rows(sizes: Sequence[int], reference_max: int, runs: int, work: Path) -> list[Row]:
    """Row 1: ``rag-gate compare`` (R = 3, 15 metrics, 10k resamples) against plain scipy, at each N."""
    import perfdata

    rows, walls, reference_per_case = [], {}, None
    goal_n = 5000 if 5000 in sizes else min(reference_max, max(sizes))
    for n in sizes:
        root = work / f"compare-{n}"
        say(f"compare: writing run directories, N = {n}")
        perfdata.make(root, n, 3)
        peaks: list[int] = []

        def ours(root: Path = root, peaks: list[int] = peaks) -> float:
            wall, rss, _ = child([RAG_GATE, "compare", str(root / "base"), str(root / "head"),
                                  "--out", str(root / "report"), "--format", "json"])  # fmt: skip
            peaks.append(rss)
            return wall

        measures: dict[str, Callable[[], float]] = {"ours": ours}
        if n <= reference_max:
            inputs = reference_inputs(root)
            measures["scipy"] = lambda inputs=inputs: scipy_reference(inputs)
        k = runs_at(n, runs)
        say(f"compare: measuring, N = {n}, {k} run(s)")
        medians = interleaved(k, **measures)
        walls[n] = medians["ours"]
        label = f"compare N={n:,} (R=3, 15 metrics): wall, peak RSS ({median_of(k)})"
        ours_text = f"{seconds(medians['ours'])}, {megabytes(max(peaks))}"
        goal = f"≤ 0.2× scipy (N={goal_n:,})" if n == goal_n else ""
        if n == max(sizes) and n >= 100_000:
            goal = (goal + "; " if goal else "") + "peak RSS ≤ 2 GB at N=100k"
        if "scipy" in medians:
            reference_per_case = medians["scipy"] / n
            ratio = medians["ours"] / medians["scipy"]
            reference = f"{seconds(medians['scipy'])} (scipy, measured)"
        elif reference_per_case is not None:
            estimate = reference_per_case * n
            ratio = medians["ours"] / estimate
            reference = f"{seconds(estimate)} (scipy, extrapolated linearly: a lower bound)"
        else:
            ratio, reference = None, "not measured (--reference-max)"
        met = None
        if n == goal_n and ratio is not None:
            met = ratio <= 0.2
        if n == max(sizes) and n >= 100_000:
            met = (met is not False) and max(peaks) <= 2 * 10**9
        rows.append(Row(label, ours_text, reference, ratio, goal, met))
        shutil.rmtree(root)
    if len(walls) >= 3:  # linear in N: the marginal time per case over the last interval against the one before
        a, b, c = sorted(walls)[-3:]
        early = (walls[b] - walls[a]) / (b - a)
        late = (walls[c] - walls[b]) / (c - b)
        rows.append(Row(f"compare: marginal time per case, N {b:,}→{c:,} vs {a:,}→{b:,} (linear in N)",
                        f"{1e6 * late:.0f} µs", f"{1e6 * early:.0f} µs", late / early, "≤ 1.25× (linear)",
                        late / early <= 1.25))  # fmt: skip
    return rows


# ------------------------------------------------------------------------------------------------ 2. retrieval
def retrieval_data(n_queries: int, n_docs: int = 100, seed: int = 0):
    """Golden cases, predictions and the same as pytrec_eval qrels and run: ``n_docs`` ranked documents per
    query, 1–3 relevant ones drawn from 1.5 × ``n_docs`` (so some are not retrieved)."""
    from gate.models import Chunk, GoldenCase, Prediction

    rng = np.random.default_rng(seed)
    names = [f"d{j}" for j in range(int(1.5 * n_docs))]
    chunks = [Chunk(name) for name in names]
    order = np.argsort(rng.random((n_queries, n_docs)), axis=1)
    relevant = rng.integers(1, 4, n_queries)
    golden, table, qrels, run = [], {}, {}, {}
    scores = {k: float(n_docs - k) for k in range(n_docs)}
    for q in range(n_queries):
        qid = f"q{q}"
        expected = tuple(names[j] for j in rng.choice(len(names), relevant[q], replace=False))
        ranked = order[q].tolist()
        golden.append(GoldenCase(qid, "question?", expected))
        table[(qid, 0)] = Prediction(qid, retrieved=tuple(chunks[j] for j in ranked))
        qrels[qid] = dict.fromkeys(expected, 1)
        run[qid] = {names[j]: scores[k] for k, j in enumerate(ranked)}
    return golden, table, qrels, run


def retrieval_rows(n_queries: int, runs: int) -> list[Row]:
    """Row 2: the batched scoring path against pytrec_eval, values compared."""
    import pytrec_eval

    from gate.config import GatePolicy
    from gate.scoring import score_all

    say(f"retrieval: building {n_queries:,} queries × 100 documents")
    golden, table, qrels, run = retrieval_data(n_queries)
    names = tuple(RETRIEVAL)
    policy = GatePolicy(metrics=names, gated=names)
    measures = {trec for trec, _ in RETRIEVAL.values()}
    results = {}

    def ours() -> float:
        results.pop("ours", None)  # the previous run's rows are freed before the clock starts
        start = time.perf_counter()
        results["ours"] = score_all(golden, table, 1, policy, judge=None)
        return time.perf_counter() - start

    def theirs() -> float:
        results.pop("theirs", None)
        start = time.perf_counter()
        results["theirs"] = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        return time.perf_counter() - start

    say("retrieval: measuring")
    medians = interleaved(runs, ours=ours, theirs=theirs)
    trec = results["theirs"]
    diff = max(abs(s.value - trec[s.id][RETRIEVAL[s.metric][1]]) for s in results["ours"])
    assert len(results["ours"]) == len(golden) * len(names)
    ratio = medians["ours"] / medians["theirs"]
    return [
        Row(
            f"retrieval metrics via score_all, {n_queries:,} queries × 100 docs, 5 metrics (max abs diff {diff:.1g})",
            seconds(medians["ours"]),
            f"{seconds(medians['theirs'])} (pytrec_eval)",
            ratio,
            "≤ 1× pytrec_eval",
            ratio <= 1 and diff < 1e-12,
        )  # fmt: skip
    ]


# ------------------------------------------------------------------------------------------------ 3. startup
def startup_rows(runs: int, work: Path) -> list[Row]:
    """Row 3: ``rag-gate --help`` and ``validate`` of a 10-case golden set against ``python -c "import click"``."""
    golden = work / "golden-10.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?", "expected_doc_ids": [f"d{i}"]})
                              + "\n" for i in range(10)))  # fmt: skip
    wall = lambda *cmd: lambda: child(cmd)[0]  # noqa: E731
    medians = interleaved(
        runs,
        click=wall(sys.executable, "-c", "import click"),
        help=wall(RAG_GATE, "--help"),
        validate=wall(RAG_GATE, "validate", str(golden)),
    )
    click = f"{seconds(medians['click'])} (python -c 'import click')"

    def startup(measurement: str, key: str, limit: float) -> Row:
        ratio = medians[key] / medians["click"]
        return Row(measurement, seconds(medians[key]), click, ratio, f"≤ {limit:g}×", ratio <= limit)

    return [
        startup("startup: rag-gate --help", "help", 2),
        startup("startup: rag-gate validate (10-case golden set)", "validate", 3),
    ]


# ------------------------------------------------------------------------------------------------ 4–5. run
def run_project(root: Path, n: int, sleep_s: float = 0.0, concurrency: int | None = None) -> Path:
    """A golden set of n cases, a constant Python pipeline (sleeping ``sleep_s`` per case) and its config."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "golden.jsonl").open("w", encoding="utf-8") as out:
        for i in range(n):
            record = {"id": f"q{i}", "question": f"What colour is item {i}?", "expected_doc_ids": [f"d{i}"],
                      "reference_answers": ["blue"]}  # fmt: skip
            out.write(json.dumps(record) + "\n")
    sleep = f"    time.sleep({sleep_s!r})\n" if sleep_s else ""
    answer = "    return {'answer': 'It is blue.', 'retrieved': [{'id': 'd0', 'text': 'Item 0 is blue.'}]}\n"
    (root / "pipe.py").write_text(f"import time\n\n\ndef answer(case):\n{sleep}{answer}", encoding="utf-8")
    pipeline = "{python: pipe:answer" + (f", concurrency: {concurrency}" if concurrency else "") + "}"
    config = root / "rag-gate.yml"
    config.write_text(f"golden: golden.jsonl\npipeline: {pipeline}\nmetrics: [{', '.join(NO_JUDGE_METRICS)}]\n"
                      "repeats: 1\n")  # fmt: skip
    return config


def run_once(config: Path) -> float:
    """Wall seconds of one fresh ``rag-gate run`` (a new output directory: never a resumed run)."""
    out = config.parent / "out"
    shutil.rmtree(out, ignore_errors=True)
    wall, _, code = child([RAG_GATE, "run", "--config", str(config), "--out", str(out), "--no-progress"])
    assert code == 0
    return wall


def run_rows(sizes: Sequence[int], runs: int, work: Path) -> list[Row]:
    """Row 4: ``rag-gate run`` wall time per case × repeat with a trivial pipeline, at each N (linear in N)."""
    configs = {n: run_project(work / f"run-{n}", n) for n in sizes}
    rows = []
    for n in sizes:
        say(f"run: measuring N = {n}, {runs_at(n, runs)} run(s)")
        wall = interleaved(runs_at(n, runs), run=lambda n=n: run_once(configs[n]))["run"]
        per_case = 1000 * wall / n
        label = f"run overhead, N={n:,}, R=1, trivial Python pipeline, {len(NO_JUDGE_METRICS)} judge-free metrics"
        rows.append(Row(f"{label}: wall / (N·R) ({median_of(runs_at(n, runs))})",
                        f"{per_case:.3g} ms ({seconds(wall)})", "—", None, "≤ 2 ms", per_case <= 2))  # fmt: skip
    for n in sizes:
        shutil.rmtree(work / f"run-{n}")
    return rows


def sleep_rows(per_slot: int, runs: int, work: Path, concurrencies: Sequence[int] = (1, 4, 8)) -> list[Row]:
    """Row 5: a pipeline sleeping 100 ms per case, against the bound N × 0.1 s / concurrency."""
    configs = {c: run_project(work / f"sleep-{c}", per_slot * c, 0.1, c) for c in concurrencies}
    say(f"sleep: measuring concurrency {', '.join(map(str, concurrencies))}")
    medians = interleaved(runs, **{str(c): lambda cfg=cfg: run_once(cfg) for c, cfg in configs.items()})
    rows = []
    for c in concurrencies:
        bound = per_slot * 0.1
        wall = medians[str(c)]
        rows.append(Row(f"run, pipeline sleeping 100 ms, N={per_slot * c}, concurrency {c}: wall vs N·0.1 s/C",
                        seconds(wall), f"{seconds(bound)} (bound)", wall / bound, "≤ 1.05×",
                        wall / bound <= 1.05))  # fmt: skip
        shutil.rmtree(work / f"sleep-{c}")
    return rows


# ------------------------------------------------------------------------------------------------ 6. judges
def judge_rows(concurrencies: Sequence[int], row_seconds: float, runs: int, latency: float = 0.2) -> list[Row]:
    """Row 6: the judges against judge_speed's 200 ms stub: efficiency, and the ragas judge against ``ascore``."""
    import judge_speed as js

    stub, url = js.start_stub(latency)
    try:
        rounds = round(row_seconds / latency)  # requests per slot
        return [row for c in concurrencies for row in judge_rows_at(url, c, rounds, runs, latency)]
    finally:
        stub.kill()
        stub.wait()


def judge_rows_at(url: str, c: int, rounds: int, runs: int, latency: float) -> list[Row]:
    """The judge rows at concurrency C: ``rounds`` requests per slot for each of the three ways of judging."""
    import judge_speed as js

    variants = {  # name → (model calls per answer, runner factory)
        "llm": (1, lambda n: js.judge_run("llm", url, c, n)),
        "ragas": (2, lambda n: js.judge_run("ragas", url, c, n)),
        "ascore": (2, lambda n: js.ragas_ascore_run(url, c, n)),
    }
    ideal: dict[str, float] = {}

    def measure(name: str) -> float:
        calls, make = variants[name]
        wall, _, requests, _ = js.timed(make(rounds * c // calls), url)
        ideal[name] = requests * latency / c
        return wall

    for _, make in variants.values():
        make(max(c, 4))()  # warm-up: imports, first connections
    say(f"judges: measuring C = {c}")
    medians = interleaved(runs, **{name: lambda name=name: measure(name) for name in variants})
    rows = []
    for name, label in (("llm", "rubric (llm) judge"), ("ragas", "ragas judge")):
        efficiency = ideal[name] / medians[name]
        rows.append(Row(f"{label}, C={c}, {latency * 1000:g} ms endpoint: wall vs ideal (efficiency "
                        f"{efficiency:.2f})", seconds(medians[name]), f"{seconds(ideal[name])} (ideal)",
                        1 / efficiency, "efficiency ≥ 0.9 (≤ 1.11×)", efficiency >= 0.9))  # fmt: skip
    ratio = medians["ragas"] / medians["ascore"]
    rows.append(Row(f"ragas judge vs ragas' own ascore (asyncio), C={c} (ascore efficiency "
                    f"{ideal['ascore'] / medians['ascore']:.2f})", seconds(medians["ragas"]),
                    f"{seconds(medians['ascore'])} (ragas ascore)", ratio, "≤ 1×", ratio <= 1))  # fmt: skip
    return rows


def judge_cli_rows(concurrencies: Sequence[int], n: int, runs: int, work: Path, latency: float = 0.2) -> list[Row]:
    """Row 6b: the rubric judge's requests through ``rag-gate run``: requests-span efficiency, and the judge phase.

    Headline: ceil(requests / C) × latency / the requests' span at the stub (its first request's arrival to its last
    answer), which is the judge's own time whatever the run does before and after it. Beside it: the judge phase
    (the run's wall time − the same run with the lexical judge) and its efficiency, the most requests the stub had
    in flight, and the load average over the measurement.
    """
    import math

    import judge_speed as js

    root = work / "judges-cli"
    root.mkdir()
    with (root / "golden.jsonl").open("w") as golden, (root / "preds.jsonl").open("w") as preds:
        for i in range(n):
            case = {"id": f"q{i}", "question": f"What colour is item {i}?", "expected_doc_ids": [f"d{i}"],
                    "reference_answers": ["blue"]}  # fmt: skip
            golden.write(json.dumps(case) + "\n")
            year = 1900 + i % 100
            chunk = {"id": f"d{i}", "text": f"Item {i} is a blue widget made in {year} by Acme."}
            preds.write(json.dumps({"id": f"q{i}", "answer": f"Item {i} is blue. It was made in {year}.",
                                    "retrieved": [chunk], "latency_ms": 100.0}) + "\n")  # fmt: skip
    stub, url = js.start_stub(latency)
    runs_done = iter(range(10**6))
    requests: dict[int, int] = {}
    spans: dict[int, list[float]] = defaultdict(list)  # the stub's first request to its last answer, per llm run
    most: dict[int, int] = defaultdict(int)  # the most requests in flight at the stub, over the llm runs

    def run(judge: dict, c: int) -> Callable[[], float]:
        def measure() -> float:
            k = next(runs_done)
            spec = {**judge, "cache_dir": str(root / f"cache-{k}")} if judge["name"] == "llm" else judge
            config = root / f"run-{k}.yml"
            config.write_text(
                f"golden: golden.jsonl\npipeline: {{predictions: preds.jsonl}}\n"
                f"judge: {json.dumps(spec)}\njudge_concurrency: {c}\n"
            )
            js.stub_stats(url, reset=True)
            out = root / f"out-{k}"
            wall, _, _ = child([RAG_GATE, "run", "--config", str(config), "--out", str(out), "--no-progress"])
            if judge["name"] == "llm":
                stats = js.stub_stats(url)
                requests[c] = json.loads((out / "manifest.json").read_text())["judge_usage"]["requests"]
                spans[c].append(stats["last"] - stats["first"])
                most[c] = max(most[c], js.most_in_flight(stats["spans"]))
            shutil.rmtree(out)
            return wall

        return measure

    rows = []
    try:
        llm = {"name": "llm", "model": "stub", "base_url": url}
        run(llm, 8)()  # warm-up: the stub's and the files' first use
        for c in concurrencies:
            load = os.getloadavg()[0]
            say(f"judges-cli: measuring C = {c} ({runs} run(s) of each side, load average {load:.1f})")
            walls = interleaved(runs, lexical=run({"name": "lexical"}, c), llm=run(llm, c))
            loads = f"{load:.1f}–{os.getloadavg()[0]:.1f}"
            ideal = math.ceil(requests[c] / c) * latency
            span = statistics.median(spans[c])
            phase = walls["llm"] - walls["lexical"]
            # the lexical run's scoring workers may cost more than the llm run spends outside its requests: a phase
            # shorter than the ideal says nothing about the judge
            shorter = " (shorter than the ideal: not the judge's time)"
            phase_text = f"{seconds(phase)}" + (f", efficiency {ideal / phase:.2f}" if phase > ideal else shorter)
            rows.append(Row(f"rubric (llm) judge through rag-gate run, {n} answers, judge_concurrency C={c}, "
                            f"{latency * 1000:g} ms endpoint: the requests' span at the endpoint (first request to "
                            f"last answer; {median_of(runs)}; at most {most[c]} in flight; load average {loads}) vs "
                            f"ceil({requests[c]}/C) × {latency * 1000:g} ms (requests-span efficiency "
                            f"{ideal / span:.2f}; the judge phase, run {seconds(walls['llm'])} − lexical run "
                            f"{seconds(walls['lexical'])}: {phase_text})",
                            seconds(span), f"{seconds(ideal)} (ideal)", span / ideal,
                            "efficiency ≥ 0.95 (≤ 1.05×)", ideal / span >= 0.95))  # fmt: skip
    finally:
        stub.kill()
        stub.wait()
        shutil.rmtree(root)
    return rows


# ------------------------------------------------------------------------------------------------ 7. cache
def cache_rows(work: Path) -> list[Row]:
    """Row 7: ``rag-gate pr`` on the tests' scratch repository with a fake GitHub: a push to main stores the base,
    then two pushes to the PR; the pipeline logs every case it answers (base: ``False``, head: ``True``)."""
    import scratch_repo as cg
    from fake_github import FakeGithub

    log = work / "pipeline-calls.log"
    hook = f"    with open({str(log)!r}, 'a') as log:\n        log.write(str(BROKEN) + ' ' + case['id'] + '\\n')\n"
    template = cg.RAG_TEMPLATE
    cg.RAG_TEMPLATE = template.replace("def answer(case, **options):\n", "def answer(case, **options):\n" + hook)
    try:
        shas = cg.make_scratch_repo(work / "repo")
    finally:
        cg.RAG_TEMPLATE = template
    repo, n_cases = work / "repo", cg.N_FACTS + len(cg.OOD)
    fake = FakeGithub().start()
    clean = {k: v for k, v in os.environ.items() if k not in cg.GITHUB_VARS}
    clean |= {"XDG_CACHE_HOME": str(work / "xdg"), "RAG_GATE_CACHE_KEY": "perf-benchmark-cache-key-0123456789"}

    def pr(label: str, event_name: str, event: dict, cache_dir: str, **extra: str) -> tuple[float, int, int, int]:
        """(wall, base cases run, head cases run, exit code) of one ``rag-gate pr``."""
        (work / label).mkdir(exist_ok=True)
        env = cg.actions_env(work / label, fake.api_url, fake.token, repo, event, event_name)
        env = clean | {k: v for k, v in env.items() if v is not None} | extra
        log.write_text("")
        wall, _, code = child([RAG_GATE, "pr", "--config", "rag-gate.yml", "--working-directory", str(repo),
                               "--cache-dir", cache_dir, "--out-dir", f"rag-gate-out/{label}", "--repeats", "",
                               "--setup-command", ""], env=env)  # fmt: skip
        calls = log.read_text().split()[::2]
        return wall, calls.count("False"), calls.count("True"), code

    try:
        say("cache: push to main, then two pushes to the PR")
        push = {"ref": "refs/heads/main", "repository": {"full_name": "octo/rag", "default_branch": "main"}}
        stored = pr("push", "push", push, ".rag-gate-cache", GITHUB_REF="refs/heads/main", GITHUB_SHA=shas["base"])
        first = pr("first", "pull_request", cg.pull_request_event(shas), ".rag-gate-cache")
        second = pr("second", "pull_request", cg.pull_request_event(shas), ".rag-gate-cache")
        uncached = pr("uncached", "pull_request", cg.pull_request_event(shas), "")
    finally:
        fake.stop()
    shutil.rmtree(work / "repo", ignore_errors=True)

    def text(result: tuple[float, int, int, int]) -> str:
        return f"{result[1]} of {n_cases} base cases, {result[2]} head cases, {seconds(result[0])}"

    reference = f"{text(uncached)} (the same PR without the cache)"
    return [
        Row(
            "pr: push to main (trusted: stores the base in the cache)",
            text(stored),
            "—",
            None,
            f"base evaluated once ({n_cases})",
            stored[1] == n_cases,
        ),  # fmt: skip
        *(
            Row(label, text(push), reference, push[0] / uncached[0], "0 base cases", push[1] == 0)
            for label, push in (
                ("pr: first push to the PR (base from the cache)", first),
                ("pr: second push to the same PR", second),
            )
        ),
    ]


# ------------------------------------------------------------------------------------------------ 8. scoring
def cold_text_caches() -> None:
    """Empty the lexical judge's caches keyed by text (a word's stem, a sentence's facts, a text's language).

    A real run meets each answer once and starts with them empty; a measure that follows another on the same
    answers would find them full, and worker processes forked from this one would inherit them.
    """
    from gate.judges.text import facts, stem
    from gate.language import char_script, identify

    for cached in (stem, facts, char_script, identify):
        cached.cache_clear()


def scoring_rows(n: int, runs: int, work: Path) -> list[Row]:
    """Row 8: ``score_all`` on 1 and 2 processes (speed-up; rows compared) and the lexical judge per core.

    Each measure starts from cold text caches (:func:`cold_text_caches`), as a run does. The machine is shared and
    its scheduler shares the cores between sessions (``sched_autogroup``): two worker processes get two cores only
    when nobody else is busy. The row therefore also gives the cores the two processes obtained (their CPU time
    over the wall time) and the speed-up from CPU times, ``CPU(1 process) / (CPU(2 processes) / 2)``: the speed-up
    on two free cores when the workers share the work evenly (they take chunks from one queue), which is what
    parallel overhead (start-up, pickling, the main process's writing) lowers. The goal is judged on the wall
    speed-up when the processes obtained at least 1.9 cores, else on the CPU-time one (said in the row).
    """
    import perfdata

    from gate.config import load_config
    from gate.golden import load_golden
    from gate.predictions import load_predictions
    from gate.produce import make_judge
    from gate.scoring import call_judge, score_all, score_lines

    config, _ = perfdata.make_project(work / "scoring", n)
    settings = load_config(config)
    policy, golden = settings.policy, load_golden(settings.golden)
    table = {(p.id, p.repeat): p for p in load_predictions(settings.pipeline.predictions)}
    judge = make_judge(policy)
    texts: dict[int, str] = {}
    cpu: dict[int, list[float]] = defaultdict(list)

    def scoring(jobs: int) -> Callable[[], float]:
        def measure() -> float:
            lines: list[str] = []
            cold_text_caches()
            before, start = os.times(), time.perf_counter()
            score_all(golden, table, 1, policy, judge, on_scores=lambda r: lines.append(score_lines(r)), jobs=jobs)
            wall, after = time.perf_counter() - start, os.times()
            # this process and its workers (reaped when the pool shut down)
            cpu[jobs].append(sum(after[:4]) - sum(before[:4]))
            texts[jobs] = "".join(lines)
            return wall

        return measure

    answers = [(c, table[(c.id, 0)]) for c in golden if table[(c.id, 0)].error is None]

    def judge_alone() -> float:
        """CPU seconds of this process (one thread) to judge every answer, from cold text caches.

        CPU time, not wall time: the machine is shared.
        """
        cold_text_caches()
        start = time.process_time()
        for case, prediction in answers:
            call_judge(judge, case, prediction, policy)
        return time.process_time() - start

    say(f"scoring: {n:,} answers on 1 and 2 processes, and the judge alone ({runs} run(s))")
    load = os.getloadavg()[0]
    medians = interleaved(runs, one=scoring(1), two=scoring(2), judge=judge_alone)
    same = texts[1] == texts[2]
    speedup = medians["one"] / medians["two"]
    cpu_one, cpu_two = statistics.median(cpu[1]), statistics.median(cpu[2])
    cores = cpu_two / medians["two"]
    cpu_speedup = cpu_one / (cpu_two / 2)
    judged = speedup if cores >= 1.9 else cpu_speedup
    basis = "wall" if cores >= 1.9 else f"CPU times: the 2 processes obtained {cores:.2f} cores"
    per_second = len(answers) / medians["judge"]
    shutil.rmtree(work / "scoring")
    return [
        Row(f"scoring {n:,} answers (15 metrics, lexical judge) on 2 processes vs 1: speed-up (scores.jsonl "
            f"{'identical' if same else 'DIFFERENT'}; {median_of(runs)}; load average {load:.1f}; CPU "
            f"{cpu_one:.2f} s on 1, {cpu_two:.2f} s on 2)", seconds(medians["two"]),
            f"{seconds(medians['one'])} (1 process)", 1 / speedup,
            f"speed-up ≥ 1.8× (wall {speedup:.2f}×, from CPU times {cpu_speedup:.2f}×; judged on {basis})",
            judged >= 1.8 and same),
        Row(f"lexical judge alone, {len(answers):,} answers on one core, CPU time ({median_of(runs)})",
            f"{per_second:.0f} answers/s ({1000 / per_second:.2f} ms each)", "—", None, "", None),
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------------ 10. e2e
def e2e_rows(n: int, work: Path) -> list[Row]:
    """Row 10: ``rag-gate run`` of both sides of ``perfdata.make_project(n)`` and ``compare``, one run each."""
    import perfdata

    root = work / "e2e"
    say(f"e2e: writing {n:,} cases and both sides' predictions")
    perfdata.make_project(root, n)
    steps = {
        "run base": ["run", "--config", "base.yml", "--out", "base", "--no-progress"],
        "run head": ["run", "--config", "head.yml", "--out", "head", "--no-progress"],
        "compare": ["compare", "base", "head", "--out", "report", "--format", "json"],
    }
    walls, peaks, cpus, loads = {}, {}, {}, {}
    for label, args in steps.items():
        loads[label] = os.getloadavg()[0]
        say(f"e2e: {label} (load average {loads[label]:.1f})")
        walls[label], peaks[label], _, cpus[label] = child_tree([RAG_GATE, *args], cwd=root)
    total, peak = sum(walls.values()), max(peaks.values())
    parts = ", ".join(
        f"{label} {seconds(w)} / {seconds(cpus[label])} CPU / {megabytes(peaks[label])} (load {loads[label]:.1f})"
        for label, w in walls.items()
    )
    shutil.rmtree(root)
    return [
        Row(f"end to end, {n:,} cases, R=1: run base + run head + compare, wall and peak RSS of one process (1 run; "
            f"wall / CPU of the process tree / peak RSS: {parts})",
            f"{seconds(total)}, {megabytes(peak)}", "300 s, 1 GB (goal)", total / 300,
            "≤ 5 min, ≤ 1 GB", total <= 300 and peak <= 2**30),
    ]  # fmt: skip


def _off_and_on(root: Path, what: str) -> tuple[tuple[float, int, int], tuple[float, int, int], dict]:
    """``rag-gate pr --adaptive off`` then ``on`` in ``root/repo`` (made by a test's ``make_repo``, its pipeline
    logging to ``root/calls.{base,head}``); ``root`` is removed afterwards.

    Returns:
        ((wall s, pipeline calls of both sides, exit code) with every case, the same adaptively, report.json's
        ``adaptive`` of the adaptive run).
    """
    figures = {}
    for mode in ("off", "on"):
        logs = [(root / "calls").with_suffix(suffix) for suffix in (".base", ".head")]
        for path in logs:
            path.unlink(missing_ok=True)
        say(f"adaptive: pr --adaptive {mode} on {what}")
        args = ["pr", "--base-ref", "main", "--out-dir", f"rag-gate-out/{mode}", "--comment", "off", "--no-progress"]
        wall, _, code, _ = child_tree([RAG_GATE, *args, "--adaptive", mode], cwd=root / "repo")
        figures[mode] = (wall, sum(len(path.read_text().split()) for path in logs if path.exists()), code)
    adaptive = json.loads((root / "repo" / "rag-gate-out" / "on" / "report.json").read_text())["adaptive"]
    shutil.rmtree(root)
    return figures["off"], figures["on"], adaptive


def adaptive_rows(n: int, work: Path) -> list[Row]:
    """Rows 11 and 11c: ``rag-gate pr`` on a clear regression and on a PR that changes nothing, every case against
    ``--adaptive on``: pipeline calls and wall; and :func:`repeats_row` (11b).

    The scratch repository of tests/pr/test_pr_adaptive.py (a deterministic code-word pipeline that logs its calls;
    the default gate; the PR breaks retrieval on every other case, or changes nothing), ``n`` in-domain cases and 2
    out-of-domain ones, R = 1, no cache.
    """
    from test_pr_adaptive import make_repo

    rows = []
    for label, broken in (("clear regression", 2), ("no change", 0)):
        root = work / f"adaptive-{broken}"
        make_repo(root / "repo", n, broken, root / "calls")
        what = "every other one broken" if broken else "the default gate, every answer the same"
        (wall_fixed, calls_fixed, code_fixed), (wall, calls, code), adaptive = _off_and_on(root, f"{n:,} cases")
        rows.append(Row(f"pr --adaptive on, {label} ({n:,} + 2 cases, {what}, R=1): pipeline calls (both sides) "
                        f"and wall, against every case (exit {code} vs {code_fixed}; {adaptive['cases_run']} cases "
                        f"per side, stopped: {adaptive['stopped']}, {adaptive['looks']} looks)",
                        f"{calls} calls, {seconds(wall)}", f"{calls_fixed} calls, {seconds(wall_fixed)}",
                        calls / calls_fixed, "calls ≤ 50 % of the fixed design, same exit code",
                        calls <= calls_fixed / 2 and code == code_fixed))  # fmt: skip
    return [*rows, repeats_row(n, work)]


def repeats_row(n: int, work: Path) -> Row:
    """Row 11b: ``rag-gate pr`` on a PR that changes nothing, R = 3, a deterministic pipeline: every case and every
    repeat against ``--adaptive on`` (repeat 0 where both sides answer the same, the audit's cases in full).

    The scratch repository of tests/pr/test_pr_adaptive_repeats.py (``n`` in-domain cases, 2 out-of-domain ones;
    one gated metric, hit_rate@5 with a margin of 0.05), no cache. Calls are the pipeline's own log, both sides.
    """
    from test_pr_adaptive_repeats import make_repo

    root = work / "repeats"
    make_repo(root / "repo", 0.0, root / "calls", n)
    (wall_fixed, calls_fixed, code_fixed), (wall, calls, code), adaptive = _off_and_on(
        root, f"{n:,} cases, R=3, no change"
    )
    every_repeat = 2 * adaptive["repeats_fixed"]
    return Row(
        f"pr --adaptive on, no change, R=3, deterministic pipeline ({n:,} + 2 cases): pipeline calls (both sides) "
        f"and wall, against every case and repeat (exit {code} vs {code_fixed}; {adaptive['cases_run']} cases per "
        f"side, {adaptive['repeats_audited']} audited, {every_repeat} calls had every case run all 3 repeats)",
        f"{calls} calls, {seconds(wall)}", f"{calls_fixed} calls, {seconds(wall_fixed)}", calls / calls_fixed,
        "calls ≤ 50 % of the fixed design, same exit code", calls <= calls_fixed / 2 and code == code_fixed,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ main
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run per row (a smoke test, < 3 min)")
    parser.add_argument("--skip-judges", action="store_true", help="leave out the LLM-judge rows (the slow ones)")
    parser.add_argument("--only", help=f"comma-separated sections among {','.join(SECTIONS)}")
    parser.add_argument("--runs", type=int, help="interleaved runs per row (median; default 3, 1 with --quick)")
    parser.add_argument("--compare-sizes", help="N of the compare rows, e.g. 1000,5000")
    parser.add_argument("--reference-max", type=int, help="largest N at which scipy is timed (default 5000)")
    parser.add_argument("--e2e-cases", type=int, default=100_000, help="cases of the end-to-end row (default 100,000)")
    parser.add_argument("--out", type=Path, help="also write the Markdown table (and its context) to this file")
    args = parser.parse_args(argv)
    sections = set(args.only.split(",")) if args.only else set(SECTIONS)
    if args.skip_judges:
        sections -= {"judges", "judges-cli"}
    if unknown := sections - set(SECTIONS):
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    quick = args.quick
    runs = args.runs or (1 if quick else 3)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    compile_package()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="rag-gate-perf-") as tmp:
        work = Path(tmp)
        if "compare" in sections:
            sizes = (300, 1000) if quick else (1000, 5000, 20_000, 100_000)
            if args.compare_sizes:
                sizes = tuple(int(n) for n in args.compare_sizes.split(","))
            reference_max = args.reference_max if args.reference_max is not None else 1000 if quick else 5000
            rows += compare_rows(sizes, reference_max, runs, work)
        if "retrieval" in sections:
            rows += retrieval_rows(5000 if quick else 100_000, runs)
        if "startup" in sections:
            rows += startup_rows(3 if quick else 5, work)
        if "run" in sections:
            rows += run_rows((1000, 2000) if quick else (20_000, 100_000), runs, work)
        if "sleep" in sections:
            rows += sleep_rows(10 if quick else 140, runs, work)
        if "judges" in sections:
            rows += judge_rows((8,) if quick else (8, 32), 1.0 if quick else 4.0, runs)
        if "judges-cli" in sections:
            rows += judge_cli_rows((8, 32), 400, runs, work)
        if "cache" in sections:
            rows += cache_rows(work)
        if "scoring" in sections:
            # below scoring.CLEAN_WORKERS_MIN: the workers are children of this process, so their CPU time is counted
            rows += scoring_rows(500 if quick else 8_000, runs, work)
        if "compare2k" in sections:
            rows += compare_rows((2000,), 2000, runs, work)
        if "e2e" in sections:
            rows += e2e_rows(2000 if quick else args.e2e_cases, work)
        if "adaptive" in sections:
            rows += adaptive_rows(200 if quick else 2000, work)
    elapsed = time.perf_counter() - started
    header = (
        f"rag-gate performance, {'--quick' if quick else 'full'} mode, median of {runs} interleaved "
        f"run(s) per row; {os.cpu_count()} CPUs shared with other jobs (load average {load_before:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end); {elapsed / 60:.1f} min in all."
    )
    text = f"{header}\n\n{markdown_table(rows)}\n"
    print("\n" + text)
    if args.out:
        command = " ".join(["python benchmarks/perf.py", *(argv if argv is not None else sys.argv[1:])])
        args.out.write_text(f"# `{command}`\n\n{text}", encoding="utf-8")


if __name__ == "__main__":
    main()
