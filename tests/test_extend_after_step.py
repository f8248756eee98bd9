"""An extend right behind decode or verify steps runs at their clock state
(profile ``gpu.extend_after_step``; sim/engine.py ``_launch``, sim/cost_model.py
``CostModel.after_step_ratio``; measured by runtime/profile_gpu.py ``extend_after_phase``)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import SimEngine, run_scenario
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import AfterStepRatios

from tests.conftest import make_scenario, tiny_profile
from tests.test_sim_speed_equivalence import assert_same_run

PLAIN = {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}


def _profile(ratios: dict | None):
    prof = tiny_profile()
    return prof.model_copy(update={"gpu": prof.gpu.model_copy(update={
        "extend_after_step": None if ratios is None else
        {k: AfterStepRatios(tokens=[1.0, 1000.0], ratios=[r, r]) for k, r in ratios.items()}})})


def _plan(mode: ForwardMode, tokens: int = 500) -> BatchPlan:
    n_ext = 0 if mode in (ForwardMode.DECODE, ForwardMode.VERIFY) else 1
    ext = (tokens,) if n_ext else ()
    rows = (1,) if mode is ForwardMode.MIXED else ((1,) if not n_ext else ())
    return BatchPlan(1, mode, tuple(range(n_ext + len(rows))), ext + rows, (0,) * n_ext + (100,) * len(rows),
                     num_extend=n_ext)


def test_an_extend_on_an_idle_stream_takes_no_ratio():
    """The profiler keeps only extends queued while the lead still ran: an extend launched
    after the stream drained (requests seconds apart, each served alone) is priced by the grid, whatever ran
    before it."""
    sc = make_scenario(PLAIN, {"kind": "poisson", "request_rate": 0.2, "num_requests": 5})
    base, fast = (run_scenario(sc, profile=_profile(r)).steps for r in (None, {"decode": 0.5}))
    main = base[base.part == "main"].reset_index(drop=True)
    mode = main["mode"].astype(str)
    idle_after_decode = (mode == "extend") & (mode.shift(1) == "decode") & (main.gpu_start_s > main.gpu_end_s.shift(1))
    assert idle_after_decode.any()
    assert base.equals(fast)


def test_ratio_table_is_validated():
    with pytest.raises(ValidationError, match="less than or equal to 2"):
        AfterStepRatios(tokens=[64.0], ratios=[2.5])
    with pytest.raises(ValidationError, match="increase strictly"):
        AfterStepRatios(tokens=[512.0, 64.0], ratios=[1.0, 1.0])
    with pytest.raises(ValidationError, match="same non-zero length"):
        AfterStepRatios(tokens=[64.0, 128.0], ratios=[1.0])
    t = AfterStepRatios(tokens=[100.0, 300.0], ratios=[0.9, 1.1])
    assert (t.at(50), t.at(200), t.at(900)) == (0.9, pytest.approx(1.0), 1.1)


def test_ratio_applies_to_a_pure_extend_behind_a_decode_or_verify_step_only():
    cost = CostModel(_profile({"decode": 0.8, "verify": 1.1}), make_scenario(PLAIN).server)
    ext = _plan(ForwardMode.EXTEND)
    assert cost.after_step_ratio(ext, ForwardMode.DECODE) == pytest.approx(0.8)
    with pytest.raises(ValidationError, match="at least 1 item"):   # an empty table is no table
        _profile({}).model_validate(_profile({}).model_dump())
    assert cost.after_step_ratio(ext, ForwardMode.VERIFY) == pytest.approx(1.1)
    for previous in (ForwardMode.EXTEND, ForwardMode.MIXED, None):   # behind extend work: the grid's
        assert cost.after_step_ratio(ext, previous) == 1.0
    for mode in (ForwardMode.MIXED, ForwardMode.DECODE):   # only a pure extend
        assert cost.after_step_ratio(_plan(mode), ForwardMode.DECODE) == 1.0
    assert CostModel(_profile(None), make_scenario(PLAIN).server).after_step_ratio(ext, ForwardMode.DECODE) == 1.0


def _steps(ratios, **workload):
    sc = make_scenario(PLAIN, {"kind": "poisson", "request_rate": 300.0, "num_requests": 24, **workload})
    return run_scenario(sc, profile=_profile(ratios)).steps


def test_extends_after_decodes_take_the_ratio_and_the_others_the_grid():
    """Step by step: every extend whose forward followed a decode on the stream lasts
    ``ratio`` x its time without the table; the first extend (nothing before it) and an
    extend behind another extend are unchanged while the plans are the same."""
    base = _steps(None)
    fast = _steps({"decode": 0.5})
    main = base[base.part == "main"].reset_index(drop=True)
    mode = main["mode"].astype(str)
    after = (mode == "extend") & (mode.shift(1) == "decode")
    assert after.any() and ((mode == "extend") & ~after).any()
    # up to the first extend behind a decode the runs are the same forward for forward
    first = int(after.idxmax())
    m_fast = fast[fast.part == "main"].reset_index(drop=True)
    dur_b = main.gpu_end_s - main.gpu_start_s
    dur_f = m_fast.gpu_end_s - m_fast.gpu_start_s
    assert (dur_f[:first] == dur_b[:first]).all()
    assert dur_f[first] == pytest.approx(0.5 * dur_b[first], rel=1e-9)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.sampled_from([20.0, 200.0, 2000.0]), n=st.integers(2, 16),
       spec=st.booleans(), chunk=st.sampled_from([256, 2048]))
def test_invariant_ratios_of_one_change_nothing(rate, n, spec, chunk):
    """INV: a table of ratios 1.0 gives the run of a profile without the table, forward for
    forward (the factor touches nothing but the extend's GPU time)."""
    server = ({} if spec else PLAIN) | {"chunked_prefill_size": chunk}
    sc = make_scenario(server, {"kind": "poisson", "request_rate": rate, "num_requests": n})
    a = run_scenario(sc, profile=_profile(None))
    b = run_scenario(sc, profile=_profile({"decode": 1.0, "verify": 1.0}))
    assert a.steps.equals(b.steps) and a.requests.equals(b.requests)


def test_profiler_times_each_extend_behind_decode_then_verify_steps(monkeypatch):
    """``extend_after_phase``: for each --extend-tokens count, the prefix-0 extend timed behind
    graph-replayed decode steps, then spec cycles, at the tile probe's batch and the middle
    grid context, each lead sized by its grid time; the ratio is over the extend grid's point."""
    from specsched.runtime.profile_fit import Fits
    from specsched.runtime.profile_gpu import GpuPhases

    class Phases(GpuPhases, Fits):
        pass

    ph = object.__new__(Phases)
    ph.dev = SimpleNamespace(is_gpu=True, use=lambda stream: contextlib.nullcontext(), h2d=lambda x: x)
    rows_made: list[int] = []
    reserved = []
    ph.runner = SimpleNamespace(add_request=lambda: rows_made.append(1) or len(rows_made),
                                extend=lambda *a: None, free_request=lambda row: rows_made.pop(),
                                pool=SimpleNamespace(reserve=lambda rows, pre: reserved.append((len(rows), pre))))
    ph.extend_lead_s, ph.tile_bs, ph.bs, ph.contexts = 0.05, 8, [1, 8, 16], [512, 1024, 2048]
    ph.grid_rows = list(range(16))
    ph.grid = {"decode": [[0.0] * 3, [0.0, 0.004, 0.0], [0.0] * 3], "spec": [[0.0] * 3, [0.0, 0.010, 0.0], [0.0] * 3]}
    ph.ext_x, ph.ext_cols, ph.prompt, ph.after_tokens = [256, 512, 1024], [512.0], 1024, [256, 1024]
    ph.ext_s = [[0.010], [0.020], [0.040]]
    ph.cfg, ph.gen, ph.lead_dry = SimpleNamespace(vocab_size=100), None, ["extend 512 tok @ctx 512"]
    monkeypatch.setattr(GpuPhases, "_step_fn", lambda self, kind, rows, rows_t, c, graph: (kind, len(rows), c, graph))
    seen = []

    def behind(self, label, group, fn, lead, lead_s, words):
        seen.append((label, lead, lead_s))
        return [{256: 0.009, 1024: 0.038}[int(label.split()[2])] * (1.0 if lead[0] == "decode" else 1.1)]

    monkeypatch.setattr(GpuPhases, "_behind", behind)
    ph.extend_after_phase()
    assert [(lbl, lead, s) for lbl, lead, s in seen] == [
        ("after-decode extend 256 tok", ("decode", 8, 1024, True), 0.004),
        ("after-verify extend 256 tok", ("spec", 8, 1024, True), 0.010),
        ("after-decode extend 1024 tok", ("decode", 8, 1024, True), 0.004),
        ("after-verify extend 1024 tok", ("spec", 8, 1024, True), 0.010)]
    assert ph.after_step_ratios() == {"decode": [(256, pytest.approx(0.9)), (1024, pytest.approx(0.95))],
                                      "verify": [(256, pytest.approx(0.99)), (1024, pytest.approx(1.045))]}
    # against the grid as kept: a re-levelled extend phase's new point moves the ratio
    ph.ext_s[2][0] = 0.038
    assert ph.after_step_ratios()["decode"][1] == (1024, pytest.approx(1.0))
    # a point whose grid time is the idle spin's (lead_dry) is left out: another state
    ph.lead_dry.append("extend 256 tok @ctx 512")
    assert [t for t, _ in ph.after_step_ratios()["decode"]] == [1024]
    assert rows_made == []   # every extend's rows freed
    # each on the grid point's layout: 256 tokens one request at prefix 384 (on column 512), 1024 at 0
    assert reserved == [(1, [384])]
    ph.extend_lead_s = 0.0   # no lead: nothing timed, no table
    ph.extend_after_phase()
    assert ph.after_step_s == {} and ph.after_step_ratios() == {}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.sampled_from([30.0, 300.0]), n=st.integers(2, 14), spec=st.booleans(),
       decode=st.floats(0.6, 1.4), verify=st.floats(0.6, 1.4))
