"""One streamed chat request to a server that is up: what `harness check` sends before it
measures anything, to say what came back (the first token's time, the tokens, the text)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from harness.load.load import LoadDriver, make_session
from harness.load.record import RequestRecord
from harness.runs.measure import served_model
from harness.workload.phase import Phase

PROMPT = "Say hello in one short sentence."
PHASE = Phase("check", endpoint="chat", max_tokens=16, ignore_eos=False)


@dataclass(frozen=True, slots=True)
class Answer:
    model: str  # the model id sent
    record: RequestRecord
    text: str


def first_request(url: str, model: str, api_key: str = "") -> Answer:
    """Stream one chat completion from the server at `url`; a failure is on the record."""
    return asyncio.run(_ask(url, model, api_key))


async def _ask(url: str, model: str, api_key: str) -> Answer:
    async with make_session(1, api_key=api_key) as session:
        sent = await served_model(session, url, model)
        driver = LoadDriver(session, url, sent, time.perf_counter())
        record, text = RequestRecord(PHASE.name, 0, 0, PHASE.max_tokens), list[str]()
        await driver.request(PHASE, PROMPT, record, answer=text)
    return Answer(sent, record, "".join(text))
