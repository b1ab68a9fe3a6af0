"""Every result committed under results/ loads through the one store (checked, migrated to the
schema this harness writes); a schema newer or other than it reads is one line; a version 1
result gains each arm's value as the catalogue's centre of its rounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.results import store
from harness.results.errors import ComparisonError
from harness.stats.compare import compare_rounds

from helpers import REPO
from helpers.cli import cli, one_line_error
from helpers.fake_runs import make_rounds

# JSON under results/ that is not a result of the gate, by the keys that say what it is
OTHER = {
    "pytest-benchmark": {"benchmarks", "machine_info", "commit_info"},
    "cost model": {"coefficients", "fit", "model"},
    "sim validation": {"rows", "decisions", "machine"},
    "A/A series": {"series", "metric", "machine"},
    "scenario table": {"runs", "machine", "start_s"},  # scripts/gpu_like_demo.py
    "client limits": {"rows", "itl_ms", "machine"},  # scripts/client_limits.py
    "capacity searches": {"searches", "machine", "date"},  # results/2026-12-03-capacity/run.sh
    "capacity check": {"levels", "model_break_req_s", "machine"},  # scripts/capacity_check.py
    "seed series": {"ab", "bisect", "machine"},  # results/2026-12-04-seed-series/summary.json
    "power runs": {"series", "runs", "machine"},  # results/2026-12-04-power-runs/summary.json
    "roofline score": {"costs", "families"},  # python -m engine.sim score
    "adopted shapes": {"shapes", "installed", "machine"},  # scripts/adopt_shapes_demo.py
    "harness before/after": {"harness", "runs", "engine_commits"},  # scripts/before_after.sh
}


def committed() -> list[Path]:
    return sorted(p for p in (REPO / "results").rglob("*.json") if p.is_file())


def kind(doc: object) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("schema"), str):
        return doc["schema"].split("/")[0]
    for name, keys in OTHER.items():
        if isinstance(doc, dict) and keys <= set(doc):
            return name
    return "unknown"


def metric_results(node: object):
    if isinstance(node, list):
        for item in node:
            yield from metric_results(item)
    elif isinstance(node, dict):
        if {"name", "method", "ratio", "base", "head"} <= set(node):
            yield node
        else:
            for value in node.values():
                yield from metric_results(value)


def test_every_committed_result_loads_at_the_current_schema():
    paths = committed()
    kinds = {p: kind(json.loads(p.read_text())) for p in paths}
    assert [str(p) for p, k in kinds.items() if k == "unknown"] == []
    results = [p for p, k in kinds.items() if k.startswith("servegate.")]
    assert len(results) >= 60  # the A/B, sweep and bisect results committed so far
    for path in results:
        doc = store.load(path)
        kind_name = doc["schema"].split(".")[1].split("/")[0]
        assert doc["schema"] == store.schema(kind_name), path
        for m in metric_results(doc):
            known = [v for v in m["base"] if v is not None]
            assert (m.get("base_value") is None) == (not known), (path, m["name"])  # null: left out


def test_a_version_1_result_gains_each_arms_centre(tmp_path):
    rounds = make_rounds({"base": [100.0, 121.0], "head": [110.0, 110.0]}, "ttft_p50_ms")
    comparison = compare_rounds(rounds, {"ttft_p50_ms": 0.1}).to_json()
    for m in comparison["metrics"]:
        del m["base_value"], m["head_value"]
    doc = {"schema": "servegate.ab/1", "suite": "s", "created": "2026-12-01T00:00:00+00:00",
           "base": {"label": "a", "ref": None, "cmd": "", "flags": [], "env": {}},
           "head": {"label": "b", "ref": None, "cmd": "", "flags": [], "env": {}},
           "rounds": rounds, "comparison": comparison, "crash": None}  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    loaded = store.load(path)
    (m,) = loaded["comparison"]["metrics"]
    assert loaded["schema"] == "servegate.ab/2"
    assert m["base_value"] == pytest.approx(110.0) and m["head_value"] == pytest.approx(110.0)
    assert math.isclose(m["head_value"] / m["base_value"], m["ratio"], rel_tol=1e-12)


@pytest.mark.parametrize(
    ("named", "said"),
    [
        (
            "servegate.ab/3",
            "schema servegate.ab/3 is newer than this harness reads (servegate.ab/2)",
        ),
        ("servegate.ab/0", "schema 'servegate.ab/0' is not one this harness reads"),
        ("servegate.plot/1", "schema 'servegate.plot/1' is not one this harness reads"),
        ("other/1", "schema 'other/1' is not one this harness reads"),
        (7, "schema 7 is not one this harness reads"),
    ],
)
def test_a_schema_it_does_not_read_is_one_line(tmp_path, named, said):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": named, "suite": "s"}))
    with pytest.raises(ComparisonError) as err:
        store.load(path)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_harness_report_of_a_newer_result_is_exit_2_in_one_line(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": "servegate.ab/9", "suite": "s"}))
    one_line_error(cli("report", str(path), cwd=tmp_path), "is newer than this harness reads")
