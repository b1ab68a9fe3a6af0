"""Where the harness's client stops keeping up, against the server's own write stamps.

Starts scripts/fast_sse_server.py (a token every --itl-ms to every open stream, each write's
time kept), then for each number of client processes and each stream count fires one burst
through the harness's own load driver (and its client workers) and client check, and compares
when the client read each stream's first and last token with when the server wrote them (with
one process, every token's read is also kept). Prints one row per level and writes them as JSON:

    python scripts/client_limits.py --procs 1 2 --streams 1 4 64 128 256 --itl-ms 1 \\
        --tokens 200 --out results/DATE-client-limits/limits.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from statistics import median

from harness.load import stream as stream_module
from harness.load.client_check import LagProbe, client_summary
from harness.load.frozen_gc import frozen_gc
from harness.load.load import LoadDriver, make_session
from harness.load.phase import PhaseResult
from harness.load.prompts import Prompt
from harness.load.workers import client_workers
from harness.runs.validity import judge
from harness.workload.suite import Phase

READS: dict[int, list[tuple[float, int]]] = {}  # id(record) -> [(read time, its tokens)]


def instrument() -> None:
    """Keep every read's time and token count (the check itself keeps only their sums)."""
    original = stream_module.Stream.read

    def read(self, now, lines):
        before = self.rec.client_tokens
        original(self, now, lines)
        if self.rec.client_tokens > before:
            READS.setdefault(id(self.rec), []).append((now, self.rec.client_tokens - before))

    stream_module.Stream.read = read


def q(values: list[float], p: float) -> float | None:
    v = sorted(values)
    return round(v[min(len(v) - 1, int(p * len(v)))], 3) if v else None


async def level(url: str, streams: int, tokens: int, procs: int) -> dict:
    phase = Phase("main", arrival="burst", clients=streams, requests=streams, max_tokens=tokens)
    prompts = [Prompt("hello", 1) for _ in range(streams)]
    READS.clear()
    async with make_session(streams) as session:
        t0 = time.perf_counter()
        with client_workers(procs, url, "fast", t0, streams) as workers:
            if workers:
                await asyncio.sleep(1.0)  # the workers' imports, before the clock matters
            driver = LoadDriver(session, url, "fast", t0, workers=workers)
            probe = LagProbe()
            with frozen_gc():
                start = driver.now()
                probe.start()
                records = await driver.run_phase(phase, prompts)
                probe.stop()
            wall = driver.now() - start
            others = workers.take_probes() if workers else []
    with urllib.request.urlopen(url + "/stamps") as r:
        stamps = json.load(r)
    result = PhaseResult("main", records, (start, start + wall))
    result.client = client_summary(others or [probe], sum(r.client_tokens for r in records),
                                   sum(r.coalesced for r in records), procs)  # fmt: skip
    valid, reasons = judge([result], None, None)
    ends, lags, per_event_gaps, server_gaps = [], [], [], []
    for rec in records:
        written = stamps.get(rec.response_id or "", [])
        server_gaps += [(b - a) * 1e3 for a, b in zip(written, written[1:], strict=False)]
        if written and rec.ok:  # the first token's read and the [DONE] read: exact either way
            ends += [(t0 + rec.first_token - written[0]) * 1e3, (t0 + rec.end - written[-1]) * 1e3]
        times = [t0 + now for now, k in READS.get(id(rec), []) for _ in range(k)]
        lags += [(t - w) * 1e3 for t, w in zip(times, written, strict=False)]
        per_event_gaps += [(b - a) * 1e3 for a, b in zip(times, times[1:], strict=False)]
    itl = [g * 1e3 for r in records if r.ok for g in r.itl_s]
    ok_tokens = sum(r.client_tokens for r in records if r.ok)
    return {
        "procs": procs,
        "streams": streams,
        "ok": sum(r.ok for r in records),
        "tok_s": round(ok_tokens / wall, 1),
        "first_last_lag_p50_ms": q(ends, 0.5),
        "first_last_lag_p95_ms": q(ends, 0.95),
        "read_lag_p50_ms": q(lags, 0.5),
        "read_lag_p95_ms": q(lags, 0.95),
        "itl_p50_ms": round(median(itl), 3) if itl else None,
        "server_itl_p50_ms": round(median(server_gaps), 3) if server_gaps else None,
        "itl_p50_per_event_ms": round(median(per_event_gaps), 3) if per_event_gaps else None,
        "client": result.client,
        "flagged": not valid,
        "reasons": reasons,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--procs", type=int, nargs="+", default=[1])
    p.add_argument("--streams", type=int, nargs="+", default=[1, 4, 64, 128, 256])
    p.add_argument("--itl-ms", type=float, default=1.0)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    o = p.parse_args()
    instrument()
    port = free_port()
    server_py = Path(__file__).with_name("fast_sse_server.py")
    server = subprocess.Popen([sys.executable, str(server_py), "--port", str(port),
                               "--itl-ms", str(o.itl_ms)], stdout=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/health").close()
                break
            except OSError:
                time.sleep(0.05)
        rows = []
        for procs, n in ((p, n) for p in o.procs for n in o.streams):
            for i in range(o.repeat):
                row = asyncio.run(level(url, n, o.tokens, procs)) | {"repeat": i + 1}
                rows.append(row)
                c = row["client"]
                line = (f"{procs} proc {n:4d} streams: {row['tok_s']:8.0f} tok/s lag first/last "
                        f"p50 {row['first_last_lag_p50_ms']} p95 {row['first_last_lag_p95_ms']}"
                        f" ms, every read p50 {row['read_lag_p50_ms']} p95 "
                        f"{row['read_lag_p95_ms']} | loop lag p50 {c['lag_p50_ms']} "
                        f"p95 {c['lag_p95_ms']} ms, cpu {c['cpu_share']}, coalesced "
                        f"{c['coalesced_share']} | ITL p50 {row['itl_p50_ms']} (server "
                        f"{row['server_itl_p50_ms']}, per event "
                        f"{row['itl_p50_per_event_ms']}) | flagged {row['flagged']}")  # fmt: skip
                print(line, flush=True)
    finally:
        server.terminate()
        server.wait()
    if o.out:
        o.out.parent.mkdir(parents=True, exist_ok=True)
        facts = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                 "itl_ms": o.itl_ms, "tokens": o.tokens, "rows": rows}  # fmt: skip
        o.out.write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main()
