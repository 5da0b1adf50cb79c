"""report.html: `rag-gate compare` writes one self-contained page beside report.json with every case side
by side; hostile text in answers, questions, chunks and errors stays text; the filters and the search work in a real
browser (headless Chromium through Selenium, opened from file:// with the network off).

The browser tests skip with a message when chromium, chromedriver or selenium is missing. With
RAG_GATE_SCREENSHOT=docs/report-html.png the screenshot of the page is also saved there (the README's picture).
"""

import json
import os
import re
import shutil

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate.cli import main
from gate.comparison import load_report
from gate.outputs.html import embed_json, safe_url

HOSTILE = (
    "<script>window.__pwned = 1; document.title = 'pwned'</script>"
    "<img src=x onerror=\"window.__pwned = 2; document.title = 'pwned'\"><!--<script>"
)
REFUSAL = "I don't have that information."


def _golden():
    cases = [
        {
            "id": f"q{i}",
            "question": f"Question {i}?",
            "expected_doc_ids": [f"d{i}"],
            "reference_answers": [f"answer {i}"],
        }
        for i in range(12)
    ]
    cases[5]["question"] = "Which " + HOSTILE + " question?"
    cases += [
        {"id": f"ood{i}", "question": f"Unanswerable {i}?", "expected_doc_ids": [], "out_of_domain": True}
        for i in range(3)
    ]
    return cases


