"""harness sim: the engine's own Scheduler on a SimBackend and a virtual clock. Time is the cost
model's, decisions are the scheduler's: the tests check both, and that the harness reads a
simulated run as it reads a real one."""

import json

import numpy as np
import pytest

from engine.config import resolve_config
from engine.model.load import load_model
from engine.sim.costs import CostModel, features, fit
from engine.sim.driver import simulate

from helpers import REPO
from helpers.cli import cli, harness

COSTS = CostModel(
    "unit",
    "made up for the tests",
    "tiny",
    {
        "prefill": [0.005, 2e-5, 1e-9],
        "prefill_batched": [0.006, 3e-5, 2e-9],
        "decode": [0.003, 0.001, 1e-7, 0.0005],
    },  # fmt: skip
)


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


def burst(rows: int, prompt: int, max_tokens: int, bursts: int = 1) -> dict:
    rng = np.random.default_rng(5)
    reqs = [
        {"prompt": [int(t) for t in rng.integers(3, 250, prompt)], "max_tokens": max_tokens,
         "ignore_eos": True}
        for _ in range(rows * bursts)
    ]  # fmt: skip
    groups = [{"mode": "closed", "clients": rows, "requests": reqs[b * rows : (b + 1) * rows]}
              for b in range(bursts)]  # fmt: skip
    return {"phases": [{"name": "main", "groups": groups}]}


def config(**flags):
    return resolve_config({"model": "tiny", **flags}, {})


def counter(result: dict, name: str) -> float:
    from harness.load.counters import deltas, parse_metrics

    phase = result["phases"][-1]
    d = deltas(parse_metrics(phase["metrics_before"]), parse_metrics(phase["metrics_after"]))
    return d.get(name, 0.0)


def test_the_simulation_is_deterministic(tiny):
    wl = burst(4, 100, 8, bursts=3)
    a, b = (simulate(tiny, config(), COSTS, wl) for _ in range(2))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_time_is_the_cost_models_and_the_decisions_the_schedulers(tiny):
    """A full cohort of 4 is admitted at once (no batch window), prefilled in one padded
    forward, then decoded in lockstep: every time is a sum of the model's step prices."""
    result = simulate(tiny, config(), COSTS, burst(4, 100, 8))
    prefill = COSTS.seconds("prefill_batched", [100] * 4, [0] * 4)
    decode = [COSTS.seconds("decode", [1] * 4, [100 + k] * 4) for k in range(7)]
    for r in result["requests"]:
        assert r["send"] == 0 and r["first_token"] == pytest.approx(prefill, abs=1e-12)
        assert r["end"] == pytest.approx(prefill + sum(decode), abs=1e-12)
        assert r["output_tokens"] == 8 and r["finish_reason"] == "length"
    assert counter(result, 'engine_prefill_forwards_total{path="batched"}') == 1
    assert counter(result, "engine_decode_steps_total") == 7
    assert result["mask_bytes_max"] == 4 * 4 * 100 * 100


def test_the_schedulers_flags_change_what_it_does(tiny):
    """The token cap spills rows out of the cohort; a long prompt is chunked, and a short one
    is admitted between its chunks: the real rules, on the virtual clock."""
    capped = simulate(tiny, config(max_batch_prefill_tokens=200), COSTS, burst(4, 100, 4))
    assert counter(capped, 'engine_prefill_forwards_total{path="batched"}') == 2
    assert counter(capped, "engine_prefill_rows_spilled_total") == 2
    rng = np.random.default_rng(1)
    wl = {"phases": [{"name": "main", "groups": [{"mode": "open", "requests": [
        {"prompt": [int(t) for t in rng.integers(3, 250, 3000)], "max_tokens": 2, "at": 0.0},
        {"prompt": [7] * 20, "max_tokens": 4, "at": 0.05},
    ]}]}]}  # fmt: skip
    result = simulate(tiny, config(prefill_chunk_size=256), COSTS, wl)
    long, short = result["requests"]
    assert counter(result, 'engine_prefill_forwards_total{path="chunked"}') == 12
    assert short["end"] < long["first_token"]


def test_fit_recovers_the_prices_of_a_linear_cost():
    rng = np.random.default_rng(0)
    steps = []
    for _ in range(80):
        b = int(rng.integers(1, 5))
        tokens = [int(rng.integers(1, 600))] * b
        offsets = [int(rng.integers(0, 900))] * b
        kind = "prefill_batched" if b > 1 else "prefill_single"
        steps.append({"kind": kind, "tokens": tokens, "offsets": offsets,
                      "s": COSTS.seconds(kind, tokens, offsets)})  # fmt: skip
        rows = int(rng.integers(1, 33))
        context = [int(rng.integers(0, 900)) for _ in range(rows)]
        steps.append({"kind": "decode", "tokens": [1] * rows, "offsets": context,
                      "s": COSTS.seconds("decode", [1] * rows, context)})  # fmt: skip
    model = fit(steps, "refit", "synthetic", "tiny")
    for fam, want in COSTS.coefficients.items():
        assert model.coefficients[fam] == pytest.approx(want, rel=1e-6)
        assert model.fit[fam]["mean_rel_error"] < 1e-9
    assert features("decode", [1, 1], [9, 19]) == [1.0, 2.0, 30.0, 0.0]


