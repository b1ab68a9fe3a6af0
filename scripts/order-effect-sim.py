"""What fitting the order effect costs and buys: simulated whole gates (tests/helpers/gate_sim)
at the README suite's noise, TTFT p50, tok/s and ITL p50 gated at 5%, `--max-rounds auto`,
300 gates per row, with and without a 6% order effect, fitted and not. docs/statistics.md
quotes its output. Run from the repository root (6 minutes on 2 cores):

    PYTHONPATH=.:tests python scripts/order-effect-sim.py
"""

import collections
import statistics

import harness.stats.compare as compare

from helpers.gate_sim import Noise, verdicts

TOL = {"ttft_p50_ms": 0.05, "ttft_p95_ms": 0.15, "tok_s": 0.05, "itl_p50_ms": 0.05,
       "tpot_ms": 0.10, "peak_rss_bytes": 0.10}  # fmt: skip
orig = compare.measured_later


def run(noise, shift, n, seed, fit):
    compare.measured_later = orig if fit else (lambda rounds, arm: None)
    rs = verdicts(n, noise, ttft_shift=shift, seed=seed, tolerances=TOL, extend_to=41)
    c = collections.Counter(r.verdict for r in rs)
    return dict(c), statistics.mean(r.rounds for r in rs)


for order in (0.0, 0.06):
    noise = Noise(ttft=0.055, tok_s=0.06, itl=0.035, order=order)
    for shift in (1.0, 1.07):
        for fit in (True, False):
            c, mr = run(noise, shift, 300, 21, fit)
            print(f"order {order} shift {shift} fit {fit}: {c} mean rounds {mr:.1f}", flush=True)
