"""Cold starts of server commands side by side: launch each in turn, time launch to a 200
from its ready path, read its VmHWM and VmRSS at that moment (Linux), stop it; N rounds,
the commands in rotating order. Prints one Markdown table (median and range per command).

    python scripts/cold_start.py --rounds 5 \
        --cmd "llama=llama-server -m M.gguf --port {port} -np 4 -t 2 -c 8192" \
        --cmd "engine=.venv/bin/engine serve --port {port}"
"""

import argparse
import shlex
import socket
import statistics
import subprocess
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as f:
        return {
            line.split(":")[0]: int(line.split()[1]) * 1024
            for line in f
            if line.startswith(("VmHWM", "VmRSS"))
        }


def cold_start(template: str, path: str, timeout: float) -> dict:
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        shlex.split(template.format(port=port)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        while time.perf_counter() - t0 < timeout:
            if proc.poll() is not None:
                raise SystemExit(f"{template!r} exited with {proc.returncode} before ready")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                    if r.status == 200:
                        return {"ready_s": time.perf_counter() - t0, **status(proc.pid)}
            except OSError:
                pass
            time.sleep(0.01)
        raise SystemExit(f"{template!r} not ready in {timeout} s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cmd", action="append", required=True, help="NAME=COMMAND with {port}")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--path", default="/health")
    p.add_argument("--timeout", type=float, default=120)
    a = p.parse_args()
    arms = [c.split("=", 1) for c in a.cmd]
    runs: dict[str, list[dict]] = {name: [] for name, _ in arms}
    for r in range(a.rounds):
        for name, template in arms[r % len(arms) :] + arms[: r % len(arms)]:
            runs[name].append(cold_start(template, a.path, a.timeout))
    mib = 2**20
    print("| server | ready (s), median [range] | VmHWM at ready (MiB) | VmRSS at ready (MiB) |")
    print("|---|---|---|---|")
    for name, rs in runs.items():
        t = [x["ready_s"] for x in rs]
        hwm = [x["VmHWM"] / mib for x in rs]
        rss = [x["VmRSS"] / mib for x in rs]
        print(
            f"| {name} | {statistics.median(t):.2f} [{min(t):.2f}, {max(t):.2f}] "
            f"| {statistics.median(hwm):.0f} | {statistics.median(rss):.0f} |"
        )


if __name__ == "__main__":
    main()
