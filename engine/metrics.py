"""EngineMetrics: the Prometheus series that prove which scheduling path ran (docs/metrics.md)."""

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class EngineMetrics:
    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.prefill_forwards = Counter(
            "engine_prefill_forwards", "Prefill forwards by path", ["path"], registry=r
        )
        self.prefill_rows = Counter(
            "engine_prefill_rows", "Sequences prefilled by path", ["path"], registry=r
        )
        self.prefill_rows_spilled = Counter(
            "engine_prefill_rows_spilled",
            "Rows left queued by the batched-prefill token cap",
            registry=r,
        )
        self.prefill_admission_capped = Counter(
            "engine_prefill_admission_capped",
            "Ticks on which --prefill-max-seqs held waiting sequences back",
            registry=r,
        )
        self.decode_steps = Counter("engine_decode_steps", "Batched decode forwards", registry=r)
        self.decode_rows = Counter("engine_decode_rows", "Sequence-steps decoded", registry=r)
        self.cache_hits = Counter("engine_prompt_cache_hits", "Prompt-cache hits", registry=r)
        self.cache_misses = Counter("engine_prompt_cache_misses", "Prompt-cache misses", registry=r)
        self.cache_tokens_reused = Counter(
            "engine_prompt_cache_tokens_reused",
            "Prompt tokens whose prefill was skipped",
            registry=r,
        )
        self.requests = Counter("engine_requests", "Requests by outcome", ["outcome"], registry=r)
        self.queue_depth = Gauge("engine_queue_depth", "Requests waiting for admission", registry=r)
        self.running = Gauge("engine_running_sequences", "Sequences holding a slot", registry=r)
        self.kv_live_tokens = Gauge(
            "engine_kv_live_tokens", "KV tokens reserved by live sequences", registry=r
        )
        self.mask_bytes_max = Gauge(
            "engine_prefill_mask_bytes_max",
            "Largest prefill attention mask materialized (bytes)",
            registry=r,
        )
        self.step_seconds = Histogram(
            "engine_step_seconds",
            "Step durations by kind",
            ["kind"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        for path in ("batched", "chunked", "single"):
            self.prefill_forwards.labels(path)
            self.prefill_rows.labels(path)
        for outcome in ("ok", "client_error", "rejected", "cancelled", "error"):
            self.requests.labels(outcome)

    def render(self) -> bytes:
        return generate_latest(self.registry)
