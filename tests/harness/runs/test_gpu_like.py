"""Servers as teams run them on GPUs, stood in for by a scripted server in a throwaway
repository (tests/helpers/gpu_repo.py): one server per device, a slow start, device memory as a
Prometheus gauge named in servegate.toml, a device 20% slower than the other. What is asserted
is what the scripted server makes certain: its gauge, its TTFT and ITL, its device speeds."""

from __future__ import annotations

import math
import re

import pytest

from harness.arms.arms import make_arm
from harness.arms.launcher import Launcher
from harness.stats.compare import compare_rounds

from helpers.arms import scripted
from helpers.cli import exit_agrees, harness, saved_result, valid_attempt
from helpers.gpu_repo import GROUP_SERVE, SUITE, GpuRepo
from helpers.processes import unique_marker, wait_no_survivors

pytestmark = pytest.mark.timing  # scripted effects of 1.2x and more on real time: alone


def ab(repo: GpuRepo, tmp_path, *args: str):
    """One A/B; once more where the machine starved the load client."""

    def attempt(n: int):
        out = tmp_path / f"out{n}"
        r = harness("ab", "--quiet", "--suite", "suite.toml", "--out-dir", str(out), *args,
                    cwd=repo.path, cache=tmp_path / "cache")  # fmt: skip
        return r, saved_result(out)

    return valid_attempt(attempt)


def test_device_memory_gauge_and_a_trade_off_are_regressions_named(tmp_path):
    repo = GpuRepo(tmp_path, start_ms=1000)
    base = repo.git("rev-parse", "HEAD")
    repo.commit("bigger pool, earlier first token, slower tokens", device_bytes="1.3e9",
                ttft_ms="24", itl_ms="26")  # fmt: skip
    r, result = ab(repo, tmp_path, "--base", base, "--head", "HEAD", "--rounds", "3",
                   "--max-rounds", "3")  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    verdicts = {m["name"]: m["verdict"] for m in result["comparison"]["metrics"]}
    assert verdicts["peak_device_bytes"] == "REGRESSION"
    assert verdicts["tpot_ms"] == "REGRESSION"
    assert verdicts["ttft_p50_ms"] == "IMPROVEMENT"
    device = next(m for m in result["comparison"]["metrics"] if m["name"] == "peak_device_bytes")
    assert device["base_value"] == 1e9 * 1.04 and device["head_value"] == 1.3e9 * 1.04  # 4 streams
    sources = {
        p["memory"]["peak_device_source"]
        for rnd in result["rounds"]
        for arm in ("base", "head")
        for p in rnd[arm]["phases"].values()
    }
    assert sources == {"server /metrics: scripted:device_memory_bytes"}
    assert "verdict: REGRESSION (trade-off)" in r.stdout, r.stdout  # never an IMPROVEMENT
    assert "paid for ttft_p50_ms 0.6" in r.stdout.replace("\n", " ")
    # one at a time, the project file's default: never two servers on the device at once
    assert all(rnd["launch"] == [] for rnd in result["rounds"])


def test_two_devices_rotate_so_a_slower_one_favours_neither_arm(tmp_path):
    repo = GpuRepo(tmp_path, start_ms=300)
    r, result = ab(repo, tmp_path, "--base", "HEAD", "--head", "HEAD", "--devices", "0,1",
                   "--rounds", "6", "--max-rounds", "6")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert result["comparison"]["block"] == 2
    rounds = result["rounds"]
    assert [rnd["devices"] for rnd in rounds] == [
        {"base": "0", "head": "1"}, {"base": "1", "head": "0"}] * 3  # fmt: skip
    assert [rnd["launch"] for rnd in rounds] == [["base", "head"]] * 6  # at once, one each
    for rnd in rounds:  # each run records where it ran
        assert rnd["base"]["arm"]["device"] == rnd["devices"]["base"]
    ratios = [rnd["head"]["summary"]["tpot_ms"] / rnd["base"]["summary"]["tpot_ms"]
              for rnd in rounds]  # fmt: skip
    # device 1 is 1.2x slower: 24 ms a token against 20, above 1.1 with any delay under 4 ms
    assert [x > 1.1 for x in ratios] == [True, False] * 3, ratios
    assert [x < 1 / 1.1 for x in ratios] == [False, True] * 3, ratios
    # blocked by device, the 1.2x cancels: what is left is the machine's noise, so the verdict
    # may be PASS or, where that noise is wide, INCONCLUSIVE, never a verdict on a device
    assert result["comparison"]["verdict"] in ("PASS", "INCONCLUSIVE")
    tpot = next(m for m in result["comparison"]["metrics"] if m["name"] == "tpot_ms")
    assert 0.93 < tpot["ratio"] < 1.07, tpot
    # the same rounds taken one by one, without their order, as if the devices had not
    # cancelled: not a PASS
    gate = result["gate"]
    unordered = [rnd | {"order": None} for rnd in rounds]
    unblocked = compare_rounds(unordered, gate, result["memory_slack_bytes"])
    tpot = next(m for m in unblocked.metrics if m.name == "tpot_ms")
    assert tpot.verdict != "PASS" and math.log(tpot.ci_high) > math.log(1.1)
    assert tpot.order_effect is None
    # with their order: here the device swaps with the order every round, so the order term
    # takes the device's 1.2x out too (head second is head on the slower device)
    ordered = compare_rounds(rounds, gate, result["memory_slack_bytes"])
    tpot = next(m for m in ordered.metrics if m.name == "tpot_ms")
    assert tpot.order_effect > 1.3 and tpot.verdict in ("PASS", "INCONCLUSIVE")  # 1.2^2 = 1.44


