"""Exact-length prompts on every server family's tokenize endpoint (vLLM's shape, llama.cpp's
llama-server, llama-cpp-python), chat templates included, and the recorded approximation
where a server cannot count a prompt."""

from __future__ import annotations

import pytest

from harness.arms.arms import make_arm
from harness.runs.measure import run_arm
from harness.workload.suite import load_suite

from helpers.arms import engine_arm, scripted
from helpers.cli import client_starved
from helpers.processes import unique_marker, wait_no_survivors
from helpers.suites import write_suite

SUITE = """
model = "scripted"
[[phase]]
name = "text"
requests = 2
prompt_tokens = 24
prefix_tokens = 8
max_tokens = 2
[[phase]]
name = "chat"
endpoint = "chat"
requests = 2
prompt_tokens = 24
max_tokens = 2
"""


@pytest.mark.parametrize(
    ("mode", "source", "exact"),
    [
        ("vllm", "server /tokenize", True),
        ("llama-server", "server /tokenize (llama.cpp)", True),
        ("llamacpp", "server /extras/tokenize (chat: content only, template not counted)", False),
        ("none", "local-approx (1 token per word)", False),
    ],
)
def test_prompt_lengths_per_tokenize_dialect(tmp_path, mode, source, exact):
    marker = unique_marker()
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    run = run_arm(suite, make_arm(marker, serve_cmd=scripted(f"--tokenize {mode}", model=marker)),
                  tmp_path / "s.log")  # fmt: skip
    assert not wait_no_survivors(marker)
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    assert (run["prompt_tokenizer"], run["prompt_tokens_exact"]) == (source, exact)
    served = {p: [r["usage_prompt_tokens"] for r in run["requests"] if r["phase"] == p]
              for p in ("text", "chat")}  # fmt: skip
    # The server's own count of what it processed: exact wherever the harness says so.
    assert served["text"] == [24, 24]
    assert (served["chat"] == [24, 24]) == exact


TINY = """
model = "tiny"
[[phase]]
name = "chat"
endpoint = "chat"
arrival = "rate"
rate = 20.0
clients = 2
requests = 6
prompt_tokens = 48
prefix_tokens = 24
max_tokens = 2
[phase.expect]
"engine_prompt_cache_tokens_reused_total" = ">=1"
"""


def test_chat_rate_and_shared_prefix_on_the_reference_engine(tmp_path):
    """A real run on the tiny engine: chat prompts of exactly 48 tokens (template included),
    all opening with the same 24-token prefix (which the prompt cache then reuses), sent at
    seeded Poisson arrival times."""
    suite = load_suite(str(write_suite(tmp_path, TINY)))
    run = run_arm(suite, engine_arm("tiny"), tmp_path / "s.log")
    assert run["valid"] or client_starved({"runs": [run]}), run["invalid_reasons"]
    assert run["prompt_tokenizer"] == "server /tokenize" and run["prompt_tokens_exact"]
    reqs = run["requests"]
    assert [r["usage_prompt_tokens"] for r in reqs] == [48] * 6
    arrivals = sorted(r["arrival"] for r in reqs)
    assert len(set(arrivals)) == 6 and arrivals[-1] - arrivals[0] > 0.05  # spread, not a burst
    assert run["phases"]["chat"]["expect"][0]["status"] == "pass"
