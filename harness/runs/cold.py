"""One arm measured cold, once: started (or handed its start), driven through the suite, its run
record kept beside its server's log at once, and a failed start or a crash under load turned
into the crash record that ends the command. `ab`, `sweep` and `bisect` all measure this way."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness.arms.launcher import LaunchError
from harness.files import strict_json, write_atomic
from harness.load.baton import Baton
from harness.load.phase import Progress
from harness.results.ab_result import Crash
from harness.results.errors import ComparisonError
from harness.results.run import Run, Server
from harness.runs.measure import Started, run_arm
from harness.runs.plan import ArmPlan, commit_problem
from harness.workload.suite import Suite

Measured = tuple[Run | None, Crash | None]  # (the run or None, its crash or None)


def server_log(log_dir: Path, round_no: int, name: str) -> Path:
    return log_dir / f"round{round_no}-{name}.server.log"


def measure_cold(
    suite: Suite,
    plan: ArmPlan,
    log_dir: Path,
    *,
    round_no: int,
    label: str = "",
    progress: Callable[[str], Progress] = lambda label: Progress(),
    ready_timeout_s: float | None = None,
    started: Started | LaunchError | None = None,
    baton: tuple[Baton, str] | None = None,
) -> Measured:
    """(run, crash): the run is None when the server never became ready; the crash names the
    arm, the round, why, and its log's tail. A run whose server served another commit than
    planned is invalid, not a crash."""
    log = server_log(log_dir, round_no, plan.name)
    try:
        if isinstance(started, LaunchError):
            raise started
        with progress(label) as bar:
            run = run_arm(
                suite, plan.arm, log, bar, ready_timeout_s=ready_timeout_s, started=started,
                baton=baton,
            )  # fmt: skip
    except LaunchError as e:
        return None, _crash(plan, round_no, str(e), e.log_tail)
    kept = log.with_name(f"round{round_no}-{plan.name}.run.json")  # beside the server's log
    plain = json.loads(strict_json(run, default=str))
    try:
        record = Run.from_json(plain, f"round {round_no} {plan.name}'s run")
    except ComparisonError as e:  # what the server said broke the record: kept, and said
        write_atomic(kept, strict_json(plain))
        return None, _crash(plan, round_no, str(e), "")
    if problem := commit_problem(plan, record):
        record = replace(record, valid=False, invalid_reasons=[*record.invalid_reasons, problem])
    write_atomic(kept, strict_json(record.to_json()))  # whatever ends the command, it survives
    if record.outcome == "crashed":
        server = record.server or Server()
        message = f"server exited with code {server.exit_code} under load"
        return record, _crash(plan, round_no, message, server.log_tail or "")
    return record, None


def _crash(plan: ArmPlan, round_no: int, message: str, log_tail: str) -> Crash:
    return Crash(arm=plan.name, round=round_no, message=message, log_tail=log_tail)
