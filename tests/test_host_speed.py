"""Host speed as a condition of a prediction (sim/host_speed.py) and its readings
(runtime/host_reference.py): factor 1 changes nothing, factor k scales the host-paced
step times and leaves the GPU-paced ones, and a measured run's speed against a profile's
conditions gpu_validate's second prediction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.runtime.host_reference import SpeedSampler, reference_work, speed_summary
from specsched.sim.config import with_value
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.host_speed import GPU_HOST_SECONDS, HOST_SECONDS, scale_host

from tests.conftest import load_benchmark, make_scenario, tiny_profile, tiny_runtime_engine

HOST_HEAVY = dict(launch_s=6e-3, schedule_s=1e-3, process_s=1e-3)
"""Host terms per verify (8 ms) well above the tiny profile's verify (2-2.3 ms): host-paced."""


def _scenario(sync_mode: str):
    return make_scenario({"sync_mode": sync_mode}, {"num_requests": 4, "output_len": {"kind": "fixed", "value": 40}})


def _verify_intervals(scenario, profile, k: float) -> np.ndarray:
    res = SimEngine(with_value(scenario, "host.speed_factor", k), profile).run()
    v = res.steps[res.steps["mode"] == "verify"]
    return np.diff(v["gpu_end_s"].to_numpy())


def test_factor_one_is_the_profile_itself_and_bit_identical():
    p = tiny_profile(**HOST_HEAVY)
    assert scale_host(p, 1.0) is p
    sc = _scenario("host_block")
    a = SimEngine(sc, p).run()
    b = SimEngine(with_value(sc, "host.speed_factor", 1.0), p).run()
    assert a.summary == b.summary
    assert a.steps.equals(b.steps)


@settings(max_examples=25, deadline=None)
@given(k=st.floats(0.05, 20.0))
def test_every_host_term_scales_and_no_gpu_term_does(k):
    p = tiny_profile(**HOST_HEAVY, ingest_per_request_s=1e-4, launch_per_extend_s=2e-3, slot_expansion_s=4e-4,
                     extend_idle_lead_by_tokens={"tokens": [256, 1024], "seconds": [1e-3, 2e-3]})
    p = p.model_copy(update={"gpu": p.gpu.model_copy(update={"eager_host_issue_s": 0.015, "eager_overhead_s": 0.01})})
    # every scalar host field non-zero (one left at 0 scales to 0 whether or not it is
    # scaled), and every one but the GPU's wait and the reference itself scales
    scalar = [f for f in type(p.host).model_fields
              if f not in ("cross_queue_penalty_s", "reference_work_s") and isinstance(getattr(p.host, f), float)]
    assert set(scalar) == set(HOST_SECONDS)
    p = p.model_copy(update={"host": p.host.model_copy(update={
        f: getattr(p.host, f) or 1e-5 * (1 + i) for i, f in enumerate(scalar)})})
    q = scale_host(p, k)
    for f in scalar:
        assert getattr(p.host, f) > 0
        assert getattr(q.host, f) == pytest.approx(getattr(p.host, f) * k)
    for f in GPU_HOST_SECONDS:
        if getattr(p.gpu, f) is not None:
            assert getattr(q.gpu, f) == pytest.approx(getattr(p.gpu, f) * k)
    assert q.host.extend_idle_lead_by_tokens.seconds == pytest.approx([1e-3 * k, 2e-3 * k])
    assert q.host.cross_queue_penalty_s == p.host.cross_queue_penalty_s   # the GPU's wait
    assert q.gpu.verify == p.gpu.verify and q.gpu.extend == p.gpu.extend and q.gpu.decode == p.gpu.decode


@settings(max_examples=8, deadline=None)
@given(k=st.floats(0.25, 3.0))
def test_gpu_paced_verify_steps_do_not_move(k):
    # stream_wait: the host's 0.4 ms per verify (x3 at most) hides behind a 2.3 ms forward
    sc, p = _scenario("stream_wait"), tiny_profile()
    assert np.median(_verify_intervals(sc, p, k)) == pytest.approx(np.median(_verify_intervals(sc, p, 1.0)), rel=1e-9)


