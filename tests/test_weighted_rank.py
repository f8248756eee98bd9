"""sim/weighted_rank.py: the values at ranks of a repeated sample, found by sorting a few
value ranges, are those of the full sort, whatever the bracketing sample (its size and
margin only change the work): with many equal values, with one value holding most of the
weight, with infinite values, with ranks at both ends.
The cuts' unique values come without np.unique (which imports numpy.ma): the same array,
bit for bit, and no numpy.ma in the process after a bracketed call.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim import weighted_rank
from specsched.sim.weighted_rank import _unique_sorted, values_at_ranks


def _reference(v: np.ndarray, w: np.ndarray, ranks: list[int]) -> list[float]:
    rep = np.sort(np.repeat(v, w))
    return [rep[r] for r in ranks]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**31), distinct=st.sampled_from([1, 2, 5, 40, None]),
       sample=st.integers(1, 200), margin=st.sampled_from([0.0, 1e-4, 0.004, 0.05, 0.5]),
       heavy=st.booleans(), infinite=st.booleans(), nranks=st.integers(1, 9),
       block=st.sampled_from([None, 1, 7, 64]))
def test_values_at_ranks_are_the_full_sorts(n, seed, distinct, sample, margin, heavy, infinite, nranks, block):
    """The values at the ranks are the full sort's, whatever the bracketing sample and
    margin and the blocks of the counting pass (``block``: pairs a block; the module's is
    2**15)."""
    blocks = weighted_rank._BLOCK
    if block is not None:
        weighted_rank._BLOCK = block
    try:
        _full_sort_case(n, seed, distinct, sample, margin, heavy, infinite, nranks)
    finally:
        weighted_rank._BLOCK = blocks


def _full_sort_case(n, seed, distinct, sample, margin, heavy, infinite, nranks) -> None:
    rng = np.random.default_rng(seed)
    v = rng.random(n) * 0.05 if distinct is None else rng.choice(rng.random(distinct) * 0.05, n)
    w = rng.integers(1, 8, n)
    if heavy:
        w[rng.integers(n)] = 10 * n       # one value holds most of the weight
    if infinite:
        v[rng.integers(n)] = np.inf
    total = int(w.sum())
    ranks = rng.integers(0, total, nranks).tolist() + [0, total - 1]
    got = values_at_ranks(v, w, ranks, sample=sample, margin=margin)
    want = _reference(v, w, ranks)
    assert [float(x) for x in got] == [float(x) for x in want]
    assert all(type(x) is np.float64 for x in got)


def test_a_large_sample_takes_the_ranges_and_matches_the_full_sort():
    # above 4 x SAMPLE pairs the default path brackets; ITL-like values (a few hundred
    # distinct gaps, multiplicities of a batch's size)
    rng = np.random.default_rng(7)
    n = 300_000
    v = rng.choice(rng.random(500) * 0.02, n)
    w = rng.integers(1, 12, n)
    total = int(w.sum())
    ranks = [total // 2 - 1, total // 2, int(0.9 * (total - 1)), int(0.99 * (total - 1)) + 1, total - 1]
    assert [float(x) for x in values_at_ranks(v, w, ranks)] == [float(x) for x in _reference(v, w, ranks)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1e-3, 2.5e-3, 0.1, np.inf, -np.inf, 5e-324]) | st.floats(
    allow_nan=False, width=64), min_size=0, max_size=30))
def test_unique_sorted_is_np_unique_bit_for_bit(values):
    a = np.array(values, dtype=np.float64)
    got, want = _unique_sorted(a.copy()), np.unique(a)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()   # signed zeros too


def test_bracketing_imports_no_numpy_ma():
    code = ("import sys, numpy as np; from specsched.sim.weighted_rank import values_at_ranks; "
            "v = np.random.default_rng(1).random(300_000); w = np.ones(v.size, dtype=np.int64); "
            "values_at_ranks(v, w, [0, 150_000, 299_999]); print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
