"""Recorder.tables hands out its chunks, steps and timeseries columns as views of the
records' own storage (no copy: the tables are made once a run is over). The views hold the
recorded values, a second call gives the same tables, and the records refuse to grow while
a view exists (a BufferError, never a silent change of the tables)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.records import Recorder


@settings(max_examples=50, deadline=None)
@given(steps=st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=3), min_size=1, max_size=12))
def test_table_columns_are_views_of_what_was_recorded(steps):
    rec = Recorder("full")
    m = max(len(s) for s in steps)
    for rid in range(m):
        rec.request_sent(rid, 8, 100, 0.0)
    want = []
    for j, counts in enumerate(steps):
        t = 1.0 + j * 0.25
        rids = list(range(len(counts)))
        rec.deliver_step(t, rids, counts, [False] * len(counts))
        rec.step(j, "decode", "main", len(counts), 0, t - 0.2, t - 0.1, 0.0, sum(counts), len(counts))
        rec.pass_state(t, len(counts), 0, 10 * j)
        want += [(r, t, n) for r, n in zip(rids, counts, strict=True)]
    _, chunks, steps_t, ts = rec.tables({})
    assert list(zip(chunks["rid"].tolist(), chunks["time_s"].tolist(), chunks["n_tokens"].tolist(),
                    strict=True)) == want
    assert steps_t["step"].tolist() == list(range(len(steps)))
    assert ts["kv_used_tokens"].tolist() == [10 * j for j in range(len(steps))]
    for col in (chunks["rid"], chunks["time_s"], steps_t["gpu_end_s"], ts["time_s"]):
        assert col.base is not None   # a view, not a copy
    again = rec.tables({})[1]
    for k in ("rid", "time_s", "n_tokens"):
        assert np.array_equal(again[k], chunks[k])
    with pytest.raises(BufferError):
        rec.deliver_step(99.0, [0], [1], [False])
