"""A cost model file checked before any simulator starts: each arm's checkout runs its own
engine's simulator, and one from before that engine checked its prices would spin forever on a
NaN or run time backwards on a negative price. One line naming the file and the field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.files import read_capped
from harness.sim.workload import SimError

MAX_COSTS_BYTES = 16 * 2**20  # a fitted model or a saved roofline is a few KB
# figures a step's seconds are divided by: zero is no price, it is forever
HARDWARE_DIVISORS = ("memory_bandwidth", "compute_efficiency", "memory_efficiency")
HARDWARE_FIGURES = (*HARDWARE_DIVISORS, "memory_bytes", "step_overhead_s", "layer_overhead_s")


MAX_PRICE_S = 1e3  # seconds a token, a step or a layer: beyond any machine's
MAX_FIGURE = 1e21  # bytes, bytes/s, FLOP/s: a zetta of any is no machine's


def _price(value: Any, where: str, positive: bool = False, most: float = MAX_PRICE_S) -> None:
    """A finite number from 0 (or above it) to `most`: larger ones overflow a step's seconds."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0 or (positive and value == 0) or value > most:
        low = "> 0" if positive else ">= 0"
        raise SimError(f"{where} is {value!r}, not a finite number {low} and <= {most:g}")


def check_costs(path: Path) -> None:
    """A cost model JSON (fitted, or a roofline saved): every price finite and >= 0, every
    hardware figure a step is divided by > 0; SimError with one line otherwise."""
    path = Path(path)
    data = read_capped(path, MAX_COSTS_BYTES, "cost model", SimError)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SimError(f"cost model {path}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SimError(f"cost model {path}: not a JSON object")
    where = f"cost model {path}:"
    if doc.get("form") == "roofline":
        hw = doc.get("hardware")
        if not isinstance(hw, dict):
            raise SimError(f"{where} hardware missing or not an object")
        for name in HARDWARE_FIGURES:
            most = MAX_PRICE_S if name.endswith("_s") else MAX_FIGURE
            _price(hw.get(name), f"{where} hardware.{name}", name in HARDWARE_DIVISORS, most)
        peaks = hw.get("peak_flops")
        if not isinstance(peaks, dict) or not peaks:
            raise SimError(f"{where} hardware.peak_flops missing or not an object of peaks")
        for kind, peak in peaks.items():
            _price(peak, f"{where} hardware.peak_flops.{kind}", True, MAX_FIGURE)
        return
    coefficients = doc.get("coefficients")
    if not isinstance(coefficients, dict):
        raise SimError(f"{where} coefficients missing or not an object")
    for family, prices in coefficients.items():
        if not isinstance(prices, list):
            raise SimError(f"{where} coefficients.{family} is not a list of prices")
        for i, value in enumerate(prices):
            _price(value, f"{where} coefficients.{family}[{i}]")
