"""Roofline cost models: a step's price from hardware figures and a model's config alone."""

import json

import pytest

from engine.sim.cost_file import load_costs
from engine.sim.roofline import Roofline, hardware

from helpers import REPO
from helpers.cli import cli


@pytest.fixture(scope="module")
def h200():
    return Roofline.named("h200", "llama-3-8b")


def test_decode_is_priced_by_bandwidth_and_long_prefill_by_compute(h200):
    """Llama-3-8B in bf16 reads ~15 GB a step (its layers and LM head; the embedding table is
    looked up, not read): a decode step of one row is memory-bound; a 4,096-token prefill
    does 2 x 7e9 FLOPs per token (compute-bound)."""
    hw, overhead = h200.hardware, 1.5e-3 + 32 * 60e-6
    assert 14.5e9 < h200.weight_bytes < 15.5e9
    one = h200.seconds("decode", [1], [100]) - overhead
    assert one == pytest.approx(h200.weight_bytes / (hw.memory_bandwidth * 0.8), rel=0.01)
    eight = h200.seconds("decode", [1] * 8, [100] * 8)
    assert eight < 1.05 * h200.seconds("decode", [1], [100])  # batching decode is nearly free
    long = h200.seconds("prefill_single", [4096], [0]) - overhead
    flops = 2 * h200.layer_params * 4096
    assert long > flops / (hw.peak_flops["bf16"] * hw.compute_efficiency)
    assert long > 10 * one


def test_padding_and_the_batched_mask_cost_what_they_would(h200):
    """A batch padded to its longest row computes the padding and reads a float32 mask per
    layer: 4 rows of 512 and one of 4,096 cost more batched than apart."""
    apart = h200.seconds("prefill_single", [4096], [0]) + h200.seconds(
        "prefill_batched", [512] * 4, [0] * 4
    )
    together = h200.seconds("prefill_batched", [512] * 4 + [4096], [0] * 5)
    assert together > apart


def test_weights_change_the_price_and_a_saved_roofline_prices_the_same(tmp_path):
    bf16, int4 = Roofline.named("m1-ultra", "llama-3-8b", "bf16"), load_costs("m1-ultra:llama-3-8b")
    assert int4.weights == "int4"  # the hardware's default
    assert int4.seconds("decode", [1], [10]) < bf16.seconds("decode", [1], [10]) / 2
    path = tmp_path / "r.json"
    int4.save(path)
    again = load_costs(str(path))
    for kind, tokens, offsets in [
        ("decode", [1, 1], [5, 900]),
        ("prefill_batched", [7, 9], [0, 3]),
    ]:
        assert again.seconds(kind, tokens, offsets) == int4.seconds(kind, tokens, offsets)
    assert again.free_memory == int4.free_memory < hardware("m1-ultra").memory_bytes


def test_unknown_hardware_shape_or_weights_is_one_line():
    for spec, says in [("tpu9:llama-3-8b", "no hardware 'tpu9'"),
                       ("h200:gpt-9", "no model shape 'gpt-9'"),
                       ("h200:llama-3-8b:int3", "weights 'int3'")]:  # fmt: skip
        with pytest.raises(ValueError, match=says):
            load_costs(spec)


def test_harness_simulates_a_model_shape_on_named_hardware(tmp_path):
    """`--costs h200:llama-3-8b`: the run is the shape's (its K/V bytes), not the tokenizer's
    model's, and says so; a spec that names nothing is a one-line exit 2."""
    out = tmp_path / "h200.json"
    r = cli("sim", "run", "--suite", "smoke", "--model", "tiny", "--costs", "h200:llama-3-8b",
            "--out", str(out), cwd=REPO)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["server"]["model"] == "llama-3-8b"
    assert run["simulated"]["name"] == "roofline h200 llama-3-8b bf16"
    assert run["simulated"]["kv_bytes_max"] % (128 * 1024) == 0  # 128 KiB per Llama-3-8B token
    bad = cli("sim", "run", "--suite", "smoke", "--model", "tiny", "--costs", "nowhere.json",
              "--out", str(tmp_path / "x.json"), cwd=REPO)  # fmt: skip
    assert bad.returncode == 2 and "nor HARDWARE:SHAPE" in bad.stderr
