"""`harness ab --sim`: an A/B whose arms are simulated, each once on a virtual clock priced by a
cost model, and gated deterministically (gate.py); the same outcome as runs/ab.py's runner
gives, so the verb finishes it the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.escape import terminal
from harness.results.ab_result import ABResult, Round
from harness.results.run import Simulation
from harness.runs.ab import ab_result
from harness.runs.plan import ArmPlan
from harness.sim.gate import compare_simulated
from harness.sim.simulated_run import described, sim_run
from harness.stats.compare import gate_rounds
from harness.workload.suite import Suite


@dataclass
class SimulatedABRunner:
    suite: Suite
    plans: dict[str, ArmPlan]
    costs: str  # a cost model: a file, or HARDWARE:SHAPE[:WEIGHTS]
    say: Callable[[str], None] = lambda line: None  # noqa: E731
    command: str = ""  # the command line, as the result keeps it
    rounds: list[Round] = field(default_factory=list, init=False)  # the one round, once simulated

    def run(self) -> ABResult:
        """Both arms simulated, then compared; SimError or ComparisonError with one line."""
        runs = {}
        for name in ("base", "head"):
            self.say(terminal(f"simulating {name} ({self.plans[name].desc.label})"))
            runs[name] = sim_run(self.suite, self.plans[name].arm, self.costs)
        self.rounds = [Round(round=1, order=["base", "head"], base=runs["base"], head=runs["head"])]
        comparison = compare_simulated(gate_rounds(self.rounds)[0], self.suite.gate)
        return ab_result(
            self.suite, self.plans, self.command, rounds=list(self.rounds), crash=None,
            schedule=None, comparison=comparison,
            simulated=described(runs["head"].simulated or Simulation()),
        )  # fmt: skip
