"""Report tables: pure functions from an A/B result's records to the rows and lines that
templates/report.md.j2 lays out."""

from __future__ import annotations

import json
from dataclasses import fields
from statistics import median

from harness.escape import markdown
from harness.report.headline import MOVED, Headline, clear_change
from harness.results.ab_result import ABResult, Round
from harness.results.comparison import Comparison, MetricResult
from harness.results.machines import machine_identity
from harness.results.metrics import METRICS, Method
from harness.results.record import to_json
from harness.results.run import Machine, Run, Sampler, Server

KEY_METRICS = ("ttft_p50_ms", "ttft_p95_ms", "e2e_p50_ms", "tok_s", "peak_rss_bytes", "errors",
               "startup_s", "startup_peak_rss_bytes")  # fmt: skip
STARTUP = ("startup_s", "startup_peak_rss_bytes")  # the start of every run: time and peak RSS
ARM_ORDER = ("base", "head", "null")


def fmt_value(name: str, v: float | None) -> str:
    """A value with its unit, as the catalogue shows it (a count outside it as a number)."""
    if name in METRICS:
        return METRICS[name].show(v)
    return "n/a" if v is None else f"{v:g}"


def fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def fmt_ci(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def fmt_mde(m: MetricResult) -> str:
    if m.mde is None:
        return "n/a"
    if m.method == Method.MINMAX:
        return f"flags head above {m.mde:.3f}x base (min/max rule)"
    return f"±{(m.mde - 1) * 100:.1f}%"


def verdict_line(h: Headline) -> str:
    """The report's first line: overall verdict, exit code and what it means, and which metrics;
    a trade-off says first what paid for what (then the regressed and improved lists would only
    repeat it). A saved result's names are read back from a file: shown as literal Markdown."""
    line = f"# {markdown(h.words)}: "
    if h.trade_off:
        line += f"{markdown(h.trade_off)}; "
    line += f"exit {h.exit_code} ({h.meaning})"
    for said, metrics in h.moved.items():
        line += f"; {said}: {', '.join(f'{markdown(n)} {fmt_ratio(r)}x' for n, r in metrics)}"
    if h.changed:
        line += "; changed within tolerance: "
        line += ", ".join(f"{markdown(name)} {said}" for name, said in h.changed)
    if h.invalid:
        line += f"; {len(h.invalid)} invalid run(s) or crash"
    return line


def fmt_change(x: float | None) -> str:
    return "n/a" if x is None else f"{(x - 1) * 100:+.1f}%"


def fmt_interval(m: MetricResult, pct: bool = False) -> str:
    """The 95% CI of the ratio, or for a memory peak the range of head/base over every pair of
    runs (min/max rule): labelled, so it is never read as a confidence interval."""
    lo, hi = m.ci_low, m.ci_high
    if m.method == Method.SIMULATED:
        return "exact (simulated)"
    if lo is None or hi is None:
        return "n/a"
    cell = f"[{fmt_change(lo)}, {fmt_change(hi)}]" if pct else fmt_ci(lo, hi)
    return f"range {cell}" if m.method == Method.MINMAX else cell


def look_bound(m: MetricResult) -> str:
    """The one-sided bounds the gate's look judged a change by, where they decided a verdict
    the 95% CI alone would not explain: "look bound [0.842, 1.011] (each side 99.96%)"."""
    lo, hi, alpha = m.evidence_low, m.evidence_high, m.alpha
    if lo is None or hi is None or alpha is None or m.verdict not in MOVED:
        return ""
    return f"look bound [{lo:.3f}, {hi:.3f}] (each side {(1 - alpha) * 100:.2f}%)"


def metric_rows(comparison: Comparison) -> list[dict]:
    """Each gated metric's row: every field of its record, null ones too (a template may show
    any), the ones a reader reads formatted."""
    noise = {n.name: n for n in comparison.noise}
    rows = []
    for m in comparison.metrics:
        rows.append(
            {f.name: None for f in fields(m)}
            | m.to_json()
            | {
                "name": m.name,
                "base": fmt_value(m.name, m.base_value),
                "head": fmt_value(m.name, m.head_value),
                "ratio": fmt_ratio(m.ratio),
                "change": fmt_change(m.ratio),
                "ci": fmt_interval(m),
                "ci_pct": fmt_interval(m, pct=True),
                "tolerance": f"{m.tolerance * 100:g}%",
                "verdict": (f"PASS: {c}" if (c := clear_change(m)) else str(m.verdict))
                + (f" ({m.note})" if m.note else "")
                + (f"; {b}" if (b := look_bound(m)) else ""),
                "noise": _fmt_noise(noise.get(m.name)),
                "method": m.method,
                "mde": fmt_mde(m),
            }
        )
    return rows


def moved_rows(comparison: Comparison) -> list[dict]:
    """The metrics the suite does not gate that moved in this A/B (their 95% CI excludes 1), as
    the gate compared them: shown, never judged, so a change the gate cannot see is still in
    front of the reader."""
    return [
        {
            "name": m.name,
            "base": fmt_value(m.name, m.base_value),
            "head": fmt_value(m.name, m.head_value),
            "change": fmt_change(m.ratio),
            "ci_pct": fmt_interval(m, pct=True),
        }
        for m in comparison.ungated
        if m.ci_low is not None and m.ci_high is not None and (m.ci_low > 1 or m.ci_high < 1)
    ]


def _ungated(result: ABResult, names: tuple[str, ...]):
    """(name, base values, head values) over the paired rounds, for each of `names` the
    suite does not gate."""
    gated = {m.name for m in result.comparison.metrics}
    paired = [(r.base, r.head) for r in result.rounds if r.base and r.head]
    for name in names:
        if name not in gated:
            yield (name, [b.summary.get(name) for b, _ in paired],
                   [h.summary.get(name) for _, h in paired])  # fmt: skip


def startup_rows(result: ABResult) -> list[dict]:
    """Launch to ready and the server's peak RSS while getting there, base and head, for every
    A/B whether or not the suite gates them: a server that doubles its memory while loading, or
    takes twice as long to start, is in front of the reader."""
    rows = []
    for name, base_values, head_values in _ungated(result, STARTUP):
        base, head = METRICS[name].centre(base_values), METRICS[name].centre(head_values)
        if base is None or head is None:
            continue
        change = fmt_change(head / base) if base > 0 else "n/a"
        rows.append({"name": name, "base": fmt_value(name, base),
                     "head": fmt_value(name, head), "change": change})  # fmt: skip
    return rows


def _fmt_noise(n: MetricResult | None) -> str:
    if n is None or n.ratio is None:
        return "n/a"
    return f"{fmt_ratio(n.ratio)} {fmt_ci(n.ci_low, n.ci_high)} {n.verdict}"


def round_rows(rounds: list[Round]) -> list[dict]:
    rows = []
    for rnd in rounds:
        order = list(rnd.order or ARM_ORDER[:2])
        order += [a for a in ARM_ORDER if _run(rnd, a) is not None and a not in order]
        for pos, arm in enumerate(order, start=1):
            run = _run(rnd, arm)
            summary = run.summary if run else {}
            rows.append(
                {
                    "round": rnd.round,
                    "position": pos,
                    "arm": arm + placed_on((rnd.devices or {}).get(arm)),
                    "values": [fmt_value(k, summary.get(k)) for k in KEY_METRICS],
                    "valid": "no run" if run is None else ("yes" if run.valid else "NO"),
                }
            )
    return rows


def _run(rnd: Round, arm: str) -> Run | None:
    return {"base": rnd.base, "head": rnd.head, "null": rnd.null}.get(arm)


def _runs(rounds: list[Round], arm: str) -> list[Run]:
    return [run for r in rounds if (run := _run(r, arm)) is not None]


def commits_match(asked: str, reported: str) -> bool:
    """Short and full SHAs of the same commit match; a dirty tree's suffix does not."""
    return bool(asked and reported) and (asked.startswith(reported) or reported.startswith(asked))


def arm_sections(result: ABResult) -> tuple[list[dict], list[str]]:
    sections, warnings = [], []
    for arm in ARM_ORDER:
        runs = _runs(result.rounds, arm)
        if arm == "null" and not runs:
            continue
        desc = result.head if arm == "head" else result.base
        servers = [r.server or Server() for r in runs]
        reported = sorted({s.commit or "?" for s in servers})
        asked = desc.commit or ""
        # only a server whose project says it reports its commit can be held to it
        held = any(r.arm and r.arm.reports_commit for r in runs)
        for commit in reported:
            if asked and held and not commits_match(asked, commit):
                warnings.append(f"{arm} was asked for commit {asked} but reported {commit}")
        # the port differs every run by design: not a different configuration
        configs = {
            json.dumps({k: v for k, v in (s.config or {}).items() if k != "port"}, sort_keys=True)
            for s in servers
        }
        if len(configs) > 1:
            warnings.append(f"{arm} reported {len(configs)} different configs across its runs")
        first = servers[0] if servers else Server()
        sections.append(
            {
                "arm": arm,
                "desc": desc,
                "reported": reported,
                "backend": first.backend,
                "model": first.model,
                "config": first.config or {},
            }
        )
    return sections, warnings


def machine_lines(m: Machine | None) -> dict[str, str]:
    """A run's machine facts in words: CPU and its vector flags, cores, memory, GPUs."""
    if m is None or m == Machine():
        return {}
    flags, gpus, load = m.cpu_flags, m.gpus, m.load_average
    out = {
        "CPU": f"{m.cpu_model or '?'}, {_known(m.logical_cores)} logical / "
        f"{_known(m.physical_cores)} physical cores ({_known(m.usable_cores)} usable)",
        "CPU vector flags": " ".join(flags)
        if flags
        else "not recorded"
        if flags is None
        else "none",
        "memory": f"{m.memory_bytes / 2**30:.1f} GiB" if m.memory_bytes else "n/a",
        "GPUs": "; ".join(gpus) if gpus else "not recorded" if gpus is None else "none",
        "platform": f"{m.platform or '?'}, Python {m.python or '?'}",
    }
    if load:
        out["load average at the first run"] = ", ".join(f"{x:g}" for x in load)
    return out


def _known(x: object) -> str:
    return "?" if x is None else str(x)


def machine_and_load(rounds: list[Round]) -> tuple[dict, dict, list[str]]:
    """What a reader needs to place the numbers: the machine (CPU and its vector flags, cores,
    memory, GPUs), the runtimes each arm's server reported, the harness's own commit; then
    the load. Every value is words, never a raw field."""
    runs = [run for arm in ARM_ORDER for run in _runs(rounds, arm)]
    machines = {
        json.dumps(machine_identity(to_json(r.machine) if r.machine else {}), sort_keys=True)
        for r in runs
    }
    warnings = [f"runs report {len(machines)} different machines"] if len(machines) > 1 else []
    machine = machine_lines(runs[0].machine if runs else None)
    for arm in ARM_ORDER:
        arm_runs = _runs(rounds, arm)
        runtime = next((r.server.runtime for r in arm_runs if r.server), None)
        if arm_runs:
            machine[f"{arm} server's runtime"] = (
                ", ".join(f"{k} {v}" for k, v in runtime.items() if v)
                if runtime
                else "not reported"
            )
    harness = next((r.harness for r in runs if r.harness), None)
    if harness:
        machine["harness"] = f"{harness.version or '?'} at commit {harness.commit or 'unknown'}"
    fingerprint = runs[0].fingerprint if runs else None
    load = {"workload fingerprint": fingerprint or "n/a"}
    counts = [r.request_count if r.request_count is not None else len(r.requests) for r in runs]
    load["requests per run (median)"] = f"{median(counts or [0]):g}"
    return machine, load, warnings


def sampler_and_prompts(rounds: list[Round]) -> dict[str, str]:
    """Per arm: the RSS sampler's achieved rate and longest gap (the worst run), and who
    counted the prompt tokens (exact, or where the harness had to approximate)."""
    out = {}
    for arm in ARM_ORDER:
        runs = _runs(rounds, arm)
        if not runs:
            continue
        samplers = [r.sampler or Sampler() for r in runs]
        rates = [x for s in samplers if (x := s.achieved_hz)]
        gaps = [x for s in samplers if (x := s.max_gap_s) is not None]
        target = samplers[0].hz
        if rates:
            out[f"RSS sampler, {arm}"] = (
                f"{min(rates):.0f}-{max(rates):.0f} Hz achieved (target {target or 0:.0f}), "
                f"longest gap {max(gaps):.3f} s"
            )
        if all(r.prompt_tokenizer is None for r in runs):
            continue  # saved by a harness that did not record it
        sources = sorted({r.prompt_tokenizer or "?" for r in runs})
        exact = all(r.prompt_tokens_exact for r in runs)
        out[f"prompt tokens, {arm}"] = (
            f"{'exact' if exact else 'APPROXIMATED'}, counted by {', '.join(sources)}"
        )
    return out


def _pct(sd: float | None) -> str:
    return "n/a" if sd is None else f"{sd * 100:.1f}%"


def power_rows(comparison: Comparison) -> list[dict]:
    """What the A/B could see, per interval-judged metric: its noise per round (sd of ln
    head/base), the noise floor (null/base when a null arm ran, else head/base) and the ratio
    its last look catches 4 times in 5."""
    noise = {n.name: n for n in comparison.noise}
    unit = "rounds" if comparison.block == 1 else "device cycles"
    rows = []
    for m in comparison.metrics:
        if m.method == Method.MINMAX or m.ratio is None:
            continue
        null = noise.get(m.name)
        floor = null.spread if null else m.spread
        rows.append(
            {
                "name": m.name,
                "noise": _pct(m.spread),
                "floor": f"{_pct(floor)} ({'null arm' if null else unit})",
                "alpha": "n/a" if m.alpha is None else f"{m.alpha:.2g}",
                "detectable": "n/a" if m.detectable is None else f"{m.detectable:.3f}x",
            }
        )
    return rows


def round_walls(rounds: list[Round]) -> str:
    """'median 71 s (68, 74, 70)' from each round's wall_s; older results lack it."""
    walls = [r.wall_s for r in rounds if r.wall_s is not None]
    if not walls:
        return "not recorded"
    each = ", ".join(f"{w:.0f}" for w in walls)
    return f"median {median(walls):.0f} s per round ({each}; {sum(walls) / 60:.1f} min in all)"


MEMORY_SOURCES = (
    ("peak_rss_bytes", "peak_rss_source"),
    ("peak_device_bytes", "peak_device_source"),
)


def memory_sources(rounds: list[Round]) -> list[str]:
    """Where each memory figure came from, per arm (VmHWM, the server's /v1/memory or its
    /metrics gauges, NVML): `peak_device_bytes, base: server /metrics: vllm:...`."""
    out = []
    for metric, key in MEMORY_SOURCES:
        for arm in ARM_ORDER:
            seen = sorted({
                str(source)
                for run in _runs(rounds, arm)
                for p in (run.phases or {}).values()
                if p.memory and (source := getattr(p.memory, key))
            })  # fmt: skip
            if seen:
                out.append(f"{metric}, {arm}: {'; '.join(seen)}")
    return out


def placed_on(device: str | None) -> str:
    """` @ device 1`, ` @ devices 2,3` (a group), or nothing."""
    return f" @ device{'s' * (',' in device)} {device}" if device else ""
