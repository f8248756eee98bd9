"""Per-term host-speed conditioning (sim/host_speed.py ``term_factors``, ``scale_host`` with a
run reference; profile ``host.reference_work_by_term``; runtime/host_reference.py's
term map): each host term scales by the run's reference work over its own.

Invariants (hypothesis):
- INV-T1: a run reference equal to every term's own reference is bit-identical to no
  conditioning (the profile object itself; the same simulated run);
- INV-T2: each term scales by run reference / its own (the profile's whole reference for a
  term the map leaves out); a term at the run's level is untouched exactly;
- INV-T3: monotone: a slower run (larger reference) never makes a host term smaller, nor
  the host-paced verify cycle shorter;
- INV-T4: a profile without the map is conditioned by the one factor run / profile.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specsched.runtime.host_reference import (
    FAST_TERMS,
    PHASE_TERMS,
    term_references,
    term_references_from_provenance,
)
from specsched.sim.config import with_value
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.host_speed import SCALED_TERMS, scale_host, term_factors
from specsched.sim.profile import Profile

from tests.conftest import load_benchmark, make_scenario, tiny_profile

HOST_HEAVY = dict(launch_s=6e-3, schedule_s=1e-3, process_s=1e-3, launch_per_extend_s=2e-3,
                  decode_schedule_s=3e-4, decode_schedule_per_req_s=1e-6, decode_process_s=2e-4,
                  decode_process_per_req_s=1e-6, decode_launch_s=4e-4, decode_launch_per_req_s=2e-6,
                  launch_per_extend_eager_s=5e-3, launch_per_inject_eager_s=1e-3,
                  slot_expansion_s=4e-4, extend_idle_lead_by_tokens={"tokens": [256, 1024], "seconds": [1e-3, 2e-3]},
                  inject_idle_lead_by_tokens={"tokens": [256, 1024], "seconds": [3e-4, 5e-4]},
                  extend_own_idle_lead_by_tokens={"tokens": [256, 1024], "seconds": [6e-4, 1.2e-3]},
                  inject_unprepared_idle_lead_by_tokens={"tokens": [256, 1024], "seconds": [4e-4, 6e-4]})
"""Host terms per verify (8 ms) well above the tiny profile's verify (2-2.3 ms): host-paced."""

refs = st.floats(1e-4, 2e-3, allow_nan=False)


def _profile(by_term: dict[str, float] | None, whole: float = 4e-4) -> Profile:
    p = tiny_profile(**HOST_HEAVY, reference_work_s=whole, reference_work_by_term=by_term)
    return p.model_copy(update={"gpu": p.gpu.model_copy(update={"eager_host_issue_s": 0.015, "eager_overhead_s": 0.01,
                                                                   "eager_spec_issue_s": 0.012, "eager_draft_overhead_s": 1e-3})})


def _term(p: Profile, t: str) -> float:
    sec, name = t.split(".")
    if name.endswith("_by_tokens"):
        return getattr(p.host, name).seconds[-1]
    return getattr(getattr(p, sec), name)


def _run(p: Profile, reference_s: float | None):
    sc = make_scenario({"sync_mode": "host_block"}, {"num_requests": 4, "output_len": {"kind": "fixed", "value": 40}})
    return SimEngine(with_value(sc, "host.reference_work_s", reference_s), p).run()


@settings(max_examples=15, deadline=None)
@given(r=refs)
def test_inv_t1_a_run_at_every_terms_own_speed_is_bit_identical(r):
    p = _profile(dict.fromkeys(SCALED_TERMS, r), whole=r * 1.37)
    assert scale_host(p, 1.0, r) is p
    a, b = _run(p, None), _run(p, r)
    assert a.summary == b.summary and a.steps.equals(b.steps)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), r=refs, whole=refs)
def test_inv_t2_each_term_scales_by_run_over_its_own(data, r, whole):
    by_term = {t: data.draw(refs, label=t) for t in SCALED_TERMS if data.draw(st.booleans(), label=f"has {t}")}
    if by_term:
        by_term[next(iter(by_term))] = r          # one term measured at the run's level
    p = _profile(by_term or None, whole)
    q = scale_host(p, 1.0, r)
    for t in SCALED_TERMS:
        own = by_term.get(t, whole)
        assert _term(q, t) == pytest.approx(_term(p, t) * r / own, rel=1e-12)
        if own == r:
            assert _term(q, t) == _term(p, t)     # exactly: x * 1.0
    assert q.host.cross_queue_penalty_s == p.host.cross_queue_penalty_s and q.gpu.verify == p.gpu.verify


