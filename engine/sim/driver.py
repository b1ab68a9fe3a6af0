"""simulate: a workload's requests through the real Scheduler on a SimBackend and virtual clock.

The workload is what the harness would send, as plain data: phases in order, each a list of
groups run one after another (a suite's bursts); a group is `closed` (its `clients` each send
their next request when the last one ended) or `open` (each request sent at its `at`, seconds
after the group starts). Each request: prompt token ids, max_tokens, ignore_eos, and `chat`
(its first ids become the model's chat template's own opening, which every chat prompt a
served run sends shares, so the prompt cache sees what it would). The answer is
every request's times on the virtual clock (sent, first token, each token, end) and the
engine's Prometheus text before and after each phase, as a served run would have scraped.
"""

import heapq
import itertools
from dataclasses import dataclass, field

from engine.config import EngineConfig
from engine.metrics import EngineMetrics
from engine.model.load import LoadedModel
from engine.policy import budgets
from engine.sampler import SamplingParams
from engine.scheduler import Scheduler
from engine.sequence import Event, Sequence
from engine.sim.backend import SimBackend
from engine.sim.clock import VirtualClock
from engine.sim.costs import CostModel

HOST_MEMORY = 16 * 2**30  # the KV budget's "free memory" in simulation


@dataclass
class Outcome:
    phase: str
    index: int
    prompt_tokens: int
    max_tokens: int
    arrival: float
    send: float = 0.0
    first_token: float | None = None
    end: float | None = None
    token_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    cached_tokens: int = 0
    finish_reason: str | None = None
    error: str = ""


class Simulation:
    def __init__(self, loaded: LoadedModel, config: EngineConfig, costs: CostModel):
        self.clock = VirtualClock()
        tok = loaded.tokenizer
        token = next(t for t in tok.encode(" the") if t not in tok.eos_ids)  # an ordinary one
        self.chat_prefix = chat_prefix(tok)
        self.backend = SimBackend(loaded.args, costs, self.clock, token)
        self.metrics = EngineMetrics()
        context_kv = self.backend.kv_bytes(config.context(loaded.args.max_position_embeddings))
        free = getattr(costs, "free_memory", HOST_MEMORY)  # a roofline's hardware has its own
        kv, cache = budgets(config.kv_cache_budget, config.prompt_cache_bytes, context_kv, free)
        self.scheduler = Scheduler(
            self.backend, loaded.tokenizer, config, self.metrics, kv, cache, self.clock
        )
        self.events: list = []  # (time, order, callback): arrivals and client sends
        self.order = itertools.count()

    def at(self, t: float, fn) -> None:
        heapq.heappush(self.events, (t, next(self.order), fn))

    def send(self, out: Outcome, req: dict, done, at: float | None = None) -> None:
        """Submit at the clock's now; `at`: when the client sent it (an arrival that fell
        inside a forward is submitted when the forward ends, but was sent at its time)."""
        out.send = self.clock.now() if at is None else at
        prompt = req["prompt"]
        if req.get("chat"):
            prompt = (self.chat_prefix + prompt)[: len(prompt)]
        seq = Sequence(prompt, req["max_tokens"], SamplingParams(temperature=0.0),
                       ignore_eos=req.get("ignore_eos", False))  # fmt: skip

        def emit(s: Sequence, event: Event) -> None:
            now = self.clock.now()
            if event.token is not None:
                out.first_token = out.first_token if out.first_token is not None else now
                out.token_times.append(now)
            if event.finish_reason:
                out.end, out.finish_reason = now, event.finish_reason
                out.output_tokens, out.cached_tokens = len(s.output), s.cached_tokens
                out.error = event.error or ""
                ok = event.finish_reason in ("stop", "length")
                self.metrics.requests.labels("ok" if ok else "error").inc()
                done()

        if not self.scheduler.submit(seq, emit):
            out.end, out.error = self.clock.now(), "503: queue full"
            done()

    def run_group(self, phase: str, group: dict, outcomes: list[Outcome]) -> None:
        start, reqs = self.clock.now(), group["requests"]
        base = len(outcomes)
        outs = [Outcome(phase, base + i, len(r["prompt"]), r["max_tokens"], start + r.get("at", 0))
                for i, r in enumerate(reqs)]  # fmt: skip
        outcomes.extend(outs)
        if group["mode"] == "open":
            for out, req in zip(outs, reqs, strict=True):
                t = out.arrival
                self.at(t, lambda o=out, r=req, t=t: self.send(o, r, lambda: None, at=t))
        else:
            queue = iter(zip(outs, reqs, strict=True))

            def next_request() -> None:
                item = next(queue, None)
                if item is not None:
                    out, req = item
                    out.arrival = self.clock.now()
                    self.send(out, req, lambda: self.at(self.clock.now(), next_request))

            for _ in range(min(group["clients"], len(reqs))):
                self.at(start, next_request)
        self.drain(outs)

    def drain(self, outs: list[Outcome]) -> None:
        """Step the scheduler, delivering events as the clock reaches them, until every
        request of the group has ended."""
        while any(o.end is None for o in outs):
            while self.events and self.events[0][0] <= self.clock.now():
                heapq.heappop(self.events)[2]()
            self.clock.next_event = self.events[0][0] if self.events else float("inf")
            if self.scheduler.idle() and not self.events:
                raise RuntimeError("simulation stalled: requests unfinished and nothing to do")
            self.scheduler.step()
            self.scheduler._update_gauges()


def chat_prefix(tok) -> list[int]:
    """The token ids the chat template puts before any user message (its system prompt and
    role header): what two rendered messages share."""
    if not tok.chat_template:
        return []
    a, b = (tok.encode(tok.apply_chat_template([{"role": "user", "content": m}]))
            for m in ("hello there", "zebra crossing"))  # fmt: skip
    return a[: next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)]


def simulate(loaded: LoadedModel, config: EngineConfig, costs: CostModel, workload: dict) -> dict:
    sim = Simulation(loaded, config, costs)
    outcomes: list[Outcome] = []
    phases = []
    for phase in workload["phases"]:
        before, t0 = sim.metrics.render().decode(), sim.clock.now()
        for group in phase["groups"]:
            sim.run_group(phase["name"], group, outcomes)
        after = sim.metrics.render().decode()
        phases.append({"name": phase["name"], "start": t0, "end": sim.clock.now(),
                       "metrics_before": before, "metrics_after": after})  # fmt: skip
    return {
        "requests": [o.__dict__ for o in outcomes],
        "phases": phases,
        "mask_bytes_max": sim.backend.mask_bytes_max,
        "kv_bytes_max": sim.backend.kv_bytes_max,
        "costs": {"name": costs.name, "source": costs.source, "fit": costs.fit},
    }