@settings(max_examples=8, deadline=None)
@given(k=st.floats(1.0, 4.0))
def test_host_paced_verify_steps_scale_with_the_factor(k):
    # host_block with 8 ms of host work per verify against a ~2.3 ms forward: the cycle is the
    # host's work (x k) plus at most one forward
    sc, p = _scenario("host_block"), tiny_profile(**HOST_HEAVY)
    host = sum(HOST_HEAVY.values())   # (the wake-up only counts when the block really waited)
    med = float(np.median(_verify_intervals(sc, p, k)))
    assert k * host - 1e-9 <= med <= k * (host + p.host.sync_wakeup_s) + 2.5e-3


def test_a_bad_factor_is_refused_naming_the_key():
    from specsched.analysis.overrides import load_scenario_with_overrides

    from tests.conftest import ROOT

    for bad in (0, -1.0, 1000.0):
        with pytest.raises(ConfigError, match="host.speed_factor"):
            load_scenario_with_overrides(ROOT / "scenarios" / "h200" / "batch1.yaml", "base", {"host.speed_factor": bad})
    with pytest.raises(ValueError):
        scale_host(tiny_profile(), float("nan"))


def test_speed_summary_reads_median_slow_share_and_factor():
    s = speed_summary([1.0e-3] * 6 + [1.9e-3] * 2, reference_s=1.0e-3)
    assert s["samples"] == 8 and s["reference_work_s"] == pytest.approx(1e-3)
    assert s["slow_share"] == pytest.approx(0.25) and s["speed_factor"] == pytest.approx(1.0)
    assert speed_summary([2e-3, 2e-3, 2e-3], 1e-3)["speed_factor"] == pytest.approx(2.0)
    assert speed_summary([]) == {} and "speed_factor" not in speed_summary([1e-3])


def test_the_sampler_keeps_its_cadence():
    sp = SpeedSampler(cadence_s=3600.0)
    sp.sample()
    sp.maybe_sample()                          # the cadence has not passed: nothing
    assert len(sp.seconds) == 1 and sp.seconds[0] > 0
    sp.cadence_s = 0.0
    sp._next = 0.0
    sp.maybe_sample()
    assert len(sp.seconds) == 2
    assert reference_work(10) == sum(i * i % 7 for i in range(10))


def test_a_runtime_run_records_its_host_speed():
    torch = pytest.importorskip("torch")
    del torch
    eng = tiny_runtime_engine()
    res = eng.run()
    hs = res.summary["host_speed"]
    assert hs["samples"] >= 2 and hs["reference_work_s"] > 0   # one at the start, one at the end
    samples = eng.host_speed_samples()
    assert len(samples["t_s"]) == hs["samples"] and samples["t_s"][0] <= 0 <= samples["t_s"][-1]


def test_gpu_validate_conditions_the_prediction_on_the_run_host_speed(tmp_path):
    gv = load_benchmark("gpu_validate", "gv_speed")
    p = tiny_profile(**HOST_HEAVY, reference_work_s=1e-3)
    sc = _scenario("host_block")

    def measure(job, eng):
        res = SimEngine(with_value(job.scenario, "host.speed_factor", 1.5), p).run()   # "the host ran 1.5x slower"
        res.summary["host_speed"] = speed_summary([1.5e-3] * 5)
        return res, eng

    def condition(job, seed, factor, launch_s=None):
        return SimEngine(with_value(job.scenario, "host.speed_factor", factor), p, seed).run()

    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(job.scenario, p, seed).run(),
                        condition=condition, reference_s=p.host.reference_work_s)
    val.run([gv.Job("a", "base", sc, "a", "a-base")])
    val.save()
    assert all(r["speed_factor"] == pytest.approx(1.5) for r in val.conditioned)
    cond = {r["metric"]: r["error_pct"] for r in val.conditioned if r["metric"] in gv.TARGETS}
    head = {r["metric"]: r["error_pct"] for r in val.rows if r["metric"] in gv.TARGETS}
    assert all(abs(e) < 1e-6 for e in cond.values())          # the host changed, not the model
    assert max(abs(e) for e in head.values()) > 5               # the headline still shows the miss
    assert (tmp_path / "validate_conditioned.csv").is_file()
    assert "x1.500 the profile's 1.000 ms" in (tmp_path / "checks.md").read_text()
    text = gv.summary_text(val.rows, [], {}, [], [], val.conditioned)
    assert "Within 5 % conditioned: **5 of 5**" in text and "| a | base | 1.500 |" in text


