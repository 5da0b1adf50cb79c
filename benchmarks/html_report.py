"""report.html at scale: a 10,000-case comparison, its page's size, how long it takes to write and to load.

Generates base and head runs of N cases (tests/perfdata.py: 15 metrics, 10 % out-of-domain, five retrieved
chunks and two claims per answer, 0.5 % failed predictions), compares them, writes report.html, then opens it in
headless Chromium from file:// (network off) and measures, best of --loads: the time until the page's script has
drawn the first cases (navigation start → ``data-ready``), then switching to "All", paging, and a search over every
case. Prints the figures; asserts nothing.

usage: python benchmarks/html_report.py [--cases 10000] [--repeats 1] [--loads 3]
needs: chromium and chromedriver (/usr/bin, or RAG_GATE_CHROMIUM / RAG_GATE_CHROMEDRIVER) and selenium.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' helpers: judgeeval, perfdata, …

import perfdata  # noqa: E402

from gate import outputs  # noqa: E402
from gate.sides import compare_sides  # noqa: E402


def _browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("RAG_GATE_CHROMIUM", "/usr/bin/chromium")
    for arg in (
        "--headless=new --no-sandbox --disable-gpu --disable-background-networking --disable-component-update "
        "--disable-sync --no-first-run --window-size=1280,1600"
    ).split():
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(
        options=options, service=Service(os.environ.get("RAG_GATE_CHROMEDRIVER", "/usr/bin/chromedriver"))
    )
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0},
    )
    return driver


def _timed(driver, script: str) -> float:
    """Milliseconds a page action takes, measured inside the page (the drawing included)."""
    return driver.execute_script(f"var t = performance.now(); {script}; return performance.now() - t;")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--loads", type=int, default=3, help="page loads timed (best is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config, base, head = perfdata.make(root, args.cases, args.repeats)
        start = time.perf_counter()
        compared = compare_sides(base, head, root / "out")
        compare_s = time.perf_counter() - start
        start = time.perf_counter()
        page = outputs.write_html(compared.comparison, root / "out", compared.cases())
        write_s = time.perf_counter() - start
        size = page.stat().st_size
        profile = tempfile.mkdtemp(prefix="rag-gate-bench-chromium-")
        driver = _browser(profile)
        try:
            loads, ready = [], []
            for _ in range(args.loads):
                driver.get("about:blank")
                driver.get(page.as_uri())  # returns after the load event
                ready.append(float(driver.execute_script("return document.documentElement.dataset.ready")))
                loads.append(driver.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd"))
            shown = driver.execute_script("return document.querySelectorAll('#cases article.case').length")
            all_ms = _timed(driver, "document.querySelector('#filters button[data-filter=\"all\"]').click()")
            page_ms = _timed(driver, "document.querySelector('#pager button:last-child').click()")
            search_ms = driver.execute_async_script(
                "var done = arguments[arguments.length - 1], s = document.getElementById('search');"
                "var count = document.getElementById('count'), t = performance.now();"
                "new MutationObserver(() => done(performance.now() - t - 120))"  # less the typing debounce
                ".observe(count, {childList: true, characterData: true, subtree: true});"
                "s.value = 'q9999 river'; s.dispatchEvent(new Event('input'));"
            )
            heap = driver.execute_script("return performance.memory ? performance.memory.usedJSHeapSize : null")
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)
    n = compared.comparison.n_cases
    print(f"cases: {n:,} (repeats {args.repeats}); regressed {len(compared.comparison.regressed_cases):,}")
    print(f"compare: {compare_s:.2f} s; write report.html: {write_s:.2f} s")
    print(f"report.html: {size / 1e6:.1f} MB ({size / n:,.0f} bytes per case)")
    print(
        f"load in headless Chromium (file://, offline), best of {len(loads)}: first {shown} cases drawn "
        f"{min(ready):,.0f} ms, load event done {min(loads):,.0f} ms "
        f"(all loads: {', '.join(f'{x:,.0f}' for x in loads)} ms)"
    )
    print(
        f"filter 'All' + draw: {all_ms:,.0f} ms; next page: {page_ms:,.0f} ms; "
        f"first search over every case: {search_ms:,.0f} ms"
    )
    if heap:
        print(f"JS heap after load: {heap / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
