"""The gate on a server that behaves like vLLM on a GPU, end to end, with its dated output:
a throwaway repository (tests/helpers/gpu_repo.py) whose scripted server holds its device
exclusively, starts in START seconds, says its device memory as a Prometheus gauge and is 20%
slower on device 1. Each scenario is `harness ab` as a user runs it; what it printed, its exit
code and wall time go to OUT/README.md and OUT/summary.json, with each A/B's Markdown report.

    python scripts/gpu_like_demo.py [OUT] [--start S] [--aa N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from helpers.gpu_repo import GpuRepo  # noqa: E402


def cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    model, cpus = fields.get("Model name", "?").strip(), fields.get("CPU(s)", "?").strip()
    return f"{model}, {cpus} CPUs, flags: {' '.join(wanted)}"


def ab(repo: GpuRepo, work: Path, name: str, *args: str, suite: str = "suite.toml") -> dict:
    out = work / name
    cmd = ["harness", "ab", "--quiet", "--suite", suite, *args]
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "harness", *cmd[1:], "--out-dir", str(out)],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env=env(work),
    )
    wall = time.monotonic() - t0
    saved = [p for p in out.glob("*.json") if not p.name.endswith(".summary.json")]
    result = json.loads(saved[0].read_text()) if saved else {}
    lines = [line.strip() for line in r.stdout.splitlines()]
    verdict = [line for line in lines if line.lower().startswith("verdict:")]
    named = [line for line in lines if line.startswith(("REGRESSION", "IMPROVEMENT", "INCONC"))]
    rounds = result.get("rounds", [])
    ratios = [
        round(x["head"]["summary"]["tpot_ms"] / x["base"]["summary"]["tpot_ms"], 3)
        for x in rounds
        if x.get("head") and x.get("base") and x["base"]["summary"].get("tpot_ms")
    ]
    row = {
        "name": name,
        "command": " ".join(cmd),
        "exit_code": r.returncode,
        "wall_s": round(wall, 1),
        "verdict": (result.get("comparison") or {}).get("verdict"),
        "verdict_line": verdict[0] if verdict else "",
        "named": named,
        "warnings": (result.get("comparison") or {}).get("warnings", []),
        "invalid": (result.get("comparison") or {}).get("invalid", []),
        "rounds": len(rounds),
        "devices": [x.get("devices") for x in rounds],
        "tpot_ratio_per_round": ratios,
        "reports": [str(p) for p in out.glob("*.md")],
        "stdout_tail": r.stdout[-1500:],
    }
    print(f"{name}: exit {r.returncode} in {row['wall_s']} s: {row['verdict_line']}", flush=True)
    return row


def write_results(out: Path, rows: list[dict], readme: Callable[[dict], str], **facts) -> None:
    """Each A/B's report beside OUT/summary.json (the date, this machine, `facts`, the rows)
    and OUT/README.md (`readme` of the summary)."""
    for row in rows:
        for report in row.pop("reports"):
            shutil.copy2(report, out / f"{row['name']}.md")
    summary = {"date": str(date.today()), "machine": cpu(), **facts, "runs": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(readme(summary))
    print(f"wrote {out}/summary.json")


def env(work: Path) -> dict:
    import os

    return dict(os.environ, SERVEGATE_CACHE=str(work / "cache"))


def readme(summary: dict) -> str:
    """The table a reader looks at: one row per scenario, its exit code and what it named."""
    lines = [
        f"# The gate on a GPU-like server ({summary['date']})",
        "",
        f"Machine: {summary['machine']}; no GPU: the scripted server of tests/helpers/gpu_repo.py "
        f"stands in (exclusive device lock, {summary['start_s']:g} s start except where the "
        "table says, device memory as a /metrics gauge, device 1 20% slower). Made by "
        "`python scripts/gpu_like_demo.py`; every A/B's report is beside this file.",
        "",
        "| scenario | start | command | exit | wall | verdict | named |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in summary["runs"]:
        cmd = r["command"].replace("|", "\\|")
        said = r["named"] + r["invalid"][:1] + r["warnings"][:1] * (r["verdict"] == "INCONCLUSIVE")
        named = "; ".join(said).replace("|", "\\|")
        lines.append(
            f"| {r['name']} | {r['start_s']:g} s | `{cmd}` | {r['exit_code']} "
            f"| {r['wall_s']:.0f} s | {r['verdict']} | {named} |"
        )
    lines += ["", "TPOT head/base per round (rotation and its absence):", ""]
    for r in summary["runs"]:
        if r["name"].startswith("aa-"):
            lines.append(f"- {r['name']}: {r['tpot_ratio_per_round']} on {r['devices'][:2]}")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", nargs="?", default=f"results/{date.today()}-gpu-like")
    p.add_argument("--start", type=float, default=20.0, help="seconds each server takes to start")
    p.add_argument("--aa", type=int, default=10, help="A/As on two devices of different speed")
    p.add_argument("--readme-only", action="store_true", help="rewrite README.md from summary.json")
    o = p.parse_args()
    out = ROOT / o.out
    if o.readme_only:
        (out / "README.md").write_text(readme(json.loads((out / "summary.json").read_text())))
        return
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-like-"))
    rows = []

    def scenario(name: str, start_s: float, head: dict | None, *args: str) -> dict:
        folder = work / name
        folder.mkdir()
        repo = GpuRepo(folder, start_ms=int(start_s * 1000))
        base = repo.git("rev-parse", "HEAD")
        if head is not None:
            repo.commit(head.pop("subject"), **head)
        row = ab(repo, folder, name, "--base", base, "--head", "HEAD", *args)
        row["start_s"] = start_s
        rows.append(row)
        return row

    long = ("--rounds", "3", "--max-rounds", "5")
    scenario("harmless", o.start, {"subject": "docs: say what the server is"}, *long)
    scenario(
        "device-memory",
        o.start,
        {"subject": "a KV pool 30% larger", "device_bytes": "1.3e9"},
        *long,
    )
    scenario("trade-off", o.start, {"subject": "first token sooner, every token later",
                                    "ttft_ms": "24", "itl_ms": "26"}, *long)  # fmt: skip
    scenario("together-one-device", o.start, {"subject": "docs"}, *long, "--residency", "together")
    for i in range(o.aa):
        scenario(
            f"aa-two-devices-{i + 1}",
            2.0,
            None,
            "--devices",
            "0,1",
            "--rounds",
            "8",
            "--max-rounds",
            "8",
        )
    scenario("aa-no-rotation", 2.0, None, "--head-env", "CUDA_VISIBLE_DEVICES=1", "--rounds", "4",
             "--max-rounds", "4")  # fmt: skip
    factors = f"{work / 'factors'}:1.0,1.3"
    scenario("budget-3-minutes", o.start, {"subject": "noisy first token", "ttft_factors": factors},
             "--rounds", "3", "--max-rounds", "9", "--budget-minutes", "3")  # fmt: skip

    write_results(out, rows, readme, start_s=o.start)


if __name__ == "__main__":
    main()
