"""Exact-length prompts on every server family's tokenize endpoint (vLLM's shape, llama.cpp's
llama-server, llama-cpp-python), chat templates included, and the recorded approximation
where a server cannot count a prompt."""

from __future__ import annotations

import pytest
from harness_helpers import scripted, unique_marker, wait_no_survivors, write_suite

from harness.arms import make_arm
from harness.run import run_arm
from harness.suite import load_suite

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
    assert run["valid"], run["invalid_reasons"]
    assert (run["prompt_tokenizer"], run["prompt_tokens_exact"]) == (source, exact)
    served = {p: [r["usage_prompt_tokens"] for r in run["requests"] if r["phase"] == p]
              for p in ("text", "chat")}  # fmt: skip
    # The server's own count of what it processed: exact wherever the harness says so.
    assert served["text"] == [24, 24]
    assert (served["chat"] == [24, 24]) == exact
