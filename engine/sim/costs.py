"""CostModel: seconds of one forward from its shape, fitted to the engine's own steps
(cost_file.py reads any cost model a user names, fitted or roofline).

The form is linear in a few features of a step (what a step costs grows with them, and a
least-squares fit of the real engine's step trace gives each one's price), per family:
- prefill (single or a chunk) and batched prefill, priced apart (the batched path materializes
  its [B, L, S] mask and pads): 1, the padded tokens B x L (every projection's GEMM runs over
  them), and the attention area B x L x S (S = the longest row's cached + new tokens);
- decode: 1, the rows B (each row's share of the step and its sampling), the context the rows
  attend over, sum of (cached + 1), and the rows past 16 (where the torch backend's decode
  switches from its int4 kernel to the GEMM: another price per row).
"""

import json
import math
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

FEATURES = {
    "prefill": ("step", "padded_tokens", "attention_area"),
    "prefill_batched": ("step", "padded_tokens", "attention_area"),
    "decode": ("step", "rows", "context_tokens", "rows_past_16"),
}
PREFILL_TWIN = {"prefill": "prefill_batched", "prefill_batched": "prefill"}  # one path unseen
KERNEL_ROWS = 16  # the torch backend's DENSE_ROWS: decode rows past it run the GEMM
MAX_FILE_BYTES = 16 * 2**20  # a cost model, roofline or config.json is a few KB


def read_bounded(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, counted as read (its claimed size is not trusted), or ValueError
    with one line: no FIFO or device (each would hang or never end), nothing over `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"{what} {path}: not a regular file")
            data = f.read(limit + 1)
    except OSError as e:
        raise ValueError(f"{what} {path}: {e.strerror or e}") from None
    if len(data) > limit:
        raise ValueError(f"{what} {path}: over {limit // 2**20} MiB")
    return data


def price(value: object, where: str) -> float:
    """A cost model's number: finite and >= 0 (a NaN never ends a simulation; a negative price
    runs time backwards), or ValueError naming it."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} is {value!r}, not a finite number >= 0")
    return float(value)


def family(kind: str) -> str:
    return kind if kind in ("decode", "prefill_batched") else "prefill"


def features(kind: str, tokens: list[int], offsets: list[int]) -> list[float]:
    rows = len(tokens)
    if family(kind) == "decode":
        context = float(sum(o + 1 for o in offsets))
        return [1.0, float(rows), context, float(max(0, rows - KERNEL_ROWS))]
    longest = max(tokens)
    span = max(o + t for o, t in zip(offsets, tokens, strict=True))
    return [1.0, float(rows * longest), float(rows * longest * span)]


@dataclass
class CostModel:
    name: str
    source: str  # where its numbers come from: a fit (model, machine, date) or a roofline
    model: str  # the model whose steps it prices
    coefficients: dict[str, list[float]]  # per family, in FEATURES order (seconds per unit)
    fit: dict = field(default_factory=dict)  # per family: steps, mean and p95 relative error

    def seconds(self, kind: str, tokens: list[int], offsets: list[int]) -> float:
        c = self.coefficients[family(kind)]
        return float(np.dot(c, features(kind, tokens, offsets)))

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1, allow_nan=False) + "\n")

    @classmethod
    def load(cls, path: Path) -> "CostModel":
        data = json.loads(read_bounded(Path(path), "cost model"))
        if not isinstance(data, dict) or not isinstance(data.get("coefficients"), dict):
            raise ValueError(f"cost model {path}: coefficients missing or not an object")
        for fam, names in FEATURES.items():
            prices = data["coefficients"].get(fam) or []
            if not isinstance(prices, list) or len(prices) != len(names):
                raise ValueError(
                    f"cost model {data.get('name')} has {len(prices)} {fam} prices where this "
                    f"engine's form has {len(names)} ({', '.join(names)}): fit it again"
                )
            for i, value in enumerate(prices):
                price(value, f"cost model {path}: coefficients.{fam}[{i}]")
        return cls(
            data["name"], data["source"], data["model"], data["coefficients"], data.get("fit", {})
        )


def fit(steps: list[dict], name: str, source: str, model: str) -> CostModel:
    """Non-negative least squares per family on relative error (each step weighted by 1/its
    seconds, so a 5 ms decode step counts as much as a 2 s prefill)."""
    coefficients, report = {}, {}
    for fam, names in FEATURES.items():
        rows = [s for s in steps if family(s["kind"]) == fam and s["s"] > 0]
        if len(rows) < len(names) and fam in PREFILL_TWIN:  # priced as the other prefill path
            continue
        if len(rows) < len(names):
            raise ValueError(f"{len(rows)} {fam} steps: too few to fit {len(names)} prices")
        x = np.array([features(s["kind"], s["tokens"], s["offsets"]) for s in rows])
        y = np.array([s["s"] for s in rows])
        w = 1.0 / y
        coef = _nonnegative_lstsq(x * w[:, None], y * w)
        coefficients[fam] = [float(c) for c in coef]
        report[fam] = _errors(x @ coef, y)
    for fam, twin in PREFILL_TWIN.items():
        if fam not in coefficients:
            if twin not in coefficients:
                raise ValueError("too few prefill steps of either kind to fit their prices")
            coefficients[fam], report[fam] = coefficients[twin], {"steps": 0, "priced_as": twin}
    return CostModel(name, source, model, coefficients, report)


def score(costs, steps: list[dict]) -> dict:
    """Any cost model (fitted or roofline) against measured steps: per family, the steps, the
    mean and p95 relative error and the mean signed error (> 0: the model prices too high)."""
    report = {}
    for fam in FEATURES:
        rows = [s for s in steps if family(s["kind"]) == fam and s["s"] > 0]
        if rows:
            predicted = np.array(
                [costs.seconds(s["kind"], s["tokens"], s["offsets"]) for s in rows]
            )
            report[fam] = _errors(predicted, np.array([s["s"] for s in rows]))
    return report


def _errors(predicted: np.ndarray, measured: np.ndarray) -> dict:
    signed = (predicted - measured) / measured
    return {
        "steps": len(measured),
        "mean_rel_error": float(np.abs(signed).mean()),
        "p95_rel_error": float(np.percentile(np.abs(signed), 95)),
        "mean_signed_error": float(signed.mean()),
    }


def _nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with every price >= 0: a price the fit makes negative is dropped (held
    at 0) and the rest refitted (an active set; three features need nothing more)."""
    keep = list(range(a.shape[1]))
    while True:
        coef = np.zeros(a.shape[1])
        coef[keep] = np.linalg.lstsq(a[:, keep], b, rcond=None)[0]
        if (coef >= 0).all() or len(keep) == 1:
            return np.clip(coef, 0, None)
        keep.remove(int(np.argmin(coef)))
