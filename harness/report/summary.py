"""The short Markdown a pull request shows: the verdict in the first line, one table, the exact
command to reproduce it and where the full report is. Written to $GITHUB_STEP_SUMMARY and to
--summary FILE by ab, sweep and bisect; `harness merge` joins shards of it."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from harness.escape import code_span, fence, markdown
from harness.files import open_append
from harness.report.sentences import gate_warnings, trade_off
from harness.report.tables import metric_rows, moved_rows
from harness.results.verdicts import exit_meaning, is_simulated

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


def _why(comparison: dict) -> str:
    if trade := trade_off(comparison):
        return trade
    bad = [m for m in comparison["metrics"] if m["verdict"] == comparison["verdict"]]
    if comparison["verdict"] == "INVALID":
        return comparison["invalid"][0] if comparison["invalid"] else "a run was invalid"
    if comparison["verdict"] == "INCONCLUSIVE":
        names = ", ".join(m["name"] for m in bad)
        return f"{names} undecided after {comparison['rounds']} rounds (not a pass: add rounds)"
    if bad and comparison["verdict"] != "PASS":
        return ", ".join(f"{m['name']} {(m['ratio'] - 1) * 100:+.1f}%" for m in bad)
    return exit_meaning(comparison["exit_code"], is_simulated(comparison), comparison["verdict"])


def metric_table(comparison: dict) -> str:
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
        if arg.startswith("--") and shas.get(name):
            out.append(f"--{name}")
            out.append(shas[name])
            seen.add(name)
            i += 1 if inline else 2
            continue
        out.append(arg)
        i += 1
    defaulted = [x for n, sha in shas.items() if sha and n not in seen for x in (f"--{n}", sha)]
    if out[:1] == ["harness"] and len(out) > 1:
        out[2:2] = defaulted
    return " ".join(shlex.quote(a) for a in out)


def arm_shas(ab: dict) -> dict[str, str | None]:
    """The commit each ref option of an A/B resolved to (None for a command or URL arm)."""
    return {a: None if ab[a].get("dirty") else ab[a].get("commit") for a in ("base", "head")}


def ab_summary(ab: dict, report: str | None) -> str:
    comp = ab["comparison"]
    what = f"{ab['suite']}, {ab['base']['label']} vs {ab['head']['label']}"
    trade = "trade-off" if trade_off(comp) else ""
    lines = [headline("ab", comp["verdict"], comp["exit_code"], what, _why(comp), trade), ""]
    lines.append(metric_table(comp))
    lines += ["", f"{comp['rounds']} round(s); base and head: geometric means over rounds."]
    if ab.get("rounds") and (moved := moved_rows(ab)):
        said = ", ".join(f"{m['name']} {m['change']} {m['ci_pct']}" for m in moved)
        lines.append(f"Not gated, but moved: {markdown(said)}.")
    lines += [f"- {markdown(line)}" for line in comp["invalid"] + gate_warnings(comp)]
    return (
        "\n".join([*lines, *_tail(reproduce(ab.get("command", ""), arm_shas(ab)), report)]) + "\n"
    )


SWEEP_REFS = {"base": "base", "head": "head", "ref": "arm"}  # option -> arm it resolves


def sweep_shas(result: dict) -> dict[str, str | None]:
    arms = result.get("arms", {})
    return {
        opt: None if (arms.get(arm) or {}).get("dirty") else (arms.get(arm) or {}).get("commit")
        for opt, arm in SWEEP_REFS.items()
    }


def bisect_shas(data: dict) -> dict[str, str]:
    return {"good": data["good"]["sha"], "bad": data["bad"]["sha"]}


def sweep_summary(result: dict, report: str | None) -> str:
    j = result["judgement"]
    arms = [a["label"] for a in result.get("arms", {}).values()] or ["one arm"]
    what = f"sweep {result['suite']}, {' vs '.join(arms)}"
    why = ""
    if j.get("first_regression"):
        worse = ", ".join(j["first_regression_metrics"])
        why = f"first regresses at {j['first_regression']} ({worse})"
    elif j["invalid"]:
        why = j["invalid"][0]
    lines = [headline("sweep", j["verdict"], j["exit_code"], what, why), ""]
    for level, comp in j.get("levels", {}).items():
        lines += [f"**{markdown(level)}**: {comp['verdict']}", "", metric_table(comp), ""]
    lines += [f"- {markdown(line)}" for line in j["invalid"]]
    command = reproduce(result.get("command", ""), sweep_shas(result))
    return "\n".join([*lines, *_tail(command, report)]) + "\n"


def bisect_summary(data: dict, report: str | None) -> str:
    culprit = data.get("culprit")
    verdict, code = ("NAMED", 0) if culprit else ("INVALID", 2)
    what = f"bisect {data['suite']}, {data['good']['short']}..{data['bad']['short']}"
    why = f"first bad commit {culprit['short']} {culprit['subject']}" if culprit else ""
    if not culprit:
        why = "interrupted" if data.get("interrupted") else "no single first bad commit"
    lines = [headline("bisect", verdict, code, what, why), ""]
    lines += ["| Commit | Role | Ratio | 95% CI | Verdict | Mark |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {code_span(r['head']['short'], table=True)} | {r['role']} | {r['ratio']} | {r['ci']} "
        f"| {r['verdict']} | {r['mark']} |"
        for r in data["path"]
    ]
    command = reproduce(data.get("command", ""), bisect_shas(data))
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
