"""How close the LLM judges come to the ideal time against a 200 ms endpoint.

Starts a local OpenAI-compatible stub (aiohttp, in its own process, every answer after ``--latency`` seconds:
rubric grades, or ragas statement extraction / verdicts) and scores N answers through ``gate.scoring.score_all``
with ``judge_concurrency`` = the judge's ``concurrency`` = C, the path ``rag-gate run`` takes. For each backend
and C it prints the measured wall time, the ideal time (requests × latency / C) and the efficiency (ideal /
measured; the goal is ≥ 0.9), next to:

- ``ragas ascore`` — ragas' own way: one ``AsyncOpenAI`` client, one ``llm_factory`` LLM and one
  ``Faithfulness`` metric, ``asyncio.gather`` of ``ascore`` under a semaphore of C (the ragas judge must be at
  least as fast);
- the designs this judge replaced, to show where the time went: ``ragas, client + loop per call`` (a new
  ``AsyncOpenAI`` client, ``llm_factory`` and ``asyncio.run`` event loop for every answer, called from C
  threads) and ``llm, sync client in threads`` (one blocking ``openai.OpenAI`` client shared by C threads).

Diagnostics per row: the stub's mean number of requests in flight / C (how full the judge keeps the endpoint),
the stub's mean time per answer (the latency, plus whatever the stub waited for a CPU) and this process's CPU
ms per request (client, instructor and ragas work; the stub runs elsewhere).

Each row is run ``--repeat`` times and the fastest run is reported (the one least disturbed by other processes);
on a shared machine, run it at a high priority (``nice -n -10``) so that it measures the judges, not the
neighbours.

usage: python benchmarks/judge_speed.py [--latency 0.2] [--concurrency 8 32] [--seconds 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

RUBRIC = json.dumps({"faithfulness": 3, "answer_relevance": 3, "correctness": 3, "completeness": 3, "form": 3})


def stub_answer(body: dict) -> str:
    """The stub's answer: ragas JSON for ragas prompts (extraction, then verdicts), else rubric grades."""
    user = str(body["messages"][-1].get("content", ""))
    if "response_format" not in body:
        return RUBRIC
    block = user.split("Now perform the same with the following input")[-1]
    block = block.split("input:", 1)[-1].rsplit("Output:", 1)[0]
    data = json.loads(block)
    if "statements" in data:
        verdicts = [{"statement": s, "reason": "stub", "verdict": 1} for s in data["statements"]]
        return json.dumps({"statements": verdicts})
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", data.get("answer", "")) if s]
    return json.dumps({"statements": sentences})


def serve(portfile: str, latency: float) -> None:
    """Run the stub on 127.0.0.1 (a free port, written to ``portfile``) until killed."""
    from aiohttp import web

    busy = {"seconds": 0.0, "requests": 0, "first": None, "last": None}  # first arrival, last answer (epoch s)

    async def stats(request: web.Request) -> web.Response:
        out = dict(busy)
        if request.method == "POST":  # reset
            busy.update(seconds=0.0, requests=0, first=None, last=None)
        return web.json_response(out)

    async def completions(request: web.Request) -> web.Response:
        arrived = time.perf_counter()
        busy["first"] = busy["first"] or time.time()
        body = await request.json()
        await asyncio.sleep(latency)
        busy["seconds"] += time.perf_counter() - arrived
        busy["requests"] += 1
        busy["last"] = time.time()
        return web.json_response({
            "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": stub_answer(body)},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        })  # fmt: skip

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", completions)
        app.router.add_route("*", "/stats", stats)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        Path(portfile + ".tmp").write_text(str(port))
        os.replace(portfile + ".tmp", portfile)
        await asyncio.Event().wait()

    asyncio.run(main())


def start_stub(latency: float) -> tuple[subprocess.Popen, str]:
    """Start the stub in a subprocess; return it and its base URL."""
    portfile = tempfile.mktemp(prefix="judge-speed-port-")
    process = subprocess.Popen([sys.executable, __file__, "--serve", portfile, "--latency", str(latency)])
    for _ in range(300):
        if os.path.exists(portfile):
            break
        if process.poll() is not None:
            sys.exit("the stub did not start (is aiohttp installed?)")
        time.sleep(0.05)
    port = Path(portfile).read_text()
    os.unlink(portfile)
    return process, f"http://127.0.0.1:{port}/v1"


def cases(n: int):
    """n golden cases and their predictions (two sentences each, one chunk)."""
    from gate.models import Chunk, GoldenCase, Prediction

    golden = [GoldenCase(f"c{i}", f"What is item {i}?") for i in range(n)]
    table = {
        (f"c{i}", 0): Prediction(
            f"c{i}", 0, f"Item {i} is a widget. It is blue.", (Chunk(f"d{i}", f"Item {i} is a blue widget."),)
        )
        for i in range(n)
    }
    return golden, table