@settings(max_examples=12, deadline=None)
@given(data=st.data(), r1=refs, r2=refs)
def test_inv_t3_scaling_is_monotone_in_the_run_reference(data, r1, r2):
    lo, hi = sorted((r1, r2))
    p = _profile({t: data.draw(refs, label=t) for t in SCALED_TERMS})
    a, b = scale_host(p, 1.0, lo), scale_host(p, 1.0, hi)
    assert all(_term(a, t) <= _term(b, t) for t in SCALED_TERMS)
    va = _run(p, lo).steps.query("mode == 'verify'")["gpu_end_s"].to_numpy()
    vb = _run(p, hi).steps.query("mode == 'verify'")["gpu_end_s"].to_numpy()
    assert np.median(np.diff(va)) <= np.median(np.diff(vb)) + 1e-12


@settings(max_examples=20, deadline=None)
@given(r=refs, whole=refs)
def test_inv_t4_without_the_map_it_is_the_one_factor(r, whole):
    p = _profile(None, whole)
    q, k = scale_host(p, 1.0, r), scale_host(p, r / whole)
    assert all(_term(q, t) == pytest.approx(_term(k, t), rel=1e-12) for t in SCALED_TERMS)
    assert scale_host(p) is p                     # no reference, factor 1: as before


def test_speed_factor_multiplies_on_top_and_bad_input_is_refused():
    p = _profile(dict.fromkeys(SCALED_TERMS, 2e-4))
    assert term_factors(p, 1.5, 4e-4) == pytest.approx(dict.fromkeys(SCALED_TERMS, 3.0))
    with pytest.raises(ValueError, match="host.reference_work_s"):
        term_factors(tiny_profile(), 1.0, 3e-4)   # the profile records no host speed
    with pytest.raises(ConfigError, match="host.reference_work_s") as e:
        _run(tiny_profile(), 3e-4)
    assert str(e.value).count("host.reference_work_s") == 2   # the key, and the profile's missing one
    with pytest.raises(ValidationError, match="reference_work_by_term: unknown host term 'host.launch'"):
        tiny_profile(reference_work_by_term={"host.launch": 1e-4})
    with pytest.raises(ValidationError):
        tiny_profile(reference_work_by_term={"host.launch_s": 0.0})


def test_the_term_map_puts_each_term_at_its_phase_and_the_eager_ones_fast():
    by_term = term_references({"extend": 5e-4, "grid": 9e-4, "launch": 3e-4, "sync": 3.1e-4, "host": 2.9e-4}, 2.6e-4)
    assert set(by_term) == set(SCALED_TERMS) - {"host.ingest_per_request_s", "host.ingest_per_token_s",
                                                "gpu.eager_draft_overhead_s", "gpu.eager_spec_issue_s"}
    assert by_term["host.launch_per_extend_s"] == 5e-4 and by_term["host.slot_expansion_s"] == 5e-4
    assert by_term["host.launch_s"] == 3e-4 and by_term["host.launch_tail_s"] == 3e-4
    assert by_term["host.sync_wakeup_s"] == 3.1e-4 and by_term["host.process_per_req_s"] == 2.9e-4
    assert all(by_term[t] == 2.6e-4 for t in FAST_TERMS)
    assert "host.launch_s" not in term_references({"extend": 5e-4}, 2.6e-4)   # a phase without samples


