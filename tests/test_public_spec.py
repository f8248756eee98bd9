"""benchmarks/public_spec.py: the acceptance it assumes is what it says, and its batch-1
EAGLE rows keep the drafter's mechanisms (an EAGLE-3 head's own LM head, a tree's depth)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from specsched.sim.acceptance import mean_accept_length

from tests.conftest import load_benchmark

ps = load_benchmark("public_spec")


@given(window=st.integers(2, 12), frac=st.floats(0.01, 0.99))
def test_rate_gives_the_stated_accept_length(window, frac):
    """Invariant: the constant per-position rate reproduces the accept length it was solved for."""
    mean = 1 + frac * (window - 1)
    p = ps.rate(mean, window)
    assert mean_accept_length(np.full(window - 1, p)) == pytest.approx(mean, abs=1e-6)


def test_batch1_eagle_rows(tmp_path):
    """Every batch-1 case is predicted; an EAGLE-3 head (its own 32000-row LM head) runs
    faster than EAGLE-2 on the target's head at the same settings even with EAGLE-2's lower
    acceptance removed from the comparison, and a 5-step tree accepts at most 6 tokens."""
    rows = ps.eagle_b1(tmp_path, seeds=1)
    assert {r[0] for r in rows} == {k for k in ps.CASES if "-b1-" in k}
    by = {(case, arm): (tok_s, acc) for case, arm, tok_s, acc in rows}
    for st_ in ("5/8/32", "3/1/4"):
        (t2, a2), (t3, a3) = by["l8-h100-b1-eagle2", f"eagle {st_}"], by["l8-h100-b1-eagle3", f"eagle3 {st_}"]
        assert t3 / a3 > t2 / a2   # cycles per second: the smaller draft head makes each cycle shorter
    assert 1 < by["l8-h100-b1-eagle3", "eagle3 5/8/32"][1] <= 6
