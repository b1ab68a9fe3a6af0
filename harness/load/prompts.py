"""Seeded prompts of an exact token length, counted by the server's own tokenizer: vLLM's (and
the reference engine's) `POST /tokenize`, llama.cpp's llama-server `POST /tokenize` (+
`/apply-template` for chat), llama-cpp-python's `POST /extras/tokenize`, else a recorded local
approximation."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import aiohttp

from harness.load.server_reads import fetch_json
from harness.workload.dataset import Item
from harness.workload.trace import BLOCK_TOKENS, Trace

WORDS = (  # noqa: SIM905 (one line of words reads better than a column)
    "the time people year way day man thing woman life child world school state family "
    "student group country problem hand part place case week company system program question "
    "work number night point home water room mother area money story fact month lot right "
    "study book eye job word business issue side kind head house service friend father power "
    "hour game line end member law car city name team minute idea kid body back parent face "
    "level office door health person art war history party result change morning reason "
    "research girl moment air"
).split()
MAX_FIT_TRIES = 200
MAX_REDRAWS = 8


class PromptError(RuntimeError):
    """No prompt of the requested token length could be built."""


@dataclass(slots=True)
class Prompt:
    text: str
    tokens: int  # as counted by the tokenizer in use (the target, unless approximated)
    max_tokens: int | None = None  # this request's own output length (a trace's); else the phase's


@dataclass(frozen=True, slots=True)
class Dialect:
    """One server family's tokenize endpoint: where it is and what its chat count covers."""

    source: str  # what the run JSON records
    path: str
    chat_exact: bool  # whether a chat prompt's template is counted too


VLLM = Dialect("server /tokenize", "/tokenize", True)  # vLLM and the reference engine
LLAMA_SERVER = Dialect("server /tokenize (llama.cpp)", "/tokenize", True)
LLAMA_CPP_PYTHON = Dialect("server /extras/tokenize", "/extras/tokenize", False)
DIALECTS = (VLLM, LLAMA_SERVER, LLAMA_CPP_PYTHON)
LOCAL = "local-approx (1 token per word)"


class TokenCounter:
    """Counts prompt tokens the way the server will; `source` records which way that was and
    `exact(chat)` whether that count is the server's own (else an approximation)."""

    def __init__(self, session: aiohttp.ClientSession | None, base: str, model: str) -> None:
        self.session, self.base, self.model = session, base, model
        self.dialect: Dialect | None = None
        self._chat_exact = True  # turns False if llama.cpp's /apply-template is missing

    @property
    def source(self) -> str:
        return self.dialect.source if self.dialect else LOCAL

    async def detect(self) -> str:
        """The first dialect that counts a known text as some tokens (a server that ignores
        a body it does not understand answers 0 tokens, or an error)."""
        for dialect in DIALECTS:
            self.dialect = dialect
            if (await self._server_count("hello world", chat=False) or 0) > 0:
                return self.source
        self.dialect = None
        return self.source

    def exact(self, chat: bool) -> bool:
        if self.dialect is None:
            return False
        return not chat or (self.dialect.chat_exact and self._chat_exact)

    async def count(self, text: str, chat: bool) -> int:
        if self.dialect is not None:
            n = await self._server_count(text, chat)
            if n is not None:
                return n
            raise PromptError(f"{self.source} stopped answering")
        return len(text.split())

    def chat_note(self, chat: bool) -> str:
        """Where a chat prompt's template could not be counted, its content is what was fitted."""
        if chat and self.dialect is not None and not self.exact(chat):
            return " (chat: content only, template not counted)"
        return ""

    async def _server_count(self, text: str, chat: bool) -> int | None:
        if self.dialect is None:
            return None
        if self.dialect is VLLM:
            body: dict[str, object] = {"model": self.model}
            body |= {"messages": _messages(text)} if chat else {"prompt": text}
        elif self.dialect is LLAMA_SERVER:
            if chat and self._chat_exact:
                templated = await self._post("/apply-template", {"messages": _messages(text)})
                if isinstance(templated, dict) and isinstance(templated.get("prompt"), str):
                    text = templated["prompt"]
                else:
                    self._chat_exact = False
            # what llama-server itself does with a prompt: BOS (if the model adds one) + text
            body = {"content": text, "add_special": True, "parse_special": True}
        else:
            body = {"input": text}
        data = await self._post(self.dialect.path, body)
        count = data.get("count") if isinstance(data, dict) else None
        if isinstance(count, int) and not isinstance(count, bool):
            return count if 0 <= count <= MAX_COUNT else None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    async def _post(self, path: str, body: dict) -> object:
        if self.session is None:
            return None
        try:
            status, data = await fetch_json(self.session, "POST", self.base + path, json=body)
        except ValueError:
            return None
        return data if status == 200 else None