def test_an_older_profile_s_provenance_gives_the_map():
    text = ("host speed while profiling: ...; median of 161 samples, p10 / p90 0.257 / 0.520 ms, 53% of samples "
            "above 1.4 x the fastest quartile; median per phase (ms): extend 0.479, grid 0.388, eager 0.434, "
            "cross_queue 0.326, launch 0.268, sync 0.292, host 0.262, end 0.277. A run's summary.json ...")
    p = tiny_profile(reference_work_s=3.97e-4).model_copy(update={"provenance": {"host.reference_work_s": text}})
    by_term = term_references_from_provenance(p)
    assert by_term["host.launch_per_inject_s"] == pytest.approx(4.79e-4)
    assert by_term["host.schedule_s"] == pytest.approx(2.62e-4)
    assert by_term["gpu.eager_host_issue_s"] == pytest.approx(2.57e-4)       # the p10: the fast level
    assert term_references_from_provenance(tiny_profile()) is None
    rp = load_benchmark("repredict_h200", "rp_terms")
    q = rp.per_term_profile(p)
    assert q.host.reference_work_by_term == by_term and rp.per_term_profile(tiny_profile()) is None
    # round 10 (launch calls only): the factor reaches the launch phase's terms, no other
    lp, ref = rp.launch_phase_profile(_profile(None), 0.6)
    k = term_factors(lp, 1.0, ref)
    assert all(k[t] == pytest.approx(0.6) for t in PHASE_TERMS["launch"])
    assert all(v == 1.0 for t, v in k.items() if t not in PHASE_TERMS["launch"])


class _ScriptedSampler:
    """A SpeedSampler whose reading depends on the phase label and the attempt: ``slow``
    maps a label to how many of its attempts read slow (2.0 ms) before one reads fast (1.0)."""

    def __init__(self, slow: dict[str, int]) -> None:
        self.slow, self.label = dict(slow), ""
        self.seconds: list[float] = []
        self.labels: list[str] = []

    def sample(self) -> float:
        ph = self.label.split(" #")[0]
        v = 2e-3 if self.slow.get(ph, 0) > 0 else 1e-3
        self.seconds.append(v)
        self.labels.append(self.label)
        return v

    def maybe_sample(self) -> None:
        self.sample()


def _leveler(slow: dict[str, int], durations: dict[str, float] | None = None):
    from specsched.runtime.profile_harness import _Budget
    from specsched.runtime.profile_level import LevelPhases

    class Fake(LevelPhases):
        def __init__(self):                      # no models: the phases only sample and count
            self.speed, self.budget, self.runs = _ScriptedSampler(slow), _Budget(100.0, 50), []

        def _one(self, ph):
            self.runs.append(ph)
            self.result = {**getattr(self, "result", {}), ph: len(self.runs)}
            for _ in range(3):
                self.speed.maybe_sample()
                self.budget.done()
            if self.speed.labels[-1].split(" #")[0] == ph and self.speed.slow.get(ph, 0) > 0:
                self.speed.slow[ph] -= 1         # the next attempt of this phase reads one level faster

        def phase_allocation(self, name):        # the out-of-memory label only: no device here
            return None

        def __getattr__(self, name):
            if name.endswith("_phase"):
                return lambda: self._one(name[:-6])
            raise AttributeError(name)

    f = Fake()
    for ph in ("extend", "grid", "eager", "cross_queue", "launch", "sync", "host"):
        f._run_phase(ph)
    for ph, s in (durations or {}).items():
        f.phase_time[ph] = s
    return f


def test_a_slow_host_phase_is_run_again_until_it_sits_on_the_fast_level():
    f = _leveler({"launch": 2, "eager": 5})
    f.relevel(100.0)
    assert f.runs[7:] == ["launch", "launch"]                          # twice slow, then fast; eager never
    assert f.result["launch"] == 9                                      # the measurements of the kept attempt
    labels = f.speed.labels
    assert {lb for lb in labels if lb.startswith("launch")} == {"launch #1 not kept", "launch #2 not kept", "launch"}
    assert all(s == 1e-3 for s, lb in zip(f.speed.seconds, labels, strict=True) if lb == "launch")
    assert "launch: attempts' medians 2.000, 2.000, 1.000 ms, kept #3 (fast)" in f.level_text(100.0)


def test_a_re_run_that_fails_keeps_the_measured_phase():
    f = _leveler({"launch": 2})
    one = f._one

    def broken(ph):
        one(ph)
        raise RuntimeError("CUDA error: out of memory\nmore")

    f._one = broken
    f.relevel(100.0)
    assert f.result["launch"] == 5 and f.runs[7:] == ["launch"]            # the first run's measurements stay
    assert "re-run #2 failed (RuntimeError: CUDA error: out of memory); kept the earlier" in f.level_text(100.0)
    assert "launch #2 failed" in f.speed.labels and f.budget.total == 100.0


