"""Device groups, end to end, with their dated output: a throwaway repository whose scripted
server (tests/helpers/gpu_repo.py) holds every device of its group exclusively and runs at the
pace of its slowest, on four scripted devices of which device 3 is 20% slower. Each arm holds
two devices. A/As with the groups rotating between rounds (`--devices 0+1,2+3`), then the same
A/A pinned (each arm's CUDA_VISIBLE_DEVICES fixed, started together): what each printed, its
exit code and wall time go to OUT/README.md and OUT/summary.json, with each A/B's report.

    python scripts/device_groups_demo.py [OUT] [--aa N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT), str(ROOT / "scripts")]

from gpu_like_demo import ab, write_results  # noqa: E402

from helpers.gpu_repo import GROUP_SERVE, GpuRepo  # noqa: E402

SPEEDS = "1.0,1.0,1.0,1.2"  # device 3 is 20% slower, and so is the group that holds it
ROUNDS = ("--rounds", "8", "--max-rounds", "8")


def readme(summary: dict) -> str:
    lines = [
        f"# Device groups: an A/A on four devices, one slower ({summary['date']})",
        "",
        f"Machine: {summary['machine']}; no GPU: the scripted server of tests/helpers/gpu_repo.py "
        f"stands in (an exclusive lock on every device of its group, {summary['start_s']:g} s "
        f"start, device speeds {SPEEDS}: a group runs at its slowest device's pace). Made by "
        "`python scripts/device_groups_demo.py`; every A/B's report is beside this file.",
        "",
        "| scenario | command | exit | wall | verdict | named | TPOT head/base per round |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in summary["runs"]:
        cmd = r["command"].replace("|", "\\|")
        named = "; ".join(r["named"] + r["invalid"][:1]).replace("|", "\\|")
        lines.append(
            f"| {r['name']} | `{cmd}` | {r['exit_code']} | {r['wall_s']:.0f} s "
            f"| {r['verdict']} | {named} | {r['tpot_ratio_per_round']} |"
        )
    rotated = [r for r in summary["runs"] if r["name"].startswith("aa-rotated")]
    passed = sum(r["verdict"] == "PASS" for r in rotated)
    lines += [
        "",
        f"Rotated: {passed} of {len(rotated)} A/As PASS; the groups each arm held, rounds 1-2: "
        f"{rotated[0]['devices'][:2] if rotated else '-'}. Pinned: "
        + ", ".join(
            f"{r['verdict']} (exit {r['exit_code']})"
            for r in summary["runs"]
            if r["name"].startswith("aa-pinned")
        )  # fmt: skip
        + ": head always held the group with the slower device.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", nargs="?", default=f"results/{date.today()}-device-groups")
    p.add_argument("--aa", type=int, default=5, help="rotated A/As")
    p.add_argument("--start", type=float, default=2.0, help="seconds each server takes to start")
    o = p.parse_args()
    out = ROOT / o.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="device-groups-"))
    rows = []

    def scenario(name: str, *args: str) -> None:
        folder = work / name
        folder.mkdir()
        repo = GpuRepo(folder, int(o.start * 1000), serve=GROUP_SERVE, device_speeds=SPEEDS)
        row = ab(repo, folder, name, "--base", "HEAD", "--head", "HEAD", *ROUNDS, *args)
        rows.append(row)

    for i in range(o.aa):
        scenario(f"aa-rotated-{i + 1}", "--devices", "0+1,2+3")
    scenario("aa-pinned", "--base-env", "CUDA_VISIBLE_DEVICES=0,1", "--head-env",
             "CUDA_VISIBLE_DEVICES=2,3", "--residency", "together")  # fmt: skip
    write_results(out, rows, readme, start_s=o.start)


if __name__ == "__main__":
    main()
