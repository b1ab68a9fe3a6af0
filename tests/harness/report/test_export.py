"""`harness export`: a real run in vLLM's `bench serve` result shape, read back by a reader that
knows only vLLM's documented keys, agreeing with the run's own summary."""

from __future__ import annotations

import json

from helpers.arms import scripted
from helpers.cli import exit_agrees, harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import SUITE, write_suite


def vllm_reader(doc: dict) -> dict:
    """What a tool built for vLLM's result files reads: nothing but vLLM's own keys."""
    return {
        "completed": doc["completed"],
        "failed": doc["failed"],
        "duration": doc["duration"],
        "req_s": doc["request_throughput"],
        "out_tok_s": doc["output_throughput"],
        "median_ttft_ms": doc["median_ttft_ms"],
        "p99_ttft_ms": doc["p99_ttft_ms"],
        "mean_tpot_ms": doc["mean_tpot_ms"],
        "median_itl_ms": doc["median_itl_ms"],
        "p99_e2el_ms": doc["p99_e2el_ms"],
        "ttfts": doc["ttfts"],
        "itls": doc["itls"],
        "input_lens": doc["input_lens"],
        "output_lens": doc["output_lens"],
        "errors": doc["errors"],
    }


def test_a_run_exported_in_vllms_shape_reads_back_the_same(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(extra=""))
    r = harness("run", "--suite", str(suite), "--quiet", "--out", "run.json", "--repeat", "2",
                "--serve-cmd", scripted("--ttft-ms 30 --itl-ms 5 --bare-health", model=marker),
                cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
    exit_agrees(r, json.loads((tmp_path / "run.json").read_text()))  # INVALID if starved
    out = harness(
        "export", "run.json", "--out", "vllm.json", cwd=tmp_path, env=outside_git(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert "vllm.json" in out.stdout and "vllm-2.json" in out.stdout
    run = json.loads((tmp_path / "run.json").read_text())["runs"][0]
    got = vllm_reader(json.loads((tmp_path / "vllm.json").read_text()))
    summary = run["summary"]
    assert (got["completed"], got["failed"]) == (6, 0)
    # the run JSON keeps times to the microsecond: the export agrees with the summary to that
    assert abs(got["median_ttft_ms"] - summary["ttft_p50_ms"]) < 0.01
    assert abs(got["out_tok_s"] - summary["tok_s"]) < 1e-4 * summary["tok_s"]
    assert abs(got["median_itl_ms"] - summary["itl_p50_ms"]) < 0.01
    assert got["input_lens"] == [8] * 6 and got["output_lens"] == [4] * 6
    assert all(25 / 1e3 < t < 1 for t in got["ttfts"]) and all(len(i) == 3 for i in got["itls"])
    assert got["errors"] == [""] * 6 and got["p99_e2el_ms"] >= got["median_ttft_ms"]
    bad = harness("export", "nope.json", "--out", "x.json", cwd=tmp_path, env=outside_git(tmp_path))
    assert bad.returncode == 2
