"""PNG plots for the report: each arm's RSS timeline with each run's phase marks, each arm's
TTFT distribution, and its latencies over time (10-second slices). Drawn on bare matplotlib
Figures (Agg canvas): no global pyplot state."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.results.ab_result import Round
from harness.results.run import Run

ARM_COLORS = {"base": "#1f77b4", "head": "#d62728", "null": "#7f7f7f", "arm": "#1f77b4"}
MIB = 2**20
Runs = dict[str, list[Run]]  # each arm's runs, in round order


def arm_runs(rounds: list[Round]) -> Runs:
    """The runs of each arm that ran (in ARM_COLORS' order), in round order."""
    out = {a: [run for r in rounds if (run := getattr(r, a, None)) is not None] for a in ARM_COLORS}
    return {a: runs for a, runs in out.items() if runs}


def plot_rss(runs_of: Runs, labels: dict[str, str], path: Path) -> Path:
    """One panel per arm, one line per run (RSS of the server's process tree over time), each
    run with its own phase marks (dashed, in the arm's colour); each phase is named once, at
    the median of its marks, on staggered rows so that close names do not overlap."""
    arms = list(runs_of)
    from matplotlib.figure import Figure  # half a second of import: only here

    fig = Figure(figsize=(9, 2.6 * len(arms) + 0.6), layout="constrained")
    axes = fig.subplots(len(arms), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, arm in zip(axes, arms, strict=True):
        timelines = [run.timeline for run in runs_of[arm] if run.timeline is not None]
        marks: dict[str, list[float]] = {}
        for tl in timelines:
            start = tl.t[0] if tl.t else 0.0  # each run aligned at its own first sample
            t = np.asarray(tl.t, dtype=float) - start
            rss = np.asarray(tl.rss, dtype=float) / MIB
            ax.plot(t, rss, color=ARM_COLORS[arm], alpha=0.55, lw=1)
            if rss.size:  # the run's sampled peak, where it happened
                i = int(np.argmax(rss))
                ax.plot(t[i], rss[i], "v", color=ARM_COLORS[arm], ms=6, mec="black", mew=0.5)
            for at, phase in tl.marks:
                ax.axvline(at - start, color=ARM_COLORS[arm], ls="--", lw=0.7, alpha=0.5)
                marks.setdefault(phase, []).append(at - start)
        _name_phases(ax, marks)
        said = f"{arm}: {labels.get(arm, arm)} ({len(timelines)} runs)"
        ax.set_title(said, loc="left", fontsize=10)
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


def plot_ttft(runs_of: Runs, labels: dict[str, str], path: Path) -> Path:
    """ECDF of per-request TTFT, pooled over each arm's runs (failed requests left out)."""
    from matplotlib.figure import Figure  # half a second of import: only here

    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.subplots()
    drawn = 0
    for arm, runs in runs_of.items():
        ttft = np.array(
            [q.ttft_ms for run in runs for q in run.requests if q.ttft_ms is not None], dtype=float
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


WINDOW_METRICS = ("ttft_p50_ms", "itl_p50_ms")


def window_series(runs: list[Run]) -> dict[str, list[tuple[float, float]]]:
    """Per metric, (seconds into the run, the median over the arm's runs) of each phase's time
    slice: the runs' slices of one phase line up by their index."""
    slices: dict[tuple[int, float], tuple[list[float], dict[str, list[float]]]] = {}
    for run in runs:
        for p, phase in enumerate((run.phases or {}).values()):
            start = (phase.window or [0.0])[0]
            for w in phase.windows or []:
                t, got = slices.setdefault((p, round(w.from_s, 3)),
                                           ([], {m: [] for m in WINDOW_METRICS}))  # fmt: skip
                t.append(start + w.from_s)
                for m in WINDOW_METRICS:
                    if (value := getattr(w, m)) is not None:
                        got[m].append(value)
    out: dict[str, list[tuple[float, float]]] = {m: [] for m in WINDOW_METRICS}
    for _, (t, got) in sorted(slices.items()):
        for m in out:
            if got[m]:
                out[m].append((float(np.median(t)), float(np.median(got[m]))))
    return out


def plot_windows(runs_of: Runs, labels: dict[str, str], path: Path) -> Path | None:
    """TTFT p50 and ITL p50 per 10-second slice of each phase, the median over each arm's
    runs, against seconds into the run: warm-up and drift at a glance. None when no run
    kept slices."""
    series = {arm: window_series(runs) for arm, runs in runs_of.items()}
    if not any(pts for s in series.values() for pts in s.values()):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4.6), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    for ax, metric, title in zip(axes, ("ttft_p50_ms", "itl_p50_ms"),
                                 ("TTFT p50 (ms)", "ITL p50 (ms)"), strict=True):  # fmt: skip
        for arm, s in series.items():
            if s[metric]:
                t, v = zip(*s[metric], strict=True)
                ax.plot(t, v, "o-", ms=3, color=ARM_COLORS[arm], label=labels.get(arm, arm))
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[0].set_title("Over time: each 10 s slice of each phase, median over the arm's runs",
                      loc="left", fontsize=11)  # fmt: skip
    axes[0].legend(fontsize=8, loc="upper right")
    axes[1].set_xlabel("seconds into the run (slices by send time for TTFT, read time for ITL)")
    fig.savefig(path, dpi=110)
    return path


def plot_capacity(runs_of: Runs, labels: dict[str, str], path: Path) -> Path | None:
    """Each run's capacity search: the levels it tried, in order, against the share of their
    requests that met the SLO (filled: met), and the share a level needs. None when no run
    searched."""
    searches = [(arm, run.capacity) for arm, runs in runs_of.items() for run in runs
                if run.capacity is not None and run.capacity.levels]  # fmt: skip
    if not searches:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.subplots()
    named = set()
    for arm, found in searches:
        levels = found.levels
        x, y = [lv.level for lv in levels], [lv.attained for lv in levels]
        color = ARM_COLORS[arm]
        label = None if arm in named else f"{arm}: {labels.get(arm, arm)}"
        named.add(arm)
        ax.plot(x, y, "-", color=color, alpha=0.35, lw=1, label=label)
        for lv in levels:
            ax.plot(lv.level, lv.attained, "o", ms=5, color=color,
                    mfc=color if lv.met else "white")  # fmt: skip
    first = searches[0][1]
    need = first.attainment if first.attainment is not None else 0.95
    ax.axhline(need, color="black", ls=":", lw=0.8)
    ax.annotate(f"meets the SLO: {need:.0%} of requests within every limit", (0, need),
                xycoords=("axes fraction", "data"), xytext=(3, 3), textcoords="offset points",
                fontsize=8)  # fmt: skip
    mode = first.mode or "rate"
    ax.set_xscale("log", base=2)
    ax.set_xlabel("clients (closed loop)" if mode == "concurrency" else "requests/s offered")
    ax.set_ylabel("share of requests within the SLO")
    ax.set_title("Capacity search: each run's levels in the order tried (filled: met)",
                 loc="left", fontsize=11)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc="lower left")
    fig.savefig(path, dpi=110)
    return path
