"""The labelling page of ``rag-gate label`` in a real browser: headless Chromium driven by Selenium from file://.

Skipped, with a message, where Chromium, chromedriver or selenium is absent (CI installs Debian's chromium and
chromium-driver). The page is labelled with the keyboard only, saved by download, and the saved file is checked
against the labels schema and read back by ``gate.labels.agreement.load_labels``.
"""

import json
import os
import time
from pathlib import Path

import pytest
from helpers import REPO

from gate.jsonl import validate
from gate.labels.agreement import load_labels
from gate.outputs.label_page import write_label_page

SCREENSHOT = REPO / "docs" / "label-page.png"


def _rows() -> list[dict]:
    hostile = '</script><img src=x onerror="window.pwned=1">'
    rows = []
    for i in range(4):
        flagged = i % 2 == 1
        rows.append(
            {
                "kind": "answer",
                "id": f"case-{i}",
                "repeat": 0,
                "question": f"When did the Normans conquer England? ({i})",
                "answer": "The Normans conquered England in 1066. They came from Normandy."
                + (hostile if i == 3 else ""),
                "out_of_domain": False,
                "reference_answers": ["1066"] if i < 2 else [],
                "chunks": [
                    {"id": "Normans-1", "text": "In 1066 the Normans, led by William, conquered England."},
                    {"id": "Normans-2", "text": "Normandy is a region of northern France."},
                ],
                "judge": {
                    "id": "lexical",
                    "key": "0123456789abcdef",
                    "flagged": flagged,
                    "faithfulness": 0.5 if flagged else 1.0,
                    "claims": [
                        {
                            "claim": "The Normans conquered England in 1066.",
                            "verdict": "supported",
                            "chunk_id": "Normans-1",
                            "reason": "100% of content words in chunk",
                        },
                        {
                            "claim": "They came from Normandy.",
                            "verdict": "unverifiable" if flagged else "supported",
                            "chunk_id": "Normans-2",
                            "reason": "no chunk covers it" if flagged else "in chunk",
                        },
                    ],  # fmt: skip
                    "reasons": ["unverifiable: They came from Normandy. (no chunk covers it)"] if flagged else [],
                },
                "stratum": "flagged, in-domain" if flagged else "not flagged, in-domain",
                "golden_sha256": "ab" * 32,
                "answer_sha256": f"{i:016x}",
                "faithful": None,
                "correct": None,
                "note": "",
            }
        )
    return rows


@pytest.fixture(scope="module")
def browser(chromium):
    """Chromium that saves downloads into ``browser.downloads`` (tests/conftest.py): the page saves labels.jsonl."""
    driver = chromium("1400,900", downloads=True)
    yield driver
    driver.quit()


def _wait_for(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size:
            return path.read_text(encoding="utf-8")
        time.sleep(0.05)
    raise AssertionError(f"{path} was not downloaded")


def test_label_page_keyboard_labelling_saves_valid_labels(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page = write_label_page(tmp_path / "to-label.html", _rows())
    browser.get(page.as_uri())
    body = browser.find_element(By.TAG_NAME, "body")
    assert browser.find_element(By.ID, "question").text == "When did the Normans conquer England? (0)"
    # the judge's claims are highlighted: one supported mark on a not-flagged answer
    assert [m.get_attribute("class") for m in browser.find_elements(By.CSS_SELECTOR, "#answer mark")] == ["ok", "ok"]
    labeller = browser.find_element(By.ID, "labeller")
    labeller.send_keys("ada")
    labeller.send_keys(Keys.ESCAPE)

    keys = ActionChains(browser)
    keys.send_keys("f").send_keys("c")  # case-0: faithful, then correct (advances: it has references)
    keys.send_keys("u").send_keys("x")  # case-1: unfaithful, incorrect
    keys.perform()
    assert "answer 3 of 4" in browser.find_element(By.ID, "progress").text
    assert [m.get_attribute("class") for m in browser.find_elements(By.CSS_SELECTOR, "#answer mark")] == ["ok", "ok"]
    ActionChains(browser).send_keys("n").perform()  # write a note on case-2, Esc back to the keys
    note = browser.find_element(By.ID, "note")
    note.send_keys("paraphrase, fine")
    note.send_keys(Keys.ESCAPE)
    ActionChains(browser).send_keys("f").perform()  # case-2 has no references: f labels and advances
    assert "answer 4 of 4" in browser.find_element(By.ID, "progress").text
    # the hostile answer is shown as text, not markup
    assert browser.execute_script("return window.pwned === undefined")
    assert "</script>" in browser.find_element(By.ID, "answer").text
    assert [m.get_attribute("class") for m in browser.find_elements(By.CSS_SELECTOR, "#answer mark")] == ["ok", "unk"]
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).send_keys(Keys.ARROW_RIGHT).send_keys("u").perform()
    if os.environ.get("RAG_GATE_SCREENSHOT"):  # refresh docs/label-page.png: RAG_GATE_SCREENSHOT=1 pytest ...
        ActionChains(browser).send_keys("k").send_keys("k").perform()  # case-1: flagged, labelled unfaithful
        browser.save_screenshot(str(SCREENSHOT))
    body.send_keys("s")

    saved = browser.downloads / "labels.jsonl"
    text = _wait_for(saved)
    rows = [json.loads(line) for line in text.splitlines()]
    for number, row in enumerate(rows, start=1):
        validate(row, "labels", saved, number)
    assert [(r["id"], r["faithful"], r["correct"]) for r in rows] == [
        ("case-0", True, True),
        ("case-1", False, False),
        ("case-2", True, None),
        ("case-3", False, None),
    ]
    assert {r["labeller"] for r in rows} == {"ada"}
    assert rows[2]["note"] == "paraphrase, fine"
    assert [r["judge_flagged"] for r in rows] == [False, True, False, True]
    labels = load_labels(saved)
    assert [label.key for label in labels] == [(f"case-{i}", 0) for i in range(4)]
    assert all(label.judge == "0123456789abcdef" and label.labelled_at for label in labels)


def test_label_page_makes_no_request(browser, tmp_path):
    """The page is self-contained: its resources are itself (no script, style or image from anywhere)."""
    page = write_label_page(tmp_path / "to-label.html", _rows()[:1])
    browser.get(page.as_uri())
    entries = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert entries == []
    assert browser.execute_script("return document.querySelectorAll('script[src], link[href], img[src]').length") == 0