def _prediction(case_id, answer, doc, chunk_text=None, **extra):
    chunk = {"id": doc, "text": chunk_text or f"The text of {doc} says answer {case_id[1:]} plainly."}
    return {"id": case_id, "repeat": 0, "answer": answer, "retrieved": [chunk], "latency_ms": 10.0, **extra}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Head loses the expected document on q0–q3 (regressed), finds it on q4 (improved), answers ood0 instead of
    refusing (a new out-of-domain failure, with a hostile answer), fails on q7 with a hostile error; q5 has a hostile
    question, q6 a hostile answer and chunk on both sides, q8 a word no other case has."""
    root = tmp_path_factory.mktemp("html")
    golden = write_jsonl(root / "golden.jsonl", _golden())
    (root / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {command: 'true'}\n"
        "metrics: [hit_rate@1, mrr, faithfulness, answer_f1, refusal, false_refusal]\n"
        "repeats: 1\nseed: 0\njudge: {name: lexical}\n",
        encoding="utf-8",
    )
    base, head = [], []
    for i in range(12):
        answer = f"The answer is answer {i}."
        base.append(_prediction(f"q{i}", answer, f"d{i}"))
        head.append(_prediction(f"q{i}", answer, f"x{i}" if i < 4 else f"d{i}"))
    base[4] = _prediction("q4", "The answer is answer 4.", "x4")
    base[6] = head[6] = _prediction("q6", "Answer " + HOSTILE, "d6", chunk_text="chunk " + HOSTILE)
    head[6] = _prediction("q6", "Answer 6 changed " + HOSTILE, "d6", chunk_text="chunk " + HOSTILE)
    head[7] = {"id": "q7", "repeat": 0, "error": "RuntimeError: " + HOSTILE, "latency_ms": 5.0}
    base[8] = _prediction("q8", "The answer is answer 8, said the zanzibarian.", "d8")
    head[8] = _prediction("q8", "The answer is answer 8, said the zanzibarian.", "d8")
    for i in range(3):
        base.append(_prediction(f"ood{i}", REFUSAL, "z", refused=True))
        head.append(_prediction(f"ood{i}", REFUSAL, "z", refused=True))
    head[12] = _prediction("ood0", "Sure: " + HOSTILE, "z", refused=False)
    base_file = write_jsonl(root / "base.jsonl", base)
    head_file = write_jsonl(root / "head.jsonl", head)
    out = root / "out"
    result = CliRunner().invoke(
        main,
        [
            "compare",
            str(base_file),
            str(head_file),
            "--golden",
            str(golden),
            "--config",
            str(root / "rag-gate.yml"),
            "--out",
            str(out),
            "--format",
            "json",
        ],
    )
    assert result.exit_code in (0, 1), result.output
    return out


def _data(page: str) -> dict:
    block = re.search(r'<script type="application/json" id="rag-gate-data">(.*?)</script>', page, re.S)
    assert block is not None
    return json.loads(block.group(1))


def test_compare_writes_report_html_beside_report_json_with_every_case(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    comparison = load_report(report / "report.json")
    data = _data(page)
    ids = [case["id"] for case in data["cases"]]
    assert ids == [case["id"] for case in _golden()]  # every case, in golden order
    by_id = {case["id"]: case for case in data["cases"]}
    regressed = {c.id for c in comparison.regressed_cases}
    assert regressed == {"q0", "q1", "q2", "q3"}
    assert {i for i, c in by_id.items() if "regressed" in c["st"]} == regressed
    assert {i for i, c in by_id.items() if "improved" in c["st"]} == {c.id for c in comparison.improved_cases} == {"q4"}
    assert {i for i, c in by_id.items() if "ood" in c["st"]} == {"ood0"} and by_id["ood0"]["oodnew"] is True
    assert {i for i, c in by_id.items() if "error" in c["st"]} == {"q7"}
    q0 = by_id["q0"]
    assert (q0["rb"], q0["rh"], q0["exp"], q0["drop"]) == (["d0"], ["x0"], ["d0"], ["d0"])
    assert q0["cause"] == "retrieval" and q0["same"] is True
    assert by_id["q7"]["ah"] is None and by_id["q7"]["err"][0][:3] == ["head", 0, None]
    assert by_id["q7"]["err"][0][3] == "RuntimeError: " + HOSTILE  # the text itself, made inert by the page
    claims = by_id["q6"]["ch"]
    assert claims and {c["v"] for c in claims} <= {"supported", "contradicted", "unverifiable"}
    assert any(c.get("id") == "d6" and HOSTILE in c["t"] for c in claims)
    labels = [m["label"] for m in data["metrics"]]
    assert labels == [m.label for m in comparison.metrics]
    # the metric table holds the intervals and the worse / tie / better counts of report.json
    hit = next(m for m in comparison.metrics if m.name == "hit_rate@1")
    row = re.search(r"<tr class=\"gated\"><td>Hit rate@1</td>(.*?)</tr>", page)
    assert row is not None and f"{hit.n_worse} / {hit.n_tied} / {hit.n_better}" in row.group(1)
    assert hit.n_worse == 4 and "[-" in row.group(1)
    assert page.count("<circle") == len([m for m in comparison.metrics if m.kind != "ratio"])  # the chart


def test_report_html_is_self_contained_and_hostile_text_is_inert(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    # two script elements only (the JSON data and the page's own script); no tag from any answer
    assert page.count("<script") == 2 and "<img" not in page and 'onerror="window' not in page
    assert "pwned" in page  # the hostile text is there, as escaped data
    markup = page.replace(re.search(r'(?s)id="rag-gate-data">.*?</script>', page).group(0), "")
    assert not re.search(r"<(link|iframe|object|embed|img)\b", markup, re.I)
    assert not re.search(r"\b(src|href)\s*=", markup, re.I)  # nothing to load, nothing to follow (outside Actions)
    assert not re.search(r"url\(|@import", markup)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp
    assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]  # only the page's own script runs


@pytest.mark.parametrize(
    "value",
    [HOSTILE, "</script><script>alert(1)</script>", "<!-- a </SCRIPT > b", "\u2028\u2029 & > <", "\\u003c"],
)
def test_embedded_json_cannot_end_its_script_block_and_reads_back_the_same(value):
    text = str(embed_json({"a": [value, {"b": value}]}))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": [value, {"b": value}]}


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://github.com/octo/rag/actions/runs/42", True),
        ("http://ghe.local:8080/o/r/actions/runs/1", True),
        ("javascript:alert(1)", False),
        ("https://x/)[y](javascript:alert(1)", False),
        ('https://x/" onclick="a', False),
        (None, False),
    ],
)
def test_only_plain_http_links_are_shown(url, kept):
    assert (safe_url(url) is not None) is kept and safe_url(url) in (url, None)


def test_pr_comment_links_the_run_that_holds_report_html(report):
    from gate.outputs.markdown import render_comment

    comparison = load_report(report / "report.json")
    url = "https://github.com/octo/rag/actions/runs/42"
    text = render_comment(comparison, details_url=url)
    assert f"`report.html` in the artifacts of [this workflow run]({url})" in text
    assert "report.html" not in render_comment(comparison)  # no run, no link (a local compare)
    hostile = render_comment(comparison, details_url="https://x/)[a](javascript:alert(1)")
    assert "javascript" not in hostile and "this workflow run" not in hostile


# ---------------------------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def browser(chromium):
    """Chromium without network (tests/conftest.py): report.html must work from file:// alone."""
    driver = chromium("1280,1600", offline=True)
    yield driver
    driver.quit()


def _shown(driver) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#cases article.case')).map(a => a.dataset.caseId)"
    )


def _filter(driver, name):
    driver.find_element("css selector", f'#filters button[data-filter="{name}"]').click()
    return _shown(driver)


