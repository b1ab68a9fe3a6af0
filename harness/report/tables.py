"""Report tables: pure functions from an A/B result (plain JSON data) to the rows and lines
that templates/report.md.j2 lays out."""

from __future__ import annotations

import json
from statistics import median

from harness.escape import markdown
from harness.report.sentences import clear_change, trade_off, verdict_words
from harness.results.machines import machine_identity
from harness.results.metrics import METRICS, Method
from harness.results.verdicts import exit_meaning, is_simulated

KEY_METRICS = ("ttft_p50_ms", "ttft_p95_ms", "e2e_p50_ms", "tok_s", "peak_rss_bytes", "errors",
               "startup_s", "startup_peak_rss_bytes")  # fmt: skip
STARTUP = ("startup_s", "startup_peak_rss_bytes")  # the start of every run: time and peak RSS
ARM_ORDER = ("base", "head", "null")
VERDICT_WORDS = {
    "REGRESSION": "regressed",
    "INCONCLUSIVE": "inconclusive (see warnings)",
    "IMPROVEMENT": "improved",
}


def fmt_value(name: str, v: float | None) -> str:
    """A value with its unit, as the catalogue shows it (a count outside it as a number)."""
    if name in METRICS:
        return METRICS[name].show(v)
    return "n/a" if v is None else f"{v:g}"


def fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def fmt_ci(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def fmt_mde(m: dict) -> str:
    if m["mde"] is None:
        return "n/a"
    if m["method"] == Method.MINMAX:
        return f"flags head above {m['mde']:.3f}x base (min/max rule)"
    return f"±{(m['mde'] - 1) * 100:.1f}%"


def verdict_line(comparison: dict) -> str:
    """The report's first line: overall verdict, exit code and what it means, and which metrics;
    a trade-off says first what paid for what (then the regressed and improved lists would only
    repeat it)."""
    code = comparison["exit_code"]
    meaning = exit_meaning(code, is_simulated(comparison), comparison["verdict"])
    line = f"# {markdown(verdict_words(comparison))}: "
    if trade := trade_off(comparison):  # a saved result's names are read back from a file
        line += f"{markdown(trade)}; "
    line += f"exit {code} ({meaning})"
    by_verdict: dict[str, list[str]] = {}
    for m in comparison["metrics"]:
        name = markdown(m["name"])
        by_verdict.setdefault(m["verdict"], []).append(f"{name} {fmt_ratio(m['ratio'])}x")
    for verdict, said in VERDICT_WORDS.items():
        if verdict in by_verdict and not (trade and verdict != "INCONCLUSIVE"):
            line += f"; {said}: {', '.join(by_verdict[verdict])}"
    changed = [
        f"{markdown(m['name'])} {c}" for m in comparison["metrics"] if (c := clear_change(m))
    ]
    if changed:
        line += f"; changed within tolerance: {', '.join(changed)}"
    if comparison["invalid"]:
        line += f"; {len(comparison['invalid'])} invalid run(s) or crash"
    return line


def fmt_change(x: float | None) -> str:
    return "n/a" if x is None else f"{(x - 1) * 100:+.1f}%"


def fmt_interval(m: dict, pct: bool = False) -> str:
    """The 95% CI of the ratio, or for a memory peak the range of head/base over every pair of
    runs (min/max rule): labelled, so it is never read as a confidence interval."""
    lo, hi = m["ci_low"], m["ci_high"]
    if m["method"] == Method.SIMULATED:
        return "exact (simulated)"
    if lo is None or hi is None:
        return "n/a"
    cell = f"[{fmt_change(lo)}, {fmt_change(hi)}]" if pct else fmt_ci(lo, hi)
    return f"range {cell}" if m["method"] == Method.MINMAX else cell


def look_bound(m: dict) -> str:
    """The one-sided bounds the gate's look judged a change by, where they decided a verdict
    the 95% CI alone would not explain: "look bound [0.842, 1.011] (each side 99.96%)"."""
    lo, hi, alpha = m.get("evidence_low"), m.get("evidence_high"), m.get("alpha")
    if None in (lo, hi, alpha) or m["verdict"] not in ("INCONCLUSIVE", "REGRESSION", "IMPROVEMENT"):
        return ""
    return f"look bound [{lo:.3f}, {hi:.3f}] (each side {(1 - alpha) * 100:.2f}%)"


def metric_rows(comparison: dict) -> list[dict]:
    noise = {n["name"]: n for n in comparison.get("noise", [])}
    rows = []
    for m in comparison["metrics"]:
        n = noise.get(m["name"])
        rows.append(
            {
                "name": m["name"],
                "base": fmt_value(m["name"], m["base_value"]),
                "head": fmt_value(m["name"], m["head_value"]),
                "ratio": fmt_ratio(m["ratio"]),
                "change": fmt_change(m["ratio"]),
                "ci": fmt_interval(m),
                "ci_pct": fmt_interval(m, pct=True),
                "tolerance": f"{m['tolerance'] * 100:g}%",
                "verdict": (f"PASS: {c}" if (c := clear_change(m)) else m["verdict"])
                + (f" ({m['note']})" if m["note"] else "")
                + (f"; {b}" if (b := look_bound(m)) else ""),
                "noise": _fmt_noise(n),
                "method": m["method"],
                "mde": fmt_mde(m),
            }
        )
    return rows


def moved_rows(ab: dict) -> list[dict]:
    """The metrics the suite does not gate that moved in this A/B (their 95% CI excludes 1), as
    the gate compared them: shown, never judged, so a change the gate cannot see is still in
    front of the reader."""
    rows = []
    for m in ab["comparison"].get("ungated", []):
        if m["ci_low"] is not None and (m["ci_low"] > 1 or m["ci_high"] < 1):
            rows.append(
                {
                    "name": m["name"],
                    "base": fmt_value(m["name"], m["base_value"]),
                    "head": fmt_value(m["name"], m["head_value"]),
                    "change": fmt_change(m["ratio"]),
                    "ci_pct": fmt_interval(m, pct=True),
                }
            )
    return rows


def _ungated(ab: dict, names: tuple[str, ...]):
    """(name, base values, head values) over the paired rounds, for each of `names` the
    suite does not gate."""
    gated = {m["name"] for m in ab["comparison"]["metrics"]}
    paired = [r for r in ab["rounds"] if r.get("base") and r.get("head")]
    for name in names:
        if name not in gated:
            yield name, *([r[a]["summary"].get(name) for r in paired] for a in ("base", "head"))


def startup_rows(ab: dict) -> list[dict]:
    """Launch to ready and the server's peak RSS while getting there, base and head, for every
    A/B whether or not the suite gates them: a server that doubles its memory while loading, or
    takes twice as long to start, is in front of the reader."""
    rows = []
    for name, base_values, head_values in _ungated(ab, STARTUP):
        base, head = METRICS[name].centre(base_values), METRICS[name].centre(head_values)
        if base is None or head is None:
            continue
        change = fmt_change(head / base) if base > 0 else "n/a"
        rows.append({"name": name, "base": fmt_value(name, base),
                     "head": fmt_value(name, head), "change": change})  # fmt: skip
    return rows


def _fmt_noise(n: dict | None) -> str:
    if n is None or n["ratio"] is None:
        return "n/a"
    return f"{fmt_ratio(n['ratio'])} {fmt_ci(n['ci_low'], n['ci_high'])} {n['verdict']}"


def round_rows(rounds: list[dict]) -> list[dict]:
    rows = []
    for rnd in rounds:
        order = list(rnd.get("order") or ARM_ORDER[:2])
        order += [a for a in ARM_ORDER if rnd.get(a) is not None and a not in order]
        for pos, arm in enumerate(order, start=1):
            run = rnd.get(arm)
            summary = (run or {}).get("summary", {})
            rows.append(
                {
                    "round": rnd["round"],
                    "position": pos,
                    "arm": arm + placed_on((rnd.get("devices") or {}).get(arm)),
                    "values": [fmt_value(k, summary.get(k)) for k in KEY_METRICS],
                    "valid": "no run" if run is None else ("yes" if run.get("valid") else "NO"),
                }
            )
    return rows


def _runs(rounds: list[dict], arm: str) -> list[dict]:
    return [r[arm] for r in rounds if r.get(arm) is not None]


def commits_match(asked: str, reported: str) -> bool:
    """Short and full SHAs of the same commit match; a dirty tree's suffix does not."""
    return bool(asked and reported) and (asked.startswith(reported) or reported.startswith(asked))


def arm_sections(ab: dict) -> tuple[list[dict], list[str]]:
    sections, warnings = [], []
    for arm in ARM_ORDER:
        runs = _runs(ab["rounds"], arm)
        if arm == "null" and not runs:
            continue
        desc = ab["base"] if arm == "null" else ab[arm]
        servers = [r.get("server", {}) for r in runs]
        reported = sorted({s.get("commit") or "?" for s in servers})
        asked = desc.get("commit") or ""
        # only a server whose project says it reports its commit can be held to it
        held = any((r.get("arm") or {}).get("reports_commit") for r in runs)
        for commit in reported:
            if asked and held and not commits_match(asked, commit):
                warnings.append(f"{arm} was asked for commit {asked} but reported {commit}")
        # the port differs every run by design: not a different configuration
        configs = {
            json.dumps({k: v for k, v in _config(s).items() if k != "port"}, sort_keys=True)
            for s in servers
        }
        if len(configs) > 1:
            warnings.append(f"{arm} reported {len(configs)} different configs across its runs")
        first = servers[0] if servers else {}
        sections.append(
            {
                "arm": arm,
                "desc": desc,
                "reported": reported,
                "backend": first.get("backend"),
                "model": first.get("model"),
                "config": _config(first),
            }
        )
    return sections, warnings


def _config(server: dict) -> dict:
    """What the server reported about its configuration; {} for a server that reports none."""
    config = server.get("config")
    return config if isinstance(config, dict) else {}


def machine_lines(m: dict) -> dict[str, str]:
    """A run's machine facts in words: CPU and its vector flags, cores, memory, GPUs."""
    if not m:
        return {}
    flags, gpus, load = m.get("cpu_flags"), m.get("gpus"), m.get("load_average")
    out = {
        "CPU": f"{m.get('cpu_model', '?')}, {m.get('logical_cores', '?')} logical / "
        f"{m.get('physical_cores', '?')} physical cores ({m.get('usable_cores', '?')} usable)",
        "CPU vector flags": " ".join(flags)
        if flags
        else "not recorded"
        if flags is None
        else "none",
        "memory": f"{m['memory_bytes'] / 2**30:.1f} GiB" if m.get("memory_bytes") else "n/a",
        "GPUs": "; ".join(gpus) if gpus else "not recorded" if gpus is None else "none",
        "platform": f"{m.get('platform', '?')}, Python {m.get('python', '?')}",
    }
    if load:
        out["load average at the first run"] = ", ".join(f"{x:g}" for x in load)
    return out


def machine_and_load(ab: dict) -> tuple[dict, dict, list[str]]:
    """What a reader needs to place the numbers: the machine (CPU and its vector flags, cores,
    memory, GPUs), the runtimes each arm's server reported, the harness's own commit; then
    the load. Every value is words, never a raw field."""
    runs = [run for arm in ARM_ORDER for run in _runs(ab["rounds"], arm)]
    machines = {json.dumps(machine_identity(r.get("machine") or {}), sort_keys=True) for r in runs}
    warnings = [f"runs report {len(machines)} different machines"] if len(machines) > 1 else []
    machine = machine_lines(runs[0].get("machine", {}) if runs else {})
    for arm in ARM_ORDER:
        arm_runs = _runs(ab["rounds"], arm)
        runtime = next(
            (r.get("server", {}).get("runtime") for r in arm_runs if r.get("server")), None
        )
        if arm_runs:
            machine[f"{arm} server's runtime"] = (
                ", ".join(f"{k} {v}" for k, v in runtime.items() if v)
                if runtime
                else "not reported"
            )
    harness = next((r.get("harness") for r in runs if r.get("harness")), None) or {}
    if harness:
        machine["harness"] = (
            f"{harness.get('version', '?')} at commit {harness.get('commit') or 'unknown'}"
        )
    fingerprint = runs[0].get("fingerprint") if runs else None
    load = {"workload fingerprint": fingerprint or "n/a", **ab.get("load", {})}
    counts = [r.get("request_count", len(r.get("requests", []))) for r in runs]
    load["requests per run (median)"] = f"{median(counts or [0]):g}"
    return machine, load, warnings


def sampler_and_prompts(ab: dict) -> dict[str, str]:
    """Per arm: the RSS sampler's achieved rate and longest gap (the worst run), and who
    counted the prompt tokens (exact, or where the harness had to approximate)."""
    out = {}
    for arm in ARM_ORDER:
        runs = _runs(ab["rounds"], arm)
        if not runs:
            continue
        rates = [r.get("sampler", {}).get("achieved_hz") for r in runs]
        gaps = [r.get("sampler", {}).get("max_gap_s") for r in runs]
        rates, gaps = [x for x in rates if x], [x for x in gaps if x is not None]
        target = runs[0].get("sampler", {}).get("hz")
        if rates:
            out[f"RSS sampler, {arm}"] = (
                f"{min(rates):.0f}-{max(rates):.0f} Hz achieved (target {target:.0f}), "
                f"longest gap {max(gaps):.3f} s"
            )
        if not any("prompt_tokenizer" in r for r in runs):
            continue  # saved by a harness that did not record it
        sources = sorted({r.get("prompt_tokenizer") or "?" for r in runs})
        exact = all(r.get("prompt_tokens_exact") for r in runs)
        out[f"prompt tokens, {arm}"] = (
            f"{'exact' if exact else 'APPROXIMATED'}, counted by {', '.join(sources)}"
        )
    return out


def _pct(sd: float | None) -> str:
    return "n/a" if sd is None else f"{sd * 100:.1f}%"


def power_rows(comparison: dict) -> list[dict]:
    """What the A/B could see, per interval-judged metric: its noise per round (sd of ln
    head/base), the noise floor (null/base when a null arm ran, else head/base) and the ratio
    its last look catches 4 times in 5."""
    noise = {n["name"]: n for n in comparison.get("noise", [])}
    unit = "rounds" if comparison.get("block", 1) == 1 else "device cycles"
    rows = []
    for m in comparison["metrics"]:
        if m["method"] == Method.MINMAX or m["ratio"] is None:
            continue
        null = noise.get(m["name"])
        floor = null.get("spread") if null else m.get("spread")
        caught = m.get("detectable")
        rows.append(
            {
                "name": m["name"],
                "noise": _pct(m.get("spread")),
                "floor": f"{_pct(floor)} ({'null arm' if null else unit})",
                "alpha": "n/a" if m.get("alpha") is None else f"{m['alpha']:.2g}",
                "detectable": "n/a" if caught is None else f"{caught:.3f}x",
            }
        )
    return rows


def round_walls(rounds: list[dict]) -> str:
    """'median 71 s (68, 74, 70)' from each round's wall_s; older results lack it."""
    walls = [r["wall_s"] for r in rounds if isinstance(r.get("wall_s"), int | float)]
    if not walls:
        return "not recorded"
    each = ", ".join(f"{w:.0f}" for w in walls)
    return f"median {median(walls):.0f} s per round ({each}; {sum(walls) / 60:.1f} min in all)"


MEMORY_SOURCES = (
    ("peak_rss_bytes", "peak_rss_source"),
    ("peak_device_bytes", "peak_device_source"),
)


def memory_sources(rounds: list[dict]) -> list[str]:
    """Where each memory figure came from, per arm (VmHWM, the server's /v1/memory or its
    /metrics gauges, NVML): `peak_device_bytes, base: server /metrics: vllm:...`."""
    out = []
    for metric, key in MEMORY_SOURCES:
        for arm in ARM_ORDER:
            seen = sorted({
                str(p["memory"][key])
                for run in _runs(rounds, arm)
                for p in (run.get("phases") or {}).values()
                if isinstance(p, dict) and (p.get("memory") or {}).get(key)
            })  # fmt: skip
            if seen:
                out.append(f"{metric}, {arm}: {'; '.join(seen)}")
    return out


def placed_on(device: str | None) -> str:
    """` @ device 1`, ` @ devices 2,3` (a group), or nothing."""
    return f" @ device{'s' * (',' in device)} {device}" if device else ""
