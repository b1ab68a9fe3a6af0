"""`harness suites`: one aligned table whatever a name's length, the default suite and the
suites CI gates marked, and CI_SUITES the workflow's own list."""

import yaml

from harness.workload.suite import CI_SUITES, DEFAULT_SUITE, shipped

from helpers import REPO
from helpers.cli import cli


def rows() -> tuple[str, dict[str, str]]:
    out = cli("suites", cwd=REPO)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    rows = [line for line in lines[1:] if line and not line[0].isspace()]  # not descriptions
    return lines[0], {line.split()[0]: line for line in rows if line.split()[0] in shipped()}


def test_every_column_starts_at_the_header_s_offset_whatever_the_name_s_length():
    header, by_name = rows()
    assert set(by_name) == set(shipped()) and len(by_name) >= 16
    assert max(len(n) for n in by_name) > 16  # the names that used to push their rows right
    for name, line in by_name.items():
        for col in ("marks", "model", "phases"):
            at = header.index(col)
            assert line[at - 2 : at] == "  ", (name, col, line)  # the column before ended
            assert line[at] != " " or col == "marks", (name, col, line)  # this one starts


def test_the_default_suite_and_the_ci_suites_are_marked_and_no_other():
    header, by_name = rows()
    marks_at, model_at = header.index("marks"), header.index("model")
    marks = {n: line[marks_at:model_at].strip() for n, line in by_name.items()}
    assert marks[DEFAULT_SUITE] == "default" and DEFAULT_SUITE == "short-concurrency"
    assert {n for n, m in marks.items() if m == "CI"} == set(CI_SUITES)
    assert {n for n, m in marks.items() if m} == {DEFAULT_SUITE, *CI_SUITES}


def test_ci_suites_are_the_ones_the_workflow_gates():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "servegate.yml").read_text())
    (gate,) = [s for s in workflow["jobs"]["gate"]["steps"] if s.get("uses") == "./.judge"]
    assert tuple(gate["with"]["suites"].split()) == CI_SUITES


def test_phases_are_plain_words():
    _, by_name = rows()
    assert "main: 4 requests at once, 8 times" in by_name["short-concurrency"]
    assert "main: 32 requests from 4 clients in a closed loop" in by_name["smoke"]
    assert "from 1 client in a closed loop" in by_name["single-client"]
