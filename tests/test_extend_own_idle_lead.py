"""The profiler times the extend's own idle lead apart from its injection's; the simulator
charges each forward the lead of the launch sequence the loop makes.

``host.extend_idle_lead_by_tokens`` is timed over extend + ``prepare_inject`` + inject (idle
wall less both device times): the sequence of a prefill whose injection is launched right
behind its extend. Where a slot-expansion block launches the injection apart, that lead
charged the injection twice (on H200 round 18 a host_block extend ended 0.4-0.8 ms after its
own issue, docs/measurements/h200-v18.md, finding 2; round 20 +131 % TPOT on small-chunk), so
the profiler now times the same sequence with events between the launches
(runtime/profile_gpu.py ``_idle_lead``) and writes ``host.extend_own_idle_lead_by_tokens``
and ``host.inject_unprepared_idle_lead_by_tokens`` (docs/measurements/h200-v19.md).

INV-OL1: a lead is never negative (the fit clamps span - device at 0), tokens ascend.
INV-OL2: without a slot-expansion block every forward pays the combined rule (the combined
         table or scalar on the extend, host.inject_idle_lead_by_tokens on every injection),
         split tables or not; with one the extend pays its own lead where the profile has it.
INV-OL3: the split tables change no result without a block (plain decoding included).
INV-OL4: with a block, an extend on an idle stream ends its own lead after its launch plus
         its device time.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import SimEngine
from specsched.sim.host_speed import scale_host
from specsched.sim.profile import LeadTable, Profile, load_profile

from tests.conftest import make_scenario, profile_with_faked_idle_lead, tiny_profile

TOKENS = 1000
COMBINED = {"tokens": [256, 4096], "seconds": [6e-3, 2e-3]}


def _table(lo: float, hi: float) -> dict:
    return {"tokens": [256, 4096], "seconds": [lo, hi]}


def _scenario(slot_sync: bool, n: int = 1):
    return make_scenario({"prefill_slot_expansion_sync": slot_sync, "sync_mode": "host_block"},
                         {"kind": "closed_loop", "concurrency": 1, "num_requests": n,
                          "input_len": {"kind": "fixed", "value": TOKENS}})


def _prefill(res, part: str):
    s = res.steps[(res.steps["mode"] == "extend") & (res.steps["part"] == part)]
    return s.set_index("step")


# ------------------------------------------------------------------------------ the fit
point = st.tuples(st.integers(1, 20000), st.floats(0, 0.05), st.floats(0, 0.05))


@given(st.lists(point, max_size=12))
@settings(max_examples=60, deadline=None)
def test_span_lead_fit_is_never_negative(points):
    """INV-OL1."""
    from specsched.runtime.profile_fit import span_lead_fit

    table = span_lead_fit(points)
    if not points:
        assert table is None
        return
    assert all(s >= 0 for s in table["seconds"])
    assert table["tokens"] == sorted({float(t) for t, _, _ in points})
    LeadTable(**table)


# --------------------------------------------------------------- the profiler's writing path
def _fake_idle_lead(self, tokens, ext, inj):  # noqa: ANN001 -- the GPU's medians, faked
    """The idle sequence as a GPU measures it: the extend's span 1.5 ms over its device time
    (0.5 ms above 16 tokens), the unprepared injection's 0.7 ms, the combined wall 3 ms."""
    ext()
    inj()
    self._tick()
    self.reps.setdefault("idle_lead", []).append(3)
    own = 1.5e-3 if tokens <= 16 else 0.5e-3
    return {"device": [0.005] * 3, "wall": [0.008] * 3, "ext_device": [0.004] * 3,
            "ext_span": [0.004 + own] * 3, "inj_device": [0.001] * 3, "inj_span": [0.0017] * 3}


