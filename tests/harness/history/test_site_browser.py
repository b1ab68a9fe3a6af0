"""The published history site in a real browser: Debian's headless Chromium, driven over its
DevTools protocol (tests/helpers/headless.py), opens it from a file URL with the network off;
no console errors, every chart drawn with every point, a point's link opens its report.
Skipped where Chromium is not installed (docs/history.md)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from harness.history.site import VERDICT_COLOR

from helpers.cli import client_starved, harness
from helpers.headless import CHROMIUM, Browser

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed")
SHOT = os.environ.get("SERVEGATE_SITE_SCREENSHOT")  # where to keep a screenshot (docs/)

CHARTS = """(() => {
  const box = e => e.getBoundingClientRect();
  const shown = e => box(e).width > 0 && getComputedStyle(e).visibility !== "hidden";
  return {
    charts: [...document.querySelectorAll("svg.chart")].map(svg => {
      const link = [...svg.querySelectorAll("a")].pop();
      return {
        width: box(svg).width, height: box(svg).height,
        points: [...svg.querySelectorAll("circle.point")].map(shown),
        line: box(svg.querySelector("polyline")).width,
        fill: link.querySelector("circle").getAttribute("fill"),
        href: new URL(link.getAttribute("href"), document.baseURI).href,
      };
    }),
    steps: [...document.querySelectorAll("g.step.worse")].map(g => g.textContent),
  };
})()"""
REPORT = """(() => ({
  h1: document.querySelector("h1").innerText,
  images: [...document.querySelectorAll("img")].map(i => i.naturalWidth),
}))()"""


async def look(index: Path) -> tuple[dict, dict, list[str], list[str]]:
    """What the index and the A/B's report page show, and what the console said on each."""
    async with Browser() as page:
        await page.open(index.as_uri())
        site = await page.evaluate(CHARTS)
        if SHOT:
            await page.screenshot(SHOT)
        on_index, page.messages = page.messages, []
        await page.open(site["charts"][0]["href"])  # the A/B's head point: its report
        report = await page.evaluate(REPORT)
        return site, report, on_index, page.messages


@pytest.mark.timeout(900)
def test_the_site_opens_offline_with_every_chart_drawn(tmp_path):
    from helpers.history_repo import COMMITS, build_history

    repo, shas, folder = build_history(tmp_path)
    # one A/B result among the runs: its head point is coloured and links to a report page
    ab = ("ab", "--base", shas[-2], "--head", shas[-1], "--suite", "suite.toml", "--quiet",
          "--rounds", "3", "--max-rounds", "3", "--out-dir", str(folder / "ab"))  # fmt: skip
    r = repo.harness(*ab, cache=tmp_path / "cache")
    saved = json.loads(next((folder / "ab").glob("*.json")).read_text())
    if client_starved(saved):  # INVALID for the machine, not the site: once more, in its place
        shutil.rmtree(folder / "ab")
        r = repo.harness(*ab, cache=tmp_path / "cache")
        saved = json.loads(next((folder / "ab").glob("*.json")).read_text())
    # an A/A on real timings: PASS, or INCONCLUSIVE on a loaded machine
    assert r.returncode == 0, r.stdout + r.stderr
    verdict = saved["comparison"]["verdict"]
    publish = ["publish", str(folder), "--out", str(tmp_path / "site")]
    r = harness(*publish, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    site, report, on_index, on_report = asyncio.run(look(tmp_path / "site" / "index.html"))
    assert len(site["charts"]) == 2
    for chart in site["charts"]:
        assert chart["width"] > 500 and chart["height"] > 150
        assert len(chart["points"]) == COMMITS and all(chart["points"])
        assert chart["line"] > 300
    assert site["steps"] and "at " in site["steps"][0]
    assert on_index == []
    assert site["charts"][0]["fill"] == VERDICT_COLOR[verdict]  # the A/B's head: coloured
    assert report["h1"].startswith(f"{verdict}: exit 0")
    plots = list((tmp_path / "site" / "results" / "ab").glob("*.png"))  # the report's own
    assert len(report["images"]) == len(plots) >= 2 and all(w > 0 for w in report["images"])
    assert on_report == []
    assert Path(tmp_path / "site" / "index.html").stat().st_size < 200_000
