"""The GPU-sized suites (gpu-chat, gpu-long-prompt) gated end to end at their stream counts, with
their dated output: the scripted GPU-like server of tests/helpers/gpu_repo.py (an exclusive
device lock, a START-second start, device memory as a Prometheus gauge, 40 ms to the first
token, ITL ms a token) in a throwaway repository, 9 rounds each: an A/A per suite, and for
gpu-chat a head whose tokens are 10% slower (twice the suite's 5%). What each printed, its
exit code, wall time, the client self-check of every run and the noise per round go to
OUT/README.md and OUT/summary.json, with each A/B's report.

    python scripts/gpu_suites_demo.py [OUT] [--start S] [--itl MS]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT), str(ROOT / "scripts")]

from gpu_like_demo import ab, write_results  # noqa: E402

from helpers.gpu_repo import GpuRepo  # noqa: E402

ROUNDS = ("--rounds", "9", "--max-rounds", "9")
NOISE = ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "tpot_ms", "tok_s", "peak_device_bytes")


def checks(work: Path, name: str) -> dict:
    """Every measured run's client self-check, its validity, and the sd of ln(head/base) per
    round of each gated metric (the noise the tolerances are set against)."""
    (path,) = [p for p in (work / name).glob("*.json") if not p.name.endswith(".summary.json")]
    result = json.loads(path.read_text())
    lags, valid, ratios = [], [], {k: [] for k in NOISE}
    for rnd in result["rounds"]:
        for arm in ("base", "head"):
            run = rnd[arm]
            valid.append(run["valid"])
            lags += [p["client"]["read_lag_p50_ms"] for p in run["phases"].values()]
        for k in NOISE:
            b, h = rnd["base"]["summary"].get(k), rnd["head"]["summary"].get(k)
            if b and h:
                ratios[k].append(math.log(h / b))
    return {
        "runs_valid": f"{sum(valid)} of {len(valid)}",
        "read_lag_p50_ms_max": max(lags),
        "noise_per_round_pct": {
            k: round(100 * statistics.stdev(v), 2) for k, v in ratios.items() if len(v) > 2
        },
        "startup_s": sorted(
            {
                round(r[a]["startup_s"], 1)
                for r in result["rounds"]
                for a in ("base", "head")
                if r[a].get("startup_s")
            }
        ),  # fmt: skip
    }


def readme(summary: dict) -> str:
    lines = [
        f"# The GPU-sized suites at their stream counts ({summary['date']})",
        "",
        f"Machine: {summary['machine']}; no GPU: the scripted server of tests/helpers/gpu_repo.py "
        f"stands in (exclusive device lock, {summary['start_s']:g} s start, device memory as a "
        f"/metrics gauge, 40 ms to the first token, {summary['itl_ms']:g} ms a token, no batching "
        "model: each stream is served on its own). Made by `python scripts/gpu_suites_demo.py`; "
        "every A/B's report is beside this file.",
        "",
        "| scenario | command | exit | wall (9 rounds) | verdict | runs VALID | client read lag "
        "p50, worst run | noise per round (sd of ln head/base, %) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["runs"]:
        cmd = r["command"].replace("|", "\\|")
        noise = ", ".join(f"{k} {v}" for k, v in r["noise_per_round_pct"].items())
        named = "; ".join(r["named"] + r["invalid"][:1]).replace("|", "\\|")
        lines.append(
            f"| {r['name']} | `{cmd}` | {r['exit_code']} | {r['wall_s'] / 60:.1f} min "
            f"| {named or r['verdict']} | {r['runs_valid']} "
            f"| {r['read_lag_p50_ms_max']:.2f} ms | {noise} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", nargs="?", default=f"results/{date.today()}-gpu-suites")
    p.add_argument("--start", type=float, default=10.0, help="seconds each server takes to start")
    p.add_argument("--itl", type=float, default=10.0, help="ms between tokens")
    p.add_argument("--readme-only", action="store_true", help="rewrite README.md from summary.json")
    o = p.parse_args()
    out = ROOT / o.out
    if o.readme_only:
        (out / "README.md").write_text(readme(json.loads((out / "summary.json").read_text())))
        return
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-suites-"))
    rows = []

    def scenario(name: str, suite: str, head: dict | None) -> None:
        folder = work / name
        folder.mkdir()
        repo = GpuRepo(folder, int(o.start * 1000), itl_ms=f"{o.itl:g}")
        base = repo.git("rev-parse", "HEAD")
        if head is not None:
            repo.commit(head.pop("subject"), **head)
        row = ab(repo, folder, name, "--base", base, "--head", "HEAD", *ROUNDS, suite=suite)
        row |= checks(folder, name)
        rows.append(row)

    scenario("gpu-chat-aa", "gpu-chat", {"subject": "docs: say what the server is"})
    scenario("gpu-chat-itl-10pct", "gpu-chat",
             {"subject": "every token 10% later", "itl_ms": f"{o.itl * 1.10:g}"})  # fmt: skip
    scenario("gpu-long-prompt-aa", "gpu-long-prompt", {"subject": "docs: say what it is"})
    write_results(out, rows, readme, start_s=o.start, itl_ms=o.itl)


if __name__ == "__main__":
    main()
