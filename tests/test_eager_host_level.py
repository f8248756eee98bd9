"""benchmarks/eager_host_level.py: an eager launch call is paired with the reference sample
taken right after it, so a call that is a fixed number of reference works reads that number
on both host levels; samples after other calls pair with none."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import load_benchmark

ehl = load_benchmark("eager_host_level")


def _run(levels: list[float], works: float = 100.0, mark_lag: float = 5e-5):
    """Per step: an extend (3 ms call, never paired) then an eager verify at batch 48 whose
    call is ``works`` reference works at that step's level; one sample after each call."""
    rows, calls, cpu, samples = [], [], [], []
    t = 0.0
    for i, ref in enumerate(levels):
        for mode, bs, c in (("extend", 8, 3e-3), ("verify", 48, works * ref)):
            rows.append((2 * i + (mode == "verify"), mode, "main", bs, t + mark_lag))
            calls.append(c)
            cpu.append(c)
            t += c
            samples.append((t + 1e-5, ref * (1.0 if mode == "verify" else 1.3)))
            t += 1e-3
    steps = pd.DataFrame(rows, columns=["step", "mode", "part", "batch_size", "gpu_start_s"])
    probe = pd.DataFrame({"host_launch_s": calls, "host_launch_cpu_s": cpu})
    speed = pd.DataFrame(samples, columns=["t_s", "reference_work_s"])
    return steps, probe, speed


@settings(max_examples=30, deadline=None)
@given(levels=st.lists(st.sampled_from([2.6e-4, 4.5e-4]), min_size=1, max_size=20), works=st.floats(50, 150))
def test_paired_calls_read_their_reference_works_on_either_level(levels, works):
    steps, probe, speed = _run(levels, works)
    e = ehl.eager_launches(steps, probe, graph_max_bs=16)
    assert len(e) == len(levels)
    got = ehl.paired_ratios(e, speed)
    assert got.size == len(levels)  # the extends' samples pair with no eager call
    assert got == pytest.approx(np.full(len(levels), works))


def test_graph_batches_are_not_eager_and_mismatched_tables_are_refused():
    steps, probe, _ = _run([2.6e-4] * 3)
    assert ehl.eager_launches(steps, probe, graph_max_bs=48).empty
    with pytest.raises(ValueError, match="host_probe.parquet has 2 rows"):
        ehl.eager_launches(steps, probe.iloc[:2], graph_max_bs=16)