def test_the_profile_launch_call_reads_a_run_host_speed():
    from specsched.runtime.host_reference import launch_call_reference, launch_speed_factor

    p = tiny_profile().model_copy(update={"provenance": {"host.launch_s": (
        "intercept of ... the engine's verify launch (runtime.engine.RuntimeEngine._launch): medians bs 1 1000 us, "
        "bs 16 2000 us, bs 128 1.2e+04 us; intercept and slope clamped >= 0")}})
    bs, sec = launch_call_reference(p)
    assert list(bs) == [1, 16, 128] and sec == pytest.approx([1e-3, 2e-3, 1.2e-2])
    assert launch_call_reference(tiny_profile()) is None
    mode = ["extend", "verify", "verify", "verify", "verify"]
    part = ["main", "main", "main", "main", "inject"]
    # calls 1.5x the profile's at bs 1 and 16; the eager one (bs 64 > 32) and the injection are not read
    f = launch_speed_factor(mode, part, [1, 1, 16, 64, 1], [9.0, 1.5e-3, 3e-3, 1.0, 9.0], 32, (bs, sec))
    assert f == pytest.approx(1.5)
    assert launch_speed_factor(["decode"], ["main"], [1], [1e-3], 32, (bs, sec)) is None


def test_repredict_reads_launch_factors_against_the_round():
    import pandas as pd

    rp = load_benchmark("repredict_h200", "rp_speed")
    fast = pd.DataFrame({"mode": ["verify"] * 4, "part": ["main"] * 4, "batch_size": [8] * 4,
                         "host_launch_cpu_s": [1e-3] * 4})
    slow = fast.assign(host_launch_cpu_s=[1.8e-3] * 4)
    f = rp.launch_speed_factors({"a": fast, "b": fast, "c": slow}, {"a": 16, "b": 16, "c": 16}, q=25.0)
    assert f == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.8})
    assert rp.main(["x.csv", "--profile", "p.yaml", "--out", "o.csv", "--host-speed"]) == 2


def test_validate_prints_the_prediction_at_the_run_host_speed(tmp_path, capsys):
    pytest.importorskip("torch")
    import json

    import yaml

    from specsched.cli import main

    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(tiny_profile(reference_work_s=1e-4).model_dump(mode="json", exclude_none=True)))
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "hs", "profile": str(prof),
        "server": {"max_running_requests": 4, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
                   "max_total_num_tokens": 5000, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4},
        "acceptance": {"mean_accept_length": 2.0},
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 40},
                     "output_len": {"kind": "fixed", "value": 8}}}))
    out = tmp_path / "out"
    assert main(["validate", str(sc), "--profile", str(prof), "--device", "cpu", "--preset", "tiny",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "conditioned on the run's host speed: x" in text and "the profile's (reference work" in text
    hs = json.loads((out / "hs-base-measured" / "summary.json").read_text())["host_speed"]
    assert hs["speed_factor"] == pytest.approx(hs["reference_work_s"] / 1e-4)


def test_gpu_validate_prints_the_launch_call_factor(tmp_path):
    gv = load_benchmark("gpu_validate", "gv_launch")
    sc = _scenario("stream_wait")

    class Probed:
        n = 0

        def launch_probe(self):
            return {k: [2e-3] * self.n for k in ("host_launch_s", "host_launch_cpu_s", "host_launch_switches",
                                                 "host_launch_gc_s")}

    def measure(job, eng):
        eng = eng or Probed()
        res = SimEngine(job.scenario, tiny_profile()).run()
        eng.n = len(res.steps)
        return res, eng

    ref = (np.array([1.0, 64.0]), np.array([1e-3, 1e-3]))
    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(job.scenario, tiny_profile()).run(),
                        launch_ref=ref)
    val.run([gv.Job("a", "stream_wait", sc, "a", "a-sw")])
    val.save()
    assert "verify launch calls: x2.000 the profile's same call" in (tmp_path / "checks.md").read_text()


def test_repredict_prefers_the_reference_work_unless_told(tmp_path):
    import json

    rp = load_benchmark("repredict_h200", "rp_source")
    d = tmp_path / "c-base-measured"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"host_speed": {"reference_work_s": 3e-4}}))
    p = tiny_profile(reference_work_s=2e-4)
    assert rp.run_speed(d, p, {d.name: 0.9}) == (pytest.approx(1.5), "reference")
    assert rp.run_speed(d, p, {d.name: 0.9}, use_reference=False) == (0.9, "launch")
    assert rp.run_speed(d, tiny_profile(), {}) == (1.0, "none")     # an old profile: no reference


