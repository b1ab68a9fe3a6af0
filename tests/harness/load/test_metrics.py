"""Summary math on synthetic request records (no server, no clock)."""

from __future__ import annotations

import pytest

from harness.load.metrics import SUMMARY_KEYS, latency_stats, run_summary
from harness.load.record import RequestRecord


def rec(phase="main", i=0, send=0.0, ttft=0.1, gaps=(0.01,) * 9, usage=10, status=200, err=""):
    r = RequestRecord(phase, i, 64, 10, arrival=send, send=send, status=status, error=err)
    if status == 200 and not err:
        r.first_token = send + ttft
        r.itl_s = list(gaps)
        r.end = r.first_token + sum(gaps)
        r.client_tokens = len(gaps) + 1
        r.output_tokens = usage
    else:
        r.end = send + 0.001
    return r


def test_ttft_percentiles_tpot_and_itl():
    records = [rec(i=i, send=0.0, ttft=(i + 1) / 100) for i in range(100)]  # 10..1000 ms
    s = latency_stats(records)
    assert s["ttft_p50_ms"] == pytest.approx(505.0)
    assert s["ttft_p95_ms"] == pytest.approx(950.5)
    assert s["ttft_p99_ms"] == pytest.approx(990.1)
    assert s["tpot_ms"] == pytest.approx(10.0)  # (e2e - ttft) / (10 - 1) = 90 ms / 9
    assert s["itl_p50_ms"] == pytest.approx(10.0)
    assert s["errors"] == 0 and s["token_mismatches"] == 0


def test_tok_s_spans_first_send_to_last_completion_per_phase():
    a = [rec("a", 0, send=0.0), rec("a", 1, send=0.5)]  # ends at 0.19 and 0.69
    b = [rec("b", 0, send=10.0)]  # ends at 10.19: the idle gap between phases is not counted
    s = latency_stats(a + b)
    assert s["output_tokens"] == 30
    assert s["tok_s"] == pytest.approx(30 / (0.69 + 0.19))
    assert s["req_s"] == pytest.approx(3 / (0.69 + 0.19))


def test_failed_requests_are_counted_not_timed():
    records = [rec(i=0), rec(i=1, status=503), rec(i=2, err="ClientPayloadError: cut")]
    s = latency_stats(records)
    assert (s["requests"], s["ok"], s["errors"]) == (3, 1, 2)
    assert s["ttft_p50_ms"] == pytest.approx(100.0)
    assert s["output_tokens"] == 10


def test_usage_wins_over_client_count_and_mismatch_is_counted():
    r = rec(usage=12)
    r.max_tokens = 16  # usage above the chunks counted, within max_tokens: believed
    assert r.tokens == 12 and r.client_tokens == 10 and r.token_mismatch
    assert r.tpot_s == pytest.approx(0.09 / 11)
    no_usage = rec(usage=None)
    assert no_usage.tokens == 10 and not no_usage.token_mismatch
    assert latency_stats([r, no_usage])["token_mismatches"] == 1


def test_empty_and_all_failed_phases_give_none_not_errors():
    s = latency_stats([rec(status=500)])
    assert s["ttft_p50_ms"] is None and s["tok_s"] is None and s["errors"] == 1
    assert latency_stats([])["requests"] == 0


def test_run_summary_has_the_contract_keys_and_max_memory_over_phases():
    memory = [
        {"peak_rss_bytes": 100, "peak_rss_sampled_bytes": 90, "peak_device_bytes": None},
        {"peak_rss_bytes": 300, "peak_rss_sampled_bytes": 80, "peak_device_bytes": None},
    ]
    s = run_summary([rec()], memory, startup_s=1.5)
    assert set(SUMMARY_KEYS) <= set(s)
    assert (s["peak_rss_bytes"], s["peak_rss_sampled_bytes"]) == (300, 90)
    assert s["peak_device_bytes"] is None and s["startup_s"] == 1.5 and s["errors"] == 0


