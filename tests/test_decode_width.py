"""The attention width of a decode step, runtime against simulator.

The runtime's decode/verify attention is dense over one graph context bucket for the batch
(runtime/spec_cycle.py ``_prepare``); the simulator charges the profile grid at the width it
computes for the same plan (sim.cost_model.CostModel.attention_width), read at the column
the profiler timed at that width (``gpu.attention_grid_align``). Both must name the same
width by construction: INV-W1 (the engine picks, step by step, the width the simulator
charges). The kernel's tile (``gpu.attention_tile``) is tests/test_attention_tile.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.runtime.runner import CTX_BUCKET_STEP  # noqa: E402
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
    cost = CostModel(padded_profile(CTX_BUCKET_STEP), sc.server)
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
