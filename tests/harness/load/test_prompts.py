"""Exact-length prompt fitting against a tokenizer whose words cost 1 or 2 tokens."""

from __future__ import annotations

import asyncio
import random

import pytest

from harness.load.prompts import PromptError, build_prompts, fit


class TwoTokenWords:
    """A stand-in for the server's /tokenize: words of 6+ letters cost two tokens."""

    source = "fake"

    def __init__(self, template: int = 0) -> None:
        self.template, self.calls = template, 0

    async def count(self, text: str, chat: bool) -> int:
        self.calls += 1
        n = sum(2 if len(w) >= 6 else 1 for w in text.split())
        return n + (self.template if chat else 0)


@pytest.mark.parametrize("target", [1, 2, 7, 64, 513])
def test_fit_hits_the_exact_length(target):
    counter = TwoTokenWords()
    prompt = asyncio.run(fit(counter, target, random.Random(target)))
    assert prompt.tokens == target
    assert asyncio.run(counter.count(prompt.text, False)) == target
    assert counter.calls < 45


def test_prompts_are_seeded_and_share_the_prefix():
    lengths = [40, 50, 60]
    a = asyncio.run(build_prompts(TwoTokenWords(), lengths, 16, seed=3, chat=False))
    b = asyncio.run(build_prompts(TwoTokenWords(), lengths, 16, seed=3, chat=False))
    c = asyncio.run(build_prompts(TwoTokenWords(), lengths, 16, seed=4, chat=False))
    assert [p.text for p in a] == [p.text for p in b] != [p.text for p in c]
    assert [p.tokens for p in a] == lengths
    prefixes = {p.text[: len(a[0].text) // 3] for p in a}
    assert len(prefixes) == 1


def test_chat_template_overhead_is_counted():
    prompts = asyncio.run(build_prompts(TwoTokenWords(template=5), [20], 0, seed=1, chat=True))
    assert len(prompts[0].text.split()) < 20 and prompts[0].tokens == 20


def test_a_length_below_the_template_is_refused():
    with pytest.raises(PromptError, match="shortest has"):
        asyncio.run(fit(TwoTokenWords(template=5), 3, random.Random(0), chat=True))


class Bytes:
    """A byte-level tokenizer, like the reference engine's `tiny` model: one token per byte."""

    source = "bytes"

    def __init__(self) -> None:
        self.calls = 0

    async def count(self, text: str, chat: bool) -> int:
        self.calls += 1
        return len(text.encode())


@pytest.mark.parametrize("target", [1, 16, 64, 1000])
def test_fit_cuts_inside_words_for_a_byte_tokenizer(target):
    counter = Bytes()
    prompt = asyncio.run(fit(counter, target, random.Random(target)))
    assert prompt.tokens == target == len(prompt.text.encode())
    assert counter.calls <= 8  # the interpolation search converges at once on a linear count
