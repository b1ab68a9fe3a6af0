"""`harness ab`: two arms (git refs, flag sets or commands), each started cold in rotating
order every round, then gated by stats/compare.py and written up by report/report.py."""

from __future__ import annotations

import difflib
import json
import shlex
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from harness.arms.arms import Arm, ArmError, make_arm
from harness.arms.launcher import LaunchError
from harness.arms.worktrees import Checkout, checkout, isolated_python
from harness.load.phase import Progress
from harness.runs.run import Started, run_arm, start_arm
from harness.stats.compare import (
    EXIT_CODES,
    INVALID,
    Comparison,
    ComparisonError,
    check_fingerprints,
    compare_rounds,
    needs_more_rounds,
)
from harness.stats.sequential import Schedule
from harness.workload.fingerprint import workload_diff
from harness.workload.suite import Suite

ARM_NAMES = ("base", "head")


@dataclass(frozen=True)
class ArmPlan:
    name: str  # base | head | null
    arm: Arm
    desc: dict  # label, ref, commit, flags, env, cmd: what the report shows
    checkout: Checkout | None = None


@dataclass(frozen=True)
class Side:
    """What the command line said about one arm."""

    ref: str | None = None
    flags: str = ""
    env: str = ""
    cmd: str | None = None


def parse_env(text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    try:
        items = shlex.split(text or "")
    except ValueError as exc:
        raise ArmError(f"environment settings {text!r}: {exc}") from None
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ArmError(f"environment settings are KEY=VALUE, got {item!r}")
        pairs.append((key, value))
    return tuple(pairs)


def needs_git(sides: dict[str, Side]) -> bool:
    """Only arms served from git refs need a repository; two command arms need none."""
    for name, side in sides.items():
        if side.cmd and side.ref:
            raise ArmError(f"give --{name} or --{name}-cmd, not both")
    return any(not side.cmd for side in sides.values())


def plan_arm(
    name: str,
    side: Side,
    repo: Path | None,
    suite: Suite,
    model: str | None,
    flags: str | None,
    isolated: bool,
) -> ArmPlan:
    model = model or suite.model
    all_flags = " ".join(f for f in (suite.flags if flags is None else flags, side.flags) if f)
    env = parse_env(side.env)
    if side.cmd:
        arm = make_arm(model, all_flags, serve_cmd=side.cmd)
        arm = replace(arm, env=env)  # keeps cwd: the command runs where harness was started
        desc = {"label": program(side.cmd), "ref": None, "commit": None, "cmd": side.cmd}
        return ArmPlan(name, arm, desc | {"flags": all_flags.split(), "env": dict(env)})
    assert repo is not None, "an arm served from a git ref needs the repository"
    co = checkout(repo, side.ref or "WORKTREE")
    python = str(isolated_python(co)) if isolated else ""
    arm = Arm("engine", model, all_flags, cwd=co.path, env=env, python=python)
    desc = {
        "label": co.label,
        "ref": co.ref,
        "commit": co.commit,
        "cmd": " ".join(arm.command(0)).replace("--port 0", "--port {port}"),
    }
    return ArmPlan(name, arm, desc | {"flags": all_flags.split(), "env": dict(env)}, co)


def _tokens(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def program(cmd: str) -> str:
    """A command's program by name: `{python}` -> python, /opt/bin/llama-server -> llama-server."""
    first = (_tokens(cmd) or ["command"])[0]
    return Path(first.replace("{python}", "python")).name or first


def differing_tokens(a: str, b: str) -> tuple[list[str], list[str]]:
    """The tokens of command a and of command b that the other does not have there; a changed
    value keeps its option's name (`--ttft-ms 40` vs `--ttft-ms 52`, not `40` vs `52`)."""
    ta, tb = _tokens(a), _tokens(b)
    only_a, only_b = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ta, b=tb, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        named = i1 > 0 and ta[i1 - 1].startswith("-") and op == "replace"
        only_a += ta[i1 - 1 : i2] if named else ta[i1:i2]
        only_b += tb[j1 - 1 : j2] if named else tb[j1:j2]
    return only_a, only_b


def label_arms(plans: dict[str, ArmPlan], sides: dict[str, Side]) -> None:
    """Same label on both sides: name each arm by what differs (its command's differing tokens,
    its flags, its env); arms that differ in nothing keep the label and add `default`."""
    if plans["base"].desc["label"] != plans["head"].desc["label"]:
        return
    base, head = sides["base"], sides["head"]
    cmd_diff = differing_tokens(base.cmd, head.cmd) if base.cmd and head.cmd else ([], [])
    for name, own in zip(ARM_NAMES, cmd_diff, strict=True):
        s = sides[name]
        extra = " ".join(x for x in (" ".join(own), s.flags, s.env) if x) or "default"
        plans[name].desc["label"] = f"{plans[name].desc['label']} {extra}".strip()


def order(round_index: int, names: list[str]) -> list[str]:
    """Rotate the start each round: AB, BA, AB, ... (ABBA over pairs of rounds)."""
    k = round_index % len(names)
    return names[k:] + names[:k]


def commit_problem(plan: ArmPlan, run: dict) -> str | None:
    """The arm must serve the commit it was built from (the wrong code is not a measurement)."""
    if plan.checkout is None:
        return None
    reported = (run.get("server") or {}).get("commit")
    if reported != plan.checkout.commit:
        return f"{plan.name} served commit {reported}, expected {plan.checkout.commit}"
    return None


@dataclass
class ABRunner:
    suite: Suite
    plans: dict[str, ArmPlan]
    log_dir: Path
    rounds_wanted: int = 3
    max_rounds: int = 9
    ready_timeout_s: float = 120.0
    progress: Callable[[str], Progress] = lambda label: Progress()  # noqa: E731
    more_rounds: Callable[[Comparison], bool] = needs_more_rounds  # on to the next look while true
    start_together: bool = True  # launch a round's arms at once, then measure them in turn
    rounds: list[dict] = field(default_factory=list, init=False)  # as run so far

    @property
    def schedule(self) -> Schedule:
        return Schedule.plan(self.rounds_wanted, max(self.rounds_wanted, self.max_rounds))

    def run(self) -> dict:
        """Rounds up to the first look, then on to the next look while `more_rounds` says a
        metric is undecided (docs/statistics.md, "Sequential stopping"); a workload mismatch
        stops after the round that shows it (the first). Each round records its wall time."""
        names = [n for n in ("base", "head", "null") if n in self.plans]
        self.rounds, crash, target, mismatch = [], None, self.rounds_wanted, None
        rounds = self.rounds
        while len(rounds) < target and crash is None and mismatch is None:
            i, started = len(rounds), time.monotonic()
            record = {"round": i + 1, "order": order(i, names), "null": None}
            record |= dict.fromkeys(names)  # each filled in as its run completes
            rounds.append(record)
            ready = self._start_round(i + 1, target, names) if self.start_together else {}
            try:
                for name in record["order"]:
                    label = f"round {i + 1}/{target} {name} ({self.plans[name].desc['label']}) "
                    record[name], crash = self._one(name, i + 1, label, ready.pop(name, None))
                    if crash:
                        break
            finally:  # a crash or an interrupt leaves no started server behind
                for arm_start in ready.values():
                    if isinstance(arm_start, Started):
                        arm_start.launcher.stop()
            record["wall_s"] = round(time.monotonic() - started, 3)
            mismatch = workload_mismatch(rounds)
            decided = len(rounds) < target or crash is not None or mismatch is not None
            if not decided and self.more_rounds(self._compare(rounds, None)):
                target = self.schedule.next_look(target) or target
        return self.outcome(crash, mismatch)

    def outcome(self, crash: dict | None = None, problem: str | None = None) -> dict:
        """The result of the rounds run so far; `problem` (a workload mismatch, an interrupt)
        makes it INVALID while keeping every run."""
        comparison = self._compare(self.rounds, crash, problem)
        return {
            "rounds": self.rounds,
            "crash": crash,
            "schedule": self.schedule.to_dict(),
            "comparison": comparison.to_dict(),
        }

    def _start_round(self, rnd: int, target: int, names: list[str]) -> dict:
        """Every launching arm of the round started at once (their cold starts overlap, so a
        round costs one start, not one per arm): name -> Started, or the LaunchError to report
        when that arm's turn comes. Arms measured at --url are not started."""
        names = [n for n in names if self.plans[n].arm.launches]
        if len(names) < 2:
            return {}
        label = f"round {rnd}/{target} starting {' + '.join(names)} "
        with self.progress(label), ThreadPoolExecutor(len(names)) as pool:
            futures = {
                n: pool.submit(
                    start_arm, self.plans[n].arm, self._log(rnd, n), self.ready_timeout_s
                )
                for n in names
            }
        return {n: _outcome(f) for n, f in futures.items()}

    def _log(self, rnd: int, name: str) -> Path:
        return self.log_dir / f"round{rnd}-{name}.server.log"

    def _one(
        self, name: str, rnd: int, label: str, ready: Started | LaunchError | None = None
    ) -> tuple[dict | None, dict | None]:
        plan = self.plans[name]
        log = self._log(rnd, name)
        try:
            if isinstance(ready, LaunchError):
                raise ready
            with self.progress(label) as progress:
                run = run_arm(
                    self.suite,
                    plan.arm,
                    log,
                    progress,
                    ready_timeout_s=self.ready_timeout_s,
                    started=ready,
                )
        except LaunchError as e:
            return None, {"arm": name, "round": rnd, "message": str(e), "log_tail": e.log_tail}
        if problem := commit_problem(plan, run):
            run["valid"] = False
            run["invalid_reasons"] = [*run.get("invalid_reasons", []), problem]
        # kept at once, beside the server's log: whatever ends this A/B, the run survives
        log.with_name(f"round{rnd}-{name}.run.json").write_text(json.dumps(run, default=str))
        if run.get("outcome") == "crashed":
            server = run.get("server") or {}
            msg = f"server exited with code {server.get('exit_code')} under load"
            return run, {
                "arm": name,
                "round": rnd,
                "message": msg,
                "log_tail": server.get("log_tail") or "",
            }
        return run, None

    def _compare(
        self, rounds: list[dict], crash: dict | None, problem: str | None = None
    ) -> Comparison:
        complete = [r for r in rounds if all(r.get(n) is not None for n in ARM_NAMES)]
        problems = [problem] if problem else []
        if crash is not None:
            problems.append(
                f"arm {crash['arm']} crashed in round {crash['round']}: {crash['message']}"
            )
        try:
            if problem is None:
                return compare_rounds(
                    complete or rounds,
                    self.suite.gate,
                    self.suite.memory_slack_bytes,
                    crash=crash,
                    schedule=self.schedule,
                )
        except ComparisonError as e:
            problems = [str(e), *problems]
        # nothing comparable ran, or it must not be compared: the problem is the whole verdict
        n = len(complete)
        return Comparison(INVALID, EXIT_CODES[INVALID], n, "", [], invalid=problems)


def _outcome(future: Future) -> Started | LaunchError:
    """A start's result; any failure is that arm's launch failure (reported in its turn)."""
    try:
        return future.result()
    except LaunchError as e:
        return e
    except Exception as e:  # e.g. an unwritable log folder: still this arm's start failing
        return LaunchError(f"cannot start server: {type(e).__name__}: {e}")


def workload_mismatch(rounds: list[dict]) -> str | None:
    """Why the runs so far are not the same workload, naming what differs; None if they are."""
    try:
        check_fingerprints([r for r in rounds if any(r.get(a) for a in ("base", "head", "null"))])
    except ComparisonError as e:
        runs = [r[a] for r in rounds for a in ("base", "head", "null") if r.get(a)]
        diff = next(
            (d for run in runs[1:] if (d := workload_diff(runs[0].get("workload") or {},
                                                         run.get("workload") or {}))),
            [],
        )  # fmt: skip
        return f"{e}" + (f" ({'; '.join(diff)})" if diff else "")
    return None


def ab_result(suite: Suite, plans: dict[str, ArmPlan], outcome: dict, command: str) -> dict:
    return {
        "schema": "servegate.ab/1",
        "suite": suite.name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "base": plans["base"].desc,
        "head": plans["head"].desc,
        "null_arm": "null" in plans,
        "gate": suite.gate,
        "memory_slack_bytes": suite.memory_slack_bytes,
        "command": command,
        **outcome,
    }
