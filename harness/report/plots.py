"""PNG plots for the report: each arm's RSS timeline with each run's phase marks, and each
arm's TTFT distribution. Drawn on bare matplotlib Figures (Agg canvas): no global pyplot
state."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ARM_COLORS = {"base": "#1f77b4", "head": "#d62728", "null": "#7f7f7f"}
MIB = 2**20


def arms_present(rounds: list[dict]) -> list[str]:
    return [a for a in ARM_COLORS if any(r.get(a) is not None for r in rounds)]


def plot_rss(rounds: list[dict], labels: dict[str, str], path: Path) -> Path:
    """One panel per arm, one line per run (RSS of the server's process tree over time), each
    run with its own phase marks (dashed, in the arm's colour); each phase is named once, at
    the median of its marks, on staggered rows so that close names do not overlap."""
    arms = arms_present(rounds)
    from matplotlib.figure import Figure  # half a second of import: only here

    fig = Figure(figsize=(9, 2.6 * len(arms) + 0.6), layout="constrained")
    axes = fig.subplots(len(arms), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, arm in zip(axes, arms, strict=True):
        runs = [r for r in rounds if r.get(arm) is not None and r[arm].get("timeline")]
        marks: dict[str, list[float]] = {}
        for rnd in runs:
            tl = rnd[arm]["timeline"]
            start = tl["t"][0] if tl["t"] else 0.0  # each run aligned at its own first sample
            t = np.asarray(tl["t"], dtype=float) - start
            rss = np.asarray(tl["rss"], dtype=float) / MIB
            ax.plot(t, rss, color=ARM_COLORS[arm], alpha=0.55, lw=1)
            if rss.size:  # the run's sampled peak, where it happened
                i = int(np.argmax(rss))
                ax.plot(t[i], rss[i], "v", color=ARM_COLORS[arm], ms=6, mec="black", mew=0.5)
            for at, phase in tl.get("marks", []):
                ax.axvline(at - start, color=ARM_COLORS[arm], ls="--", lw=0.7, alpha=0.5)
                marks.setdefault(phase, []).append(at - start)
        _name_phases(ax, marks)
        ax.set_title(f"{arm}: {labels.get(arm, arm)} ({len(runs)} runs)", loc="left", fontsize=10)
        ax.set_ylabel("RSS (MiB)")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(
        "seconds since each run's own start (dashed: its phase starts; triangle: its peak)"
    )
    fig.suptitle("Server RSS over time (process tree), one line per run", fontsize=11)
    fig.savefig(path, dpi=110)
    return path


def label_rows(positions: list[float], widths: list[float], rows: int = 3) -> list[int]:
    """A row per label (0 = top) so that no two labels on one row overlap: each label takes
    the first row whose last label ends before it starts. Positions and widths share a unit."""
    ends = [float("-inf")] * rows
    out = []
    for x, w in zip(positions, widths, strict=True):
        row = next(
            (i for i, end in enumerate(ends) if end <= x), min(range(rows), key=ends.__getitem__)
        )
        ends[row] = x + w
        out.append(row)
    return out


def _name_phases(ax, marks: dict[str, list[float]]) -> None:
    if not marks:
        return
    named = sorted((float(np.median(ts)), name) for name, ts in marks.items())
    lo, hi = ax.get_xlim()
    span = max(hi - lo, 1e-9)
    # a label's width as a fraction of the axis: ~0.009 per character at 8 pt on a 9-inch figure
    rows = label_rows([(t - lo) / span for t, _ in named], [0.009 * (len(n) + 1) for _, n in named])
    for (t, name), row in zip(named, rows, strict=True):
        ax.annotate(
            name,
            (t, 1),
            xycoords=("data", "axes fraction"),
            xytext=(3, -3 - 11 * row),
            textcoords="offset points",
            va="top",
            fontsize=8,
        )


def plot_ttft(rounds: list[dict], labels: dict[str, str], path: Path) -> Path:
    """ECDF of per-request TTFT, pooled over each arm's runs (failed requests left out)."""
    from matplotlib.figure import Figure  # half a second of import: only here

    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.subplots()
    drawn = 0
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
        drawn += 1
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
    if drawn:
        ax.legend(loc="lower right", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no request of any run got a first token", ha="center",
                transform=ax.transAxes)  # fmt: skip
    fig.savefig(path, dpi=110)
    return path
