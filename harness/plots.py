"""PNG plots for the report: each arm's RSS timeline with phase marks, and each arm's TTFT
distribution. Drawn on bare matplotlib Figures (Agg canvas), so no global pyplot state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

ARM_COLORS = {"base": "#1f77b4", "head": "#d62728", "null": "#7f7f7f"}
MIB = 2**20


def arms_present(rounds: list[dict]) -> list[str]:
    return [a for a in ARM_COLORS if any(r.get(a) is not None for r in rounds)]


def plot_rss(rounds: list[dict], labels: dict[str, str], path: Path) -> Path:
    """One panel per arm, one line per run (RSS of the server's process tree over time), with
    the first run's phase marks as dashed lines."""
    arms = arms_present(rounds)
    fig = Figure(figsize=(9, 2.4 * len(arms) + 0.6), layout="constrained")
    axes = fig.subplots(len(arms), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, arm in zip(axes, arms, strict=True):
        runs = [r for r in rounds if r.get(arm) is not None and r[arm].get("timeline")]
        for rnd in runs:
            tl = rnd[arm]["timeline"]
            rss = np.asarray(tl["rss"], dtype=float) / MIB
            ax.plot(tl["t"], rss, color=ARM_COLORS[arm], alpha=0.55, lw=1)
        if runs:
            for t, phase in runs[0][arm]["timeline"].get("marks", []):
                ax.axvline(t, color="black", ls="--", lw=0.8, alpha=0.6)
                ax.annotate(
                    phase,
                    (t, 1),
                    xycoords=("data", "axes fraction"),
                    xytext=(3, -3),
                    textcoords="offset points",
                    va="top",
                    fontsize=8,
                )
        ax.set_title(f"{arm}: {labels.get(arm, arm)} ({len(runs)} runs)", loc="left", fontsize=10)
        ax.set_ylabel("RSS (MiB)")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds since launch")
    fig.suptitle("Server RSS over time (process tree), one line per run", fontsize=11)
    fig.savefig(path, dpi=110)
    return path


def plot_ttft(rounds: list[dict], labels: dict[str, str], path: Path) -> Path:
    """ECDF of per-request TTFT, pooled over each arm's runs (failed requests left out)."""
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.subplots()
    for arm in arms_present(rounds):
        ttft = np.array(
            [
                q["ttft_ms"]
                for r in rounds
                if r.get(arm) is not None
                for q in r[arm].get("requests", [])
                if q.get("ttft_ms") is not None
            ],
            dtype=float,
        )
        if ttft.size == 0:
            continue
        p50, p95 = np.percentile(ttft, [50, 95])
        ax.ecdf(
            ttft,
            color=ARM_COLORS[arm],
            label=f"{arm}: {labels.get(arm, arm)} (n={ttft.size}, p50 {p50:.0f}, p95 {p95:.0f} ms)",
        )
    for q, name in ((0.5, "p50"), (0.95, "p95")):
        ax.axhline(q, color="black", ls=":", lw=0.8, alpha=0.6)
        ax.annotate(
            name,
            (0, q),
            xycoords=("axes fraction", "data"),
            xytext=(3, 2),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_xlabel("TTFT (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("Time to first token, all requests of all runs per arm", loc="left", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    fig.savefig(path, dpi=110)
    return path
