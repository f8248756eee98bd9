"""``gpu.attention_tile``: the decode/verify attention pays for whole tiles of KV positions.

Measured on an H200 (docs/measurements/h200-v14.md, benchmarks/decode_width_sweep.py): widths
at odd multiples of 64 cost as the next multiple of 128. The profiler's grid columns were
timed at ``round_up(c + W, 64)`` (odd multiples of 64 for c on the 128 lattice), the loop's
steps run at multiples of 256: with the tile, both are read at the width the kernel pays.

INV-T1: tile 1 is bit-identical to a profile without the field.
INV-T2: a step whose width is on the tile lattice is charged the grid's line through the
        columns' tile widths (column c stands at c + round_up(round_up(W, align), tile)).
INV-T3: with a tile, the cost is a step function of the width: every width in one tile
        costs the same, and it never falls as the width grows.
INV-T4: the profiler's tile fit (runtime.profile_fit.attention_tile_fit) returns the tile
        times were made with (1, 128 or 256), within noise well under a tile's cost, and
        reads 128 off the H200 width sweep.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.runtime.profile_fit import attention_tile_fit
from specsched.sim.cost_model import CostModel
from specsched.sim.profile import Grid

from tests.conftest import make_scenario, tiny_profile

BUCKET = 256


def padded_profile(tile: int, align: int = 64):
    """The tiny profile with the runtime profiler's layout fields, a tile, and decode/verify
    grids that grow with context (1 us per position per request), as a GPU's do."""
    p = tiny_profile()
    ctx = [512.0, 1024.0, 2048.0, 4096.0]
    grid = Grid(x=[1.0, 64.0], context_len=ctx,
                seconds=[[1e-3 + 1e-6 * c * bs for c in ctx] for bs in (1.0, 64.0)])
    update = {"attention_width": "padded_max", "attention_bucket": BUCKET, "attention_grid_align": align,
              "attention_tile": tile, "decode": grid, "verify": grid}
    return p.model_copy(update={"gpu": p.gpu.model_copy(update=update)})


def cost_model(tile: int, window: int = 1, align: int = 64) -> CostModel:
    spec = {"speculative_algorithm": "dspark"} if window > 1 else {"speculative_algorithm": "none"}
    sc = make_scenario({**spec, "speculative_num_draft_tokens": window, "max_total_num_tokens": 10**6},
                       acceptance={"mean_accept_length": 1.0, "request_spread": 0.0})
    return CostModel(padded_profile(tile, align), sc.server)


@settings(max_examples=40, deadline=None)
@given(bs=st.sampled_from([1, 2, 4, 8]), ctx=st.integers(1, 3000), window=st.sampled_from([1, 4, 6]))
def test_tile_one_is_no_tile(bs, ctx, window):
    """INV-T1."""
    p = padded_profile(1)
    base = p.model_copy(update={"gpu": p.gpu.model_copy(update={"attention_tile": 1})})
    fields = base.gpu.model_dump(exclude={"attention_tile"})
    assert base.gpu.model_validate(fields).attention_tile == 1      # the default
    a = cost_model(1, window).step_s(bs, ctx, ctx)
    spec = {"speculative_algorithm": "dspark"} if window > 1 else {"speculative_algorithm": "none"}
    sc = make_scenario({**spec, "speculative_num_draft_tokens": window, "max_total_num_tokens": 10**6},
                       acceptance={"mean_accept_length": 1.0, "request_spread": 0.0})
    no_field = base.model_copy(update={"gpu": base.gpu.model_validate(fields)})
    assert CostModel(no_field, sc.server).step_s(bs, ctx, ctx) == a


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 10), window=st.sampled_from([1, 4, 6]))
def test_lattice_width_reads_the_column_at_its_tile_width(k, window):
    """INV-T2: a loop width of 256 k reads the grid at column 256 k - 128 (tile 128, grid
    align 64: column c was timed at c + 64, which the kernel pays as c + 128), what an
    untiled model whose columns were timed at c + 128 reads; the untiled align-64 model
    reads 64 positions further (column 256 k - 64) and charges more."""
    tiled = cost_model(128, window)
    at_128, at_64 = cost_model(1, window, align=128), cost_model(1, window, align=64)
    width = BUCKET * k
    ctx = width - window          # the longest request's context that needs this width
    assert tiled.attention_width(ctx) == width
    assert tiled.width_offset == 128 and at_64.width_offset == 64
    assert tiled.step_s(8, ctx, ctx) == at_128.step_s(8, ctx, ctx)
    assert tiled.step_s(8, ctx, ctx) < at_64.step_s(8, ctx, ctx)


