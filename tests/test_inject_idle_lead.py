"""``host.inject_idle_lead_by_tokens``: a block drafter's injection launched onto a drained stream.

runtime/engine.py: under ``prefill_slot_expansion_sync`` the loop blocks until the extend
drains, then launches the injection onto an idle stream, whose first kernels trail the
host's issue (as an extend's do: host.extend_idle_lead_by_tokens). On H200 round 15 the
loop's injection ran 0.4-0.5 ms longer after the block than queued behind its extend.

INV-IL1: no table (the default) is bit-identical to a profile without the field.
INV-IL2: after a slot-expansion block, every injection ends the table's lead at its extend
         tokens later than without the table (the tiny profile issues nothing on the host).
INV-IL3: without the block the injection queues behind its running extend: the lead hides.
INV-IL4: the fit is span - device per point, clamped >= 0, by tokens ascending, duplicates
         averaged; no points: None. Host conditioning scales the table like any host term.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.host_speed import scale_host
from specsched.sim.profile import HostProfile

from tests.conftest import make_scenario, tiny_profile

pytest.importorskip("torch")

from specsched.runtime.profile_fit import span_lead_fit  # noqa: E402

TOKENS = 1000


def _scenario(slot_sync: bool):
    return make_scenario({"prefill_slot_expansion_sync": slot_sync, "sync_mode": "host_block"},
                         {"kind": "closed_loop", "concurrency": 1, "num_requests": 3,
                          "input_len": {"kind": "fixed", "value": TOKENS}})


def _inject_after_extend(res) -> np.ndarray:
    """Per prefill step: the injection's end minus its extend's end (seconds)."""
    s = res.steps[res.steps["mode"] == "extend"]
    main = s[s["part"] == "main"].set_index("step")["gpu_end_s"]
    inj = s[s["part"] == "inject"].set_index("step")["gpu_end_s"]
    return (inj - main.loc[inj.index]).to_numpy()


def _with_table(lead_at_256: float, lead_at_4096: float):
    return tiny_profile(inject_idle_lead_by_tokens={"tokens": [256, 4096], "seconds": [lead_at_256, lead_at_4096]})


def test_no_table_is_no_field():
    """INV-IL1."""
    p = tiny_profile()
    fields = p.host.model_dump(exclude={"inject_idle_lead_by_tokens"})
    no_field = p.model_copy(update={"host": HostProfile.model_validate(fields)})
    a, b = SimEngine(_scenario(True), p).run(), SimEngine(_scenario(True), no_field).run()
    assert a.summary == b.summary and a.steps.equals(b.steps)


@settings(max_examples=20, deadline=None)
@given(lo=st.floats(0.0, 3e-3), hi=st.floats(0.0, 3e-3))
def test_the_injection_after_the_block_pays_its_idle_lead(lo, hi):
    """INV-IL2: the lead read at the extend's tokens (linear in the table)."""
    base = _inject_after_extend(SimEngine(_scenario(True), tiny_profile()).run())
    got = _inject_after_extend(SimEngine(_scenario(True), _with_table(lo, hi)).run())
    lead = float(np.interp(TOKENS, [256, 4096], [lo, hi]))
    assert len(got) == 3
    np.testing.assert_allclose(got - base, lead, rtol=1e-7, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(lead=st.floats(1e-6, 5e-4))
def test_queued_behind_its_extend_the_lead_hides(lead):
    """INV-IL3: a 1000-token extend (1 ms on the tiny profile) outlasts the lead."""
    base = _inject_after_extend(SimEngine(_scenario(False), tiny_profile()).run())
    got = _inject_after_extend(SimEngine(_scenario(False), _with_table(lead, lead)).run())
    np.testing.assert_allclose(got, base, rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(pts=st.lists(st.tuples(st.sampled_from([256, 1024, 4096]), st.floats(0.0, 1e-2), st.floats(0.0, 1e-2)),
                    max_size=8))
def test_the_fit(pts):
    """INV-IL4."""
    got = span_lead_fit(pts)
    if not pts:
        assert got is None
        return
    assert got["tokens"] == sorted({float(t) for t, _, _ in pts})
    for t, s in zip(got["tokens"], got["seconds"], strict=True):
        want = np.mean([max(0.0, span - dev) for tt, span, dev in pts if tt == t])
        assert s == pytest.approx(want) and s >= 0.0


def test_host_conditioning_scales_the_table():
    """INV-IL4: speed factor k multiplies the table's seconds (sim/host_speed.py)."""
    p = _with_table(1e-3, 2e-3)
    q = scale_host(p, 1.5)
    assert q.host.inject_idle_lead_by_tokens.seconds == pytest.approx([1.5e-3, 3e-3])
