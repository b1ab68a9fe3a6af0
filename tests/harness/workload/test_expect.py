"""Expectation rules and /metrics deltas, without a server."""

from __future__ import annotations

import pytest

from harness.load.counters import deltas, parse_metrics
from harness.workload.expect import ExpectContext, ExpectError, evaluate, parse_rule, parse_series

BEFORE = """
# TYPE engine_prefill_forwards_total counter
engine_prefill_forwards_total{path="batched"} 2
engine_prefill_forwards_total{path="single"} 1
# TYPE engine_decode_steps_total counter
engine_decode_steps_total 10
# TYPE engine_step_seconds histogram
engine_step_seconds_bucket{kind="decode",le="0.1"} 10
engine_step_seconds_bucket{kind="decode",le="+Inf"} 10
engine_step_seconds_sum{kind="decode"} 0.5
engine_step_seconds_count{kind="decode"} 10
"""
AFTER = BEFORE.replace('"batched"} 2', '"batched"} 5').replace("steps_total 10", "steps_total 42")
AFTER += "# TYPE engine_prefill_rows_spilled_total counter\nengine_prefill_rows_spilled_total 3\n"


@pytest.mark.parametrize(
    ("rule", "delta", "holds"),
    [(">=1", 1, True), (">=1", 0.5, False), (">0", 0, False), ("==3", 3, True),
     ("<=0", 0, True), ("<= 2", 3, False), ("<1", 0, True), (2, 2, True), (2, 1, False)],
)  # fmt: skip
def test_rule_operators(rule, delta, holds):
    assert parse_rule("x_total", rule).holds(delta) is holds


@pytest.mark.parametrize("bad", [">=", "=>1", "about 3", True, ">= one"])
def test_bad_rules_raise(bad):
    with pytest.raises(ExpectError):
        parse_rule("x_total", bad)


def test_series_labels_are_parsed_and_sorted():
    assert parse_series('a_total{z="1", path="bat\\"ched"}') == (
        "a_total", (("path", 'bat\\"ched'), ("z", "1")),
    )  # fmt: skip
    with pytest.raises(ExpectError):
        parse_series("a_total{path=batched}")


def test_deltas_drop_buckets_and_count_new_series_from_zero():
    d = deltas(parse_metrics(BEFORE), parse_metrics(AFTER))
    assert d['engine_prefill_forwards_total{path="batched"}'] == 3
    assert d['engine_prefill_forwards_total{path="single"}'] == 0
    assert d["engine_decode_steps_total"] == 32
    assert d["engine_prefill_rows_spilled_total"] == 3
    assert d['engine_step_seconds_count{kind="decode"}'] == 0
    assert not any("_bucket" in key for key in d)


def test_evaluate_sums_label_subsets_and_judges_missing_series():
    before, after = parse_metrics(BEFORE), parse_metrics(AFTER)
    rules = [
        parse_rule('engine_prefill_forwards_total{path="batched"}', ">=1"),
        parse_rule("engine_prefill_forwards_total", "==3"),  # all paths together
        parse_rule('engine_prefill_forwards_total{path="chunked"}', ">=1"),  # exported name, 0
        parse_rule("engine_decode_steps_total", ">40"),
        parse_rule("engine_never_exported_total", ">=1"),
    ]
    ctx = ExpectContext(deltas(before, after), after.names, strict=True)
    status = [o.status for o in evaluate(rules, ctx)]
    assert status == ["pass", "pass", "fail", "fail", "fail"]
    ctx.strict = False
    outcomes = evaluate(rules, ctx)
    assert [o.status for o in outcomes] == ["pass", "pass", "fail", "fail", "skipped"]
    assert outcomes[-1].note == "series not exported by server" and outcomes[-1].delta is None


def test_no_metrics_endpoint_fails_strict_and_skips_external():
    rule = [parse_rule("engine_decode_steps_total", ">0")]
    assert evaluate(rule, ExpectContext({}, set(), True, False))[0].status == "fail"
    assert evaluate(rule, ExpectContext({}, set(), False, False))[0].status == "skipped"


def test_unparsable_metrics_text_is_reported():
    snap = parse_metrics("this is { not prometheus")
    assert not snap.ok and "unparsable" in snap.error
