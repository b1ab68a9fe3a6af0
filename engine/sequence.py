"""Sequence: one request's state as the scheduler moves it from queue to slot to finish."""

import itertools
from dataclasses import dataclass, field
from enum import Enum

from engine.model.tokenizer import Tokenizer
from engine.sampler import Sampler, SamplingParams
from engine.stops import StopMatcher

_ids = itertools.count(1)


class Status(Enum):
    WAITING = "waiting"
    PREFILLING = "prefilling"  # chunked prefill parked between chunks
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class Event:
    """What the scheduler tells a request's handler: new text, or the end."""

    text: str = ""
    sent: int = 0  # characters of text already streamed
    token: int | None = None
    finish_reason: str | None = None  # "stop" | "length" | "cancelled" | "error"
    error: str | None = None


@dataclass(eq=False)
class Sequence:
    prompt: list[int]
    max_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    seq_id: int = field(default_factory=lambda: next(_ids))
    status: Status = Status.WAITING
    output: list[int] = field(default_factory=list)
    text: str = ""
    sent: int = 0  # characters of text already streamed
    prefilled: int = 0  # prompt tokens whose KV is in the slot
    cached_tokens: int = 0  # of those, copied from the prompt cache
    kv_bytes: int = 0  # reserved while the sequence holds a slot
    cancelled: bool = False
    arrival: float = 0.0  # perf_counter at submit
    finish_reason: str | None = None

    def __post_init__(self):
        self.sampler = Sampler(self.sampling)
        self.stops = StopMatcher(self.stop)
        self._stream = None

    @property
    def capacity(self) -> int:
        return len(self.prompt) + self.max_tokens

    @property
    def remaining_prompt(self) -> list[int]:
        return self.prompt[self.prefilled :]

    def _flush(self, hold: int = 0) -> str:
        piece = self.text[self.sent : len(self.text) - hold]
        self.sent += len(piece)
        return piece

    def append(self, token: int, tokenizer: Tokenizer) -> Event:
        """Record a sampled token; decide whether the sequence stops here."""
        if token in tokenizer.eos_ids and not self.ignore_eos:
            self.finish_reason = "stop"
            return Event(text=self._flush(), finish_reason="stop")
        self.output.append(token)
        if self._stream is None:
            self._stream = tokenizer.stream()
        piece = self._stream.step(tokenizer.backend, token) or ""
        self.text += piece
        at = self.stops.feed(piece)
        if at is not None:
            self.text = self.text[:at]
            self.finish_reason = "stop"
            return Event(text=self._flush(), token=token, finish_reason="stop")
        if len(self.output) >= self.max_tokens:
            self.finish_reason = "length"
        # trailing characters that could begin a stop string are not streamed until resolved
        hold = 0 if self.finish_reason else self.stops.held()
        return Event(text=self._flush(hold), token=token, finish_reason=self.finish_reason)
