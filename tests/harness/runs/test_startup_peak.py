"""The server's start in every run and A/B: seconds to ready and its peak RSS while loading
(VmHWM before any phase resets it), shown in the report and gateable like any memory peak."""

import sys

import pytest

from helpers.arms import scripted
from helpers.cli import cli, saved_result, valid_attempt
from helpers.processes import unique_marker
from helpers.suites import SUITE, write_suite

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")


@linux
def test_a_load_time_transient_is_its_own_row_and_can_be_gated(tmp_path):
    marker = unique_marker()
    base, head = scripted(model=marker), scripted("--load-spike-mb 300", model=marker)
    suite = write_suite(tmp_path, SUITE.format(extra=""))

    def attempt(n: int, suite=suite):
        out = tmp_path / f"results{n}"
        r = cli("ab", "--quiet", "--suite", str(suite), "--rounds", "2", "--max-rounds", "2",
                "--base-cmd", base, "--head-cmd", head, "--out-dir", str(out),
                cwd=tmp_path)  # fmt: skip
        return (r, out), saved_result(out)

    (r, out), ab = valid_attempt(attempt)
    assert r.returncode == 0, r.stdout + r.stderr  # not gated: shown, the verdict untouched
    (saved,) = out.glob("*.json")
    for rnd in ab["rounds"]:
        b, h = (rnd[a]["summary"]["startup_peak_rss_bytes"] for a in ("base", "head"))
        assert h > b + 250 * 2**20, (b, h)  # the spike was freed before ready: only VmHWM saw it
        assert rnd["head"]["summary"]["peak_rss_bytes"] < h - 250 * 2**20
        assert rnd["head"]["server"]["startup_peak_rss_bytes"] == h
    text = saved.with_suffix(".md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| startup_peak_rss_bytes"))
    assert "Server start" in text and "MiB" in row and row.split("|")[4].strip().startswith("+")

    gated = write_suite(tmp_path, SUITE.format(extra="[gate]\nstartup_peak_rss_bytes = 0.10\n"))
    (r, _), _ = valid_attempt(lambda n: attempt(n + 2, gated))
    assert r.returncode == 1 and "REGRESSION" in r.stdout, r.stdout + r.stderr
    assert "startup_peak_rss_bytes" in r.stdout