def test_invariant_collapsed_stretches_keep_the_last_forward(rate, n, spec, decode, verify):
    """INV: the run with collapsed decode stretches equals the step-by-step run under any
    ratios: a stretch leaves its last forward (decode or verify) as the one an extend after
    it follows (sim/engine.py ``_stretch_applied``)."""
    sc = make_scenario({} if spec else PLAIN, {"kind": "poisson", "request_rate": rate, "num_requests": n})
    prof = _profile({"decode": decode, "verify": verify})
    # times to 1e-12: the collapsed timelines add the same durations in another order
    assert_same_run(SimEngine(sc, prof, fast_forward=False).run(), SimEngine(sc, prof, fast_forward=True).run(),
                    rel=1e-12)


def test_a_bad_lead_kind_in_a_profile_file_is_one_line_naming_the_key(tmp_path, capsys):
    """A lead the table does not know (``prefill``) was said as ``...prefill.[key] =``
    (pydantic's location of a mapping's key); now ``gpu.extend_after_step['prefill']``."""
    import yaml

    from specsched.cli import main

    prof = tiny_profile().model_dump(mode="json", exclude_none=True)
    prof["gpu"]["extend_after_step"] = {"prefill": {"tokens": [64.0], "ratios": [0.9]}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(prof))
    sc = make_scenario(PLAIN).model_dump(mode="json", exclude_none=True) | {"profile": str(tmp_path / "p.yaml")}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("p.yaml: gpu.extend_after_step['prefill'] = 'prefill': allowed: decode, verify"), err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o").exists()


