"""A cost model read from what a user names: a JSON file (fitted, or a roofline saved), or a
roofline from data/ named `HARDWARE:SHAPE[:WEIGHTS]`."""

from __future__ import annotations

import json
from pathlib import Path

from engine.sim.costs import CostModel, read_bounded
from engine.sim.roofline import Roofline


def load_costs(spec: str):
    """A cost model: a JSON file (fitted, or a roofline saved), or `HARDWARE:SHAPE[:WEIGHTS]`
    (a roofline from data/, e.g. h200:llama-3-8b). Raises ValueError with one line."""
    path = Path(spec)
    if not path.is_file():
        if path.exists():  # a FIFO or a device: it would hang or never end
            raise ValueError(f"cost model {spec}: not a regular file")
        if ":" not in spec:
            raise ValueError(f"cost model {spec}: no such file, nor HARDWARE:SHAPE")
        return Roofline.named(*spec.split(":", 2))
    try:
        data = json.loads(read_bounded(path, "cost model"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("form") == "roofline":
            return Roofline.from_dict(data)
        return CostModel.load(path)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        why = f"no {e}" if isinstance(e, KeyError) else str(e)
        why = why.removeprefix(f"cost model {path}: ")  # named once
        raise ValueError(f"cost model {spec}: {why}") from None