def test_re_runs_stop_at_the_allowance_and_at_the_tries_and_keep_the_fastest():
    f = _leveler({"extend": 9}, durations={"extend": 50.0})
    f.relevel(20.0)                                                     # one attempt needs 50 s
    assert f.runs[7:] == [] and "needs about 50.0 s, 20.0 s of --relevel-budget left" in f.level_text(20.0)
    f = _leveler({"sync": 9})
    f.relevel(100.0)
    assert f.runs[7:] == ["sync"] * 3 and "still slow after 3 re-runs" in f.level_text(100.0)
    assert f.result["sync"] == 6                      # no re-run was faster: the first run's measurements stay
    text = _leveler({}, durations={"extend": 41.0}).level_text(0.0)
    assert text.startswith("seconds per phase (first run): extend 41.0, grid ")
    assert text.endswith("; phases were not re-run (--relevel-budget 0)")


def test_the_extend_terms_level_read_from_the_runs_extend_launches(tmp_path):
    import json

    import pandas as pd

    rp = load_benchmark("repredict_h200", "rp_extend")
    dirs = []
    for k, ref in enumerate((2.5e-4, 3.0e-4, 5.0e-4)):      # the call takes 2 ms + 20 x the reference work
        d = tmp_path / f"r{k}-base-measured"
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({"host_speed": {"reference_work_s": ref}}))
        n = 12
        pd.DataFrame({"mode": ["extend"] * n + ["verify"], "part": ["main"] * (n + 1), "batch_size": [1] * (n + 1),
                      "host_launch_cpu_s": [2e-3 + 20 * ref] * n + [1.0]}).to_parquet(d / "host_probe.parquet")
        dirs.append(d)
    p = tiny_profile(reference_work_s=4e-4, launch_per_extend_s=8e-3 - 1024 * 1e-7, launch_per_extend_token_s=1e-7)
    ref, n = rp.extend_issue_reference(dirs, p)
    assert n == 3 and ref == pytest.approx(3e-4)             # 8 ms = 2 ms + 20 x 0.3 ms
    assert rp.extend_issue_reference(dirs[:2], p) is None and rp.extend_issue_reference(dirs, p, min_calls=13) is None


@settings(max_examples=20, deadline=None)
@given(f=st.floats(0.2, 5.0), lf=st.floats(0.2, 5.0), r=st.one_of(st.none(), refs))
def test_inv_t5_the_launch_path_takes_its_own_factor_on_top_and_nothing_else_does(f, lf, r):
    """INV-T5: host.launch_speed_factor multiplies exactly the launch path's terms
    (LAUNCH_PATH_TERMS: launch calls and kernel issue), on top of the host's speed; the
    scheduler's Python, wake-ups and idle leads keep the host's factor
    (docs/measurements/h200-v39.md: the launch path ran x0.5-0.75 of the reference work's)."""
    from specsched.sim.host_speed import LAUNCH_PATH_TERMS

    p = _profile({"host.launch_s": 3e-4})
    base, both = term_factors(p, f, r), term_factors(p, f, r, lf)
    assert LAUNCH_PATH_TERMS < set(SCALED_TERMS)
    for t in SCALED_TERMS:
        want = base[t] * lf if t in LAUNCH_PATH_TERMS else base[t]
        assert both[t] == pytest.approx(want, rel=1e-12), t
    q = scale_host(p, f, r, lf)
    for t in ("host.launch_s", "host.decode_launch_s", "host.launch_per_extend_s", "gpu.eager_host_issue_s"):
        assert _term(q, t) == pytest.approx(_term(p, t) * both[t], rel=1e-9)
    for t in ("host.schedule_s", "host.decode_process_s", "host.slot_expansion_s", "host.extend_idle_lead_by_tokens"):
        assert _term(q, t) == pytest.approx(_term(p, t) * base[t], rel=1e-9)


