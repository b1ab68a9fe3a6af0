"""Engine: the loaded model, its backend and the scheduler, behind what the server needs."""

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import psutil

from engine.backends import load_backend
from engine.config import EngineConfig
from engine.memory import keep_freed_memory, release_freed_memory
from engine.metrics import EngineMetrics
from engine.model.load import LoadedModel, load_model
from engine.policy import budgets
from engine.protocol import ApiError, GenerationRequest
from engine.scheduler import Scheduler
from engine.sequence import Sequence

log = logging.getLogger("engine")


class Engine:
    def __init__(self, config: EngineConfig, metrics: EngineMetrics):
        self.config, self.metrics = config, metrics
        self.ready = False
        self.load_error: str | None = None
        self.loaded: LoadedModel | None = None

    def load(self) -> None:
        t0 = time.perf_counter()
        c = self.config
        self.loaded = load_model(c.model)
        self.tokenizer = self.loaded.tokenizer
        self.model_name = self.loaded.name
        t1 = time.perf_counter()
        self.backend = load_backend(c.backend, self.loaded, device=c.device, dtype=c.dtype)
        self.load_seconds = {"model file": t1 - t0, "backend": time.perf_counter() - t1}
        self.loaded.drop_weights()  # the backend has its own
        release_freed_memory()  # what loading freed goes back; what serving frees is kept
        keep_freed_memory()
        self.ctx_size = c.context(self.loaded.args.max_position_embeddings)
        self.backend.reserve_kv(c.parallel, self.ctx_size)  # CPU: address space, not memory
        free = self.backend.available_memory()  # device memory; None: host memory
        free = free if free is not None else psutil.virtual_memory().available
        context_kv = self.backend.kv_bytes(self.ctx_size)
        self.kv_budget, self.prompt_cache_budget = budgets(
            c.kv_cache_budget, c.prompt_cache_bytes, context_kv, free
        )
        self.scheduler = Scheduler(
            self.backend, self.tokenizer, c, self.metrics, self.kv_budget, self.prompt_cache_budget
        )
        self.ready = True
        log.info(
            "engine: %s on %s/%s/%s (activations: %s, decode: %s, prefill: %s) loaded in %.1fs "
            "(%s; weights from %s); config %s; kv budget %s",
            self.model_name,
            self.backend.name,
            self.backend.device,
            self.backend.dtype,
            self.backend.activations,
            self.backend.decode_path,
            self.backend.prefill_path,
            time.perf_counter() - t0,
            ", ".join(f"{k} {v:.2f}s" for k, v in self.load_seconds.items()),
            self.backend.weights_from,
            c.public(),
            self.kv_budget,
        )

    def describe(self) -> dict:
        return {
            "model": self.model_name,
            "backend": self.backend.name,
            "device": self.backend.device,
            "dtype": self.backend.dtype,
            "runtime": self.backend.runtime,
            "activations": self.backend.activations,
            "decode_path": self.backend.decode_path,
            "prefill_path": self.backend.prefill_path,
            "weights_from": self.backend.weights_from,
            "ctx_size": self.ctx_size,
            "kv_budget_bytes": self.kv_budget,
            "prompt_cache_budget_bytes": (
                self.prompt_cache_budget if self.config.prompt_cache else None
            ),
            "config": self.config.public(),
        }

    def encode(self, req: GenerationRequest) -> list[int]:
        if req.chat:
            if not self.tokenizer.chat_template:
                raise ApiError(400, f"model {self.model_name} has no chat template", "messages")
            try:
                text = self.tokenizer.apply_chat_template(req.messages)
            except Exception as e:  # the template's raise_exception and friends
                raise ApiError(400, f"chat template: {e}", "messages") from None
            return self.tokenizer.encode(text)
        if isinstance(req.prompt, list):
            if any(not 0 <= t < self.tokenizer.vocab_size for t in req.prompt):
                raise ApiError(400, "prompt token id out of the vocabulary", "prompt")
            return list(req.prompt)
        return self.tokenizer.encode(req.prompt)

    def make_sequence(self, req: GenerationRequest) -> Sequence:
        if req.model is not None and req.model != self.model_name:
            raise ApiError(
                404,
                f"the model '{req.model}' does not exist; this server serves '{self.model_name}'",
                "model",
                code="model_not_found",
            )
        prompt = self.encode(req)
        if not prompt:
            raise ApiError(400, "the prompt is empty after tokenization", "prompt")
        if len(prompt) + req.max_tokens > self.ctx_size:
            raise ApiError(
                400,
                f"prompt ({len(prompt)} tokens) + max_tokens ({req.max_tokens}) "
                f"exceeds the context ({self.ctx_size})",
                "max_tokens",
                code="context_length_exceeded",
            )
        need = self.backend.kv_bytes(len(prompt) + req.max_tokens)
        if self.kv_budget is not None and need > self.kv_budget:
            raise ApiError(
                400,
                f"the request needs {need} bytes of KV cache, more than the "
                f"budget of {self.kv_budget}",
                "max_tokens",
            )
        return Sequence(
            prompt=prompt,
            max_tokens=req.max_tokens,
            sampling=req.sampling,
            stop=req.stop,
            ignore_eos=req.ignore_eos,
        )

    def load_and_run(self, loaded: Callable[[BaseException | None], None]) -> None:
        """The compute thread's whole life: load the model, say so, then run the scheduler on
        this same thread. Small OpenMP regions (the int4 kernels) ran 2x slower on a thread
        other than the one that loaded the model: docs/performance.md."""
        try:
            self.load()
        except BaseException as e:  # told to the server, which stops
            loaded(e)
            return
        self.scheduler.thread = threading.current_thread()
        loaded(None)
        self.scheduler.run()

    async def drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.scheduler.idle() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.scheduler.stop()
        await asyncio.to_thread(self.scheduler.thread.join, 10)
