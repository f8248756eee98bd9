"""The attention width of a decode step, runtime against simulator.

The runtime's decode/verify attention is dense over one graph context bucket for the batch
(runtime/spec_cycle.py ``_prepare``); the simulator charges the profile grid at the width it
computes for the same plan (sim.cost_model.CostModel.attention_width), read at the column
the profiler timed at that width (``gpu.attention_grid_align``). Both must name the same
width by construction: INV-W1 (the engine picks, step by step, the width the simulator
charges), INV-W2 (every profiler grid column is timed at a width the engine runs at, and
the simulator maps that width back to that column).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.runtime.runner import CTX_BUCKET_STEP, grid_context_buckets  # noqa: E402
from specsched.sim.cost_model import CostModel  # noqa: E402
from specsched.sim.plan import ForwardMode  # noqa: E402

from tests.conftest import make_scenario, tiny_profile  # noqa: E402


def padded_profile(align: int):
    """The tiny profile with the layout fields the runtime's profiler writes."""
    p = tiny_profile()
    gpu = p.gpu.model_copy(update={"attention_width": "padded_max", "attention_bucket": CTX_BUCKET_STEP,
                                   "attention_grid_align": align})
    return p.model_copy(update={"gpu": gpu})


def test_engine_picks_the_width_the_simulator_charges():
    """INV-W1 on a replayed run (tiny model, CPU): every decode launch's context bucket equals
    CostModel.attention_width of the same plan's longest context. The longest request
    (at most 300 + 40 tokens) puts the engine's row width off the 256 lattice unless it is rounded
    to it (max_context 340 + 4 + 64 = 408: 448 at CTX_ALIGN), so the steps past 256
    positions ran at 448 while the simulator charged 512."""
    sc = make_scenario({"max_running_requests": 4, "chunked_prefill_size": 512, "max_prefill_tokens": 1024,
                        "speculative_algorithm": "none", "speculative_num_draft_tokens": 1,
                        "max_total_num_tokens": 5000},
                       {"kind": "burst", "num_requests": 4, "input_len": {"kind": "uniform", "value": 300, "range_ratio": 0.8},
                        "output_len": {"kind": "fixed", "value": 40}})
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    cost = CostModel(padded_profile(CTX_BUCKET_STEP), sc.server, warn_to=None)
    runner = eng.runner
    picked: list[int] = []
    bucket = runner.context_bucket

    def record(need: int) -> int:
        c = bucket(need)
        picked.append(c)
        return c

    runner.context_bucket = record
    charged: list[int] = []
    launch = eng._launch_call

    def launch_and_charge(op):
        plan, n = op.plan, op.plan.num_extend
        before = len(picked)
        h = launch(op)
        if op.part == "main" and n < plan.batch_size:
            assert plan.mode is ForwardMode.DECODE and len(picked) == before + 1
            charged.append(cost.attention_width(max(plan.prefix_lens[n:])))
        return h

    eng._launch_call = launch_and_charge
    eng.run()
    assert len(charged) >= 30 and max(charged) > CTX_BUCKET_STEP  # past the first bucket edge
    assert picked == charged


@settings(max_examples=60, deadline=None)
@given(cols=st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True), window=st.integers(1, 16))
def test_grid_columns_are_timed_at_widths_the_engine_runs_at(cols, window):
    """INV-W2: with contexts on the engine's bucket lattice, each grid column ``c`` is timed at
    a width that is one of the engine's buckets, and the simulator reads a step of that
    width (decode or verify, any window) at column ``c`` itself, not between columns."""
    contexts = sorted(CTX_BUCKET_STEP * k for k in cols)
    align, widths = grid_context_buckets(contexts, window)
    assert align == CTX_BUCKET_STEP
    spec = {"speculative_algorithm": "dspark"} if window > 1 else {"speculative_algorithm": "none"}
    sc = make_scenario({**spec, "speculative_num_draft_tokens": window, "max_total_num_tokens": 10**6},
                       acceptance={"mean_accept_length": 1.0, "request_spread": 0.0})
    assert sc.server.spec_window == window
    cost = CostModel(padded_profile(align), sc.server, warn_to=None)
    for c, w in zip(contexts, widths, strict=True):
        assert w % CTX_BUCKET_STEP == 0 and c + window <= w
        # the engine's width for a step whose longest request holds c tokens (need c + window)
        assert cost.attention_width(c) == w
        assert w - cost.width_offset == c


def test_grid_columns_off_the_lattice_keep_their_alignment():
    """Contexts that are not multiples of the bucket step keep the old layouts: multiples of
    64 are timed at round_up(c + W, 64) (align 64), anything else is read as c + W (align 1)."""
    assert grid_context_buckets([64, 512], 4) == (64, [128, 576])
    assert grid_context_buckets([100, 512], 4) == (1, [128, 576])


def test_width_sweep_times_each_width_at_that_bucket(tmp_path):
    """benchmarks/decode_width_sweep.py (tiny model, CPU): every row ran at the width it
    names (the bucket covering the longest request), and the CSV is written."""
    from tests.conftest import load_benchmark

    mod = load_benchmark("decode_width_sweep")
    out = tmp_path / "sweep.csv"
    assert mod.main(["--device", "cpu", "--preset", "tiny", "--batch", "2", "--start", "256", "--stop", "320",
                     "--repeats", "1", "--window", "4", "--pad", "--out", str(out)]) == 0
    import pandas as pd

    df = pd.read_csv(out)
    assert sorted(set(df.width)) == [256, 320] and len(df) == 2 * 2 * 2
    half = df[df.layout == "half"]
    assert (half.mean_len < df[df.layout == "full"].mean_len.max()).all()
    assert mod.main(["--batch", "x"]) == 2
