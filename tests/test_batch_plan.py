"""The constructors that write a frozen dataclass's fields through a writable twin of its
slots and turn the object back into its class (BatchPlan, sim/plan.py; RequestSpec,
sim/workload.py): what comes out is the frozen object the dataclass describes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.workload import RequestSpec

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


@given(st.integers(0, 10**6), st.integers(1, 10**5), st.integers(0, 10**5), st.data())
def test_a_request_spec_holds_its_fields_and_stays_frozen(index, input_len, output_len, data):
    names = [f.name for f in dataclasses.fields(RequestSpec)]
    given_kw = data.draw(st.fixed_dictionaries({}, optional={
        "arrival_s": st.floats(0, 1e6), "priority": st.integers(-5, 5), "turn": st.integers(0, 9),
        "routing_key": st.text(max_size=4), "abort": st.text(max_size=8), "truncated_input": st.integers(1, 100),
        "tokenizer_reject": st.booleans(), "prefill_only": st.booleans()}))
    s = RequestSpec(index, input_len, output_len, **given_kw)
    defaults = {f.name: f.default for f in dataclasses.fields(RequestSpec)}
    want = {**defaults, "index": index, "input_len": input_len, "output_len": output_len, **given_kw}
    assert type(s) is RequestSpec
    assert {k: getattr(s, k) for k in names} == want
    q = dataclasses.replace(s, output_len=output_len + 1)
    assert type(q) is RequestSpec and q.output_len == output_len + 1 and dataclasses.replace(q, output_len=output_len) == s
    assert pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.index = index + 1