def test_report_html_in_a_browser_filters_search_and_inert_hostile_text(report, browser, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get((report / "report.html").as_uri())
    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.documentElement.dataset.ready"))
    # nothing from an answer, a question, a chunk or an error ran
    assert browser.execute_script("return window.__pwned === undefined")
    comparison = load_report(report / "report.json")
    assert browser.title == f"rag-gate: {comparison.verdict}"
    assert browser.execute_script("return document.querySelectorAll('img, #cases script').length") == 0
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0  # no request
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe  # also: no script refused by the page's Content-Security-Policy
    # opens on the regressed cases, worst first as the data lists them (golden order)
    assert _shown(browser) == ["q0", "q1", "q2", "q3"] == sorted(c.id for c in comparison.regressed_cases)
    assert _filter(browser, "improved") == ["q4"]
    assert _filter(browser, "ood") == ["ood0"]
    assert _filter(browser, "error") == ["q7"]
    everything = _filter(browser, "all")
    assert everything == [c["id"] for c in _golden()]
    assert browser.find_element("id", "count").text == "15 of 15 cases"
    # hostile text is shown as text
    q6 = browser.find_element("css selector", 'article[data-case-id="q6"]')
    assert HOSTILE in q6.find_element("css selector", ".side.base .answer").text
    assert "6 changed" in q6.find_element("css selector", ".side.head .answer ins").text  # the difference, marked
    q5 = browser.find_element("css selector", 'article[data-case-id="q5"] .q').text
    assert q5 == "Which " + HOSTILE + " question?"
    q0 = browser.find_element("css selector", 'article[data-case-id="q0"]')
    assert q0.find_element("css selector", ".side.base .chip.dropped").text.startswith("d0")
    assert q0.find_element("css selector", ".side.base .chip.expected").text.startswith("d0")
    # search: a word of one answer; every term must match; the filter still applies
    search = browser.find_element("id", "search")
    search.send_keys("ZANZIBARIAN")
    WebDriverWait(browser, 5).until(lambda d: _shown(d) == ["q8"])
    search.send_keys(" nothing-has-this")
    WebDriverWait(browser, 5).until(lambda d: _shown(d) == [])
    search.clear()
    search.send_keys("x1")  # a retrieved id
    WebDriverWait(browser, 5).until(lambda d: _shown(d) == ["q1"])
    assert _filter(browser, "improved") == []
    search.clear()
    search.send_keys(" ")
    WebDriverWait(browser, 5).until(lambda d: _shown(d) == ["q4"])
    _filter(browser, "regressed")
    shot = tmp_path / "report-html.png"
    assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if target := os.environ.get("RAG_GATE_SCREENSHOT"):
        shutil.copyfile(shot, target)
    assert browser.execute_script("return window.__pwned === undefined")


def test_html_escapes_the_config_name_and_run_link(report):
    from gate.outputs.html import render_html

    comparison = load_report(report / "report.json")
    page = render_html(comparison, [], details_url="https://github.com/o/r/actions/runs/1", config="<b>x</b>.yml")
    assert "&lt;b&gt;x&lt;/b&gt;.yml" in page and "<b>x" not in page
    assert 'href="https://github.com/o/r/actions/runs/1"' in page
    assert "javascript" not in render_html(comparison, [], details_url="javascript:alert(1)")


def test_report_html_streamed_a_batch_at_a_time_is_the_page_rendered_whole(squad_runs, tmp_path):
    """The page is written a case at a time, answers and claims read in batches (memory at 100k cases):
    any batch size gives the same bytes, and the embedded JSON is the encoding of every case at once."""
    from gate.compare.views import case_views
    from gate.outputs.html import case_rows, html_parts, render_html, write_html
    from gate.sides import compare_sides

    base, head = squad_runs
    compared = compare_sides(base, head, tmp_path / "out")
    comparison = compared.comparison
    rows = list(case_rows(comparison, compared.cases()))
    assert len(rows) == 140 and any("ch" in row for row in rows)  # claims were read from the scores files
    names = [m.name for m in comparison.metrics]
    views = (case_views(compared.base, compared.head, compared.policy, names, batch=b) for b in (1, 7, 4096))
    assert [row for batch in views for row in case_rows(comparison, batch)] == rows * 3
    page = write_html(comparison, tmp_path / "out", compared.cases()).read_text(encoding="utf-8")
    assert page == render_html(comparison, rows) == "".join(html_parts(comparison, iter(rows)))
    whole = {
        "metrics": _data(page)["metrics"],
        "statuses": _data(page)["statuses"],
        "cases": rows,
    }
    assert f'id="rag-gate-data">{embed_json(whole)}</script>' in page
    assert _data(page)["cases"] == json.loads(json.dumps(rows))