def test_groups_of_two_devices_rotate_as_single_devices_do(tmp_path):
    repo = GpuRepo(tmp_path, start_ms=300, serve=GROUP_SERVE, device_speeds="1.0,1.0,1.0,1.2")
    r, result = ab(repo, tmp_path, "--base", "HEAD", "--head", "HEAD", "--devices", "0+1,2+3",
                   "--rounds", "4", "--max-rounds", "4")  # fmt: skip
    exit_agrees(r, result)
    assert result["comparison"]["block"] == 2
    rounds = result["rounds"]
    assert [rnd["devices"] for rnd in rounds] == [
        {"base": "0,1", "head": "2,3"}, {"base": "2,3", "head": "0,1"}] * 2  # fmt: skip
    # at once, each holding both devices of its group (a shared device would end one with
    # CUDA's out-of-memory line)
    assert [rnd["launch"] for rnd in rounds] == [["base", "head"]] * 4
    assert any("@ devices 2,3" in p.read_text() for p in tmp_path.glob("out*/**/*.md"))
    ratios = [rnd["head"]["summary"]["tpot_ms"] / rnd["base"]["summary"]["tpot_ms"]
              for rnd in rounds]  # fmt: skip
    # device 3 is 1.2x slower and paces its group
    assert [x > 1.1 for x in ratios] == [True, False] * 2, ratios
    assert [x < 1 / 1.1 for x in ratios] == [False, True] * 2, ratios


def test_a_budget_shortens_the_rounds_and_says_what_they_could_resolve(tmp_path):
    repo = GpuRepo(tmp_path, start_ms=1000)
    base = repo.git("rev-parse", "HEAD")
    # head's first token: 40 ms, then 52, then 40, ...: undecided at any round count
    repo.commit("noisy first token", ttft_factors=f"{tmp_path / 'factors'}:1.0,1.3")
    r, result = ab(repo, tmp_path, "--base", base, "--head", "HEAD", "--rounds", "3",
                   "--max-rounds", "9", "--budget-minutes", "0.3")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    comparison = result["comparison"]
    assert comparison["verdict"] == "INCONCLUSIVE"
    n = len(result["rounds"])
    note = comparison["warnings"][0]
    assert note.startswith(f"the budget of 0.3 min ended after {n} round(s), before the gate")
    if n >= 2:  # how many rounds fit depends on this machine's speed; what each says does not
        # a percentage, or "none within 2x" where these rounds resolve nothing that small
        assert re.search(r"they resolve: ttft_p50_ms (\+\d+\.\d%|none within 2x)", note), note
    else:
        assert "too few rounds for an interval: no change is resolvable" in note
    assert n < 9 and n * 2 * 1.0 < 0.3 * 60  # fewer rounds than planned; each start is 1 s
    assert "budget of 0.3 min" in r.stdout


DEVICE_PROJECT = """\
[server]
name = "any-server"
serve = "unused {port} {model}"  # arms given by command or URL: only what applies to any server

[server.device_memory]
gauges = ["scripted:device_memory_bytes"]
"""
DEVICE_SUITE = SUITE.split("[gate]")[0] + "[gate]\npeak_device_bytes = 0.10\n"
TIMES = "--ttft-ms 40 --itl-ms 20"  # 180 ms a request: every scrape sees 4 streams open


def test_device_memory_from_the_gauge_for_command_and_url_arms(tmp_path):
    marker = unique_marker()
    (tmp_path / "p.toml").write_text(DEVICE_PROJECT)
    (tmp_path / "suite.toml").write_text(DEVICE_SUITE)
    base = scripted(f"{TIMES} --device-bytes 1e9", model=marker)
    head = scripted(f"{TIMES} --device-bytes 1.3e9 --tag b", model=marker)

    def gated(out: str, *arms: str):
        """The A/B of the two arms, once more where the machine starved the client: exit 1 on
        the gauge's 30% (4 streams open: each peak 1.04x the server's own bytes)."""

        def attempt(n: int):
            folder = tmp_path / f"{out}{n}"
            r = harness("ab", "--quiet", "--suite", "suite.toml", "--project", "p.toml", *arms,
                        "--rounds", "2", "--max-rounds", "2", "--out-dir", str(folder),
                        cwd=tmp_path, cache=tmp_path / "cache")  # fmt: skip
            return r, saved_result(folder)

        r, result = valid_attempt(attempt)
        assert r.returncode == 1, r.stdout + r.stderr
        (device,) = [m for m in result["comparison"]["metrics"]
                     if m["name"] == "peak_device_bytes"]  # fmt: skip
        assert device["verdict"] == "REGRESSION"
        assert (device["base_value"], device["head_value"]) == (1e9 * 1.04, 1.3e9 * 1.04)
        return result

    gated("out", "--base-cmd", base, "--head-cmd", head)
    assert not wait_no_survivors(marker)
    # the same two servers already running, given by URL (containers, another team's fleet)
    with (
        Launcher(make_arm(marker, serve_cmd=base), tmp_path / "b.log") as b,
        Launcher(make_arm(marker, serve_cmd=head), tmp_path / "h.log") as h,
    ):
        result = gated("url", "--base-url", b.url, "--head-url", h.url)
    assert not wait_no_survivors(marker)
    sources = {p["memory"]["peak_device_source"] for rnd in result["rounds"]
               for arm in ("base", "head") for p in rnd[arm]["phases"].values()}  # fmt: skip
    assert sources == {"server /metrics: scripted:device_memory_bytes"}
