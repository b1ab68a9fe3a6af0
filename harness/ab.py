"""`harness ab`: two arms (git refs, flag sets or commands), each started cold in rotating
order every round, then gated by compare.py and written up by report.py."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.arms import Arm, ArmError, make_arm
from harness.compare import (
    EXIT_CODES,
    INVALID,
    Comparison,
    ComparisonError,
    compare_rounds,
    next_look,
)
from harness.launcher import LaunchError
from harness.phase import Progress
from harness.run import run_arm
from harness.sequential import Schedule
from harness.suite import Suite
from harness.worktrees import Checkout, checkout, isolated_python

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
    for item in shlex.split(text or ""):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ArmError(f"environment settings are KEY=VALUE, got {item!r}")
        pairs.append((key, value))
    return tuple(pairs)


def plan_arm(
    name: str,
    side: Side,
    repo: Path,
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
        arm = Arm(arm.kind, arm.model, arm.flags, arm.template, env=env)
        desc = {"label": side.cmd.split()[0], "ref": None, "commit": None, "cmd": side.cmd}
        return ArmPlan(name, arm, desc | {"flags": all_flags.split(), "env": dict(env)})
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


def label_arms(plans: dict[str, ArmPlan], sides: dict[str, Side]) -> None:
    """Same code on both sides: name each arm by what differs (its flags, env or command)."""
    if plans["base"].desc["label"] != plans["head"].desc["label"]:
        return
    for name in ARM_NAMES:
        s = sides[name]
        extra = " ".join(x for x in (s.flags, s.env) if x) or "default"
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
    rounds: int = 3
    max_rounds: int = 9
    ready_timeout_s: float = 120.0
    progress: Callable[[str], Progress] = lambda label: Progress()  # noqa: E731

    @property
    def schedule(self) -> Schedule:
        return Schedule.plan(self.rounds, max(self.rounds, self.max_rounds))

    def run(self) -> dict:
        """Rounds up to the first look, then two more per look while a metric is undecided
        (docs/statistics.md, "Sequential stopping"); each round records its wall time."""
        names = [n for n in ("base", "head", "null") if n in self.plans]
        rounds, crash, target = [], None, self.rounds
        while len(rounds) < target and crash is None:
            i, started = len(rounds), time.monotonic()
            record = {"round": i + 1, "order": order(i, names), "null": None}
            for name in record["order"]:
                label = f"round {i + 1}/{target} {name} ({self.plans[name].desc['label']}) "
                record[name], crash = self._one(name, i + 1, label)
                if crash:
                    break
            record["wall_s"] = round(time.monotonic() - started, 3)
            rounds.append(record)
            if len(rounds) == target and crash is None:
                target = next_look(self._compare(rounds, None), self.schedule) or target
        return {
            "rounds": rounds,
            "crash": crash,
            "schedule": self.schedule.to_dict(),
            "comparison": self._compare(rounds, crash).to_dict(),
        }

    def _one(self, name: str, rnd: int, label: str) -> tuple[dict | None, dict | None]:
        plan = self.plans[name]
        log = self.log_dir / f"round{rnd}-{name}.server.log"
        try:
            with self.progress(label) as progress:
                run = run_arm(
                    self.suite, plan.arm, log, progress, ready_timeout_s=self.ready_timeout_s
                )
        except LaunchError as e:
            return None, {"arm": name, "round": rnd, "message": str(e), "log_tail": e.log_tail}
        if problem := commit_problem(plan, run):
            run["valid"] = False
            run["invalid_reasons"] = [*run.get("invalid_reasons", []), problem]
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

    def _compare(self, rounds: list[dict], crash: dict | None) -> Comparison:
        complete = [r for r in rounds if all(r.get(n) is not None for n in ARM_NAMES)]
        try:
            return compare_rounds(
                complete or rounds,
                self.suite.gate,
                self.suite.memory_slack_bytes,
                crash=crash,
                schedule=self.schedule,
            )
        except ComparisonError:
            if crash is None:
                raise
            # nothing comparable ran: the crash is the whole verdict
            problems = [f"arm {crash['arm']} crashed in round {crash['round']}: {crash['message']}"]
            return Comparison(INVALID, EXIT_CODES[INVALID], len(rounds), "", [], invalid=problems)


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
