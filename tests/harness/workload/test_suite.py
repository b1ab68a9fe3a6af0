"""Suite parsing: the shipped suites load, and each kind of mistake is one clear error."""

from __future__ import annotations

import random

import pytest

from harness.workload.phase import PromptLength
from harness.workload.suite import SuiteError, load_suite, shipped

from helpers.suites import write_suite

BASE = """
model = "tiny"
[[phase]]
name = "main"
"""


def test_smoke_suite_is_shipped_and_expects_decode_steps():
    assert "smoke" in shipped()
    suite = load_suite("smoke")
    assert suite.model == "tiny"
    main = suite.phases[0]
    assert (main.clients, main.requests, main.max_tokens) == (4, 32, 16)
    assert main.prompt_tokens.sample(random.Random(0), 3) == [64, 64, 64]
    rule = {r.series: r for r in main.expect}["engine_decode_steps_total"]
    assert (rule.op, rule.value) == (">", 0.0)
    # a plumbing gate: TTFT p95 of 32 tiny requests is jitter (suites/smoke.toml says why)
    assert set(suite.gate) == {"ttft_p50_ms", "tok_s", "peak_rss_bytes", "peak_device_bytes"}
    assert suite.gate["ttft_p50_ms"] == 0.30


def test_every_other_shipped_gate_judges_decode_latency():
    # a change that buys TTFT with slower tokens must not pass (docs/statistics.md, "Decode
    # latency"); smoke's tokens on tiny are jitter; sim-calibration and cancellations are no
    # gate (the latter checks the abort path by its expectations)
    for name in sorted(set(shipped()) - {"smoke", "sim-calibration", "cancellations"}):
        gate = load_suite(name).gate
        assert {"itl_p50_ms", "tpot_ms"} <= set(gate), name
        # from measured noise per round: 15-30% where arms ran one after the other, 8-10%
        # elsewhere, 5% in short-concurrency, whose arms take turns (docs/statistics.md), and
        # in the GPU-sized suites (docs/suites.md)
        least = 0.05 if name == "short-concurrency" or name.startswith("gpu-") else 0.08
        assert all(least <= gate[m] <= 0.30 for m in ("itl_p50_ms", "tpot_ms")), name
    assert not load_suite("sim-calibration").gate and not load_suite("cancellations").gate


def test_minimal_suite_gets_defaults(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, BASE)))
    phase = suite.phases[0]
    assert phase.arrival.mode == "concurrency" and phase.temperature == 0.0 and phase.ignore_eos
    assert phase.endpoint == "completions" and suite.warmup is None and suite.gate == {}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('arrival = "poisson"', "arrival must be one of burst, concurrency, rate"),
        ('arrival = "rate"', "needs a finite rate > 0"),
        ("rate = 3.0", "rate is only meaningful"),
        ("clients = 0", "clients must be a positive integer"),
        ("max_tokens = 1.5", "max_tokens must be an integer, got 1.5"),
        ("requests = true", "requests must be an integer, got True"),
        ('endpoint = "embeddings"', "endpoint must be one of"),
        ("prefix_tokens = 64", "prefix_tokens must be >= 0 and below"),
        ("colour = 1", "unknown key(s) colour"),
        ("max_error_rate = 1.5", "max_error_rate must be a fraction from 0 to 1"),
        ("bursts = 2", "bursts is only meaningful"),
        ('arrival = "burst"\nbursts = 0', "bursts must be a positive integer"),
        ("prompt_tokens = 0", "prompt_tokens must be a positive integer"),
        ('prompt_tokens = {dist = "zipf"}', "dist must be uniform, normal or choice"),
        ('prompt_tokens = {dist = "uniform", min = 9}', "needs max"),
        ('prompt_tokens = {dist = "uniform", min = 9, max = 3}', "1 <= min <= max"),
        ('expect = {"engine_x_total" = "~1"}', "bad rule"),
        ('expect = {"engine x" = ">=1"}', "not a Prometheus series selector"),
    ],
)
def test_phase_mistakes_are_named(tmp_path, extra, message):
    path = write_suite(tmp_path, BASE.replace('name = "main"', f'name = "main"\n{extra}'))
    with pytest.raises(SuiteError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        load_suite(str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[phase]]\nname = 'a'", "model must be a non-empty string"),
        ("model = 'tiny'", "at least one"),
        (BASE + "[[phase]]\nname = 'main'", "phase names must be unique"),
        ("model = 'm'\n[[phase]]\nname = 'warmup'", "not 'warmup'"),
        (BASE + "[gate]\ntok_s = 'ten'", "gate.tok_s must be a number, got 'ten'"),
        (BASE + "[gate]\nlatency = 0.1", "unknown key"),
        (BASE + "[warmup]\nexpect = {a_total = 1}", "warmup cannot have an expect"),
        ("model = ", "not valid TOML"),
    ],
)
def test_suite_mistakes_are_named(tmp_path, text, message):
    with pytest.raises(SuiteError, match=message):
        load_suite(str(write_suite(tmp_path, text)))


