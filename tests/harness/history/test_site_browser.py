"""The published history site in a real browser: headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium) opens it from a file URL with the network off; no console
errors, every chart drawn with every point, a point's link opens its report. Skipped where
Chromium or Selenium is not installed (docs/history.md says how to run it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.cli import harness

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="Debian's chromium and chromium-driver are not installed"
)
SHOT = os.environ.get("SERVEGATE_SITE_SCREENSHOT")  # where to keep a screenshot (docs/)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # the proxy is a closed port: any fetch the page tried would fail, as with no network
    offline = ("--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", "--window-size=900,1400", *offline):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(DRIVER))


@pytest.mark.timeout(900)
def test_the_site_opens_offline_with_every_chart_drawn(tmp_path):
    from helpers.history_repo import COMMITS, build_history

    repo, shas, folder = build_history(tmp_path)
    # one A/B result among the runs: its head point is coloured and links to a report page
    r = repo.harness("ab", "--base", shas[-2], "--head", shas[-1], "--suite", "suite.toml",
                     "--quiet", "--rounds", "3", "--max-rounds", "3", "--out-dir",
                     str(folder / "ab"), cache=tmp_path / "cache")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    site = ["publish", str(folder), "--out", str(tmp_path / "site")]
    r = harness(*site, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    driver = browser()
    try:
        driver.get((tmp_path / "site" / "index.html").as_uri())
        charts = driver.find_elements("css selector", "svg.chart")
        assert len(charts) == 2
        for svg in charts:
            assert svg.size["width"] > 500 and svg.size["height"] > 150
            points = svg.find_elements("css selector", "circle.point")
            assert len(points) == COMMITS
            assert all(p.size["width"] > 0 and p.is_displayed() for p in points)
            assert svg.find_elements("css selector", "polyline")[0].size["width"] > 300
        steps = driver.find_elements("css selector", "g.step.worse")
        assert steps and "at " in steps[0].text
        if SHOT:
            driver.save_screenshot(SHOT)
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == [], errors
        last = charts[0].find_elements("css selector", "a")[-1]  # the A/B's head: coloured
        assert last.find_element("css selector", "circle").get_attribute("fill") == "#2e7d32"
        href = "return new URL(arguments[0].getAttribute('href'), document.baseURI).href"
        driver.get(driver.execute_script(href, last))  # an SVG link's href is no plain string
        assert driver.find_element("css selector", "h1").text.startswith("PASS: exit 0")
        images = driver.find_elements("css selector", "img")
        assert len(images) == 2
        assert all(driver.execute_script("return arguments[0].naturalWidth", i) > 0 for i in images)
        assert driver.get_log("browser") == []
    finally:
        driver.quit()
    assert Path(tmp_path / "site" / "index.html").stat().st_size < 200_000