def test_harness_sim_run_writes_a_run_json_the_harness_reads(tmp_path):
    costs = tmp_path / "costs.json"
    COSTS.save(costs)
    out = tmp_path / "sim.json"
    r = cli("sim", "run", "--suite", "short-concurrency", "--model", "tiny", "--costs",
            str(costs), "--out", str(out), cwd=REPO)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["simulated"]["name"] == "unit" and run["valid"]
    assert run["counters"]["main"]['engine_prefill_forwards_total{path="batched"}'] == 8
    assert run["summary"]["ttft_p50_ms"] > 0 and run["summary"]["peak_rss_bytes"] is None
    assert "simulated with unit" in r.stdout
    again = tmp_path / "again.json"
    cli("sim", "run", "--suite", "short-concurrency", "--model", "tiny", "--costs", str(costs),
        "--out", str(again), cwd=REPO)  # fmt: skip
    first, second = (json.loads(p.read_text())["runs"][0] for p in (out, again))
    assert first["requests"] == second["requests"]  # deterministic through the harness too
    cmp = cli("compare", str(out), str(again), "--out-dir", str(tmp_path / "cmp"), cwd=REPO)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr  # one round each: INCONCLUSIVE
    assert "ttft_p50_ms 1.000x" in cmp.stdout  # the same simulation: the same numbers


def test_a_cost_model_of_another_model_is_refused_in_one_line(tmp_path):
    costs = tmp_path / "costs.json"
    CostModel("other", "x", "smollm2-135m", COSTS.coefficients).save(costs)
    r = cli("sim", "run", "--suite", "smoke", "--model", "tiny", "--costs", str(costs),
            "--out", str(tmp_path / "o.json"), cwd=REPO)  # fmt: skip
    assert r.returncode == 2 and "prices smollm2-135m, not tiny" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    costs.write_text("not json")
    r = cli("sim", "run", "--suite", "smoke", "--model", "tiny", "--costs", str(costs),
            "--out", str(tmp_path / "o.json"), cwd=REPO)  # fmt: skip
    assert r.returncode == 2 and f"cost model {costs}" in r.stderr, r.stderr


def test_a_suite_with_what_the_simulator_cannot_do_is_refused_in_one_line(tmp_path):
    r = cli("ab", "--sim", "h200:smollm2-135m", "--suite", "cancellations", "--base", "HEAD",
            "--head", "HEAD", "--quiet", "--out-dir", str(tmp_path), cwd=REPO)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()[-1:]
    assert "phase 'main': cancel_share is not simulated" in line and "Traceback" not in r.stderr


# one of each path: a padded batch and its spill, a 32-row storm, chunks, chat prompts sharing
# the template's opening (smoke, single-client and short-concurrency repeat these; kept out of
# CI's 20 minutes, they are equal too: `harness sim validate --model tiny` shows it)
CLOSED_SUITES = ("boundary-spill", "prefill-storm", "long-transient", "rival-chat")


@pytest.mark.timing
def test_the_simulated_scheduler_decides_as_the_real_one(tmp_path):
    """Shipped suites whose requests come in bursts, served for real on tiny and simulated:
    every scheduling counter (prefill forwards and rows by path, spills, capped admissions,
    cache hits and tokens reused, decode steps and rows) is the same in every phase. Each of
    these suites gathers its bursts for 250 ms (--batch-window-ms), far longer than a loaded
    machine takes to deliver them, so which requests meet in a batch is certain. A sweep's
    closed loops are not asserted here: after the first requests each client sends when its
    answer ends, and the default 10 ms window gathers those only when the machine keeps up
    (one fresh clone's c4 prefilled one request alone; `harness sim validate --levels` shows
    the levels on a quiet machine). head-of-line and trace-replay send at trace times."""
    costs = tmp_path / "costs.json"
    COSTS.save(costs)
    out = tmp_path / "validate.md"
    suites = [a for s in CLOSED_SUITES for a in ("--suite", s)]
    r = cli("sim", "validate", "--quiet", "--costs", str(costs), "--model", "tiny", *suites,
            "--out", str(out), cwd=REPO)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    decisions = json.loads(out.with_suffix(".json").read_text())["decisions"]
    assert list(decisions) == list(CLOSED_SUITES)
    assert set(decisions.values()) == {"equal"}, decisions
    assert "| boundary-spill | ttft_p95_ms |" in out.read_text()


