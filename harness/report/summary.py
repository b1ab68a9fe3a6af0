"""The short Markdown a pull request shows: the verdict in the first line, one table, the exact
command to reproduce it and where the full report is. Written to $GITHUB_STEP_SUMMARY and to
--summary FILE by ab, sweep and bisect; `harness merge` joins shards of it."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from harness.escape import code_span, fence, markdown
from harness.files import open_append
from harness.report.headline import headline as headline_of
from harness.report.tables import metric_rows, moved_rows
from harness.results.ab_result import ABResult
from harness.results.bisect_result import BisectResult
from harness.results.comparison import Comparison
from harness.results.sweep_result import SweepResult

MARK = {"REGRESSION": "❌", "INVALID": "⛔", "INCONCLUSIVE": "⚠️"} | dict.fromkeys(
    ("PASS", "IMPROVEMENT", "VALID", "NAMED"), "✅"
)
TABLE_HEAD = "| Metric | Base | Head | Change | 95% CI | Tolerance | Verdict |\n" + "|---" * 7 + "|"


def headline(
    kind: str, verdict: str, code: int, what: str, why: str = "", qualifier: str = ""
) -> str:
    """`### ❌ servegate ab: REGRESSION (exit 1): short-concurrency, main@1a2b vs HEAD@3c4d`;
    a `qualifier` goes beside the exit code: `REGRESSION (trade-off, exit 1)`. `what` and
    `why` carry names and messages from elsewhere: shown as literal Markdown."""
    said = f"{qualifier}, exit {code}" if qualifier else f"exit {code}"
    line = f"### {MARK.get(verdict, '')} servegate {kind}: {verdict} ({said}): "
    return line + markdown(what) + (f": {markdown(why)}" if why else "")


def metric_table(comparison: Comparison) -> str:
    rows = [
        f"| {markdown(r['name'])} | {r['base']} | {r['head']} | {r['change']} | {r['ci_pct']} "
        f"| {r['tolerance']} | {markdown(r['verdict'])} |"
        for r in metric_rows(comparison)
    ]
    return "\n".join([TABLE_HEAD, *rows]) if rows else "No metric was compared."


def reproduce(command: str, shas: dict[str, str | None]) -> str:
    """The command as run, with every ref pinned to the commit it resolved to, so the line
    means the same thing tomorrow: `--base main` -> `--base 1a2b3c4d...`, and a ref left to
    its default (`harness ab` alone: base HEAD) is added after the verb, pinned."""
    try:
        args = shlex.split(command)
    except ValueError:
        return command
    out, seen, i = [], set(), 0
    while i < len(args):
        arg, key = args[i], args[i].lstrip("-")
        name, _, inline = key.partition("=")
        if arg.startswith("--") and (sha := shas.get(name)):
            out.append(f"--{name}")
            out.append(sha)
            seen.add(name)
            i += 1 if inline else 2
            continue
        out.append(arg)
        i += 1
    defaulted = [x for n, sha in shas.items() if sha and n not in seen for x in (f"--{n}", sha)]
    if out[:1] == ["harness"] and len(out) > 1:
        out[2:2] = defaulted
    return " ".join(shlex.quote(a) for a in out)


def arm_shas(result: ABResult) -> dict[str, str | None]:
    """The commit each ref option of an A/B resolved to (None for a command or URL arm)."""
    arms = {"base": result.base, "head": result.head}
    return {name: None if arm.dirty else arm.commit for name, arm in arms.items()}


def ab_summary(result: ABResult, report: str | None) -> str:
    comp = result.comparison
    h = headline_of(comp)
    what = f"{result.suite}, {result.base.label} vs {result.head.label}"
    trade = "trade-off" if h.trade_off else ""
    lines = [headline("ab", h.verdict, h.exit_code, what, h.why, trade), ""]
    lines.append(metric_table(comp))
    lines += ["", f"{comp.rounds} round(s); base and head: geometric means over rounds."]
    if result.rounds and (moved := moved_rows(comp)):
        said = ", ".join(f"{m['name']} {m['change']} {m['ci_pct']}" for m in moved)
        lines.append(f"Not gated, but moved: {markdown(said)}.")
    lines += [f"- {markdown(line)}" for line in h.invalid + h.warnings]
    command = reproduce(result.command or "", arm_shas(result))
    return "\n".join([*lines, *_tail(command, report)]) + "\n"


SWEEP_REFS = {"base": "base", "head": "head", "ref": "arm"}  # option -> arm it resolves


def sweep_shas(result: SweepResult) -> dict[str, str | None]:
    arms = result.arms or {}
    return {
        opt: None if (a := arms.get(arm)) is None or a.dirty else a.commit
        for opt, arm in SWEEP_REFS.items()
    }


def bisect_shas(data: BisectResult) -> dict[str, str | None]:
    return {name: c.sha if c else None for name, c in (("good", data.good), ("bad", data.bad))}


def sweep_summary(result: SweepResult, report: str | None) -> str:
    j = result.judgement
    arms = [a.label for a in (result.arms or {}).values()] or ["one arm"]
    what = f"sweep {result.suite}, {' vs '.join(arms)}"
    why = ""
    if j.first_regression:
        worse = ", ".join(j.first_regression_metrics or [])
        why = f"first regresses at {j.first_regression} ({worse})"
    elif j.invalid:
        why = j.invalid[0]
    lines = [headline("sweep", j.verdict, j.exit_code, what, why), ""]
    for level, comp in (j.levels or {}).items():
        lines += [f"**{markdown(level)}**: {comp.verdict}", "", metric_table(comp), ""]
    lines += [f"- {markdown(line)}" for line in j.invalid]
    command = reproduce(result.command or "", sweep_shas(result))
    return "\n".join([*lines, *_tail(command, report)]) + "\n"


def bisect_summary(data: BisectResult, report: str | None) -> str:
    culprit = data.culprit
    verdict, code = ("NAMED", 0) if culprit else ("INVALID", 2)
    ends = [c.short if c else "?" for c in (data.good, data.bad)]
    what = f"bisect {data.suite}, {ends[0]}..{ends[1]}"
    why = f"first bad commit {culprit.short} {culprit.subject}" if culprit else ""
    if not culprit:
        why = "interrupted" if data.interrupted else "no single first bad commit"
    lines = [headline("bisect", verdict, code, what, why), ""]
    lines += ["| Commit | Role | Ratio | 95% CI | Verdict | Mark |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {code_span(s.head.short if s.head else '', table=True)} | {s.role} | {s.ratio} "
        f"| {s.ci} | {s.verdict} | {s.mark} |"
        for s in data.path
    ]
    command = reproduce(data.command or "", bisect_shas(data))
    return "\n".join([*lines, *_tail(command, report)]) + "\n"


def _tail(command: str, report: str | None) -> list[str]:
    out = ["", "Reproduce:", "", fence(command, "sh"), ""]
    written = [f"Full report: {code_span(report)}"] if report else []
    return out + (written or ["The full report was not written."])


def summary_targets(summary_file: Path | None) -> list[Path]:
    """Where a summary goes: --summary FILE, and GitHub's job summary when it is set."""
    paths = [summary_file] if summary_file else []
    if step := os.environ.get("GITHUB_STEP_SUMMARY"):
        paths.append(Path(step))
    return paths


def append_summary(text: str, targets: list[Path]) -> list[str]:
    """Append `text` to each target; the errors as lines (a summary never changes a verdict)."""
    errors = []
    for path in targets:
        try:
            with open_append(path) as f:
                f.write(text + "\n")
        except OSError as exc:
            errors.append(f"summary not written: {path}: {exc.strerror or exc}")
    return errors