MAX_COUNT = 10_000_000  # more tokens than any prompt the harness sends: not a count


def _messages(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


async def fit(
    counter: TokenCounter, target: int, rng: random.Random, prefix: str = "", chat: bool = False
) -> Prompt:
    """Cut seeded words after `prefix` at the character that makes the text count exactly
    `target` tokens: an interpolation search over the cut, since the count grows with it
    (one token per word for BPE, one per byte for a byte tokenizer). Where no cut hits the
    target (a step of two tokens), the words are redrawn."""
    head = prefix + " " if prefix else ""
    n_head = await counter.count(head, chat) if head or chat else 0
    if n_head > target:
        raise PromptError(f"cannot build a {target}-token prompt: the shortest has {n_head}")
    tries = 0
    for _ in range(MAX_REDRAWS):
        body = " ".join(rng.choice(WORDS) for _ in range(target + 16))
        lo, n_lo, hi, n_hi = 0, n_head, len(body), await counter.count(head + body, chat)
        tries += 1
        while hi - lo > 1 and tries < MAX_FIT_TRIES:
            cut = lo + round((hi - lo) * (target - n_lo) / max(n_hi - n_lo, 1))
            cut = min(hi - 1, max(lo + 1, cut))
            n = await counter.count(head + body[:cut], chat)
            tries += 1
            if n == target:
                return Prompt(head + body[:cut], n)
            lo, n_lo, hi, n_hi = (cut, n, hi, n_hi) if n < target else (lo, n_lo, cut, n)
        if n_lo == target:
            return Prompt(head + body[:lo], n_lo)
    raise PromptError(f"no {target}-token prompt after {tries} tries ({counter.source})")


async def build_prompts(
    counter: TokenCounter, lengths: list[int], prefix_tokens: int, seed: int, chat: bool
) -> list[Prompt]:
    """One prompt per length, all starting with the same seeded prefix of `prefix_tokens`."""
    rng = random.Random(seed)
    prefix = (await fit(counter, prefix_tokens, rng)).text if prefix_tokens else ""
    seeds = [rng.getrandbits(32) for _ in lengths]
    limit = asyncio.Semaphore(8)

    async def one(length: int, s: int) -> Prompt:
        async with limit:
            return await fit(counter, length, random.Random(s), prefix, chat)

    return list(await asyncio.gather(*(one(n, s) for n, s in zip(lengths, seeds, strict=True))))


async def build_trace_prompts(
    counter: TokenCounter, trace: Trace, seed: int, chat: bool
) -> list[Prompt]:
    """One prompt per trace request, of its exact input length, made of blocks: the text of
    hash id k is the same wherever k appears (BLOCK_TOKENS tokens, seeded by k), so requests
    that share hash ids share that prefix, as the trace says; the last block is fitted to
    the length. Each prompt carries the request's output length."""
    blocks: dict[int, str] = {}

    async def block(h: int) -> str:
        if h not in blocks:
            blocks[h] = (await fit(counter, BLOCK_TOKENS, random.Random(seed * 1_000_003 + h))).text
        return blocks[h]

    out = []
    for i, req in enumerate(trace.requests):
        whole = [h for k, h in enumerate(req.hash_ids) if (k + 1) * BLOCK_TOKENS < req.input_length]
        prefix = " ".join([await block(h) for h in whole])
        prompt = await fit(counter, req.input_length, random.Random(seed + i), prefix, chat)
        out.append(Prompt(prompt.text, prompt.tokens, req.output_length))
    return out


async def dataset_prompts(
    counter: TokenCounter, items: list[Item], chat: bool, max_tokens: int, seed: int = 0
) -> list[Prompt]:
    """A dataset's prompts as they are, each counted by the server's tokenizer, or generated to
    an item's input_length (seeded by `seed` and the item's place); the output length is the
    item's (a ShareGPT reply counted the same way), at most `max_tokens`."""
    limit = asyncio.Semaphore(8)

    async def one(i: int, item: Item) -> Prompt:
        async with limit:
            if item.input_length is not None:
                made = await fit(
                    counter, item.input_length, random.Random(seed * 1_000_003 + i), "", chat
                )
                text, tokens = made.text, made.tokens
            else:
                text, tokens = item.prompt, await counter.count(item.prompt, chat)
            out = item.output_length
            if out is None and item.reply:
                out = await counter.count(item.reply, False)
            return Prompt(text, tokens, min(out or max_tokens, max_tokens))

    return list(await asyncio.gather(*(one(i, item) for i, item in enumerate(items))))