def test_the_launch_reference_work_is_sampled_beside_the_python_work_and_summarized():
    """runtime.host_reference.LaunchReferenceWork: a sampler given it keeps one launch sample
    per Python sample; speed_summary gives their median and, against a profile's launch
    reference, the launch path's factor; a runtime run writes it to summary.json host_speed
    and host_speed_samples."""
    torch = pytest.importorskip("torch")
    from specsched.runtime.host_reference import LaunchReferenceWork

    work = LaunchReferenceWork(torch.device("cpu"), torch.float32)
    sp = SpeedSampler(cadence_s=0.0, launch_work=work)
    for _ in range(3):
        sp.sample()
    assert len(sp.launch_seconds) == len(sp.seconds) == 3 and min(sp.launch_seconds) > 0
    assert "index_select" in work.kind
    s = speed_summary([1e-3] * 3, 1e-3, launch_seconds=[2e-4, 3e-4, 4e-4], launch_reference_s=1.5e-4)
    assert s["launch_reference_work_s"] == pytest.approx(3e-4) and s["launch_path_factor"] == pytest.approx(2.0)
    assert "launch_reference_work_s" not in speed_summary([1e-3])
    eng = tiny_runtime_engine()
    hs = eng.run().summary["host_speed"]
    assert hs["launch_reference_work_s"] > 0
    assert len(eng.host_speed_samples()["launch_reference_work_s"]) == hs["samples"]


def test_gpu_validate_conditions_the_launch_path_on_the_run_launch_reference(tmp_path):
    """A run whose summary has the launch reference work, against a profile that has one:
    the conditioned prediction gets the run's launch reference (the launch path's terms at it
    over the profile's), and checks.md prints both factors."""
    gv = load_benchmark("gpu_validate", "gv_launch")
    p = tiny_profile(**HOST_HEAVY, reference_work_s=1e-3, launch_reference_work_s=2e-4)
    seen = []

    def measure(job, eng):
        res = SimEngine(job.scenario, p).run()
        res.summary["host_speed"] = speed_summary([1e-3] * 5, launch_seconds=[3e-4] * 5)
        return res, eng

    def condition(job, seed, factor, launch_s=None):
        seen.append((factor, launch_s))
        sc = with_value(with_value(job.scenario, "host.reference_work_s", factor * 1e-3),
                        "host.launch_reference_work_s", launch_s)
        return SimEngine(sc, p, seed).run()

    val = gv.Validation(tmp_path, measure, lambda job, seed: SimEngine(job.scenario, p, seed).run(),
                        condition=condition, reference_s=1e-3, launch_reference_s=2e-4)
    val.run([gv.Job("a", "base", _scenario("host_block"), "a", "a-base")])
    val.save()
    assert seen == [(pytest.approx(1.0), pytest.approx(3e-4))]
    assert "launch reference work 0.300 ms, x1.500 the profile's 0.200 ms" in (tmp_path / "checks.md").read_text()
    head = {r["metric"]: r["error_pct"] for r in val.rows if r["metric"] in gv.TARGETS}
    cond = {r["metric"]: r["error_pct"] for r in val.conditioned if r["metric"] in gv.TARGETS}
    assert max(abs(e) for e in head.values()) < 1e-6 < max(abs(e) for e in cond.values())  # a slower launch path moves it
