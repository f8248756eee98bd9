"""BatchPlan's constructor (sim/plan.py): its fields are written through a writable twin of
its slots and the object turned back into a BatchPlan; what comes out is the frozen plan
the dataclass describes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from specsched.sim.plan import BatchPlan, ForwardMode

_lens = st.lists(st.integers(0, 5000), min_size=1, max_size=6)


@given(st.integers(0, 10**6), st.sampled_from(list(ForwardMode)), _lens, st.integers(0, 6),
       st.one_of(st.none(), st.integers(0, 99)), st.integers(1, 8))
def test_a_plan_holds_its_fields_and_stays_frozen(step, mode, lens, num_extend, chunked, window):
    n = len(lens)
    num_extend = min(num_extend, n)
    rids = tuple(range(100, 100 + n))
    args = (step, mode, rids, tuple(lens), tuple(x + 1 for x in lens), num_extend, chunked,
            rids[:num_extend], window, tuple(lens), tuple(x + 2 for x in lens), rids[num_extend:])
    p = BatchPlan(*args)
    assert type(p) is BatchPlan
    names = [f.name for f in dataclasses.fields(BatchPlan)]
    assert tuple(getattr(p, k) for k in names[:12]) == args
    assert p.batch_size == n and p.num_extend_tokens == sum(lens[:num_extend])
    # the dataclass's own ways of making one agree with the constructor
    q = dataclasses.replace(p)
    assert type(q) is BatchPlan and q == p and hash(q) == hash(p)
    assert pickle.loads(pickle.dumps(p)) == p
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.step = step + 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.batch_size = 0
    assert p == BatchPlan(*args) and p.step == step
