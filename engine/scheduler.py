"""Scheduler: the tick loop on one compute thread (queue, admission, prefill, decode).

Each tick asks policy.decide_tick what to do; admission drains a cohort with
policy.drain_cohort. Results go back to request handlers through their `emit` callbacks.

Fault isolation: a forward that raises fails the sequences in that forward; a sample (or the
per-sequence work after a forward) that raises fails that one sequence. `live` (sequences
holding a KV slot) is the one source of truth for KV; every path out releases through _finish.
"""

import logging
import threading
from collections import deque
from collections.abc import Callable

from engine.backends.base import Backend
from engine.clock import SYSTEM_CLOCK, Clock
from engine.config import EngineConfig
from engine.metrics import EngineMetrics
from engine.model.tokenizer import Tokenizer
from engine.policy import Tick, TickState, admission_rows, decide_tick, drain_cohort, kv_admits
from engine.prompt_cache import PromptCache
from engine.sequence import Event, Sequence, Status
from engine.step_trace import StepTrace

log = logging.getLogger("engine.scheduler")
Emit = Callable[[Sequence, Event], None]


class Scheduler:
    def __init__(
        self,
        backend: Backend,
        tokenizer: Tokenizer,
        config: EngineConfig,
        metrics: EngineMetrics,
        kv_budget: int | None,
        prompt_cache_bytes: int = 2 * 1024**3,
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.backend, self.tokenizer, self.config, self.metrics = (
            backend,
            tokenizer,
            config,
            metrics,
        )
        self.kv_budget = kv_budget
        self.clock = clock
        self.trace = StepTrace(config.step_trace) if config.step_trace else None
        self.traced: tuple | None = None  # this tick's forward: kind, rows' tokens, offsets
        self.cache = PromptCache(prompt_cache_bytes) if config.prompt_cache else None
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.parked: Sequence | None = None
        self.live: dict[int, Sequence] = {}  # seq_id -> sequence holding a KV slot
        self.emitters: dict[int, Emit] = {}
        self.decode_ticks_since_grant = 0
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopped = False
        self.thread = threading.Thread(target=self.run, name="engine-compute", daemon=True)

    # ---- called from the event loop ----
    def submit(self, seq: Sequence, emit: Emit) -> bool:
        """Queue a request; False when the queue is full (the caller answers 503)."""
        with self.lock:
            if len(self.waiting) >= self.config.max_queue_depth:
                return False
            self.emitters[seq.seq_id] = emit
            seq.arrival = self.clock.now()
            self.waiting.append(seq)
            self.metrics.queue_depth.set(len(self.waiting))
        self.wake.set()
        return True

    def cancel(self, seq: Sequence) -> None:
        seq.cancelled = True
        self.wake.set()

    def idle(self) -> bool:
        return not (self.waiting or self.live)

    @property
    def kv_live_bytes(self) -> int:
        return sum(s.kv_bytes for s in self.live.values())

    def invariant_errors(self) -> list[str]:
        """Between steps: live == running + parked == the backend's slots (empty when idle)."""
        live, slots = set(self.live), set(self.backend.caches)
        held = {s.seq_id for s in self.running} | ({self.parked.seq_id} if self.parked else set())
        errors = []
        if live != held:
            errors.append(f"live {sorted(live)} != running+parked {sorted(held)}")
        if live != slots:
            errors.append(f"live {sorted(live)} != backend slots {sorted(slots)}")
        return errors

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()

    # ---- the compute thread ----
    def run(self) -> None:
        while not self.stopped:
            try:
                self.step()
            except Exception as e:  # a scheduler bug: release every slot, keep serving
                self._fail(list(self.live.values()), e)
            self._update_gauges()
        for seq in [*self.waiting, *self.live.values()]:
            self._finish(seq, "cancelled")
        self._update_gauges()

    def step(self) -> None:
        self._drop_cancelled()
        c = self.config
        with self.lock:
            head = self.waiting[0] if self.waiting else None
        head_wait = self.clock.now() - head.arrival if head else 0.0
        window = c.batch_window_ms / 1000
        state = TickState(
            queued=len(self.waiting),
            running=len(self.running),
            parked=self.parked is not None,
            can_admit=self._head_admissible(),
            head_needs_chunks=head is not None and self._uncached(head) > c.prefill_chunk_size,
            decode_ticks_since_grant=self.decode_ticks_since_grant,
            grant_interval=c.prefill_grant_interval,
            admit_rows=admission_rows(c.max_batch_prefill, self._free_slots(), c.prefill_max_seqs),
            head_wait_s=head_wait,
            batch_window_s=window,
        )
        tick = decide_tick(state)
        if tick in (Tick.IDLE, Tick.WAIT):
            idle = tick is Tick.IDLE
            self.clock.wait(self.wake, 0.05 if idle else max(0.0, window - head_wait), idle)
            return
        t0, self.traced = self.clock.now(), None
        if tick is Tick.ADMIT:
            self._admit()
        elif tick is Tick.DECODE:
            self._decode()
        else:
            self._prefill_chunk(self.parked)
        if self.trace and self.traced:  # the whole tick: its forward, sampling and emitting
            self.trace.write(*self.traced, self.clock.now() - t0)

    def _uncached(self, seq: Sequence) -> int:
        """Prompt tokens left to prefill after the prompt cache's longest prefix."""
        reuse = self.cache.match(seq.prompt)[1] if self.cache is not None else 0
        return len(seq.prompt) - reuse

    def _free_slots(self) -> int:
        return self.config.parallel - len(self.running) - (self.parked is not None)

    def _head_admissible(self) -> bool:
        with self.lock:
            head = self.waiting[0] if self.waiting else None
        return (
            head is not None
            and self._free_slots() > 0
            and kv_admits(self.kv_live_bytes, self.backend.kv_bytes(head.capacity), self.kv_budget)
        )

    def _drop_cancelled(self) -> None:
        with self.lock:
            gone = [s for s in self.waiting if s.cancelled]
            for s in gone:
                self.waiting.remove(s)
        for s in [*gone, *[s for s in self.running if s.cancelled]]:
            self._finish(s, "cancelled")
        if self.parked is not None and self.parked.cancelled:
            self._finish(self.parked, "cancelled")

    def _admit(self) -> None:
        c = self.config
        free = self._free_slots()
        rows = admission_rows(c.max_batch_prefill, free, c.prefill_max_seqs)
        with self.lock:
            queued = list(self.waiting)
        if c.prefill_max_seqs and min(c.max_batch_prefill, free, len(queued)) > rows:
            self.metrics.prefill_admission_capped.inc()
        # the cohort drains by the tokens each row still has to prefill: a prompt-cache hit
        # copies its prefix and joins the batched forward with its suffix (docs/engine.md)
        lengths, live = [], self.kv_live_bytes
        for seq in queued[:rows]:
            need = self.backend.kv_bytes(seq.capacity)
            if not kv_admits(live, need, self.kv_budget):
                break
            lengths.append(self._uncached(seq))
            live += need
        if not lengths:
            return
        cohort = drain_cohort(lengths, rows, c.token_cap, c.prefill_chunk_size)
        if cohort.path == "chunked" and self.parked is not None:
            return  # one prompt parked at a time (decide_tick does not admit this head)
        self.metrics.prefill_rows_spilled.inc(cohort.spilled)
        taken = [
            s
            for s in self._take(cohort.rows)
            if self._owned([s], self._start, s) and self._owned([s], self._reuse_prefix, s)
        ]
        if not taken:
            return
        if cohort.path == "batched":
            self._prefill_batched(taken)
        else:
            self._prefill_alone(taken[0])

    def _reuse_prefix(self, seq: Sequence) -> None:
        """Copy the prompt cache's longest prefix of seq's prompt into its slot (if any)."""
        if self.cache is None:
            return
        entry, reuse = self.cache.lookup(seq.prompt)
        if entry is None:
            self.metrics.cache_misses.inc()
            return
        self.backend.copy_prefix(entry.kv, seq.seq_id, reuse)
        seq.prefilled = seq.cached_tokens = reuse
        self.metrics.cache_hits.inc()
        self.metrics.cache_tokens_reused.inc(reuse)

    def _take(self, n: int) -> list[Sequence]:
        with self.lock:
            taken = [self.waiting.popleft() for _ in range(n)]
            self.metrics.queue_depth.set(len(self.waiting))
        return taken

    def _start(self, seq: Sequence) -> None:
        seq.kv_bytes = self.backend.kv_bytes(seq.capacity)
        self.live[seq.seq_id] = seq  # first, so a failing add_sequence is still released
        self.backend.add_sequence(seq.seq_id, seq.capacity)

    def _owned(self, seqs: list[Sequence], fn, *args) -> bool:
        """Run fn; if it raises, fail exactly `seqs` (the sequences it works for)."""
        try:
            fn(*args)
            return True
        except Exception as e:
            self._fail(seqs, e)
            return False

    def _timed(self, kind: str, seqs: list[Sequence], fn, *args):
        """One forward for `seqs`; None (and those sequences failed) if it raises. args are
        (ids, token lists) or (id, tokens): the step trace records each row's tokens and the
        tokens already in its slot."""
        ids, tokens = ([args[0]], [args[1]]) if isinstance(args[0], int) else args
        offsets = [self.backend.seq_length(i) for i in ids] if self.trace else None
        t0 = self.clock.now()
        try:
            out = fn(*args)
        except Exception as e:
            self._fail(seqs, e)
            return None
        seconds = self.clock.now() - t0
        self.metrics.step_seconds.labels(kind).observe(seconds)
        if self.trace:
            self.traced = (kind, [1 if isinstance(t, int) else len(t) for t in tokens], offsets)
        return out

    def _prefill_batched(self, seqs: list[Sequence]) -> None:
        logits = self._timed(
            "prefill_batched",
            seqs,
            self.backend.prefill_batch,
            [s.seq_id for s in seqs],
            [s.remaining_prompt for s in seqs],
        )
        if logits is None:
            return
        self.metrics.prefill_forwards.labels("batched").inc()
        self.metrics.prefill_rows.labels("batched").inc(len(seqs))
        for seq, row in zip(seqs, logits, strict=True):
            seq.prefilled = len(seq.prompt)
            self._prompt_done(seq, row)

    def _prefill_alone(self, seq: Sequence) -> None:
        if len(seq.remaining_prompt) <= self.config.prefill_chunk_size:
            logits = self._timed(
                "prefill_single", [seq], self.backend.prefill, seq.seq_id, seq.remaining_prompt
            )
            if logits is None:
                return
            self.metrics.prefill_forwards.labels("single").inc()
            self.metrics.prefill_rows.labels("single").inc()
            seq.prefilled = len(seq.prompt)
            return self._prompt_done(seq, logits)
        seq.status, self.parked = Status.PREFILLING, seq
        self.metrics.prefill_rows.labels("chunked").inc()
        self._prefill_chunk(seq)

    def _prefill_chunk(self, seq: Sequence) -> None:
        chunk = seq.remaining_prompt[: self.config.prefill_chunk_size]
        logits = self._timed("prefill_chunked", [seq], self.backend.prefill, seq.seq_id, chunk)
        if logits is None:
            return
        self.metrics.prefill_forwards.labels("chunked").inc()
        self.decode_ticks_since_grant = 0
        seq.prefilled += len(chunk)
        if not seq.remaining_prompt:
            self.parked = None
            self._prompt_done(seq, logits)

    def _prompt_done(self, seq: Sequence, logits) -> None:
        seq.status = Status.RUNNING
        self.running.append(seq)
        cache_it = self.cache is not None and not self.cache.covers(seq.prompt)
        if not cache_it or self._owned([seq], self._cache_prompt, seq):
            self._sample(seq, logits)

    def _cache_prompt(self, seq: Sequence) -> None:
        kv, nbytes = self.backend.save_prefix(seq.seq_id, len(seq.prompt))
        self.cache.insert(seq.prompt, kv, nbytes)

    def _decode(self) -> None:
        seqs = list(self.running)
        logits = self._timed(
            "decode",
            seqs,
            self.backend.decode,
            [s.seq_id for s in seqs],
            [s.output[-1] for s in seqs],
        )
        if logits is None:
            return
        self.metrics.decode_steps.inc()
        self.metrics.decode_rows.inc(len(seqs))
        self.decode_ticks_since_grant += 1
        for seq, row in zip(seqs, logits, strict=True):
            self._sample(seq, row)

    def _sample(self, seq: Sequence, logits) -> None:
        try:
            event = seq.append(seq.sampler(logits), self.tokenizer)
        except Exception as e:  # this sequence's sample or stop check: fail it alone
            return self._fail([seq], e)
        if event.finish_reason:
            self._finish(seq, event.finish_reason, text=event.text)
        else:
            self._emit(seq, event)

    def _emit(self, seq: Sequence, event: Event) -> None:
        emit = self.emitters.get(seq.seq_id)
        if emit is not None:
            emit(seq, event)

    def _fail(self, seqs: list[Sequence], e: Exception) -> None:
        """An exception in work for `seqs`: they end with "error", everyone else carries on."""
        ids = [s.seq_id for s in seqs]
        log.error("step failed for sequences %s: %s: %s", ids, type(e).__name__, e, exc_info=e)
        for seq in seqs:
            self._finish(seq, "error", error=f"{type(e).__name__}: {e}")

    def _finish(self, seq: Sequence, reason: str, text: str = "", error: str | None = None):
        if seq.status is Status.FINISHED:
            return
        if self.live.pop(seq.seq_id, None) is not None:
            self.backend.remove_sequence(seq.seq_id)
        if seq in self.running:
            self.running.remove(seq)
        if self.parked is seq:
            self.parked = None
        seq.status, seq.finish_reason = Status.FINISHED, reason
        self._update_gauges()  # before its last event: a client that saw it end sees it gone
        self._emit(seq, Event(text=text, finish_reason=reason, error=error))
        self.emitters.pop(seq.seq_id, None)

    def _update_gauges(self) -> None:
        """Every gauge derived from the scheduler's own state, after every step."""
        with self.lock:
            self.metrics.queue_depth.set(len(self.waiting))
        self.metrics.running.set(len(self.live))
        self.metrics.kv_live_tokens.set(sum(s.capacity for s in self.live.values()))
        self.metrics.mask_bytes_max.set(self.backend.mask_bytes_max)
