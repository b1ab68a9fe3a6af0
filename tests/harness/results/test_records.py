"""Every result committed under results/ loads into its record, and the record is its JSON:
`from_json(to_json(x)) == x`, and writing the record back keeps every value the file held."""

from __future__ import annotations

import json

import pytest

from harness.results import store
from harness.results.ab_result import ABResult
from harness.results.bisect_result import BisectResult
from harness.results.comparison import Comparison, MetricResult
from harness.results.errors import ComparisonError
from harness.results.run import Run
from harness.results.sweep_result import CurvePoint, SweepResult

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import SUITE, write_suite

RECORDS = {"ab": ABResult, "sweep": SweepResult, "bisect": BisectResult}


def saved_results():
    for path in sorted((REPO / "results").rglob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("servegate."):
            yield path


def without_nulls(node: object) -> object:
    """Missing and null read alike; a record writes every field."""
    if isinstance(node, dict):
        return {k: without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def held(doc: object, written: object) -> bool:
    """Every key and value of `doc` is in `written` (which may add fields at their defaults)."""
    if isinstance(doc, dict):
        return isinstance(written, dict) and all(
            k in written and held(v, written[k]) for k, v in doc.items()
        )
    if isinstance(doc, list):
        return (
            isinstance(written, list)
            and len(doc) == len(written)
            and all(held(a, b) for a, b in zip(doc, written, strict=True))
        )
    return doc == written


def test_every_committed_result_is_its_record():
    paths = list(saved_results())
    assert len(paths) >= 90  # the A/B, sweep and bisect results committed so far
    kinds = set()
    for path in paths:
        doc = store.load(path)
        kind = doc["schema"].split(".")[1].split("/")[0]
        kinds.add(kind)
        record = RECORDS[kind].from_json(doc)
        assert RECORDS[kind].from_json(record.to_json()) == record, path
        assert held(without_nulls(doc), without_nulls(record.to_json())), path
    assert kinds == set(RECORDS)


def test_a_record_names_the_field_it_cannot_read():
    with pytest.raises(ComparisonError, match=r"^the run\.summary\.tok_s is 'x', not a finite"):
        Run.from_json({"summary": {"tok_s": "x"}}, "the run")
    with pytest.raises(ComparisonError, match=r"^c\.metrics\[0\]\.name is missing$"):
        Comparison.from_json({"verdict": "PASS", "exit_code": 0, "rounds": 1, "metrics": [{}],
                              "invalid": [], "warnings": []}, "c")  # fmt: skip
    with pytest.raises(ComparisonError, match=r"^r\.rounds is -1, not a whole number of rounds"):
        Comparison.from_json({"verdict": "PASS", "exit_code": 0, "rounds": -1}, "r")


def test_a_full_run_with_its_requests_and_timeline_is_its_record():
    import numpy as np

    from helpers.fake_runs import realistic_run

    doc = realistic_run(np.random.default_rng(1), ttft_ms=50.0, tok_s=40.0, rss_peak=4e8,
                        commit="a" * 40)  # fmt: skip
    run = Run.from_json(doc, "the run")
    assert Run.from_json(run.to_json()) == run
    assert run.timeline is not None and run.timeline.marks[1] == [2.0, "warmup"]


def test_a_run_the_harness_writes_is_held_whole_by_its_record(tmp_path):
    """Every key `harness run` writes, requests and timeline included, is a field of a record."""
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    serve = scripted("--ttft-ms 20 --itl-ms 5 --bare-health", model=unique_marker())
    r = harness("run", "--suite", str(suite), "--quiet", "--out", "run.json", "--serve-cmd",
                serve, cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
    assert r.returncode in (0, 2), r.stderr  # 2: INVALID when the machine starved the client
    (doc,) = json.loads((tmp_path / "run.json").read_text())["runs"]
    assert doc["requests"] and doc["timeline"]["t"]
    run = Run.from_json(doc, "the run")
    assert Run.from_json(run.to_json()) == run
    assert held(without_nulls(doc), without_nulls(run.to_json()))


def test_every_field_of_the_comparison_records_has_a_row_in_the_docs():
    """A field added to a record is documented where users read the JSON (docs/run-json.md)."""
    import dataclasses
    import re

    doc = (REPO / "docs" / "run-json.md").read_text()
    rows = {name for cell in re.findall(r"^\| ([^|]+) \|", doc, re.M)
            for name in re.findall(r"`([a-z_]+)`", cell)}  # fmt: skip
    for record in (Comparison, MetricResult):
        missing = [f.name for f in dataclasses.fields(record) if f.name not in rows]
        assert not missing, (record.__name__, missing)


def test_a_flat_field_is_named_where_it_stands_in_the_file():
    point = {"name": "c1", "level": 1, "rounds": 3, "valid": True, "tok_s": "fast"}
    with pytest.raises(ComparisonError, match=r"^p\.tok_s is 'fast', not a finite number$"):
        CurvePoint.from_json(point, "p")
    assert CurvePoint.from_json(point | {"tok_s": 5.0}).median("tok_s") == 5.0
