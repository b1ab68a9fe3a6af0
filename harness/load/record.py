"""One request as the client saw it: when it arrived, waited, was sent, streamed and ended.
Times are seconds on the run's perf_counter clock (0 = the run's start)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(slots=True)
class RequestRecord:
    phase: str
    index: int
    prompt_tokens: int  # the fitted length as counted by the prompt tokenizer
    max_tokens: int
    arrival: float = 0.0  # when the request was due (burst: phase start; rate: Poisson time)
    send: float = 0.0  # when the POST was issued, after a client slot was free
    first_token: float | None = None  # first SSE chunk with non-empty generated text
    end: float | None = None  # the stream's end ([DONE], or the error)
    itl_s: list[float] = field(default_factory=list)  # gaps between content chunks
    reads: list[tuple[float, int]] = field(default_factory=list)  # (time, tokens) per read
    output_tokens: int | None = None  # the server's usage.completion_tokens
    client_tokens: int = 0  # content chunks the client counted
    usage_prompt_tokens: int | None = None
    status: int = 0  # HTTP status; 0 when no response came
    error: str = ""
    finish_reason: str | None = None
    response_id: str | None = None  # the stream's "id", to match the server's own logs
    turn: int = 1  # in a conversation (turns > 1): which turn this request is
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, if reported
    coalesced: int = 0  # tokens that came in one read with another of this stream's tokens
    cancelled: bool = False  # the client dropped it by design (a phase's cancel_share)
    output_sha256: str | None = None  # of the text streamed (UTF-8), to compare outputs
    settling: bool = False  # sent within the phase's settle_s: run and kept, not measured
    raw: list[tuple[float, bytes]] | None = None  # (time, bytes) per read, until parsed; not kept

    @property
    def ok(self) -> bool:
        return self.status == 200 and not self.error and not self.cancelled

    @property
    def failed(self) -> bool:
        """Neither served whole nor cancelled by the client on purpose."""
        return not self.ok and not self.cancelled

    @property
    def queue_s(self) -> float:
        return self.send - self.arrival

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.send

    @property
    def e2e_s(self) -> float | None:
        return None if self.end is None else self.end - self.send

    @property
    def tokens(self) -> int:
        """Output tokens: the server's usage where it can be true, else the client's count. A
        streamed chunk holds at least one token and the server may send at most max_tokens, so
        usage below the chunks counted or above max_tokens is not believed (a head that
        claimed tokens would pass a tok/s gate); the mismatch is flagged either way."""
        usage = self.output_tokens
        if usage is None or not self.client_tokens <= usage <= max(self.max_tokens, 0):
            return self.client_tokens
        return usage

    @property
    def token_mismatch(self) -> bool:
        return self.output_tokens is not None and self.output_tokens != self.client_tokens

    @property
    def tpot_s(self) -> float | None:
        if not self.ok or self.ttft_s is None or self.e2e_s is None or self.tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.tokens - 1)

    def as_dict(self) -> dict:
        """Timestamps in seconds since the run's start; durations in milliseconds."""
        out = asdict(self)
        del out["itl_s"], out["raw"]
        for key in ("arrival", "send", "first_token", "end"):
            out[key] = _round(out[key], 6)
        out |= {
            "ok": self.ok,
            "queue_ms": _ms(self.queue_s),
            "ttft_ms": _ms(self.ttft_s),
            "e2e_ms": _ms(self.e2e_s),
            "tpot_ms": _ms(self.tpot_s),
            "itl_ms": [_ms(g) for g in self.itl_s],
            "reads": [[_round(t, 6), k] for t, k in self.reads],
            "token_mismatch": self.token_mismatch,
        }
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RequestRecord:
        names = set(cls.__dataclass_fields__) - {"itl_s", "reads", "raw"}
        rec = cls(**{k: v for k, v in data.items() if k in names})
        rec.itl_s = [g / 1e3 for g in data.get("itl_ms", [])]
        rec.reads = [(t, k) for t, k in data.get("reads", [])]
        return rec


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)
