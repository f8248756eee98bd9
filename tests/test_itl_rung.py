"""Where the median ITL sits on speculative decoding's ladder (sim/metrics.py
``median_itl_rung``) and the validate note it gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.metrics import itl_values, median_itl_rung, median_itl_rung_note


def _chunks(deliveries: list[list[tuple[float, int]]]) -> pd.DataFrame:
    rows = [(rid, t, n) for rid, req in enumerate(deliveries) for t, n in req]
    return pd.DataFrame(rows, columns=["rid", "time_s", "n_tokens"])


def _ladder(cycle_s: float, tokens: list[int]) -> list[tuple[float, int]]:
    """One request: a first token at 0, then a delivery of ``n`` tokens every ``cycle_s``."""
    return [(0.0, 1)] + [((i + 1) * cycle_s, n) for i, n in enumerate(tokens)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.floats(1e-4, 0.1), st.integers(1, 8)), min_size=1, max_size=12),
                min_size=1, max_size=6))
def test_the_rung_reproduces_the_median_itl(reqs):
    """Invariant RUNG-MEDIAN: dt / n of the delivery named is the lower middle ITL value,
    i.e. the median whenever the middle two values are equal or the count is odd."""
    deliveries = []
    for req in reqs:
        t, rows = 0.0, [(0.0, 1)]
        for dt, n in req:
            t += dt
            rows.append((t, n))
        deliveries.append(rows)
    chunks = _chunks(deliveries)
    n, dt = median_itl_rung(chunks)
    v = np.sort(itl_values(chunks))
    assert np.isclose(dt / n, v[(len(v) - 1) // 2])
    assert 1 <= n <= 8


def test_medians_on_different_rungs_get_a_note_naming_both_and_the_means():
    # same 15 ms cycle; predicted commits 8 tokens a bit more often than measured: the median
    # gap falls on the 1/8 rung in one and the 1/6 rung in the other
    pred = _chunks([_ladder(0.015, [8, 8, 8, 6, 2])])
    meas = _chunks([_ladder(0.015, [8, 6, 6, 6, 2])])
    assert median_itl_rung(pred) == (8, 0.015)
    assert median_itl_rung(meas)[0] == 6
    note = median_itl_rung_note(pred, meas, {"mean_itl_ms": 3.1, "median_itl_ms": 1.875},
                                {"mean_itl_ms": 3.2, "median_itl_ms": 2.5})
    assert note is not None and "carrying 8" in note and "carrying 6" in note and "3.100 vs 3.200" in note
    # medians that agree get no note, whatever deliveries they come from
    assert median_itl_rung_note(pred, meas, {"median_itl_ms": 2.5}, {"median_itl_ms": 2.52}) is None


def test_the_same_rung_and_interval_gives_no_note_and_a_longer_interval_does():
    a = _chunks([_ladder(0.015, [4, 4, 4])])
    b = _chunks([_ladder(0.0152, [4, 4, 4])])
    assert median_itl_rung_note(a, b, {}, {}) is None
    c = _chunks([_ladder(0.017, [4, 4, 4])])    # a cycle stretched by a prefill between
    assert median_itl_rung_note(c, b, {}, {}) is not None


def test_no_rung_without_a_second_delivery():
    assert median_itl_rung(_chunks([[(0.0, 1)], [(0.1, 1)]])) is None
    assert median_itl_rung(pd.DataFrame(columns=["rid", "time_s", "n_tokens"])) is None