def test_a_simulated_sweep_gates_each_level(tmp_path):
    """One slot instead of four: equal at one client, a tok/s regression at four; the report
    says it was simulated and with which cost model; --rounds is refused with --sim."""
    costs = tmp_path / "costs.json"
    COSTS.save(costs)
    args = ("sweep", "--quiet", "--sim", str(costs), "--model", "tiny", "--levels", "1,4",
            "--base", "HEAD", "--head", "HEAD", "--head-flags", "--parallel 1",
            "--out-dir", str(tmp_path / "out"))  # fmt: skip
    r = cli(*args, cwd=REPO)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first regresses at c4" in r.stdout and "simulated with unit" in r.stdout
    (report,) = (tmp_path / "out").glob("*sweep*.md")
    text = report.read_text()
    assert "**Simulated**" in text and "`unit` (made up for the tests" in text
    assert "beyond tolerance in the simulation)" in text.splitlines()[0]  # no error rate claimed
    assert "| c1 | tok_s |" in text and "exact (simulated)" in text
    again = cli(*args, "--rounds", "2", cwd=REPO)
    assert again.returncode == 2 and "--rounds does not apply to --sim" in again.stderr


def sim_ab(repo_path, tmp_path, *args: str):
    return harness("ab", "--quiet", "--suite", "boundary-spill", "--model", "tiny",
                   "--out-dir", str(tmp_path / "out"), *args,
                   cwd=repo_path, cache=tmp_path / "cache")  # fmt: skip


def test_a_scheduler_change_in_a_commit_changes_the_simulated_verdict(tmp_path):
    """The token cap re-derived as max_batch_prefill x chunk (half of today's) in a throwaway
    commit: boundary-spill's four 520-token prompts no longer batch, and the simulated A/B of
    the two commits (each arm's own scheduler) says REGRESSION; the same commit twice PASSes."""
    from helpers.throwaway_repo import ThrowawayRepo

    repo = ThrowawayRepo(tmp_path)
    costs = tmp_path / "costs.json"
    COSTS.save(costs)
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit("cap: mbp x chunk", "engine/config.py",
                       "return 2 * max_batch_prefill * prefill_chunk_size",
                       "return max_batch_prefill * prefill_chunk_size")  # fmt: skip
    same = sim_ab(repo.path, tmp_path, "--sim", str(costs), "--base", base, "--head", base)
    assert same.returncode == 0 and "verdict: PASS" in same.stdout, same.stdout + same.stderr
    changed = sim_ab(repo.path, tmp_path, "--sim", str(costs), "--base", base, "--head", head)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert (
        "verdict: REGRESSION (exit 1: a gated metric is worse beyond tolerance in the "
        "simulation)" in changed.stdout
    )
    (report,) = (tmp_path / "out").glob(f"*{head[:8]}*.md")
    assert "**Simulated**" in report.read_text()
    assert "false-regression rate" not in report.read_text().splitlines()[0]
    rounds = sim_ab(repo.path, tmp_path, "--sim", str(costs), "--rounds", "3")
    assert rounds.returncode == 2 and "--rounds does not apply to --sim" in rounds.stderr


def test_validation_rows_read_the_error_against_the_real_runs_and_their_range():
    from harness.sim.validate import counter_diffs, rows

    reals = [{"ttft_p50_ms": v, "ttft_p95_ms": v, "tok_s": 100.0} for v in (90.0, 100.0, 130.0)]
    p50, _, tok = rows("s", reals, {"ttft_p50_ms": 125.0, "ttft_p95_ms": 80.0, "tok_s": 100.0})
    assert p50.real == 100.0 and p50.error == pytest.approx(0.25) and not p50.within
    assert p50.inside and p50.spread == pytest.approx(0.40)  # 125 lies in [90, 130]
    assert tok.within and tok.spread is None and tok.inside is None  # equal runs: no range
    real = {"main": {'engine_prefill_forwards_total{path="batched"}': 3.0, "engine_queue_depth": 2}}
    sim = {"main": {'engine_prefill_forwards_total{path="batched"}': 2.0, "engine_queue_depth": 0}}
    assert counter_diffs(real, sim) == [  # scheduling counters only, not gauges
        'main: engine_prefill_forwards_total{path="batched"} 3 -> 2'
    ]


def test_a_prefill_path_the_steps_never_took_is_priced_as_the_other():
    """Leave-one-out fits see only some suites: a trace of batched prefills alone still fits,
    single prefills priced as batched ones (and neither at all is one line)."""
    rng = np.random.default_rng(2)
    steps = []
    for _ in range(30):
        rows, n = int(rng.integers(2, 5)), int(rng.integers(8, 300))
        steps.append({"kind": "prefill_batched", "tokens": [n] * rows, "offsets": [0] * rows,
                      "s": COSTS.seconds("prefill_batched", [n] * rows, [0] * rows)})  # fmt: skip
        steps.append({"kind": "decode", "tokens": [1] * rows, "offsets": [n] * rows,
                      "s": COSTS.seconds("decode", [1] * rows, [n] * rows)})  # fmt: skip
    model = fit(steps, "batched-only", "synthetic", "tiny")
    assert model.coefficients["prefill"] == model.coefficients["prefill_batched"]
    assert model.fit["prefill"] == {"steps": 0, "priced_as": "prefill_batched"}
    with pytest.raises(ValueError, match="too few prefill steps"):
        fit([s for s in steps if s["kind"] == "decode"], "none", "synthetic", "tiny")
