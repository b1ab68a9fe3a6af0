"""Trace replay: requests sent at the trace's timestamps (within 50 ms p99 at 50 requests/s
against a scripted server), the schedule kept per request in the run JSON, prompts sharing the
trace's hash-id blocks, the same trace fingerprinted the same and another refused, a bad trace
line one line and exit 2."""

from __future__ import annotations

import json
import random
import re

import pytest

from harness.workload.suite import SuiteError, load_suite

from helpers.arms import scripted
from helpers.cli import client_starved, exit_agrees, harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import write_suite

SUITE = """
name = "replay"
model = "scripted"
[[phase]]
name = "replay"
arrival = "trace"
trace = "{trace}"
max_lateness_ms = 50
"""


def write_trace(path, n: int, rate: float, seed: int = 1) -> None:
    rng, t, lines = random.Random(seed), 0.0, []
    for i in range(n):
        shared = [7] if i % 2 else []
        lines.append(json.dumps({"timestamp": round(t, 3), "input_length": 24 + 512 * len(shared),
                                 "output_length": 2, "hash_ids": [*shared, 100 + i]}))  # fmt: skip
        t += rng.expovariate(rate) * 1000
    path.write_text("\n".join(lines) + "\n")


def replay(tmp_path, trace: str, out: str, marker: str):
    suite = write_suite(tmp_path, SUITE.format(trace=trace), f"{out}.toml")
    return harness("run", "--suite", str(suite), "--quiet", "--out", f"{out}.json",
                   "--serve-cmd", scripted("--ttft-ms 100 --itl-ms 1 --bare-health", model=marker),
                   cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip


@pytest.mark.timeout(600)
def test_a_trace_is_replayed_on_time_and_fingerprinted_by_its_content(tmp_path):
    marker = unique_marker()
    write_trace(tmp_path / "a.jsonl", 200, rate=50.0)
    r = replay(tmp_path, "a.jsonl", "first", marker)
    saved = json.loads((tmp_path / "first.json").read_text())
    exit_agrees(r, saved)
    (run,) = saved["runs"]
    assert run["valid"] or client_starved(saved), run["invalid_reasons"]
    reqs = sorted(run["requests"], key=lambda q: q["index"])
    assert len(reqs) == 200 and all(q["ok"] for q in reqs)
    trace = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    start = reqs[0]["arrival"]
    due = [round(start + (t["timestamp"] - trace[0]["timestamp"]) / 1e3, 6) for t in trace]
    assert [q["arrival"] for q in reqs] == pytest.approx(due, abs=2e-6)  # the schedule kept
    late = sorted(q["queue_ms"] for q in reqs)
    p99 = late[min(len(late) - 1, int(0.99 * len(late)))]  # as the validity rule reads it
    print(f"send lateness: median {late[100]:.2f} ms, p99 {p99:.2f} ms, max {late[-1]:.2f} ms")
    # Under 5 ms on a quiet 2-core machine (at 50 a second, five requests of 100 ms are under
    # way at once); sent in turn, seconds late. A machine that delays the sends beyond the
    # bound makes the run INVALID, naming the client: the rule, whatever the machine did.
    behind = [why for why in run["invalid_reasons"] if "fell behind its schedule" in why]
    assert bool(behind) == (p99 > 50.0), (p99, run["invalid_reasons"])
    assert [q["max_tokens"] for q in reqs] == [2] * 200
    assert [q["prompt_tokens"] for q in reqs[:2]] == [24, 536]

    again = replay(tmp_path, "a.jsonl", "second", marker)
    saved = json.loads((tmp_path / "second.json").read_text())
    exit_agrees(again, saved)
    assert saved["runs"][0]["fingerprint"] == run["fingerprint"]
    write_trace(tmp_path / "b.jsonl", 200, rate=50.0, seed=2)
    other = replay(tmp_path, "b.jsonl", "other", marker)
    exit_agrees(other, json.loads((tmp_path / "other.json").read_text()))
    refused = harness(
        "compare", "first.json", "other.json", cwd=tmp_path, env=outside_git(tmp_path)
    )
    assert refused.returncode == 2 and "different workloads" in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    "line, said",
    [
        ('{"input_length": 8, "output_length": 2}', "timestamp (ms) must be a number"),
        ('{"timestamp": 5, "input_length": 0, "output_length": 2}', "input_length must be"),
        ("not json", "not a JSON object"),
        ('{"timestamp": 5, "input_length": 8, "output_length": 2, "hash_ids": "x"}', "hash_ids"),
    ],
)
def test_a_bad_trace_line_is_one_line_and_exit_2(tmp_path, line, said):
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 8, "output_length": 2}\n'
                                      + line + "\n")  # fmt: skip
    suite = write_suite(tmp_path, SUITE.format(trace="t.jsonl"))
    with pytest.raises(SuiteError, match=rf"t\.jsonl:2: .*{re.escape(said)}"):
        load_suite(str(suite))
    r = harness("run", "--suite", str(suite), "--dry-run", cwd=tmp_path, env=outside_git(tmp_path))
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_shipped_trace_suite_loads_its_trace():
    suite = load_suite("trace-replay")
    (phase,) = suite.phases
    assert phase.arrival.mode == "trace"
    assert phase.requests == 24 == len(phase.arrival.trace.requests)
    assert any(len(r.hash_ids) > 1 and r.hash_ids[0] >= 1000 for r in phase.arrival.trace.requests)


def test_a_warmup_reads_its_trace_beside_the_suite_file(tmp_path, monkeypatch):
    """A trace path is relative to the suite file, in the warm-up table as in a phase."""
    folder = tmp_path / "suites"
    folder.mkdir()
    write_trace(folder / "t.jsonl", 3, 10.0)
    text = SUITE.format(trace="t.jsonl") + '[warmup]\narrival = "trace"\ntrace = "t.jsonl"\n'
    (folder / "replay.toml").write_text(text)
    monkeypatch.chdir(tmp_path)  # not the suite's folder
    suite = load_suite(str(folder / "replay.toml"))
    assert suite.warmup is not None and suite.warmup.requests == 3
