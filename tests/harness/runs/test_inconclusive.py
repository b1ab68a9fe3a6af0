"""What a gate that cannot decide exits with is the team's choice: pass (0, the default) or
fail (1), the verdict still INCONCLUSIVE and said as failing; a decided gate is untouched; the
choice comes from --inconclusive, servegate.toml's [gate] inconclusive or the action's input."""

from __future__ import annotations

import numpy as np
import pytest

from harness.arms.project import ProjectError, load_project
from harness.results.verdicts import UNDECIDED_FAILS, exit_meaning
from harness.runs.ab import undecided
from harness.stats.compare import compare_rounds

from helpers.fake_runs import make_rounds


def comparison(head: list[float]):
    rounds = make_rounds({"base": np.array([100.0, 100.0, 100.0]), "head": np.array(head)},
                         "ttft_p50_ms")  # fmt: skip
    return compare_rounds(rounds, {"ttft_p50_ms": 0.10})


def test_an_undecided_gate_fails_only_when_the_team_says_so():
    undecided_one = comparison([112.0, 125.0, 126.0])  # past tolerance, not past its evidence
    assert (undecided_one.verdict, undecided_one.exit_code) == ("INCONCLUSIVE", 0)
    assert undecided(undecided_one, "pass") == undecided_one
    failed = undecided(undecided_one, "fail")
    assert (failed.verdict, failed.exit_code) == ("INCONCLUSIVE", 1)
    assert failed.warnings[0] == "INCONCLUSIVE fails this gate (--inconclusive fail)"
    assert exit_meaning(1, verdict="INCONCLUSIVE") == UNDECIDED_FAILS
    assert "regress" not in UNDECIDED_FAILS.replace("nothing regressed", "")
    for head, verdict, code in (([100.0, 101.0, 99.0], "PASS", 0),
                                ([160.0, 161.0, 159.0], "REGRESSION", 1)):  # fmt: skip
        decided = undecided(comparison(head), "fail")
        assert (decided.verdict, decided.exit_code) == (verdict, code)


def test_the_choice_in_the_project_file_is_checked(tmp_path):
    path = tmp_path / "servegate.toml"
    path.write_text('[server]\nserve = "s --port {port}"\n[gate]\ninconclusive = "fail"\n')
    assert load_project(path).inconclusive == "fail"
    path.write_text('[server]\nserve = "s --port {port}"\n[gate]\ninconclusive = "maybe"\n')
    with pytest.raises(ProjectError, match='inconclusive must be "pass" or "fail"'):
        load_project(path)


def test_the_report_row_shows_the_bound_that_decided_beside_the_95_percent_ci():
    from harness.report.tables import metric_rows

    one = comparison([112.0, 125.0, 126.0])
    (m,) = one.metrics
    assert m.ci_low > 1 > m.evidence_low  # the 95% CI alone would read as a regression
    (row,) = metric_rows(one)
    assert row["verdict"].startswith("INCONCLUSIVE; look bound [")
    assert f"[{m.evidence_low:.3f}, {m.evidence_high:.3f}]" in row["verdict"]
    (passed,) = metric_rows(comparison([100.0, 101.0, 99.0]))
    assert "look bound" not in passed["verdict"]  # a PASS is explained by its CI
