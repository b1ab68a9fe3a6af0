"""Every test module that reads a clock is in docs/testing.md's inventory, with what its tests
assert and why that holds on a slow, noisy machine: a new one is reviewed there before it lands."""

import re
from pathlib import Path

TESTS = Path(__file__).parent
CLOCK = re.compile(r"perf_counter|monotonic\(|time\.time\(")


def test_every_module_that_reads_a_clock_is_in_the_inventory():
    inventory = (TESTS.parent / "docs" / "testing.md").read_text()
    reading = [
        path.relative_to(TESTS).as_posix()
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in ("conftest.py", "test_inventory.py")  # the rule's own words
        and CLOCK.search(path.read_text())
    ]
    assert len(reading) > 10  # the rule still finds them
    missing = [path for path in reading if path not in inventory]
    assert not missing, f"read a clock, not in docs/testing.md's inventory: {missing}"