def test_a_launch_speed_factor_of_one_is_the_profile_itself_and_a_slower_launch_path_slows_a_no_overlap_decode():
    """The scenario field: 1 leaves the profile object as it is (bit-identical runs); a launch
    path 2x slower makes a plain-decoding server without overlap decode slower (every step's
    launch is on its critical path), and a zero factor is refused at load in one line."""
    p = _profile(None)
    assert scale_host(p, 1.0, None, 1.0) is p
    sc = make_scenario({"enable_overlap_schedule": False, "speculative_algorithm": "none"},
                       {"num_requests": 4, "output_len": {"kind": "fixed", "value": 40}})
    runs = [SimEngine(with_value(sc, "host.launch_speed_factor", lf), p).run() for lf in (1.0, 2.0)]
    assert runs[1].summary["median_tpot_ms"] > runs[0].summary["median_tpot_ms"] * 1.01
    with pytest.raises(ValidationError):
        with_value(sc, "host.launch_speed_factor", 0.0)


def _with_launch(p: Profile, whole: float, by_term: dict[str, float] | None = None) -> Profile:
    host = p.host.model_copy(update={"launch_reference_work_s": whole, "launch_reference_work_by_term": by_term})
    return p.model_copy(update={"host": host})


@settings(max_examples=20, deadline=None)
@given(f=st.floats(0.2, 5.0), r=st.one_of(st.none(), refs), lr=refs, lwhole=refs, lterm=refs)
def test_inv_t6_the_launch_path_follows_its_own_reference_work_and_nothing_else_does(f, r, lr, lwhole, lterm):
    """INV-T6: a run's launch reference work (scenario host.launch_reference_work_s) puts each
    launch-path term at run / its own launch reference (the profile's
    launch_reference_work_by_term, else launch_reference_work_s), times speed_factor, in
    place of the Python reference work's ratio; every other term keeps the Python
    conditioning exactly (the launch path ran 1.3-1.5x apart from the Python work across two
    H200 machines, docs/measurements/h200-v39.md)."""
    from specsched.sim.host_speed import LAUNCH_PATH_TERMS

    p = _with_launch(_profile({"host.launch_s": 3e-4}), lwhole, {"host.decode_launch_s": lterm})
    base, k = term_factors(p, f, r), term_factors(p, f, r, launch_reference_s=lr)
    for t in SCALED_TERMS:
        if t in LAUNCH_PATH_TERMS:
            own = lterm if t == "host.decode_launch_s" else lwhole
            assert k[t] == pytest.approx(f * lr / own, rel=1e-12), t
        else:
            assert k[t] == base[t], t
    # at the profile's own launch speed the launch path is as without the reading
    same = term_factors(p, f, None, launch_reference_s=lwhole)
    assert same["host.launch_s"] == pytest.approx(f, rel=1e-12)


def test_a_launch_reference_needs_a_profile_that_has_one_and_a_slower_one_slows_a_no_overlap_decode():
    """The scenario field host.launch_reference_work_s: refused in one ConfigError naming the
    field when the profile has no launch reference (profiles made before it), and a run
    whose launch reference work took 2x the profile's decodes slower without overlap; a
    launch-path term off the allowed set is refused at profile load."""
    p = _profile(None)
    sc = make_scenario({"enable_overlap_schedule": False, "speculative_algorithm": "none"},
                       {"num_requests": 4, "output_len": {"kind": "fixed", "value": 40}})
    with pytest.raises(ConfigError, match="host.launch_reference_work_s") as e:
        SimEngine(with_value(sc, "host.launch_reference_work_s", 4e-4), p).run()
    assert "no launch-path speed" in str(e.value)
    q = _with_launch(p, 3e-4)
    runs = [SimEngine(with_value(sc, "host.launch_reference_work_s", lr), q).run() for lr in (3e-4, 6e-4)]
    assert runs[1].summary["median_tpot_ms"] > runs[0].summary["median_tpot_ms"] * 1.01
    assert runs[0].summary["median_tpot_ms"] == SimEngine(sc, q).run().summary["median_tpot_ms"]
    with pytest.raises(ValidationError, match="not a launch-path term"):
        tiny_profile(launch_reference_work_s=3e-4, launch_reference_work_by_term={"host.schedule_s": 3e-4})
