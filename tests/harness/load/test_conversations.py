"""Multi-turn conversations: turn k+1 sends the conversation so far, the server's own answers
included (checked by what the server counted), after the think time; metrics per turn index.
Against the reference engine its prompt cache reuses more of each later turn."""

from __future__ import annotations

import json
import sys

import pytest

from harness.workload.suite import SuiteError, load_suite

from helpers import REPO
from helpers.arms import scripted
from helpers.cli import client_starved, exit_agrees, harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import write_suite

SUITE = """
model = "{model}"
[[phase]]
name = "chat"
arrival = "burst"
endpoint = "chat"
clients = 2
requests = 2
turns = 3
think_time_s = 0.05
prompt_tokens = {prompt}
max_tokens = 4
"""


def conversations(run: dict) -> list[list[dict]]:
    reqs = sorted(run["requests"], key=lambda q: q["index"])
    return [reqs[c * 3 : c * 3 + 3] for c in range(2)]


def test_each_turn_sends_the_conversation_so_far_after_the_think_time(tmp_path):
    marker = unique_marker()
    suite = write_suite(tmp_path, SUITE.format(model="scripted", prompt=8))
    serve = scripted("--ttft-ms 5 --itl-ms 1 --bare-health", model=marker)
    r = harness("run", "--suite", str(suite), "--quiet", "--out", "run.json", "--serve-cmd", serve,
                cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
    saved = json.loads((tmp_path / "run.json").read_text())
    exit_agrees(r, saved)
    (run,) = saved["runs"]
    assert run["valid"] or client_starved(saved), run["invalid_reasons"]
    assert len(run["requests"]) == 6
    for conv in conversations(run):
        assert [q["turn"] for q in conv] == [1, 2, 3]
        served = [q["usage_prompt_tokens"] for q in conv]
        # what the server counted: the last turn's messages, plus the answer of 4 words and a
        # new 8-token user message (3 words of template per message on this server)
        assert served[0] == 8 and served[1] == served[0] + (4 + 3) + 8
        assert served[2] == served[1] + (4 + 3) + 8
        for before, after in zip(conv, conv[1:], strict=False):
            assert after["send"] - before["end"] >= 0.05  # the think time
    turns = run["phases"]["chat"]["turns"]
    assert sorted(turns) == ["1", "2", "3"] and all(t["ok"] == 2 for t in turns.values())
    assert turns["3"]["served_prompt_tokens_mean"] == 38


def test_turns_need_a_chat_endpoint_and_a_closed_or_burst_arrival(tmp_path):
    text = SUITE.format(model="m", prompt=8).replace('endpoint = "chat"', "")
    with pytest.raises(SuiteError, match='turns > 1 needs endpoint = "chat"'):
        load_suite(str(write_suite(tmp_path, text)))


@pytest.mark.timeout(600)
def test_the_engines_prompt_cache_reuses_more_of_each_later_turn(tmp_path):
    suite = write_suite(tmp_path, SUITE.format(model="tiny", prompt=48))
    serve = f"{sys.executable} -m engine.cli serve --model tiny --port {{port}}"
    r = harness("run", "--suite", str(suite), "--quiet", "--out", str(tmp_path / "run.json"),
                "--serve-cmd", serve, cwd=REPO, env=outside_git(REPO))  # fmt: skip
    saved = json.loads((tmp_path / "run.json").read_text())
    exit_agrees(r, saved)  # INVALID where a loaded machine starved the client
    (run,) = saved["runs"]
    for conv in conversations(run):
        served = [q["usage_prompt_tokens"] for q in conv]
        cached = [q["cached_tokens"] for q in conv]
        out = [q["output_tokens"] for q in conv]
        # the engine counted each later prompt as the earlier one, its answer and a new message
        assert served[1] > served[0] + out[0] and served[2] > served[1] + out[1], served
        assert cached[0] < cached[1] < cached[2], cached  # more of each turn came from cache
    turns = run["phases"]["chat"]["turns"]
    assert turns["1"]["cached_tokens_mean"] < turns["3"]["cached_tokens_mean"]