def test_record_round_trips_through_its_dict():
    r = rec(usage=11)
    r.max_tokens = 16
    d = r.as_dict()
    assert d["ttft_ms"] == pytest.approx(100.0) and d["ok"] and d["token_mismatch"]
    assert d["itl_ms"] == pytest.approx([10.0] * 9) and d["tpot_ms"] == pytest.approx(90 / 10)
    back = RequestRecord.from_dict(d)
    assert back.ttft_s == pytest.approx(r.ttft_s) and back.output_tokens == 11
    assert back.itl_s == pytest.approx(r.itl_s)


def test_goodput_counts_the_requests_that_meet_every_limit_per_second():
    # 10 requests over 1.09 s: TTFT 100..1000 ms, every gap 10 ms (TPOT 10 ms)
    records = [rec(i=i, send=0.0, ttft=(i + 1) / 10 - 0.09) for i in range(10)]
    span = max(r.end for r in records)
    s = latency_stats(records, {"ttft_ms": 500.0})
    assert s["goodput_req_s"] == pytest.approx(5 / span)  # TTFT 10, 110, ..., 410 ms
    both = latency_stats(records, {"ttft_ms": 500.0, "tpot_ms": 5.0})
    assert both["goodput_req_s"] == 0.0  # every TPOT is 10 ms: none meets both
    assert latency_stats(records)["goodput_req_s"] is None  # no SLO, no goodput
    assert s["itl_p95_ms"] == pytest.approx(10.0)


def test_a_phase_in_time_slices_counts_each_token_where_it_was_read():
    from harness.load.metrics import time_windows, token_times

    def rec(i, send, first, gaps, tokens=None, ok=True):
        r = RequestRecord("main", i, 8, 16, arrival=send, send=send, first_token=first,
                          end=first + sum(gaps), itl_s=list(gaps), status=200 if ok else 500,
                          client_tokens=tokens or len(gaps) + 1)  # fmt: skip
        return r

    early = rec(0, 1.0, 2.0, [1.0] * 9)  # tokens read at 2..11 s: 8 in the first slice, 2 after
    late = rec(1, 12.0, 13.0, [0.5, 0.5], tokens=4)  # one token came with the first
    assert token_times(late) == [13.0, 13.0, 13.5, 14.0]
    failed = rec(2, 15.0, 15.5, [], ok=False)
    slices = time_windows([early, late, failed], start=0.0, end=15.0, width=10.0)
    first, second = slices
    assert (first["from_s"], first["to_s"], first["sent"]) == (0.0, 10.0, 1)
    assert first["ttft_p50_ms"] == 1000.0 and first["itl_p50_ms"] == 1000.0
    assert first["tok_s"] == 0.8  # 8 tokens read in 10 s
    assert (second["to_s"], second["sent"], second["errors"]) == (15.0, 2, 1)
    assert second["tok_s"] == (2 + 4) / 5  # the last slice ends with the phase
    assert second["ttft_p50_ms"] == 1000.0 and second["itl_p50_ms"] == 750.0  # 1, 1, .5, .5 s


def test_requests_sent_while_a_phase_settled_are_kept_but_not_measured():
    from harness.load.phase import PhaseResult

    records = [rec(i=i, send=float(i), ttft=0.5 if i < 2 else 0.1) for i in range(5)]
    for r in records:
        r.settling = r.send < 2.0  # what run_phase marks with settle_s = 2
    result = PhaseResult("main", records, (0.0, 5.0))
    out = result.as_dict()
    assert [r.index for r in result.measured] == [2, 3, 4]
    assert out["stats"]["requests"] == 3 and out["stats"]["ttft_p50_ms"] == pytest.approx(100)
    assert sum(w["sent"] for w in out["windows"]) == 5  # the slices show the settling too
    assert records[0].as_dict()["settling"] is True