def test_unknown_suite_name_lists_the_shipped_ones():
    with pytest.raises(SuiteError, match=r"no suite named 'nope' \(shipped: .*smoke"):
        load_suite("nope")


def test_length_distributions_are_seeded_and_bounded():
    normal = PromptLength("normal", mean=100, std=50, min=10, max=150)
    draws = normal.sample(random.Random(7), 500)
    assert draws == normal.sample(random.Random(7), 500)
    assert min(draws) == 10 and max(draws) == 150 and len(set(draws)) > 50
    uniform = PromptLength("uniform", min=5, max=9).sample(random.Random(1), 200)
    assert set(uniform) == {5, 6, 7, 8, 9}
    assert set(PromptLength("choice", choices=(3, 30)).sample(random.Random(1), 50)) == {3, 30}


def test_the_fingerprint_covers_every_field_of_a_phase_that_changes_the_work():
    """Walk the Phase dataclass and each of its parts: changing any field that changes what is
    sent (arrival, rate, sampling, lengths, ...) changes the fingerprint; the fields that only
    judge a run or bound it do not. A new field fails here until it is put on one side or the
    other."""
    from dataclasses import fields, replace

    from harness.results.record import to_json
    from harness.results.run import Workload
    from harness.runs.measure import draw_lengths
    from harness.workload.arrival import Burst, Concurrency, Rate, Replay
    from harness.workload.dataset import Dataset, Item
    from harness.workload.fingerprint import fingerprint, workload
    from harness.workload.phase import Cancels, Conversation, Phase, PromptLength
    from harness.workload.trace import Trace, TraceRequest

    judging = {"expect", "max_error_rate", "request_timeout_s", "phase_timeout_s",
               "max_lateness_ms"}  # fmt: skip
    rate = Phase("main", arrival=Rate(2.0), clients=2, requests=4, max_tokens=8)
    burst = Phase("main", arrival=Burst(), clients=2, requests=4, max_tokens=8)
    chat = Phase("main", clients=2, requests=4, max_tokens=8, endpoint="chat")
    requests = (TraceRequest(0.0, 16, 4), TraceRequest(250.0, 24, 4, (1, 2)))
    replay = Phase("main", arrival=Replay(Trace("a", "digest", requests)), requests=2)
    ramped = replace(rate, arrival=Rate(2.0, ramp="linear", ramp_to=4.0))
    talk = replace(chat, conversation=Conversation(2))
    by_tokens = replace(rate, cancels=Cancels(0.5, after_tokens=1))
    by_time = replace(rate, cancels=Cancels(0.5, after_ms=50.0))
    changes = {
        "name": (rate, {"name": "other"}),
        "arrival": (rate, {"arrival": Concurrency()}),
        "clients": (rate, {"clients": 3}),
        "requests": (rate, {"requests": 5}),
        "seed": (rate, {"seed": 1}),
        "prompt_tokens": (rate, {"prompt_tokens": PromptLength(value=65)}),
        "prefix_tokens": (rate, {"prefix_tokens": 8}),
        "max_tokens": (rate, {"max_tokens": 9}),
        "ignore_eos": (rate, {"ignore_eos": False}),
        "temperature": (rate, {"temperature": 0.8}),
        "endpoint": (rate, {"endpoint": "chat"}),
        "dataset": (rate, {"dataset": Dataset("d.jsonl", "digest", (Item("hello there"),))}),
        "conversation": (chat, {"conversation": Conversation(3)}),
        "cancels": (rate, {"cancels": Cancels(0.5, after_tokens=1)}),
        "settle_s": (rate, {"settle_s": 5.0}),
    }
    part_changes = {  # (the phase field holding the part, its field): a phase, the change
        ("arrival", "rate"): (rate, {"rate": 3.0}),
        ("arrival", "burstiness"): (rate, {"burstiness": 0.5}),
        ("arrival", "ramp"): (rate, {"ramp": "linear", "ramp_to": 4.0}),
        ("arrival", "ramp_to"): (ramped, {"ramp_to": 6.0}),
        ("arrival", "bursts"): (burst, {"bursts": 2}),
        ("arrival", "trace"): (replay, {"trace": Trace("b", "other digest", requests)}),
        ("arrival", "time_scale"): (replay, {"time_scale": 0.5}),
        ("conversation", "turns"): (talk, {"turns": 3}),
        ("conversation", "think_time_s"): (talk, {"think_time_s": 1.5}),
        ("conversation", "followup_tokens"): (talk, {"followup_tokens": 9}),
        ("cancels", "share"): (by_tokens, {"share": 0.25}),
        ("cancels", "after_tokens"): (by_tokens, {"after_tokens": 2}),
        ("cancels", "after_ms"): (by_time, {"after_ms": 80.0}),
    }
    bounds = {"max_error_rate": 0.1, "request_timeout_s": 5.0, "phase_timeout_s": 60.0,
              "expect": (), "max_lateness_ms": 5.0}  # fmt: skip
    names = {f.name for f in fields(Phase)}
    assert names == set(changes) | judging, names ^ (set(changes) | judging)
    for holder, part in (("arrival", Rate), ("arrival", Burst), ("arrival", Replay),
                         ("conversation", Conversation), ("cancels", Cancels)):  # fmt: skip
        names = {(holder, f.name) for f in fields(part)}
        assert names <= set(part_changes), names - set(part_changes)

    def fp(phase: Phase) -> str:
        facts = workload("s", [(phase, draw_lengths(phase))], None)
        (held,) = to_json(Workload.from_json(facts))["phases"]  # the run record takes each fact
        assert held == {k: v for k, v in facts["phases"][0].items() if v is not None}
        return fingerprint(facts)

    for name, (base, change) in changes.items():
        assert fp(replace(base, **change)) != fp(base), name
    for (holder, name), (base, change) in part_changes.items():
        changed = replace(base, **{holder: replace(getattr(base, holder), **change)})
        assert fp(changed) != fp(base), name
    for name in judging:
        assert fp(replace(rate, **{name: bounds[name]})) == fp(rate), name


def test_a_phase_table_has_a_key_for_each_field_of_a_phase_and_of_its_parts():
    """The TOML's keys (schema.PHASE, with their types) are the phase's own fields and its
    parts' (phase_table.PART_KEYS, read off the records), plus `stages`: a new field fails
    here until the file format has it."""
    from dataclasses import fields

    from harness.workload import schema
    from harness.workload.phase import Phase
    from harness.workload.phase_table import PART_KEYS

    own = {f.name for f in fields(Phase)} - {"conversation", "cancels"}
    assert set(schema.PHASE) == own | set(PART_KEYS) | {"stages"}
