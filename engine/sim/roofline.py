"""Roofline: a step's seconds on named hardware from its public figures and a model's shape from
its config alone (no weights), for what-if questions about machines this one is not.

A forward costs the larger of its compute time (FLOPs over peak x compute efficiency) and its
memory time (bytes over bandwidth x memory efficiency), plus a fixed overhead per forward and
per layer (an eager engine launches each layer's kernels). FLOPs: 2 per weight per computed
token (a padded batch computes its padding), the attention's scores and values (4 x heads x
head_dim per query-key pair), the LM head for each row's last token. Bytes: every weight once,
each row's K/V context, and a batched prefill's float32 [B, L, S] mask, which every layer reads.
Hardware figures and their sources: data/hardware.toml; shapes: data/shapes/*.json (Hugging Face
config.json fields) or any config.json path.
"""

import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.model.args import ModelArgs
from engine.sim.costs import price, read_bounded

DATA = Path(__file__).parent / "data"
BYTES_PER_WEIGHT = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0625,
                    "int4": 0.5625}  # fmt: skip  # int8/int4: a 16-bit scale per group of 32/64
KV_ELEMENT_BYTES = 2  # bfloat16/float16 K and V
MASK_ELEMENT_BYTES = 4  # the batched path's float32 mask
HARDWARE_FIGURES = ("memory_bandwidth", "memory_bytes", "compute_efficiency", "memory_efficiency",
                    "step_overhead_s", "layer_overhead_s")  # fmt: skip
DIVISORS = ("memory_bandwidth", "compute_efficiency", "memory_efficiency")


@dataclass(frozen=True)
class Hardware:
    key: str
    name: str
    activations: str
    weights: str
    peak_flops: dict[str, float]
    memory_bandwidth: float
    memory_bytes: float
    compute_efficiency: float
    memory_efficiency: float
    step_overhead_s: float
    layer_overhead_s: float
    sources: dict[str, str] = field(default_factory=dict)


def hardware(key: str) -> Hardware:
    table = tomllib.loads((DATA / "hardware.toml").read_text())
    if key not in table:
        raise ValueError(f"no hardware {key!r}: known are {', '.join(sorted(table))}")
    return Hardware(key=key, **table[key])


def shape(name_or_path: str) -> tuple[str, str, ModelArgs]:
    """(name, source, args) of a shipped shape or a config.json path."""
    path = DATA / "shapes" / f"{name_or_path}.json"
    if not path.is_file():
        path = Path(name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (DATA / "shapes").glob("*.json")))
        raise ValueError(f"no model shape {name_or_path!r}: known are {known}, or a config.json")
    try:
        cfg = json.loads(read_bounded(path, "model shape"))
        args = ModelArgs.from_hf_config(cfg)
    except (ValueError, KeyError, TypeError, AttributeError, AssertionError) as e:
        raise ValueError(f"model shape {path}: not a Llama config.json ({e})") from None
    return cfg.get("_name", path.stem), cfg.get("_source", str(path)), args


@dataclass
class Roofline:
    name: str
    source: str
    model: str  # the shape's name
    hardware: Hardware
    args: ModelArgs
    weights: str
    fit: dict = field(default_factory=dict)  # none: its figures are public, not fitted
    form: str = "roofline"

    @classmethod
    def named(cls, hw_key: str, shape_name: str, weights: str | None = None) -> "Roofline":
        hw = hardware(hw_key)
        name, source, args = shape(shape_name)
        weights = weights or hw.weights
        if weights not in BYTES_PER_WEIGHT:
            raise ValueError(f"weights {weights!r}: one of {', '.join(BYTES_PER_WEIGHT)}")
        if hw.activations not in hw.peak_flops:
            raise ValueError(f"hardware {hw_key} has no {hw.activations} peak")
        label = f"roofline {hw_key} {name} {weights}"
        return cls(label, f"{hw.name} (data/hardware.toml); {name}: {source}", name, hw, args,
                   weights)  # fmt: skip

    @property
    def layer_params(self) -> int:
        a, d = self.args, self.args.head_dim
        attention = 2 * a.hidden_size * a.num_attention_heads * d
        attention += 2 * a.hidden_size * a.num_key_value_heads * d
        return a.num_hidden_layers * (attention + 3 * a.hidden_size * a.intermediate_size)

    @property
    def weight_bytes(self) -> float:
        head = self.args.vocab_size * self.args.hidden_size
        return (self.layer_params + head) * BYTES_PER_WEIGHT[self.weights]

    @property
    def free_memory(self) -> float:
        """What the KV budget's `auto` sees: the hardware's memory less the weights."""
        return self.hardware.memory_bytes - self.weight_bytes

    def seconds(self, kind: str, tokens: list[int], offsets: list[int]) -> float:
        a, hw, rows = self.args, self.hardware, len(tokens)
        spans = [o + t for o, t in zip(offsets, tokens, strict=True)]
        mask = 0.0
        if kind == "prefill_batched":  # padded to the longest row, masked to the longest span
            longest, span = max(tokens), max(spans)
            computed, pairs, context = rows * longest, rows * longest * span, rows * span
            mask = MASK_ELEMENT_BYTES * pairs * (1 + a.num_hidden_layers)  # written, then read
        else:
            computed, context = sum(tokens), sum(spans)
            pairs = sum(t * s for t, s in zip(tokens, spans, strict=True))
        flops = 2 * self.layer_params * computed
        flops += 4 * a.num_hidden_layers * a.num_attention_heads * a.head_dim * pairs
        flops += 2 * a.hidden_size * a.vocab_size * rows
        kv = a.kv_bytes_per_token * KV_ELEMENT_BYTES * context
        moved = self.weight_bytes + kv + mask
        compute = flops / (hw.peak_flops[hw.activations] * hw.compute_efficiency)
        memory = moved / (hw.memory_bandwidth * hw.memory_efficiency)
        overhead = hw.step_overhead_s + a.num_hidden_layers * hw.layer_overhead_s
        return max(compute, memory) + overhead

    def save(self, path: Path) -> None:
        data = asdict(self)
        data["args"] = self.args.to_hf_config()
        Path(path).write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")

    @classmethod
    def from_dict(cls, data: dict) -> "Roofline":
        hw = Hardware(**data["hardware"])
        for name in HARDWARE_FIGURES:
            if price(getattr(hw, name), f"hardware.{name}") == 0 and name in DIVISORS:
                raise ValueError(f"hardware.{name} is 0: a step would take forever")
        if not isinstance(hw.peak_flops, dict) or not hw.peak_flops:
            raise ValueError("hardware.peak_flops: not an object of peaks")
        for kind, peak in hw.peak_flops.items():
            if price(peak, f"hardware.peak_flops.{kind}") == 0:
                raise ValueError(f"hardware.peak_flops.{kind} is 0: a step would take forever")
        args = ModelArgs.from_hf_config(data["args"])
        return cls(data["name"], data["source"], data["model"], hw, args, data["weights"])
