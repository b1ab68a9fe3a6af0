"""The MLX backend's batched decode: one attention call over every row's cache (padded to the
longest row, masked per row) gives each row what it gets decoded alone."""

import numpy as np
import pytest

from engine.backends import load_backend
from engine.model.load import load_model

from helpers.marks import needs_smollm2

mx = pytest.importorskip("mlx.core", exc_type=ImportError)  # else the module is skipped


@pytest.fixture(scope="module")
def tiny_mlx():
    return load_backend("mlx", load_model("tiny"), dtype="float32")


def prompts(lengths, seed: int = 1) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(3, 259, n)] for n in lengths]


def greedy(be, batch: list[list[int]], steps: int, together: bool) -> np.ndarray:
    """Each row prefilled alone, then `steps` greedy decodes: all rows in one decode call, or
    one call per row. Logits [steps + 1, B, V]. Each cache holds just its row, so shorter
    rows' caches are padded up to the longest row's keys."""
    ids = list(range(len(batch)))
    for i, p in zip(ids, batch, strict=True):
        be.add_sequence(i, len(p) + steps)
    try:
        out = [np.stack([be.prefill(i, p) for i, p in zip(ids, batch, strict=True)])]
        for _ in range(steps):
            tokens = [int(t) for t in out[-1].argmax(-1)]
            if together:
                out.append(be.decode(ids, tokens))
            else:
                rows = [be.decode([i], [t]) for i, t in zip(ids, tokens, strict=True)]
                out.append(np.concatenate(rows))
        return np.stack(out)
    finally:
        for i in ids:
            be.remove_sequence(i)


def assert_rows_match(be, batch: list[list[int]], steps: int, atol: float) -> None:
    together = greedy(be, batch, steps, together=True)
    alone = greedy(be, batch, steps, together=False)
    assert (together.argmax(-1) == alone.argmax(-1)).all()
    assert np.allclose(together, alone, rtol=0, atol=atol), np.abs(together - alone).max()


def test_batched_decode_matches_each_row_alone(tiny_mlx):
    assert_rows_match(tiny_mlx, prompts((5, 17, 33, 64)), 16, atol=1e-5)  # measured: 0.0


@pytest.mark.slow
@needs_smollm2
@pytest.mark.timeout(900)  # 51 s beside a busy process on every core
def test_smollm2_batched_decode_matches_each_row_alone():
    loaded = load_model("smollm2-135m")
    text = (
        "The river wound through the valley, past old mills and quiet farms, until it reached "
        "the sea. Fishermen mended their nets on the shore while gulls circled overhead, and "
        "the town's bell rang out the hour."
    )
    tokens = loaded.tokenizer.encode(text)
    assert len(tokens) >= 40
    be = load_backend("mlx", loaded, dtype="float32")
    assert_rows_match(be, [tokens[:5], tokens[:17], tokens[:40]], 12, atol=1e-3)  # CPU: 0.0


def test_decode_attends_once_per_layer_for_the_whole_batch(tiny_mlx, monkeypatch):
    sdpa = mx.fast.scaled_dot_product_attention
    calls = []

    def counting(q, k, v, **kwargs):
        calls.append((q.shape, k.shape, kwargs["mask"].shape))
        return sdpa(q, k, v, **kwargs)

    batch = prompts((3, 9, 20, 6), seed=2)
    for i, p in enumerate(batch):
        tiny_mlx.add_sequence(i, len(p) + 1)
        tiny_mlx.prefill(i, p)
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", counting)
    try:
        tiny_mlx.decode([0, 1, 2, 3], [5, 6, 7, 8])
    finally:
        for i in range(len(batch)):
            tiny_mlx.remove_sequence(i)
    a = tiny_mlx.args
    S = 20 + 1  # the longest row's keys after this step
    one = ((4, a.num_attention_heads, 1, a.head_dim), (4, a.num_key_value_heads, S, a.head_dim))
    assert calls == [(*one, (4, 1, 1, S))] * a.num_hidden_layers
