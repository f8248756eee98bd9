"""``gpu.attention_padding_cost``: what a padding position of the dense decode/verify attention
costs against a position holding a request's own KV.

Under ``gpu.attention_width: padded_max`` a step of ``bs`` requests attends ``P x W`` positions
(P the graph batch, W the longest request's width): ``bs (c + window)`` hold the requests' own
KV, the rest the padding slot. The grid was timed with every position real; the runtime's 8b
loop steps (H200 rounds 26-28, benchmarks/verify_step_costs.py --padding) cost about 0.7-0.85
of a real position per padding one.

INV-P1: cost 1 (the default) is the reading without the field, whatever the mix.
INV-P2: at one graph batch and width, a step costs more the more of its positions are real
        when the cost is below 1 (never less), and the same whatever the mix at 1.
INV-P3: a step with no padding (a full graph batch, every request at the width) costs the
        same whatever the padding cost.
INV-P4: the saving is linear: the column moves down by (1 - cost) x padding positions per row.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.cost_model import CostModel
from specsched.sim.profile import Grid

from tests.conftest import make_scenario, tiny_profile

BUCKET = 256
ALIGN = 64


def profile(cost: float | None):
    """The tiny profile with the runtime profiler's layout fields and grids that grow with the
    context (1 us per position per request), as a GPU's do."""
    p = tiny_profile()
    ctx = [0.0, 512.0, 1024.0, 2048.0, 4096.0]
    grid = Grid(x=[1.0, 64.0], context_len=ctx, seconds=[[1e-3 + 1e-6 * c * bs for c in ctx] for bs in (1.0, 64.0)])
    update = {"attention_width": "padded_max", "attention_bucket": BUCKET, "attention_grid_align": ALIGN,
              "decode": grid, "verify": grid}
    if cost is not None:
        update["attention_padding_cost"] = cost
    return p.model_copy(update={"gpu": p.gpu.model_copy(update=update)})


def model(cost: float | None, window: int = 4) -> CostModel:
    spec = {"speculative_algorithm": "dspark"} if window > 1 else {"speculative_algorithm": "none"}
    sc = make_scenario({**spec, "speculative_num_draft_tokens": window, "max_total_num_tokens": 10**6,
                        "max_running_requests": 64, "cuda_graph_max_bs": 64},
                       acceptance={"mean_accept_length": 1.0, "request_spread": 0.0})
    return CostModel(profile(cost), sc.server)


mixes = st.tuples(st.integers(1, 64), st.integers(100, 3000), st.floats(0.05, 1.0), st.sampled_from([1, 4, 6]))


@settings(max_examples=40, deadline=None)
@given(mix=mixes)
def test_cost_one_is_no_field(mix):
    """INV-P1."""
    bs, longest, frac, window = mix
    mean = longest * frac
    assert model(1.0, window).step_s(bs, mean, longest) == model(None, window).step_s(bs, mean, longest)


@settings(max_examples=40, deadline=None)
@given(mix=mixes, cost=st.floats(0.0, 0.95))
def test_more_real_positions_cost_more_below_one(mix, cost):
    """INV-P2: same batch, same longest request (so the same graph batch and width); the mean
    context moves only how many positions are real."""
    bs, longest, frac, window = mix
    low, high = longest * frac * 0.5, longest * frac
    cm, flat = model(cost, window), model(1.0, window)
    assert cm.step_s(bs, low, longest) <= cm.step_s(bs, high, longest)
    assert flat.step_s(bs, low, longest) == flat.step_s(bs, high, longest)
    if (high - low) * bs >= 40 and high >= 256:   # beyond the column's 10-token rounding and its floor at 0
        assert cm.step_s(bs, low, longest) < cm.step_s(bs, high, longest)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(2, 12), window=st.sampled_from([1, 4, 6]), cost=st.floats(0.0, 1.0))
def test_no_padding_costs_the_same(k, window, cost):
    """INV-P3: 64 requests (a graph batch) each holding width - window tokens."""
    width = k * BUCKET
    ctx = width - window
    assert model(cost, window).step_s(64, ctx, ctx) == model(1.0, window).step_s(64, ctx, ctx)


def test_the_column_moves_by_the_padding_saved():
    """INV-P4 on decode (window 1, graph batch 8 exact): contexts 300 and 700, width 768; the
    grid's column for 768 is 768 - 64 = 704; padding 8 x 768 - (301 + 701) x 4 = 2136
    positions, 267 a row; at cost 0.75 the column is 704 - 66.75 ~ 640 (rounded to 10)."""
    cm = model(0.75, 1)
    got = cm.step_s(8, 500.0, 700)
    assert got == cm.step_grid(8, 640.0)
    assert model(1.0, 1).step_s(8, 500.0, 700) == cm.step_grid(8, 700.0)


@settings(max_examples=20, deadline=None)
@given(bs=st.integers(65, 96), longest=st.integers(300, 3000), cost=st.floats(0.0, 1.0))
def test_an_eager_step_keeps_its_eager_cost(bs, longest, cost):
    """Above the largest graph (64 here) a step runs eagerly: it pays gpu.eager_overhead_s
    on top of its padding-priced forward, whatever the padding cost (the padding count once
    shadowed the padded batch in CostModel.step_s and dropped the overhead)."""
    sc = make_scenario({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1,
                        "max_total_num_tokens": 10**6, "max_running_requests": 128, "cuda_graph_max_bs": 64},
                       acceptance={"mean_accept_length": 1.0, "request_spread": 0.0})
    p = profile(cost)
    with_overhead = p.model_copy(update={"gpu": p.gpu.model_copy(update={"eager_overhead_s": 0.004})})
    cm, plain = CostModel(with_overhead, sc.server), CostModel(p, sc.server)
    assert cm.padded_batch(bs) is None
    assert cm.step_s(bs, longest / 2, longest) - plain.step_s(bs, longest / 2, longest) == pytest.approx(0.004)
