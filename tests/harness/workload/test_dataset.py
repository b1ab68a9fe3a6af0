"""Datasets: prompts sampled by seed from a local ShareGPT JSON or JSON-lines file, sent as they
are and counted by the server's own tokenizer, output lengths from the file (a ShareGPT reply
counted the same way), or lengths alone with prompts generated to them (simulated too); a
file that is not JSON is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from harness.runs.measure import draw_lengths
from harness.sim.workload import build as workload
from harness.workload.suite import SuiteError, load_suite

from helpers.arms import scripted
from helpers.cli import exit_agrees, harness, outside_git
from helpers.processes import unique_marker
from helpers.suites import write_suite

SUITE = """
name = "ds"
model = "scripted"
[[phase]]
name = "main"
clients = 2
requests = 6
max_tokens = 8
seed = {seed}
dataset = "{dataset}"
"""
SHAREGPT = [
    {
        "conversations": [
            {"from": "human", "value": " ".join(["ask"] * (3 + k))},
            {"from": "gpt", "value": " ".join(["yes"] * (2 + k))},
        ]
    }  # fmt: skip
    for k in range(10)
]


def run(tmp_path, dataset: str, seed: int, out: str, marker: str) -> dict:
    suite = write_suite(tmp_path, SUITE.format(seed=seed, dataset=dataset), f"{out}.toml")
    r = harness("run", "--suite", str(suite), "--quiet", "--out", f"{out}.json",
                "--serve-cmd", scripted("--ttft-ms 2 --itl-ms 1 --bare-health", model=marker),
                cwd=tmp_path, env=outside_git(tmp_path))  # fmt: skip
    saved = json.loads((tmp_path / f"{out}.json").read_text())
    exit_agrees(r, saved)  # INVALID where a loaded machine starved the client
    return saved["runs"][0]


def test_sharegpt_and_json_lines_prompts_are_sent_as_they_are(tmp_path):
    marker = unique_marker()
    (tmp_path / "sharegpt.json").write_text(json.dumps(SHAREGPT))
    lines = [{"prompt": "one two three four five", "output_length": 3}, {"prompt": "a b"}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")

    first = run(tmp_path, "sharegpt.json", 1, "a", marker)
    reqs = first["requests"]
    # the prompt of item k has 3 + k words and its reply 2 + k: counted by the server
    assert all(3 <= q["prompt_tokens"] <= 12 for q in reqs)
    assert all(q["max_tokens"] == min(q["prompt_tokens"] - 1, 8) for q in reqs)
    assert len({q["prompt_tokens"] for q in reqs}) == 6  # six distinct items: no replacement
    assert run(tmp_path, "sharegpt.json", 1, "b", marker)["fingerprint"] == first["fingerprint"]
    assert run(tmp_path, "sharegpt.json", 2, "c", marker)["fingerprint"] != first["fingerprint"]

    jsonl = run(tmp_path, "p.jsonl", 1, "d", marker)["requests"]
    assert sorted({(q["prompt_tokens"], q["max_tokens"]) for q in jsonl}) == [(2, 8), (5, 3)]


def test_rows_of_lengths_alone_get_prompts_of_those_lengths(tmp_path):
    rows = [{"input_length": 5 + 3 * k, "output_length": 2 + k} for k in range(4)]
    (tmp_path / "lengths.jsonl").write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    reqs = run(tmp_path, "lengths.jsonl", 3, "a", unique_marker())["requests"]
    # each prompt counts its row's input_length in the server's tokens (the scripted server's
    # words), each output its row's length; four rows for six requests: all four, then two again
    assert sorted({(q["prompt_tokens"], q["max_tokens"]) for q in reqs}) == [
        (5, 2), (8, 3), (11, 4), (14, 5)]  # fmt: skip
    suite = load_suite(str(write_suite(tmp_path, SUITE.format(seed=3, dataset="lengths.jsonl"))))
    (phase,) = workload(suite, {"main": draw_lengths(suite.phases[0])})["phases"]
    sent = [(len(r["prompt"]), r["max_tokens"]) for g in phase["groups"] for r in g["requests"]]
    assert sorted(set(sent)) == [(5, 2), (8, 3), (11, 4), (14, 5)]  # the simulator sends them
    assert sorted(sent) == sorted((q["prompt_tokens"], q["max_tokens"]) for q in reqs)


@pytest.mark.parametrize(
    "content, said",
    [
        ("this is not json at all", "not JSON"),
        ('[{"conversation": []}]', "no conversations list"),
        ('{"prompt": ""}', "needs a non-empty string prompt"),
        ('{"prompt": "x", "output_length": 0}', "output_length must be an integer >= 1"),
        ('{"input_length": 1.5}', "input_length must be an integer >= 1"),
        ('{"prompt": "x", "input_length": 3}', "a prompt or an input_length, not both"),
        ("[1]", "no conversations list"),
        ("7", "needs a JSON object"),
    ],
)
def test_a_bad_dataset_is_one_line_and_exit_2(tmp_path, content, said):
    (tmp_path / "d.json").write_text(content)
    suite = write_suite(tmp_path, SUITE.format(seed=0, dataset="d.json"))
    with pytest.raises(SuiteError, match=said):
        load_suite(str(suite))
    r = harness("run", "--suite", str(suite), "--dry-run", cwd=tmp_path, env=outside_git(tmp_path))
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1