def test_profile_command_writes_and_prints_the_ratios(monkeypatch, tmp_path, capsys):
    """``specsched profile`` (the GPU phase faked on CPU, where it cannot run): the table is
    written as ratios over the extend grid's first column, with its provenance, the profile
    loads, and the command prints one line per lead."""
    import yaml
    from specsched.runtime.profile_gpu import GpuPhases
    from specsched.sim.profile import Profile

    from tests.conftest import profile_with_faked_idle_lead

    def fake(self):   # the medians a GPU would give: 0.9 and 1.1 x the grid's own point
        self.after_tokens, self.after_lead = [16, 64], "decode steps and spec cycles (faked)"
        self.after_step_s = {lead: [(t, f * self.ext_s[self.ext_x.index(t)][0]) for t in (16, 64)]
                             for lead, f in (("decode", 0.9), ("verify", 1.1))}

    monkeypatch.setattr(GpuPhases, "extend_after_phase", fake)
    out = profile_with_faked_idle_lead(monkeypatch, tmp_path, GpuPhases._idle_lead, "16,64")
    text = capsys.readouterr().out
    assert "extend after decode steps: 16 tok x0.900, 64 tok x0.900" in text
    assert "extend after verify steps: 16 tok x1.100, 64 tok x1.100" in text
    d = yaml.safe_load(out.read_text())
    assert d["gpu"]["extend_after_step"]["decode"]["ratios"] == [pytest.approx(0.9, rel=1e-4)] * 2
    assert "faked" in d["provenance"]["gpu.extend_after_step"]
    assert Profile.model_validate(d).gpu.extend_after_step["verify"].at(40) == pytest.approx(1.1, rel=1e-4)
