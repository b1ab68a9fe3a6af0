"""A request trace to replay: JSON lines in the Mooncake format (`timestamp` in ms,
`input_length`, `output_length`, `hash_ids`: requests that share a hash id share that block of
their prompt, BLOCK_TOKENS tokens each), read and checked whole before anything runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from harness.files import read_capped

BLOCK_TOKENS = 512  # Mooncake's block size: hash id k covers prompt tokens [512 k, 512 (k+1))
MAX_TRACE_BYTES = 64 * 2**20


class TraceError(ValueError):
    """A trace that cannot be replayed; the message is one line naming the file and line."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Trace:
    path: str
    digest: str  # sha256 of the file's bytes: the fingerprint's hold on the trace
    requests: tuple[TraceRequest, ...]

    def offsets(self, time_scale: float) -> list[float]:
        """Each request's due time in seconds after the first, times `time_scale`."""
        t0 = self.requests[0].timestamp_ms
        return [(r.timestamp_ms - t0) / 1e3 * time_scale for r in self.requests]


def _int(row: dict, key: str, where: str, low: int) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise TraceError(f"{where}: {key} must be an integer >= {low}, got {value!r}")
    return value


def read_trace(path: Path) -> Trace:
    path = Path(path)
    data = read_capped(path, MAX_TRACE_BYTES, "trace", TraceError)
    rows, last = [], None
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except ValueError:
            raise TraceError(f"{where}: not a JSON object") from None
        if not isinstance(row, dict):
            raise TraceError(f"{where}: not a JSON object")
        ts = row.get("timestamp")
        if isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
            raise TraceError(f"{where}: timestamp (ms) must be a number >= 0, got {ts!r}")
        if last is not None and ts < last:
            raise TraceError(f"{where}: timestamps must not go back ({ts} after {last})")
        hash_ids = row.get("hash_ids", [])
        if not isinstance(hash_ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) for h in hash_ids
        ):
            raise TraceError(f"{where}: hash_ids must be a list of integers")
        rows.append(
            TraceRequest(
                float(ts),
                _int(row, "input_length", where, 1),
                _int(row, "output_length", where, 1),
                tuple(hash_ids),
            )
        )
        last = ts
    if not rows:
        raise TraceError(f"{path}: no requests")
    return Trace(str(path), hashlib.sha256(data).hexdigest()[:16], tuple(rows))
