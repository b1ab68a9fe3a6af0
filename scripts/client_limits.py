"""Where the harness's client stops keeping up, against the server's own write stamps, and
whether its own check says so.

Starts scripts/fast_sse_server.py (a token every --itl-ms to every open stream, each write's
time kept), then for each number of client processes and each stream count fires one burst
through the harness's own load driver (and its client workers) and client check, and compares
when the client read each token (every record keeps its reads) with when the server wrote it.
With --busy N, N busy processes run beside each level (a loaded CI machine). Prints one row per
level and writes them as JSON (and a Markdown table beside it):

    python scripts/client_limits.py --procs 1 2 4 --streams 1 4 64 128 256 --itl-ms 1 \\
        --tokens 200 --repeat 2 --busy 0 1 --out results/DATE-client-limits/limits.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from statistics import median

from harness.load import event_loop
from harness.load.client_check import LagProbe, client_summary
from harness.load.frozen_gc import frozen_gc
from harness.load.load import LoadDriver, make_session
from harness.load.phase import PhaseResult
from harness.load.prompts import Prompt
from harness.load.workers import client_workers
from harness.runs.validity import judge
from harness.workload.arrival import Burst
from harness.workload.phase import Phase


def q(values: list[float], p: float) -> float | None:
    v = sorted(values)
    return round(v[min(len(v) - 1, int(p * len(v)))], 3) if v else None


async def level(url: str, streams: int, tokens: int, procs: int) -> dict:
    phase = Phase("main", arrival=Burst(), clients=streams, requests=streams, max_tokens=tokens)
    prompts = [Prompt("hello", 1) for _ in range(streams)]
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
            probe.saw(records, t0)
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
        times = [t0 + now for now, k in rec.reads for _ in range(k)]
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


def aiperf_level(url: str, streams: int, tokens: int, aiperf: str, tokenizer: str) -> dict:
    """The same burst fired by AIPerf's `profile` with one worker, its raw records' per-message
    times (CLOCK_MONOTONIC, as the server's stamps) against the server's writes."""
    folder = Path(tempfile.mkdtemp(prefix="aiperf-"))
    cmd = [aiperf, "profile", "--model", "fast", "--url", url, "--endpoint-type", "completions",
           "--streaming", "--concurrency", str(streams), "--request-count", str(streams),
           "--workers-max", "1", "--prompt-input-tokens-mean", "8", "--prompt-output-tokens-mean",
           str(tokens), "--tokenizer", tokenizer, "--export-level", "raw",
           "--output-artifact-dir", str(folder), "--ui", "none", "--no-server-metrics",
           "--no-gpu-telemetry"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    with urllib.request.urlopen(url + "/stamps") as r:
        stamps = json.load(r)
    lags = []
    for line in (folder / "profile_export_raw.jsonl").read_text().splitlines():
        record = json.loads(line)
        reads = [(m["perf_ns"] / 1e9, json.loads(m["packets"][0]["value"]))
                 for m in record.get("responses", [])
                 if m.get("packets") and m["packets"][0]["value"].startswith("{")]  # fmt: skip
        content = [(t, e["id"]) for t, e in reads if any(c.get("text") for c in e["choices"])]
        if content:
            written = stamps.get(content[0][1], [])
            lags += [(t - w) * 1e3 for (t, _), w in zip(content, written, strict=False)]
    shutil.rmtree(folder, ignore_errors=True)
    return {"tool": "aiperf", "streams": streams, "tokens": len(lags),
            "read_lag_p50_ms": q(lags, 0.5), "read_lag_p95_ms": q(lags, 0.95)}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busy_processes(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def line(row: dict) -> str:
    c, verdict = row["client"], "INVALID" if row["flagged"] else "VALID"
    return (f"busy {row['busy']} {row['procs']} proc {row['streams']:4d} streams: "
            f"{row['tok_s']:8.0f} tok/s | read lag (stamps) p50 {row['read_lag_p50_ms']} p95 "
            f"{row['read_lag_p95_ms']} ms | self-check p50 {c['read_lag_p50_ms']} ms, behind "
            f"{c['late_share']}, wake-ups p50 {c['lag_p50_ms']}, cpu {c['cpu_share']} | ITL "
            f"p50 {row['itl_p50_ms']} (server {row['server_itl_p50_ms']}) | {verdict}")  # fmt: skip


def table(rows: list[dict]) -> str:
    """The rows as Markdown: the server stamps' lag beside the client's own check and verdict."""
    out = [
        "| busy | procs | streams | tok/s | read lag p50 / p95 (stamps, ms) | self-check "
        "read lag p50 (ms) | behind | wake-up lag p50 (ms) | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["client"]
        verdict = "INVALID" if r["flagged"] else "VALID"
        out.append(f"| {r['busy']} | {r['procs']} | {r['streams']} | {r['tok_s']:.0f} | "
                   f"{r['read_lag_p50_ms']} / {r['read_lag_p95_ms']} | {c['read_lag_p50_ms']} | "
                   f"{c['late_share']:.0%} | {c['lag_p50_ms']} | {verdict} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--procs", type=int, nargs="+", default=[1])
    p.add_argument("--streams", type=int, nargs="+", default=[1, 4, 64, 128, 256])
    p.add_argument("--itl-ms", type=float, default=1.0)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--busy", type=int, nargs="+", default=[0], help="busy processes beside")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--aiperf", help="AIPerf's command: each one-process row runs beside it")
    p.add_argument("--tokenizer", help="a local Hugging Face tokenizer folder, for AIPerf")
    o = p.parse_args()
    port = free_port()
    server_py = Path(__file__).with_name("fast_sse_server.py")
    server = subprocess.Popen([sys.executable, str(server_py), "--port", str(port),
                               "--itl-ms", str(o.itl_ms)], stdout=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    rows, rivals = [], []
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/health").close()
                break
            except OSError:
                time.sleep(0.05)
        for busy in o.busy:
            hogs = busy_processes(busy)
            try:
                for procs, n in ((p, n) for p in o.procs for n in o.streams):
                    for i in range(o.repeat):
                        beside = o.aiperf and procs == 1
                        if beside and i % 2:  # AIPerf first every other time: neither goes first
                            rivals.append(aiperf_level(url, n, o.tokens, o.aiperf, o.tokenizer))
                        row = event_loop.run(level(url, n, o.tokens, procs))
                        rows.append(row | {"repeat": i + 1, "busy": busy})
                        print(line(rows[-1]), flush=True)
                        if beside and not i % 2:
                            rivals.append(aiperf_level(url, n, o.tokens, o.aiperf, o.tokenizer))
                        if beside:
                            print(f"    aiperf {n} streams: read lag p50 "
                                  f"{rivals[-1]['read_lag_p50_ms']} p95 "
                                  f"{rivals[-1]['read_lag_p95_ms']} ms", flush=True)  # fmt: skip
                            rivals[-1] |= {"repeat": i + 1, "busy": busy}
            finally:
                for hog in hogs:
                    hog.kill()
    finally:
        server.terminate()
        server.wait()
    if o.out:
        o.out.parent.mkdir(parents=True, exist_ok=True)
        facts = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                 "itl_ms": o.itl_ms, "tokens": o.tokens, "rows": rows,
                 "aiperf": rivals}  # fmt: skip
        o.out.write_text(json.dumps(facts, indent=1) + "\n")
        o.out.with_suffix(".md").write_text(table(rows))


if __name__ == "__main__":
    main()
