"""Per-request rules that need no server: sampling and stopping."""

import numpy as np

from engine.model.tiny import tiny_tokenizer
from engine.sampler import Sampler, SamplingParams
from engine.sequence import Sequence


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
