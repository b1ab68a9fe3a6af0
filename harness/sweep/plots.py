"""PNG plots of a sweep, arms overlaid: throughput vs level, TTFT p95 vs level, and the
latency-throughput curve. Bare matplotlib Figures (Agg canvas), no global pyplot state."""

from __future__ import annotations

from pathlib import Path

from harness.results.sweep_result import SweepResult

COLORS = {"arm": "#2ca02c", "base": "#1f77b4", "head": "#d62728"}


def _per_round(result: SweepResult, arm: str, metric: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for point, rounds in zip(result.judgement.curves[arm], result.by_level.values(), strict=True):
        for rnd in rounds:
            run = rnd.of(arm)
            if run is not None and (value := run.summary.get(metric)) is not None:
                xs.append(point.level)
                ys.append(value)
    return xs, ys


def _label(result: SweepResult, arm: str) -> str:
    return f"{arm}: {(result.arms or {})[arm].label}"


def _by_level(result: SweepResult, metric: str, ylabel: str, title: str, path: Path) -> Path:
    """Median per level as a line, every round as a dot, the knee as a ring."""
    from matplotlib.figure import Figure  # half a second of import: only here

    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.subplots()
    judgement = result.judgement
    for arm, curve in judgement.curves.items():
        color, label = COLORS.get(arm, "black"), _label(result, arm)
        pts = [(c.level, y) for c in curve if (y := c.median(metric)) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color=color, label=label, ms=4)
        ax.scatter(*_per_round(result, arm, metric), color=color, alpha=0.35, s=12)
        knee = judgement.knee[arm]
        at = [p for p in pts if p[0] == knee]
        if at:
            ax.scatter(*at[0], s=160, facecolors="none", edgecolors=color, lw=1.6)
            ax.annotate(
                f"knee {knee:g}",
                at[0],
                xytext=(6, -12),
                textcoords="offset points",
                color=color,
                fontsize=8,
            )
    for slo in judgement.slos:
        if slo.metric == metric:
            ax.axhline(slo.limit, color="black", ls="--", lw=0.9, alpha=0.7)
            ax.annotate(
                f"SLO {slo.rule}",
                (0, slo.limit),
                xycoords=("axes fraction", "data"),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize=8,
            )
    ax.set_xscale("log", base=2)
    levels = [c.level for c in next(iter(judgement.curves.values()))]
    ax.set_xticks(levels, [f"{v:g}" for v in levels])
    ax.set_xlabel("concurrent clients" if result.mode == "concurrency" else "requests/s offered")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    fig.savefig(path, dpi=110)
    return path


def plot_throughput(result: SweepResult, path: Path) -> Path:
    return _by_level(
        result,
        "tok_s",
        "output tok/s (aggregate)",
        "Throughput vs load level (line: median of rounds; dots: rounds)",
        path,
    )


def plot_ttft(result: SweepResult, path: Path) -> Path:
    return _by_level(
        result,
        "ttft_p95_ms",
        "TTFT p95 (ms)",
        "TTFT p95 vs load level (line: median of rounds; dots: rounds)",
        path,
    )


def plot_latency_throughput(result: SweepResult, path: Path) -> Path:
    """x: aggregate tok/s, y: TTFT p95, one point per level (labelled): a curve bending up
    and to the left of the other arm's is worse."""
    from matplotlib.figure import Figure  # half a second of import: only here

    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.subplots()
    for arm, curve in result.judgement.curves.items():
        medians = [(c.name, c.median("tok_s"), c.median("ttft_p95_ms")) for c in curve]
        pts = [(name, x, y) for name, x, y in medians if x is not None and y is not None]
        color = COLORS.get(arm, "black")
        ax.plot(
            [x for _, x, _ in pts],
            [y for _, _, y in pts],
            "-o",
            color=color,
            label=_label(result, arm),
            ms=4,
        )
        for name, x, y in pts:
            ax.annotate(
                name,
                (x, y),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=8,
                color=color,
            )
    ax.set_yscale("log")
    ax.set_xlabel("output tok/s (aggregate, median of rounds)")
    ax.set_ylabel("TTFT p95 (ms, log)")
    ax.set_title("Latency vs throughput, one point per level", loc="left", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9)
    fig.savefig(path, dpi=110)
    return path
