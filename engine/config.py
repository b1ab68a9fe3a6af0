"""EngineConfig: every serving flag, resolved as flag > ENGINE_<FLAG> env > derived default."""

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from engine.model.load import DEFAULT_MODEL

SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
}
KV_BUDGET_OFF = ("none", "off", "disabled", "0")


class ConfigError(ValueError):
    pass


def parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in SIZE_UNITS:
        raise ConfigError(f"not a byte size: {text!r} (e.g. 2147483648, 512MiB, 2GiB)")
    return int(float(m.group(1)) * SIZE_UNITS[m.group(2).lower()])


def parse_kv_budget(text: str) -> str | int | None:
    """'auto' | None (no budget) | bytes."""
    t = str(text).strip().lower()
    if t == "auto":
        return "auto"
    return None if t in KV_BUDGET_OFF else parse_bytes(t)


@dataclass(frozen=True)
class EngineConfig:
    model: str = DEFAULT_MODEL
    backend: str = "auto"
    device: str = "auto"
    dtype: str = "auto"
    host: str = "127.0.0.1"
    port: int = 8000
    parallel: int = 4
    max_batch_prefill: int = 4
    max_batch_prefill_tokens: int | None = None  # None: derived; 0: uncapped
    prefill_chunk_size: int = 512
    prefill_max_seqs: int = 0
    prefill_grant_interval: int = 16
    batch_window_ms: float = 10.0
    ctx_size: int = 0  # 0: the model's context
    max_queue_depth: int = 32
    kv_cache_budget: str | int | None = "auto"
    prompt_cache: bool = True
    prompt_cache_bytes: str | int = "auto"  # auto: engine.policy.default_prompt_cache_budget
    api_key: str | None = None
    max_body_bytes: int = 4 * 1024**2
    drain_seconds: float = 3.0
    read_timeout: float = 60.0  # seconds for a request's headers and body to arrive
    step_trace: str | None = None  # a file: every forward as a JSON line (engine/step_trace.py)
    # test-only (ENGINE_TEST_FAULT_MARKER, no flag): a request whose prompt contains this
    # string gets a sampler that raises, to test fault isolation (docs/engine.md)
    test_fault_marker: str | None = None

    def __post_init__(self):
        positive = (
            "parallel",
            "max_batch_prefill",
            "prefill_chunk_size",
            "prefill_grant_interval",
            "max_queue_depth",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1")
        for name in ("prefill_max_seqs", "ctx_size", "prompt_cache_bytes"):
            if getattr(self, name) != "auto" and getattr(self, name) < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 0")
        if self.max_batch_prefill_tokens is not None and self.max_batch_prefill_tokens < 0:
            raise ConfigError("--max-batch-prefill-tokens must be >= 0 (0 = uncapped)")
        if self.batch_window_ms < 0:
            raise ConfigError("--batch-window-ms must be >= 0")
        if self.drain_seconds < 0:
            raise ConfigError("--drain-seconds must be >= 0")
        if not self.read_timeout > 0:
            raise ConfigError("--read-timeout must be > 0")
        if self.api_key == "":
            raise ConfigError("--api-key must not be empty (leave it unset to serve without a key)")
        if not 0 < self.port < 65536:
            raise ConfigError("--port must be in 1..65535")
        if self.step_trace is not None and not Path(self.step_trace).parent.is_dir():
            raise ConfigError(f"--step-trace: no folder {Path(self.step_trace).parent}")

    def context(self, model_context: int) -> int:
        """Tokens a sequence may hold: --ctx-size, at most the model's (0: the model's)."""
        return min(self.ctx_size, model_context) if self.ctx_size else model_context

    @property
    def token_cap(self) -> int:
        """The batched-prefill cap on rows * max_len; 0 means uncapped."""
        if self.max_batch_prefill_tokens is not None:
            return self.max_batch_prefill_tokens
        return default_token_cap(self.max_batch_prefill, self.prefill_chunk_size)

    @property
    def exposed(self) -> bool:
        """Bound beyond loopback: reachable from other machines."""
        if self.host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(self.host).is_loopback
        except ValueError:  # a host name: assume reachable
            return True

    def public(self) -> dict:
        d = asdict(self)
        d["api_key"] = "set" if self.api_key else None
        if d["test_fault_marker"] is None:
            del d["test_fault_marker"]
        d["max_batch_prefill_tokens"] = self.token_cap
        return d


def default_token_cap(max_batch_prefill: int, prefill_chunk_size: int) -> int:
    """Twice the exactly-tight product: prompts that tokenize just over the chunk still batch."""
    return 2 * max_batch_prefill * prefill_chunk_size


def _flag(text: str) -> bool:
    return str(text).strip().lower() in ("1", "true", "yes", "on")


INT_FIELDS = (
    "port",
    "parallel",
    "max_batch_prefill",
    "max_batch_prefill_tokens",
    "prefill_chunk_size",
    "prefill_max_seqs",
    "prefill_grant_interval",
    "ctx_size",
    "max_queue_depth",
)
CONVERTERS = {
    **dict.fromkeys(INT_FIELDS, int),
    "prompt_cache": _flag,
    "kv_cache_budget": parse_kv_budget,
    "prompt_cache_bytes": lambda t: "auto" if str(t).strip().lower() == "auto" else parse_bytes(t),
    "max_body_bytes": parse_bytes,
    "drain_seconds": float,
    "batch_window_ms": float,
    "read_timeout": float,
}


def resolve_config(flags: Mapping[str, object], env: Mapping[str, str]) -> EngineConfig:
    """flags holds the options given on the command line; None means not given."""
    values = {}
    for f in fields(EngineConfig):
        raw = flags.get(f.name)
        if raw is None:
            raw = env.get(f"ENGINE_{f.name.upper()}") or None  # an empty variable is unset
        if raw is None:
            continue
        convert = CONVERTERS.get(f.name, str)
        try:
            values[f.name] = raw if isinstance(raw, bool) else convert(raw)
        except ValueError as e:
            raise ConfigError(f"--{f.name.replace('_', '-')}: {e}") from None
    return EngineConfig(**values)