def test_profiler_writes_each_forwards_lead(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``specsched profile`` (GPU medians faked on CPU): the extend's own table, the
    unprepared injection's, the combined one as before, provenance for each, the per-term
    host reference, and the profile loads. Before the split only the combined table existed."""
    pytest.importorskip("torch")
    out = profile_with_faked_idle_lead(monkeypatch, tmp_path, _fake_idle_lead, "16,64")
    text = capsys.readouterr().out
    assert "extend own idle lead: 16 tok 1.500 ms, 64 tok 0.500 ms" in text
    assert "unprepared injection idle lead: 16 tok 0.700 ms" in text
    d = yaml.safe_load(out.read_text())
    host, prov = d["host"], d["provenance"]
    assert host["extend_own_idle_lead_by_tokens"]["tokens"] == [16.0, 64.0]
    assert host["extend_own_idle_lead_by_tokens"]["seconds"] == pytest.approx([1.5e-3, 0.5e-3])
    assert host["inject_unprepared_idle_lead_by_tokens"]["seconds"] == pytest.approx([7e-4, 7e-4])
    assert host["extend_idle_lead_by_tokens"]["seconds"] == pytest.approx([3e-3, 3e-3])  # combined, as before
    own = prov["host.extend_own_idle_lead_by_tokens"]
    assert "e0 -> e1" in own and "16: 5.5 ms / 4 ms -> 1.5 ms" in own
    assert "e1 -> e2" in prov["host.inject_unprepared_idle_lead_by_tokens"]
    assert "charges this table to an extend launched with its injection right behind it" in prov["host.extend_idle_lead_by_tokens"]
    assert "slot-expansion block launches the injection apart" in own
    assert "Recorded, not charged" in prov["host.inject_unprepared_idle_lead_by_tokens"]
    by_term = host["reference_work_by_term"]
    assert by_term["host.extend_own_idle_lead_by_tokens"] == by_term["host.launch_per_extend_s"]
    p = load_profile(str(out))
    assert isinstance(p, Profile) and p.host.extend_own_idle_lead_by_tokens.at(40) == pytest.approx(1e-3)


def test_cpu_profile_measures_no_split() -> None:
    """Without the fake, a CPU run measures no lead: neither table, provenance says so."""
    pytest.importorskip("torch")
    from specsched.runtime.profiler import profile_device

    d = profile_device(device="cpu", preset="tiny", spec_window=3, max_bs=2, contexts=[64],
                       extend_tokens=[16], cuda_graph_max_bs=2, repeats=3, progress=False)
    for key in ("extend_own_idle_lead_by_tokens", "inject_unprepared_idle_lead_by_tokens"):
        assert key not in d["host"]
        assert "not measured" in d["provenance"][f"host.{key}"]


# ------------------------------------------------------------------------ the simulator
def _old_rule(h, plan, part: str) -> float:
    """The lead each forward paid before the split (sim/cost_model.py before this change)."""
    if part == "inject":
        t = h.inject_idle_lead_by_tokens
        return t.at(plan.num_extend_tokens) if t is not None else 0.0
    if not plan.num_extend:
        return 0.0
    t = h.extend_idle_lead_by_tokens
    return t.at(plan.num_extend_tokens) if t is not None else h.extend_idle_lead_s


secs = st.floats(0.0, 0.02)


@given(scalar=secs, combined=st.none() | st.tuples(secs, secs), inject=st.none() | st.tuples(secs, secs),
       own=st.none() | st.tuples(secs, secs), unprepared=st.none() | st.tuples(secs, secs),
       tokens=st.integers(0, 20000), part=st.sampled_from(["main", "inject"]), block=st.booleans())
@settings(max_examples=200, deadline=None)
def test_each_forward_pays_the_lead_of_its_launch_sequence(scalar, combined, inject, own, unprepared, tokens, part,
                                                           block):
    """INV-OL2 at the cost model: every (tables, tokens, part, block)."""
    extra = {"extend_idle_lead_s": scalar}
    for key, pair in (("extend_idle_lead_by_tokens", combined), ("inject_idle_lead_by_tokens", inject),
                      ("extend_own_idle_lead_by_tokens", own), ("inject_unprepared_idle_lead_by_tokens", unprepared)):
        if pair:
            extra[key] = _table(*pair)
    prof = tiny_profile(**extra)
    cost = CostModel(prof, make_scenario({"prefill_slot_expansion_sync": block}).server)
    plan = SimpleNamespace(num_extend=1 if tokens else 0, num_extend_tokens=tokens)
    want = _old_rule(prof.host, plan, part)
    if block and part == "main" and tokens and own:
        want = prof.host.extend_own_idle_lead_by_tokens.at(tokens)
    assert cost.idle_lead_s(plan, part) == want


@pytest.mark.parametrize("slot_sync", [True, False])
def test_an_older_profile_runs_as_before(slot_sync):
    """INV-OL2 end to end: the new tables absent is the same as a profile that never had the
    fields, and the extend ends the combined lead after its launch plus its device time."""
    old = tiny_profile(extend_idle_lead_by_tokens=COMBINED, inject_idle_lead_by_tokens=_table(1e-3, 1e-3))
    data = old.model_dump(mode="python", exclude={"path"})
    for k in ("extend_own_idle_lead_by_tokens", "inject_unprepared_idle_lead_by_tokens"):
        assert data["host"].pop(k) is None
    same = Profile.model_validate(data)
    a, b = SimEngine(_scenario(slot_sync), old).run(), SimEngine(_scenario(slot_sync), same).run()
    assert a.summary == b.summary and a.steps.equals(b.steps)
    ext = _prefill(a, "main").iloc[0]
    lead = float(np.interp(TOKENS, COMBINED["tokens"], COMBINED["seconds"]))
    assert ext.gpu_end_s - ext.gpu_start_s == pytest.approx(lead + 1e-3, abs=1e-12)


@settings(max_examples=15, deadline=None)
@given(own=st.tuples(st.floats(0.0, 2e-2), st.floats(0.0, 2e-2)), unprepared=st.tuples(st.floats(0.0, 2e-2), st.floats(0.0, 2e-2)))
def test_without_a_block_the_split_tables_change_nothing(own, unprepared):
    """INV-OL3 end to end: a profile holding the extend's own and the unprepared injection's
    leads gives exactly the steps and summary of the same profile without them, with the
    injection right behind its extend."""
    base = dict(extend_idle_lead_by_tokens=COMBINED, inject_idle_lead_by_tokens=_table(1e-3, 1e-3))
    split = tiny_profile(**base, extend_own_idle_lead_by_tokens=_table(*own),
                         inject_unprepared_idle_lead_by_tokens=_table(*unprepared))
    a, b = SimEngine(_scenario(False, 2), split).run(), SimEngine(_scenario(False, 2), tiny_profile(**base)).run()
    assert a.summary == b.summary and a.steps.equals(b.steps)


@settings(max_examples=20, deadline=None)
@given(lo=st.floats(0.0, 5e-3), hi=st.floats(0.0, 5e-3))
def test_with_a_block_the_extend_pays_its_own_lead(lo, hi):
    """INV-OL4: on an idle stream (the first request) the extend of a prefill whose slot
    expansion blocks lasts its own lead plus its device time (1 ms at 1000 tokens on the tiny
    profile), not the combined lead, which holds the injection the block launches apart."""
    prof = tiny_profile(extend_idle_lead_by_tokens=COMBINED, extend_own_idle_lead_by_tokens=_table(lo, hi))
    ext = _prefill(SimEngine(_scenario(True), prof).run(), "main").iloc[0]
    own = float(np.interp(TOKENS, [256, 4096], [lo, hi]))
    assert ext.gpu_end_s - ext.gpu_start_s == pytest.approx(own + 1e-3, rel=1e-9, abs=1e-12)


def test_host_conditioning_scales_the_new_tables():
    """The new tables are host seconds: a slower host scales them like every host term."""
    p = tiny_profile(extend_own_idle_lead_by_tokens=_table(1e-3, 2e-3),
                     inject_unprepared_idle_lead_by_tokens=_table(3e-4, 4e-4))
    q = scale_host(p, 1.5)
    assert q.host.extend_own_idle_lead_by_tokens.seconds == pytest.approx([1.5e-3, 3e-3])
    assert q.host.inject_unprepared_idle_lead_by_tokens.seconds == pytest.approx([4.5e-4, 6e-4])
