"""A phase of a suite: how its requests arrive (arrival.py, one record per mode), how many and
from how many clients, their prompts (generated lengths or a dataset) and outputs, and the parts
only some phases have: conversations, cancels and a settling start. Each part checks its own
fields where it is made; the phase checks what the parts cannot see alone."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from harness.workload.arrival import (
    MODES,
    Arrival,
    Burst,
    Concurrency,
    Replay,
    SuiteError,
    finite,
    whole,
)
from harness.workload.dataset import Dataset
from harness.workload.expect import ExpectRule

MAX_OPEN_SLOTS = 256  # an open loop's client slots when the suite gives none
ENDPOINTS = ("completions", "chat")


@dataclass(frozen=True, slots=True)
class PromptLength:
    """A prompt length in tokens: exact, or drawn from a seeded distribution."""

    dist: str = "exact"  # exact | uniform | normal | choice
    value: int = 0
    min: int = 1
    max: int = 0
    mean: float = 0.0
    std: float = 0.0
    choices: tuple[int, ...] = ()

    def sample(self, rng: random.Random, n: int) -> list[int]:
        if self.dist == "exact":
            return [self.value] * n
        if self.dist == "uniform":
            return [rng.randint(self.min, self.max) for _ in range(n)]
        if self.dist == "choice":
            return [rng.choice(self.choices) for _ in range(n)]
        return [
            min(self.max, max(self.min, round(rng.gauss(self.mean, self.std)))) for _ in range(n)
        ]

    @property
    def floor(self) -> int:
        return {"exact": self.value, "choice": min(self.choices or (0,))}.get(self.dist, self.min)


@dataclass(frozen=True, slots=True)
class Conversation:
    """Each request a conversation of `turns` chat turns, `think_time_s` between an answer and
    the next user message, later user messages `followup_tokens` long (else drawn as the
    first)."""

    turns: int
    think_time_s: float = 0.0
    followup_tokens: int | None = None

    def __post_init__(self) -> None:
        if not whole(self.turns, 1):
            raise SuiteError("turns must be a positive integer")
        if not (finite(self.think_time_s) and self.think_time_s >= 0):
            raise SuiteError("think_time_s must be a finite number >= 0")
        if self.followup_tokens is not None and not (
            whole(self.followup_tokens, 1) and self.turns > 1
        ):
            raise SuiteError("followup_tokens must be a positive integer, with turns > 1")
        if self.think_time_s and self.turns < 2:
            raise SuiteError("think_time_s needs turns > 1")

    def facts(self) -> dict:
        return {
            **({"turns": self.turns, "think_time_s": self.think_time_s} if self.turns > 1 else {}),
            **({"followup_tokens": self.followup_tokens} if self.followup_tokens else {}),
        }


@dataclass(frozen=True, slots=True)
class Cancels:
    """A seeded `share` of the requests the client cancels, each `after_tokens` tokens into its
    answer (0: before the first) or `after_ms` after it was sent (load/cancels.py)."""

    share: float
    after_tokens: int | None = None
    after_ms: float | None = None

    def __post_init__(self) -> None:
        share, tokens, ms = self.share, self.after_tokens, self.after_ms
        if not (finite(share) and 0 <= share <= 1):
            raise SuiteError("cancel_share must be a fraction from 0 to 1")
        if share and (tokens is None) == (ms is None):
            raise SuiteError("cancel_share needs cancel_after_tokens or cancel_after_ms")
        if tokens is not None and not whole(tokens, 0):
            raise SuiteError("cancel_after_tokens must be whole, below max_tokens")
        if ms is not None and not (finite(ms) and ms > 0):
            raise SuiteError("cancel_after_ms must be a finite number > 0")
        if (tokens is not None or ms is not None) and not share:
            raise SuiteError("cancel_after_* needs a cancel_share > 0")

    def facts(self) -> dict:
        if not self.share:
            return {}
        return {"cancel_share": self.share, "cancel_after_tokens": self.after_tokens,
                "cancel_after_ms": self.after_ms}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    arrival: Arrival = Concurrency()
    clients: int = 0  # requests out at once; 0 (unset): 1, or in an open loop one per request
    requests: int = 1
    seed: int = 0
    prompt_tokens: PromptLength = field(default_factory=lambda: PromptLength(value=64))
    prefix_tokens: int = 0
    max_tokens: int = 16
    ignore_eos: bool = True
    temperature: float = 0.0
    endpoint: str = "completions"
    expect: tuple[ExpectRule, ...] = ()
    max_error_rate: float = 0.5  # more failed requests than this fraction: the run is invalid
    request_timeout_s: float | None = None  # one request, send to finish; None: request_deadline
    phase_timeout_s: float = 900.0  # the whole phase; requests still out then are errors
    max_lateness_ms: float = 50.0  # open loop: a p99 send lateness above this is INVALID
    dataset: Dataset | None = None  # prompts (and output lengths) sampled from a local file
    conversation: Conversation | None = None
    cancels: Cancels | None = None
    settle_s: float = 0.0  # requests sent this long into the phase run but are not measured

    def __post_init__(self) -> None:
        where = f"phase {self.name!r}"
        if not isinstance(self.arrival, tuple(MODES.values())):
            raise SuiteError(f"{where}: arrival must be one of {', '.join(MODES)}")
        if self.conversation is not None and self.conversation == Conversation(1):
            object.__setattr__(self, "conversation", None)  # one turn: no conversation
        if self.cancels is not None and not self.cancels.share:
            object.__setattr__(self, "cancels", None)  # a share of none: no cancels
        if self.clients == 0:  # an open loop sends each request when due: a slot for each
            slots = min(self.requests, MAX_OPEN_SLOTS) if self.arrival.open_loop else 1
            object.__setattr__(self, "clients", slots if whole(self.requests, 1) else 1)
        if self.endpoint not in ENDPOINTS:
            raise SuiteError(f"{where}: endpoint must be one of {', '.join(ENDPOINTS)}")
        for key in ("clients", "requests", "max_tokens"):
            if not whole(value := getattr(self, key), 1):
                raise SuiteError(f"{where}: {key} must be a positive integer, got {value!r}")
        if not (finite(self.temperature) and self.temperature >= 0):
            raise SuiteError(f"{where}: temperature must be a finite number >= 0")
        for key in ("request_timeout_s", "phase_timeout_s"):
            value = getattr(self, key)
            if value is not None and not (finite(value) and value > 0):
                raise SuiteError(f"{where}: {key} must be a finite number of seconds > 0")
        if isinstance(self.arrival, Replay) and self.requests != len(self.arrival.trace.requests):
            raise SuiteError(
                f"{where}: requests must be the trace's {len(self.arrival.trace.requests)}"
            )
        if self.turns > 1 and (
            self.endpoint != "chat" or self.arrival.mode not in ("concurrency", "burst")
            or self.bursts > 1 or self.dataset is not None
        ):  # fmt: skip
            raise SuiteError(
                f'{where}: turns > 1 needs endpoint = "chat" and arrival = "concurrency" or '
                '"burst" (one burst), with generated prompts'
            )
        if self.dataset is not None and (isinstance(self.arrival, Replay) or self.prefix_tokens):
            raise SuiteError(f"{where}: a dataset's prompts take no trace and no prefix_tokens")
        if not (finite(self.max_lateness_ms) and self.max_lateness_ms > 0):
            raise SuiteError(f"{where}: max_lateness_ms must be a finite number > 0")
        rate = self.max_error_rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise SuiteError(f"{where}: max_error_rate must be a fraction from 0 to 1")
        if not 0 <= self.prefix_tokens < max(self.prompt_tokens.floor, 1):
            raise SuiteError(f"{where}: prefix_tokens must be >= 0 and below every prompt length")
        if not (finite(self.settle_s) and self.settle_s >= 0):
            raise SuiteError(f"{where}: settle_s must be a finite number of seconds >= 0")
        if self.settle_s and self.bursts > 1:
            raise SuiteError(f"{where}: settle_s measures one stretch of load, not bursts > 1")
        after = self.cancels.after_tokens if self.cancels else None
        if after is not None and after >= self.max_tokens:
            raise SuiteError(f"{where}: cancel_after_tokens must be whole, below max_tokens")

    @property
    def bursts(self) -> int:
        return self.arrival.bursts if isinstance(self.arrival, Burst) else 1

    @property
    def turns(self) -> int:
        """Requests per unit of work: a conversation's turns, else 1."""
        return self.conversation.turns if self.conversation else 1

    @property
    def request_deadline_s(self) -> float:
        """How long one request may take, send to finish: the suite's, else 120 s plus 1 s per
        output token (a CPU serving SmolLM2 takes a few seconds; a stuck server, forever)."""
        return self.request_timeout_s or 120.0 + 1.0 * self.max_tokens

    @property
    def total_requests(self) -> int:
        """Every request the phase sends: `requests` per burst times `bursts`, times `turns`
        (each of a conversation's turns is a request)."""
        return self.requests * self.bursts * self.turns

    def facts(self) -> dict:
        """What sets this phase's work apart beyond its common fields, for the fingerprint:
        each part's facts, only when set, so workloads without them keep their fingerprints."""
        return {
            **self.arrival.facts(),
            **({"dataset_sha256": self.dataset.digest} if self.dataset else {}),
            **(self.conversation.facts() if self.conversation else {}),
            **({"settle_s": self.settle_s} if self.settle_s else {}),
            **(self.cancels.facts() if self.cancels else {}),
        }