@settings(max_examples=40, deadline=None)
@given(a=st.integers(1, 4000), b=st.integers(1, 4000))
def test_cost_is_a_step_function_of_the_tile(a, b):
    """INV-T3 (with bucket 256 >= tile, every width in a bucket costs the same)."""
    m = cost_model(128)
    lo, hi = sorted((a, b))
    assert m.step_s(8, lo, lo) <= m.step_s(8, hi, hi)
    if m.attention_width(lo) == m.attention_width(hi):
        assert m.step_s(8, lo, lo) == m.step_s(8, hi, hi)


# the runtime's graph-replayed steps on an H200, batch 64, ms at widths 1024..1280 every 64
# (docs/measurements/h200-v14/width-sweep.csv, benchmarks/decode_width_sweep.py)
H200_WIDTHS = [1024, 1088, 1152, 1216, 1280]
H200_BS64 = {"decode": [4.3120, 4.5940, 4.5850, 4.8770, 4.8570],
             "spec": [7.0430, 7.3740, 7.3630, 7.7020, 7.6700]}
H200_BS8 = {"decode": [2.3349, 2.4032, 2.3880, 2.4570, 2.4370],
            "spec": [3.0850, 3.1620, 3.1530, 3.2310, 3.2130]}


def test_tile_fit_reads_128_off_the_h200_sweep():
    """INV-T4 on measured times: both batch sizes of the sweep give 128; with the odd widths
    put on the line through the even ones (no tile) the same fit gives 1."""
    for times in (H200_BS64, H200_BS8):
        tile, scores = attention_tile_fit(H200_WIDTHS, times)
        assert tile == 128, scores
        linear = {k: [t[0] + (t[4] - t[0]) * (w - 1024) / 256 for w in H200_WIDTHS] for k, t in times.items()}
        assert attention_tile_fit(H200_WIDTHS, linear)[0] == 1


@settings(max_examples=60, deadline=None)
@given(tile=st.sampled_from([1, 128, 256]), base=st.sampled_from([256, 512, 1024, 2304, 4096]),
       fixed=st.floats(1e-4, 1e-2), per_pos=st.floats(1e-8, 1e-5),
       noise=st.lists(st.floats(-0.02, 0.02), min_size=10, max_size=10))
def test_tile_fit_finds_the_tile_the_times_were_made_with(tile, base, fixed, per_pos, noise):
    """INV-T4: times a + s round_up(w, tile), each off by at most 2 % of 64 positions' cost."""
    widths = [base + 64 * i for i in range(5)]
    step = per_pos * 64
    times = {kind: [fixed * f + per_pos * (-(-w // tile) * tile) + step * e
                    for w, e in zip(widths, noise[5 * j:5 * j + 5], strict=True)]
             for j, (kind, f) in enumerate((("decode", 1.0), ("spec", 1.7)))}
    got, scores = attention_tile_fit(widths, times)
    assert got == tile, scores


def test_tile_fit_refuses_a_tile_inside_the_noise():
    """A step pattern smaller than the repeats' noise is not a tile: 1."""
    widths = H200_WIDTHS
    times = {k: [t * 1e-3 for t in v] for k, v in H200_BS64.items()}
    assert attention_tile_fit(widths, times, {k: [1e-3] * 5 for k in times})[0] == 1
    assert attention_tile_fit(widths, times, {k: [1e-5] * 5 for k in times})[0] == 128


def test_profile_values_are_not_coerced(tmp_path):
    """A profile is read as strictly as a scenario (docs/reliability.md): YAML's true or "128"
    is not an attention tile, nor "2e-4" a host time; each is one ConfigError naming the key."""
    import pytest
    import yaml
    from specsched.sim.errors import ConfigError
    from specsched.sim.profile import load_profile

    base = tiny_profile().model_dump(mode="json", exclude={"path"})
    for i, (section, key, bad) in enumerate((("gpu", "attention_tile", "true"), ("gpu", "attention_tile", "'128'"),
                                             ("host", "slot_expansion_s", "'2e-4'"))):
        d = {**base, section: {**base[section], key: "PLACEHOLDER"}}
        f = tmp_path / f"p{i}.yaml"
        f.write_text(yaml.safe_dump(d).replace("PLACEHOLDER", bad))  # the value as a user writes it
        with pytest.raises(ConfigError) as e:
            load_profile(str(f))
        assert key in str(e.value)
