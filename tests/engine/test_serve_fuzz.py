"""Property: whatever bodies clients send, no 5xx, the server stays healthy, gauges go to zero.

Hypothesis builds batches of request bodies (well-formed, ill-typed, out of range, lone
surrogates, unsupported fields) and sends each batch concurrently to one real tiny engine.
Bounded for CI: a fixed number of examples, derandomized, no example database.
"""

import asyncio
import json
import time

import aiohttp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.engine_server import metrics

GAUGES = ("engine_queue_depth", "engine_running_sequences", "engine_kv_live_tokens")
PATHS = ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["\ud800", "a\udfffb", "", "<|im_end|>", 1e-310, -0.0])
)
anything = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
small_ints = st.integers(-2, 6) | st.sampled_from([10**6, 2**63, 2**64])
part = st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", 5]), "text": anything})
content = st.none() | st.text(max_size=12) | st.lists(part | anything, max_size=2) | anything
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "tool", "", 3]), "content": content}
)
FIELDS = {
    "prompt": st.text(max_size=16) | st.lists(st.integers(-3, 300), max_size=4) | anything,
    "messages": st.lists(message, max_size=3) | anything,
    "temperature": st.floats(-1, 3) | anything,
    "top_p": st.floats(-0.5, 1.5) | anything,
    "seed": st.integers(-(2**65), 2**65) | anything,
    "stop": st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=6) | anything,
    "stream": st.booleans() | anything,
    "stream_options": st.fixed_dictionaries({"include_usage": anything}) | anything,
    "ignore_eos": st.booleans() | anything,
    "n": small_ints | anything,
    "model": st.just("tiny") | anything,
    "best_of": small_ints | anything,
    "logprobs": anything,
    "echo": anything,
    "presence_penalty": anything,
    "tools": anything,
    "tokens": st.lists(st.integers(-3, 300), max_size=4) | anything,
}
wild = st.fixed_dictionaries(
    {"max_tokens": small_ints | anything},  # always present: a valid body stays short
    optional=FIELDS,
)
# well-formed bodies with in-range values (edges included), so generation runs too
plausible = st.fixed_dictionaries(
    {
        "max_tokens": st.integers(1, 6),
        "prompt": st.text(min_size=1, max_size=16),
        "messages": st.lists(
            st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=12)}),
            min_size=1,
            max_size=2,
        ),
    },
    optional={
        "temperature": st.floats(0, 2) | st.sampled_from([1e-310, 5e-324, 1e-5]),
        "top_p": st.floats(1e-300, 1) | st.just(1),
        "seed": st.integers(0, 2**64 - 1),
        "stop": st.text(min_size=1, max_size=3) | st.lists(st.text(min_size=1), max_size=4),
        "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
        "ignore_eos": st.booleans(),
        "tokens": st.lists(st.integers(0, 255), max_size=4),
    },
)
request = st.tuples(st.sampled_from(PATHS), plausible | wild | anything)


async def send(s: aiohttp.ClientSession, url: str, path: str, payload) -> int:
    async with s.post(url + path, data=json.dumps(payload)) as r:
        await r.read()
        return r.status


def settle(url: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(url)
        if all(m[g] == 0 for g in GAUGES) or time.monotonic() > deadline:
            return m


def test_fuzzed_bodies_never_get_5xx_and_leave_the_engine_idle(engine_factory):
    eng = engine_factory()

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(request, min_size=1, max_size=4))
    def batch(requests):
        async def go():
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
                return await asyncio.gather(*(send(s, eng.url, p, b) for p, b in requests))

        statuses = asyncio.run(go())
        assert all(code < 500 for code in statuses), (statuses, requests)
        m = settle(eng.url)
        assert all(m[g] == 0 for g in GAUGES), {g: m[g] for g in GAUGES}

    batch()
    m = metrics(eng.url)
    assert m['engine_requests_total{outcome="error"}'] == 0
    assert m['engine_requests_total{outcome="client_error"}'] > 0
    assert m['engine_requests_total{outcome="ok"}'] > 0  # some fuzzed bodies were valid
