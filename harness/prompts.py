"""Seeded prompts of an exact token length, counted by the server's own tokenizer: vLLM's
`POST /tokenize`, llama.cpp's `POST /extras/tokenize`, else a recorded local approximation."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import aiohttp

WORDS = (  # noqa: SIM905 (one line of words reads better than a column)
    "the time people year way day man thing woman life child world school state family "
    "student group country problem hand part place case week company system program question "
    "work number night point home water room mother area money story fact month lot right "
    "study book eye job word business issue side kind head house service friend father power "
    "hour game line end member law car city name team minute idea kid body back parent face "
    "level office door health person art war history party result change morning reason "
    "research girl moment air"
).split()
MAX_FIT_TRIES = 40


class PromptError(RuntimeError):
    """No prompt of the requested token length could be built."""


@dataclass(slots=True)
class Prompt:
    text: str
    tokens: int  # as counted by the tokenizer in use (the target, unless approximated)


class TokenCounter:
    """Counts prompt tokens the way the server will; `source` records which way that was."""

    def __init__(self, session: aiohttp.ClientSession | None, base: str, model: str) -> None:
        self.session, self.base, self.model = session, base, model
        self.source = "local-approx (1 token per word)"
        self._path: str | None = None

    async def detect(self) -> str:
        for path, source in (("/tokenize", "server /tokenize"),
                             ("/extras/tokenize", "server /extras/tokenize")):  # fmt: skip
            self._path = path
            if await self._server_count("hello world", chat=False) is not None:
                self.source = source
                return source
        self._path = None
        return self.source

    async def count(self, text: str, chat: bool) -> int:
        if self._path is not None:
            n = await self._server_count(text, chat)
            if n is not None:
                return n
            raise PromptError(f"{self.source} stopped answering")
        return len(text.split())

    def chat_note(self, chat: bool) -> str:
        """llama.cpp cannot count a templated chat prompt: its content is what gets fitted."""
        if chat and self._path == "/extras/tokenize":
            return " (chat: content only, template not counted)"
        return ""

    async def _server_count(self, text: str, chat: bool) -> int | None:
        if self._path == "/tokenize":
            body = {"model": self.model}
            body |= {"messages": _messages(text)} if chat else {"prompt": text}
        else:
            body = {"input": text}
        try:
            async with self.session.post(self.base + self._path, json=body) as resp:
                if resp.status != 200:
                    return None
                data = await resp.json(content_type=None)
        except (aiohttp.ClientError, ValueError):
            return None
        if isinstance(data, dict) and isinstance(data.get("count"), int):
            return data["count"]
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None


def _messages(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


async def fit(
    counter: TokenCounter, target: int, rng: random.Random, prefix: str = "", chat: bool = False
) -> Prompt:
    """Append seeded words to `prefix` until the text counts exactly `target` tokens. When one
    word more overshoots (a word of two tokens), that word is redrawn."""
    pool = [rng.choice(WORDS) for _ in range(target + 16)]
    k, seen = max(1, target - (await counter.count(prefix, chat) if prefix else 0)), set()
    overshoots_at_one = 0
    for _ in range(MAX_FIT_TRIES):
        while len(pool) < k:
            pool.append(rng.choice(WORDS))
        text = (prefix + " " if prefix else "") + " ".join(pool[:k])
        n = await counter.count(text, chat)
        if n == target:
            return Prompt(text, n)
        if n > target and k == 1:
            overshoots_at_one += 1
            if overshoots_at_one >= 8:
                raise PromptError(f"cannot build a {target}-token prompt: the shortest has {n}")
        if k in seen or (n > target and k == 1):
            pool[k - 1] = rng.choice(WORDS)
        seen.add(k)
        k = max(1, k + (target - n))
    raise PromptError(f"no {target}-token prompt after {MAX_FIT_TRIES} tries ({counter.source})")


async def build_prompts(
    counter: TokenCounter, lengths: list[int], prefix_tokens: int, seed: int, chat: bool
) -> list[Prompt]:
    """One prompt per length, all starting with the same seeded prefix of `prefix_tokens`."""
    rng = random.Random(seed)
    prefix = (await fit(counter, prefix_tokens, rng, chat=chat)).text if prefix_tokens else ""
    seeds = [rng.getrandbits(32) for _ in lengths]
    limit = asyncio.Semaphore(8)

    async def one(length: int, s: int) -> Prompt:
        async with limit:
            return await fit(counter, length, random.Random(s), prefix, chat)

    return list(await asyncio.gather(*(one(n, s) for n, s in zip(lengths, seeds, strict=True))))
