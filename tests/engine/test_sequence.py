"""Per-request rules that need no server: sampling and stopping."""

import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model.tiny import tiny_tokenizer
from engine.sampler import Sampler, SamplingParams
from engine.sequence import Sequence
from engine.stops import StopMatcher


def test_greedy_takes_the_argmax():
    assert Sampler(SamplingParams())(np.array([0.1, 3.0, 2.9])) == 1


def test_seeded_sampling_repeats_and_top_p_restricts():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    a = [Sampler(SamplingParams(1.0, 1.0, 7)) for _ in range(2)]
    assert [a[0](logits) for _ in range(50)] == [a[1](logits) for _ in range(50)]
    s = Sampler(SamplingParams(1.0, 0.6, 3))
    assert set(s(logits) for _ in range(300)) == {0, 1}  # 0.5 + 0.3 reaches 0.6
    assert Sampler(SamplingParams(1.0, 0.4, 1))(logits) == 0  # 0.5 alone reaches 0.4


def make(stop=(), max_tokens=10, ignore_eos=False) -> tuple[Sequence, object]:
    return Sequence(
        prompt=[5], max_tokens=max_tokens, stop=stop, ignore_eos=ignore_eos
    ), tiny_tokenizer()


def ids(text: str) -> list[int]:
    return tiny_tokenizer().encode(text)


def test_stop_string_across_tokens_is_cut_from_the_text():
    seq, tok = make(stop=("END",))
    events = []
    for t in ids("abcENDxyz"):  # the scheduler stops feeding at the first finish
        events.append(seq.append(t, tok))
        if events[-1].finish_reason:
            break
    assert events[-1].finish_reason == "stop" and len(events) == len("abcEND")
    assert seq.text == "abc" and "".join(e.text for e in events) == "abc"


def test_eos_stops_unless_ignored_and_max_tokens_ends_with_length():
    seq, tok = make()
    assert seq.append(2, tok).finish_reason == "stop" and seq.output == []
    seq, tok = make(ignore_eos=True, max_tokens=2)
    assert seq.append(2, tok).finish_reason is None
    assert seq.append(70, tok).finish_reason == "length" and len(seq.output) == 2


def naive_stop(text: str, stops: tuple[str, ...]) -> tuple[int | None, int]:
    """The first stop match (by where it ends) and the held tail, by brute force."""
    for end in range(1, len(text) + 1):
        for s in stops:
            if text[:end].endswith(s):
                return end - len(s), 0
    held = max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
    return None, held


@settings(max_examples=300, derandomize=True, database=None)
@given(
    st.lists(st.text("ab", min_size=1, max_size=4), max_size=12),
    st.lists(st.text("ab", min_size=1, max_size=5), min_size=1, max_size=4),
)
def test_kmp_stop_matching_agrees_with_brute_force(pieces, stops):
    m, text, at = StopMatcher(tuple(stops)), "", None
    for piece in pieces:
        at = m.feed(piece)
        text += piece
        if at is not None:
            break
    want_at, want_held = naive_stop(text, tuple(stops))
    assert at == want_at
    if at is None:
        assert m.held() == want_held


def test_stop_handling_is_linear_in_the_new_text():
    stops = tuple(c * 199_999 + "!" for c in "abcd")  # 800 KB of stop strings
    seq, tok = make(stop=stops, max_tokens=2000, ignore_eos=True)
    t0 = time.perf_counter()
    for t in ids("a" * 1999):
        seq.append(t, tok)
    assert time.perf_counter() - t0 < 2.0  # was 200,000 endswith calls per stop per token
    assert seq.sent == 0  # 1999 'a's may still begin the first stop string: held back
    assert seq.append(ids("b")[0], tok).text == "a" * 1999 + "b" and seq.finish_reason == "length"


def test_the_sampler_never_produces_nan():
    bad = np.array([np.nan, 1.0, np.inf, -np.inf], dtype=np.float32)
    assert Sampler(SamplingParams(1.0, 0.9, 1))(bad) == 2
    assert Sampler(SamplingParams())(bad) == 2  # greedy: a NaN never wins the argmax
    assert Sampler(SamplingParams(1e-310))(np.array([0.1, 3.0, 2.9])) == 1  # greedy
    assert Sampler(SamplingParams(1e-4, 1.0, 1))(np.array([1e30, 0.0], dtype=np.float32)) == 0
    assert Sampler(SamplingParams(1.0))(np.full(3, -np.inf)) in (0, 1, 2)