def stub_stats(url: str, reset: bool = False) -> dict:
    """The stub's counters: seconds spent answering (summed over requests) and requests answered."""
    import urllib.request

    request = urllib.request.Request(url.removesuffix("/v1") + "/stats", method="POST" if reset else "GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def timed(run: Callable[[], int], url: str) -> tuple[float, float, int, float]:
    """(wall seconds, CPU seconds of this process, requests, seconds the stub spent answering) of ``run()``,
    which returns its request count."""
    stub_stats(url, reset=True)
    wall, cpu = time.perf_counter(), time.process_time()
    requests = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, requests, stub_stats(url)["seconds"]


def judge_run(backend: str, url: str, concurrency: int, n: int) -> Callable[[], int]:
    """Score n answers with a fresh judge through ``score_all`` (the path of ``rag-gate run``)."""
    from gate.config import GatePolicy
    from gate.judges import get_judge
    from gate.scoring import score_all

    spec = {"name": backend, "model": "stub", "base_url": url, "cache_dir": False, "concurrency": concurrency}
    judge = get_judge(spec)
    policy = GatePolicy(metrics=("faithfulness",), gated=("faithfulness",), judge=spec,
                            judge_concurrency=concurrency)  # fmt: skip
    golden, table = cases(n)

    def run() -> int:
        scores = score_all(golden, table, 1, policy, judge)
        failed = [s.error for s in scores if s.error]
        if failed:
            sys.exit(f"{backend}: {len(failed)} judge failures, e.g. {failed[0]}")
        return judge.usage().requests

    return run


def ragas_ascore_run(url: str, concurrency: int, n: int) -> Callable[[], int]:
    """ragas' own way: one client, one LLM, one metric, ``asyncio.gather`` of ``ascore`` under a semaphore."""

    def run() -> int:
        import openai
        from ragas.llms import llm_factory
        from ragas.metrics.collections import Faithfulness

        golden, table = cases(n)

        async def main() -> None:
            client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
            metric = Faithfulness(llm=llm_factory("stub", client=client, temperature=0.0, max_tokens=1024))
            slots = asyncio.Semaphore(concurrency)

            async def one(case, prediction):
                async with slots:
                    await metric.ascore(user_input=case.question, response=prediction.answer,
                                        retrieved_contexts=[c.text for c in prediction.retrieved])  # fmt: skip

            await asyncio.gather(*(one(c, table[(c.id, 0)]) for c in golden))
            await client.close()

        asyncio.run(main())
        return 2 * n

    return run


def ragas_per_call_run(url: str, concurrency: int, n: int) -> Callable[[], int]:
    """The replaced design: a new client, ``llm_factory`` and event loop per answer, from C threads."""

    def run() -> int:
        import openai
        from ragas.llms import llm_factory
        from ragas.metrics.collections import Faithfulness

        golden, table = cases(n)

        async def one(case, prediction) -> None:
            client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
            llm = llm_factory("stub", client=client, temperature=0.0, max_tokens=1024)
            await Faithfulness(llm=llm).ascore(user_input=case.question, response=prediction.answer,
                                               retrieved_contexts=[c.text for c in prediction.retrieved])  # fmt: skip
            await client.close()

        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda c: asyncio.run(one(c, table[(c.id, 0)])), golden))
        return 2 * n

    return run


def sync_threads_run(url: str, concurrency: int, n: int) -> Callable[[], int]:
    """The replaced design of the rubric judge: one blocking ``openai.OpenAI`` client shared by C threads."""

    def run() -> int:
        import openai

        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        lock = threading.BoundedSemaphore(concurrency)

        def one(i: int) -> None:
            with lock:
                client.chat.completions.create(model="stub", messages=[{"role": "user", "content": f"case {i}"}],
                                               temperature=0.0, max_tokens=256)  # fmt: skip

        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, range(n)))
        return n

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="stub latency per request, seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--seconds", type=float, default=4.0, help="ideal time per row, seconds (sets N)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the fastest is reported")
    parser.add_argument("--serve", metavar="PORTFILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    stub, url = start_stub(args.latency)
    try:
        rows = []
        for c in args.concurrency:
            rounds = round(args.seconds / args.latency)  # requests per slot
            variants = [
                ("llm (rubric judge)", 1, lambda n, c=c: judge_run("llm", url, c, n)),
                ("llm, sync client in threads (before)", 1, lambda n, c=c: sync_threads_run(url, c, n)),
                ("ragas judge", 2, lambda n, c=c: judge_run("ragas", url, c, n)),
                ("ragas ascore (ragas' own, asyncio)", 2, lambda n, c=c: ragas_ascore_run(url, c, n)),
                ("ragas, client + loop per call (before)", 2, lambda n, c=c: ragas_per_call_run(url, c, n)),
            ]
            for name, calls, make in variants:
                n = rounds * c // calls
                make(max(c, 4))()  # warm-up: imports, first connections
                runs = [timed(make(n), url) for _ in range(args.repeat)]
                wall, cpu, requests, busy = min(runs)  # the least disturbed run
                ideal = requests * args.latency / c
                rows.append((name, c, n, requests, wall, ideal, ideal / wall, busy / wall / c, 1000 * busy / requests,
                             1000 * cpu / requests))  # fmt: skip
                print(f"  measured {name} at C={c}: {wall:.2f} s", file=sys.stderr, flush=True)
    finally:
        stub.kill()
        stub.wait()
    print(f"\nLatency {args.latency * 1000:g} ms per request; efficiency = ideal / measured (goal ≥ 0.9); in flight =")
    print("the stub's mean number of requests being answered / C; stub ms = its mean time per answer (above the")
    print("latency when the stub itself waits for a CPU); CPU ms = this process's CPU per request.\n")
    print(f"{'variant':<40} {'C':>3} {'answers':>7} {'requests':>8} {'measured s':>10} {'ideal s':>8} "
          f"{'efficiency':>10} {'in flight':>9} {'stub ms':>7} {'CPU ms':>6}")  # fmt: skip
    for name, c, n, requests, wall, ideal, efficiency, in_flight, stub_ms, cpu_ms in rows:
        print(f"{name:<40} {c:>3} {n:>7} {requests:>8} {wall:>10.2f} {ideal:>8.2f} {efficiency:>10.2f} "
              f"{in_flight:>9.2f} {stub_ms:>7.0f} {cpu_ms:>6.2f}")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{os.cpu_count()} CPUs, load average {load:.1f} at the end (other processes share them).")


if __name__ == "__main__":
    main()
