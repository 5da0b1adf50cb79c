import contextlib
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import NamedTuple

import jsonschema
import pytest
from helpers import EXAMPLE, REFUSAL, REPORT_SCHEMA, SHARED_DATA, compare, read_jsonl, write_jsonl

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``shared_data(name, ...)`` whose data sets are not under :data:`SHARED_DATA`."""
    for item in items:
        for mark in item.iter_markers("shared_data"):
            missing = [name for name in mark.args if not (SHARED_DATA / name).exists()]
            if missing:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"needs the team's data set(s) {', '.join(missing)} under {SHARED_DATA} "
                        "(not shipped with the repo; set RAG_GATE_SHARED_DATA to their directory)"
                    )
                )


# ------------------------------------------------- no test leaves a process behind


def _proc_processes() -> dict[int, tuple[int, str, Path | None]]:
    """Every process this user can see in ``/proc``: pid → (parent pid, state, working directory or None)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cwd = Path(os.readlink(entry / "cwd"))
        except (OSError, IndexError):  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = (int(fields[1]), fields[0], cwd)
    return found


INTERPRETER_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "joblib.externals.loky")
"""Helpers a library keeps for the life of the interpreter (not a test's leftovers): they exit with pytest."""


def leftover_processes(root: Path) -> list[str]:
    """Running processes a test started and left: descendants of this (pytest) process, and processes whose working
    directory is under ``root`` (this session's temporary directory, where a test's pipeline runs; an orphan that
    was re-parented to init is found that way). Zombies are dead and left out; so is this process.

    Returns:
        ``pid (state) cwd: command line`` of each.
    """
    table = _proc_processes()
    ours, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, (ppid, _, _) in table.items() if ppid in ours} - ours
        ours |= more
        grew = bool(more)
    root = root.resolve()
    left = []
    for pid, (_, state, cwd) in sorted(table.items()):
        if pid == os.getpid() or state in ("Z", "X"):
            continue
        if pid in ours or (cwd is not None and cwd.is_relative_to(root)):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(helper in command for helper in INTERPRETER_HELPERS):
                continue
            left.append(f"{pid} ({state}) {cwd}: {command.strip()[:200]}")
    return left


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_tests(tmp_path_factory):
    """At the end of the session (of each xdist worker), fail the run if a process a test started is still running.

    Killing a pipeline, a timeout or a signal must take the whole process group with it; a test that waits for
    such a process must clean it up in ``finally``. Leftovers get 30 s to exit (a loaded machine reaps late),
    then are listed, killed (by pid: they are this session's) and reported as an error.
    """
    yield
    if not Path("/proc/self/stat").exists():
        return
    root = tmp_path_factory.getbasetemp()
    deadline = time.monotonic() + 30
    while (left := leftover_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        for line in left:
            with contextlib.suppress(OSError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        pytest.fail("processes started by the tests are still running:\n" + "\n".join(left), pytrace=False)


@pytest.fixture(autouse=True)
def _every_report_matches_its_schema(request):
    """After each test, every report.json it wrote under its tmp_path validates against the report schema."""
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None:
        return
    for path in tmp.rglob("report.json"):
        jsonschema.validate(json.loads(path.read_text(encoding="utf-8")), REPORT_SCHEMA)


CHROMIUM = os.environ.get("RAG_GATE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("RAG_GATE_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
"""Debian's chromium and chromium-driver (.ci/run installs them); the browser tests skip without them."""


@pytest.fixture(scope="session")
def chromium(tmp_path_factory):
    """Start headless Chromium under selenium (skips without selenium, chromium or chromedriver).

    ``chromium(window="1280,1600", downloads=False, offline=False)`` returns a driver with its own profile and the
    browser's console log kept; ``downloads=True`` saves downloads without asking into ``driver.downloads``;
    ``offline=True`` cuts the network (a page must work from file:// alone). The caller quits the driver.
    """
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test-base extra)")
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(
            f"chromium ({CHROMIUM}) or chromedriver ({CHROMEDRIVER}) is not installed: "
            "apt-get install chromium chromium-driver"
        )

    def start(window: str = "1280,1600", *, downloads: bool = False, offline: bool = False):
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", f"--window-size={window}",
                     f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):  # fmt: skip
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        folder = tmp_path_factory.mktemp("downloads") if downloads else None
        if folder is not None:
            options.add_experimental_option(
                "prefs", {"download.default_directory": str(folder), "download.prompt_for_download": False}
            )
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        driver.downloads = folder
        if offline:
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd(
                "Network.emulateNetworkConditions",
                {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0},
            )
        return driver

    return start


@pytest.fixture
def tiny_golden(tmp_path: Path) -> Path:
    """Four cases: three in-domain, one out-of-domain."""
    return write_jsonl(
        tmp_path / "golden.jsonl",
        [
            {"id": "q1", "question": "Where is Paris?", "expected_doc_ids": ["d1"], "reference_answers": ["France"]},
            {
                "id": "q2",
                "question": "When was the bridge built?",
                "expected_doc_ids": ["d2"],
                "reference_answers": ["1889"],
            },
            {
                "id": "q3",
                "question": "Who wrote Hamlet?",
                "expected_doc_ids": ["d3"],
                "reference_answers": ["William Shakespeare", "Shakespeare"],
            },
            {
                "id": "q4",
                "question": "What is the airspeed of a swallow?",
                "expected_doc_ids": [],
                "out_of_domain": True,
            },
        ],
    )


# ------------------------------------------------- a real SQuAD comparison, built and scored once per session


class SquadPair(NamedTuple):
    """Two real TF-IDF runs over the bundled SQuAD 2.0 example, as predictions files in ``dir``."""

    dir: Path
    """Holds golden.jsonl, base.jsonl and head.jsonl (predictions files)."""
    golden: list[dict]
    """The 140 golden cases: the example's 100 in-domain questions, then 40 of its 48 out-of-domain ones."""
    base_rank: list[list[int]]
    """Per case, the top 5 corpus indices of base (its retrieved chunks, in rank order)."""
    head_rank: list[list[int]]
    """Per case, the top 5 corpus indices of head."""
    ids: list[str]
    """Corpus document ids (the indices above point here)."""
    answered_ood: set[str]
    """The 12 out-of-domain questions that head answers and base refuses."""


@pytest.fixture(scope="session")
def squad_pair(tmp_path_factory) -> SquadPair:
    """Base ranks the whole corpus; head is a worse retriever (every other word of each paragraph indexed: a
    lossy chunker) and answers 12 out-of-domain questions that base refuses. Each side retrieves 5 paragraphs (as
    the example's base); answers are the first sentence of the top paragraph."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    rng = random.Random(7)
    corpus = read_jsonl(EXAMPLE / "corpus.jsonl")
    golden_all = read_jsonl(EXAMPLE / "golden.jsonl")
    in_domain = [c for c in golden_all if not c["out_of_domain"]]
    ood = rng.sample([c for c in golden_all if c["out_of_domain"]], 40)
    golden = in_domain + ood
    tmp = tmp_path_factory.mktemp("squad")
    write_jsonl(tmp / "golden.jsonl", golden)

    ids = [d["id"] for d in corpus]
    texts = {d["id"]: d["text"] for d in corpus}

    def ranking(index_texts):
        vec = TfidfVectorizer(sublinear_tf=True, stop_words="english")
        matrix = vec.fit_transform(index_texts)
        sims = (vec.transform([c["question"] for c in golden]) @ matrix.T).toarray()
        return [sorted(range(len(ids)), key=lambda j: (-row[j], ids[j]))[:5] for row in sims]

    base_rank = ranking([d["text"] for d in corpus])
    head_rank = ranking([" ".join(d["text"].split()[::2]) for d in corpus])
    answered_ood = {c["id"] for c in ood[:12]}

    def predictions(ranks, answer_ood):
        rows = []
        for case, order in zip(golden, ranks, strict=True):
            top = [ids[j] for j in order]
            answer = texts[top[0]].split(". ")[0]
            if case["out_of_domain"] and case["id"] not in answer_ood:
                answer = REFUSAL
            rows.append(
                {
                    "id": case["id"],
                    "answer": answer,
                    "latency_ms": 10.0,
                    "retrieved": [{"id": d, "text": texts[d]} for d in top],
                }
            )
        return rows

    write_jsonl(tmp / "base.jsonl", predictions(base_rank, set()))
    write_jsonl(tmp / "head.jsonl", predictions(head_rank, answered_ood))
    return SquadPair(tmp, golden, base_rank, head_rank, ids, answered_ood)


@pytest.fixture(scope="session")
def squad_compared(squad_pair):
    """``rag-gate compare --format json`` of the two predictions files, scored once: (result, report).

    The output is in ``squad_pair.dir / "report"``; reuse it instead of comparing the same files again."""
    return compare(squad_pair.dir, "base.jsonl", "head.jsonl", "report", "--format", "json")


@pytest.fixture(scope="session")
def squad_runs(squad_pair) -> tuple[Path, Path]:
    """Scored run directories (``rag-gate run`` of the predictions files): (base, head). Comparing them reuses
    their scores (no rescoring)."""
    from gate.config import load_config
    from gate.produce import run_side

    out = []
    for side in ("base", "head"):
        config = squad_pair.dir / f"{side}.yml"
        config.write_text(f"golden: golden.jsonl\npipeline: {{predictions: {side}.jsonl}}\n")
        out.append(run_side(load_config(config), squad_pair.dir / "runs" / side))
    return out[0], out[1]
