"""The metric catalogue is the one list of metrics: the run summary holds exactly its names,
each percentile comes from its column, the docs name each, the gate refuses a name outside it,
and the terminal and the report show the same value with the same unit for each arm."""

from __future__ import annotations

import io
import re
from dataclasses import fields

import pytest
from rich.console import Console

from harness.load.metrics import run_summary
from harness.load.record import RequestRecord
from harness.report.tables import metric_rows
from harness.report.terminal import print_verdict
from harness.results.ab_result import ABResult
from harness.results.comparison import MetricResult
from harness.results.errors import ComparisonError
from harness.results.metrics import CATALOGUE, GATEABLE, SUMMARY_KEYS, Method, metric
from harness.stats.compare import compare_rounds

from helpers import REPO
from helpers.fake_runs import make_rounds


def records(ttfts_ms: list[float]) -> list[RequestRecord]:
    """Requests with these TTFTs, 4 tokens 10 ms apart after the first."""
    out = []
    for i, ttft in enumerate(ttfts_ms):
        send = float(i)
        first = send + ttft / 1e3
        out.append(RequestRecord("p", i, 16, 4, arrival=send, send=send, first_token=first,
                                 end=first + 0.03, itl_s=[0.01] * 3, output_tokens=4,
                                 client_tokens=4, status=200))  # fmt: skip
    return out


def test_the_run_summary_holds_exactly_the_catalogue():
    summary = run_summary(records([10.0] * 4), [{"peak_rss_bytes": 5}], 1.0)
    assert tuple(summary) == SUMMARY_KEYS


def test_each_percentile_is_its_column_at_its_quantile():
    ttfts = [float(x) for x in range(10, 110, 10)]  # 10 .. 100 ms
    summary = run_summary(records(ttfts), [], None)
    # linear interpolation between order statistics, as pandas and numpy do
    assert summary["ttft_p50_ms"] == pytest.approx(55.0)
    assert summary["ttft_p90_ms"] == pytest.approx(91.0)
    assert summary["ttft_p95_ms"] == pytest.approx(95.5)
    assert summary["itl_p50_ms"] == pytest.approx(10.0)
    assert summary["e2e_p50_ms"] == pytest.approx(85.0)


def test_directions_rules_and_units_are_the_catalogues():
    assert not metric("tok_s").lower_is_better and not metric("goodput_req_s").lower_is_better
    assert all(metric(n).lower_is_better for n in ("ttft_p90_ms", "itl_p95_ms", "queue_p95_ms"))
    assert {m.name for m in CATALOGUE if m.method == Method.MINMAX} == {
        "peak_rss_bytes", "peak_rss_sampled_bytes", "peak_device_bytes", "startup_peak_rss_bytes"
    }  # fmt: skip
    assert "ttft_p90_ms" in GATEABLE and "errors" not in GATEABLE
    assert metric("peak_rss_bytes").show(3 * 2**20) == "3.0 MiB"
    assert metric("tpot_ms").show(12.345) == "12.35 ms" and metric("errors").show(3) == "3"
    with pytest.raises(ValueError, match="no known direction for metric 'ttft_p42_ms'"):
        metric("ttft_p42_ms")
    with pytest.raises(ComparisonError, match="ttft_p42_ms"):
        compare_rounds(make_rounds({"base": [1.0], "head": [1.0]}, "ttft_p42_ms"),
                       {"ttft_p42_ms": 0.1})  # fmt: skip


def test_the_docs_table_is_the_catalogue():
    text = (REPO / "docs" / "run-json.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([\w/]+) \| (lower|higher) \| ([\w/-]+) \|", text, re.M)
    rule = {Method.T: "interval", Method.MINMAX: "min/max"}
    documented = {name: (unit, better, gate) for name, unit, better, gate in rows}
    assert documented == {
        m.name: (m.unit, "lower" if m.lower_is_better else "higher",
                 rule[m.method] if m.gateable else "-")
        for m in CATALOGUE
    }  # fmt: skip


def test_the_terminal_and_the_report_show_the_same_values_and_units():
    base = [100.0, 110.0, 121.0]  # geometric mean 110, median 110; head's differ:
    head = [100.0, 130.0, 131.0]  # geometric mean 119.37..., median 130
    rounds = make_rounds({"base": base, "head": head}, "ttft_p50_ms")
    comparison = compare_rounds(rounds, {"ttft_p50_ms": 0.5})
    (row,) = metric_rows(comparison)
    assert row["base"] == "110.0 ms" and row["head"] == "119.4 ms"  # what head/base is of
    out = io.StringIO()
    arm = {"ref": None, "cmd": None, "flags": None, "env": None}
    ab = {
        "suite": "s",
        "created": "2026-12-05T00:00:00+00:00",
        "base": arm | {"label": "a"},
        "head": arm | {"label": "b"},
        "rounds": [],
        "crash": None,
        "comparison": comparison.to_json(),
    }
    print_verdict(Console(file=out, width=200), ABResult.from_json(ab))
    line = next(x for x in out.getvalue().splitlines() if "ttft_p50_ms" in x)
    cells = [c.strip() for c in re.split("[│|]", line) if c.strip()]
    assert cells[1:4] == ["110.0 ms", "119.4 ms", row["ratio"]], line


def test_a_metric_row_holds_every_field_of_its_record_null_ones_too():
    """A template may show any field of a metric's record (one cell, no other change): its row
    holds each, a null one as None, though the saved JSON leaves nulls out."""
    rounds = make_rounds({"base": [1e9, 1e9, 1e9], "head": [1e9, 1e9, 1e9]}, "peak_rss_bytes")
    (row,) = metric_rows(compare_rounds(rounds, {"peak_rss_bytes": 0.05}))
    (metric_result,) = compare_rounds(rounds, {"peak_rss_bytes": 0.05}).metrics
    nulls = [f.name for f in fields(MetricResult) if getattr(metric_result, f.name) is None]
    assert nulls, "a min/max metric leaves some field null"
    assert {f.name for f in fields(MetricResult)} <= set(row)
    assert all(name not in metric_result.to_json() for name in nulls)
