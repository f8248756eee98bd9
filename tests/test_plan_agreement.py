"""analysis/plan_agreement.py: where two runs' step plans agree, and the line validate prints."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from specsched.analysis.plan_agreement import PLAN_COLUMNS, plan_agreement


def steps(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    """A steps table of (mode, batch, extend tokens) rows, with times that differ per call."""
    return pd.DataFrame([{"step": i, "mode": m, "part": "main", "batch_size": b, "num_extend_tokens": e,
                          "accepted_tokens": b, "decoding_reqs": 0 if m == "extend" else b,
                          "gpu_start_s": i * 1e-3, "gpu_end_s": i * 1e-3 + 5e-4} for i, (m, b, e) in enumerate(rows)])


ROW = st.tuples(st.sampled_from(["extend", "verify", "decode"]), st.integers(1, 64), st.integers(0, 4096))


@given(st.lists(ROW, min_size=1, max_size=30))
def test_a_plan_agrees_with_itself_whatever_its_times(rows):
    """Invariant: the times are not part of a plan; the same rows agree row for row."""
    a, b = steps(rows), steps(rows)
    b["gpu_end_s"] *= 3.0
    agree = plan_agreement(a, b, {"num_retractions": 2}, {"num_retractions": 2})
    assert agree.all_identical and agree.identical == len(rows) and agree.first_difference is None
    assert agree.line().startswith(f"step plans: {len(rows)} of {len(rows)} rows identical (retractions 2 / 2")


@given(st.lists(ROW, min_size=1, max_size=30), st.data())
def test_the_identical_prefix_ends_at_the_first_differing_row(rows, data):
    """Invariant: changing row k (in any plan column) leaves exactly k leading rows identical,
    and the line names both runs' row k."""
    k = data.draw(st.integers(0, len(rows) - 1))
    changed = list(rows)
    m, b, e = rows[k]
    changed[k] = (m, b + 1, e)
    agree = plan_agreement(steps(rows), steps(changed))
    assert agree.identical == k and not agree.all_identical
    def text(t: pd.DataFrame) -> str:
        return " ".join(f"{c}={t.iloc[k][c]}" for c in PLAN_COLUMNS)

    assert agree.first_difference == (text(steps(rows)), text(steps(changed)))
    assert f"batch_size={b} " in agree.first_difference[0] and f"batch_size={b + 1} " in agree.first_difference[1]
    assert f"the first {k} of {len(rows)} / {len(rows)} rows identical" in agree.line()


def test_a_run_that_stops_early_is_a_prefix_not_a_difference():
    rows = [("extend", 4, 512), ("verify", 4, 0), ("verify", 4, 0)]
    agree = plan_agreement(steps(rows), steps(rows[:2]))
    assert agree.identical == 2 and agree.first_difference is None and not agree.all_identical
    assert agree.extend_batches == (1, 1) and agree.retractions == (None, None)
    assert "retractions n/a / n/a" in agree.line()


def test_tables_without_plan_columns_are_refused():
    with pytest.raises(ValueError, match="not results steps tables"):
        plan_agreement(pd.DataFrame({"x": [1]}), pd.DataFrame({"x": [1]}))
    assert set(PLAN_COLUMNS) <= set(steps([("decode", 1, 0)]).columns)


def test_mixed_steps_count_as_extend_batches():
    """A mixed chunk is a prefill batch carrying decode rows (SGLang's enable_mixed_chunk):
    a run of 2 extends and 3 mixed steps made 5 extend batches (they were counted as 2)."""
    rows = [("extend", 4, 128), ("mixed", 5, 128), ("mixed", 5, 128), ("verify", 5, 0), ("mixed", 6, 64),
            ("extend", 2, 64)]
    agree = plan_agreement(steps(rows), steps(rows))
    assert agree.extend_batches == (5, 5)
    assert "extend batches 5 / 5" in agree.line()


def test_preemptions_are_said_beside_retractions_when_a_run_preempted():
    rows = [("extend", 4, 128), ("verify", 4, 0)]
    quiet = plan_agreement(steps(rows), steps(rows), {"num_preemptions": 0}, {"num_preemptions": 0})
    assert "preemptions" not in quiet.line()   # a run without priorities: nothing to say
    agree = plan_agreement(steps(rows), steps(rows), {"num_retractions": 0, "num_preemptions": 2},
                           {"num_retractions": 0, "num_preemptions": 1})
    assert agree.preemptions == (2, 1)
    assert "preemptions 2 / 1; predicted / measured" in agree.line()
