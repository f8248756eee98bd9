"""benchmarks/ttft_sensitivity.py: the gap split of a TTFT sample and the scaled costs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import load_benchmark

ts = load_benchmark("ttft_sensitivity")


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 40), lo=st.floats(0.01, 0.2), hi=st.floats(0.5, 2.0))
def test_median_of_an_even_split_is_the_gap_midpoint(n, lo, hi):
    """Half the requests unqueued (TTFT near lo), half queued (near hi): the median is the
    midpoint of the gap, so it moves by half of whatever moves the first queued request."""
    fast = lo + np.linspace(0, 0.01, n)
    slow = hi + np.linspace(0, 0.3, n)
    got = ts.ttft_split(np.concatenate([slow, fast]))
    assert got["queued"] == n
    assert np.isclose(got["median"], (fast.max() + slow.min()) / 2 * 1e3)
    assert np.isclose(got["gap_ms"], (slow.min() - fast.max()) * 1e3)


def test_scaled_profile_scales_only_the_named_grid():
    """knob decode scales gpu.decode by the factor and leaves gpu.extend as it was."""
    from specsched.sim.profile import load_profile

    p = load_profile("h200-1b")
    q = ts.scaled_profile(p, "decode", 1.1)
    if p.gpu.decode is not None:
        assert np.allclose(np.array(q.gpu.decode.seconds), 1.1 * np.array(p.gpu.decode.seconds))
    assert q.gpu.extend.seconds == p.gpu.extend.seconds
    assert ts.scaled_profile(p, "host", 1.1) is p


def test_bad_input_is_one_line_and_exit_2(capsys):
    """An unknown override key and an out-of-range eps: one line on stderr, exit 2."""
    sc = str(Path(__file__).resolve().parents[1] / "scenarios" / "h200" / "poisson-nospec.yaml")
    assert ts.main([sc, "--profile", "h200-1b", "--set", "server.no_such_key=1"]) == 2
    assert ts.main([sc, "--profile", "h200-1b", "--eps", "0.7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("ttft_sensitivity: ") for e in err)
