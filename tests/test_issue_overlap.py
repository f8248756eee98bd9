"""Eager kernel issue overlaps the GPU work it issues: an extend ends no earlier than the
host's issue of its kernels, an eager decode/verify cycle lasts max(graph + floor, issue);
and the profiler's fits of those terms (runtime.profile_fit.eager_fit, extend_issue_fit).

Mechanism: without a CUDA graph every kernel is a host launch; kernels run as they are
issued, so a short forward is host-bound and a long one GPU-bound (measured on an H200
proxy: eager minus graph falls from ~12 ms at batch 32 / 512 context to ~0.8 ms at 8K;
extend issue ~15 ms nearly flat from 1K to 8K tokens; docs/measurements/h200-v2.md)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_scenario, tiny_profile
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.runtime.profile_fit import eager_fit, extend_issue_fit
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import SimEngine, run_scenario
from specsched.sim.plan import BatchPlan, ForwardMode


def _with(profile, gpu=None, host=None):
    raw = profile.model_dump()
    raw["gpu"].update(gpu or {})
    raw["host"].update(host or {})
    return type(profile).model_validate(raw)


def _one_request(**server):
    return make_scenario(server=server, workload={"num_requests": 1, "input_len": {"kind": "fixed", "value": 200},
                                                  "output_len": {"kind": "fixed", "value": 8}})


def test_extend_issue_bounds_a_short_prefill_from_below():
    base = tiny_profile()
    slow_issue = _with(base, host={"launch_per_extend_s": 0.05})
    sc = _one_request()
    t0 = run_scenario(sc, seed=1, profile=base).summary["median_ttft_ms"]
    t1 = run_scenario(sc, seed=1, profile=slow_issue).summary["median_ttft_ms"]
    # the 200-token extend takes ~0.2 ms of GPU: the 50 ms issue decides when it ends
    assert t1 - t0 == pytest.approx(50.0, rel=0.05)


def test_issue_is_not_charged_as_launch_host_work():
    prof = _with(tiny_profile(), host={"launch_per_extend_s": 0.01, "launch_per_extend_token_s": 1e-6})
    cm = CostModel(prof, _one_request().server)
    plan = BatchPlan(step=0, mode=ForwardMode.EXTEND, rids=(0,), extend_lens=(200,), prefix_lens=(0,), num_extend=1)
    assert cm.host("launch", plan) == pytest.approx(prof.host.launch_s)
    assert cm.issue(plan) == pytest.approx(0.01 + 1e-6 * 200)
    assert cm.issue(plan, "inject") == 0.0


@pytest.mark.parametrize("ctx", [512, 200_000])
def test_eager_cycle_is_the_slower_of_gpu_and_issue(ctx):
    sc = _one_request(cuda_graph_max_bs=1)
    no_issue = _with(tiny_profile(), gpu={"eager_overhead_s": 1e-4})
    with_issue = _with(no_issue, gpu={"eager_host_issue_s": 0.02})
    bs = 4  # above cuda_graph_max_bs: eager
    t0 = CostModel(no_issue, sc.server).step_s(bs, ctx)
    t1 = CostModel(with_issue, sc.server).step_s(bs, ctx)
    assert t1 == pytest.approx(max(t0, 0.02))


def test_eager_fit_finds_the_floor_and_the_issue_time():
    issue, floor = 0.015, 0.0008
    graph_times = [0.004, 0.007, 0.010, 0.014, 0.030, 0.050]
    points = [(32, i, max(g + floor, issue), max(g + floor, issue) / g) for i, g in enumerate(graph_times)]
    got_floor, got_issue = eager_fit(points)
    assert got_floor == pytest.approx(floor, rel=1e-6)
    assert got_issue == pytest.approx(issue, rel=1e-6)
    assert eager_fit([(32, 0, g + floor, (g + floor) / g) for g in (0.03, 0.05)])[1] is None


@settings(max_examples=40, deadline=None)
@given(issues=st.lists(st.floats(0.005, 0.03), min_size=3, max_size=15), slow=st.floats(1.0, 2.0))
def test_eager_issue_measured_apart_stays_in_the_fast_points_range(issues, slow):
    """With the issue measured at every point (device time apart), the issue is their lower
    quartile, whatever the device times: a slow-host stretch over up to half the points
    (here the first half, slowed by up to 2x, as an H200 showed in docs/measurements/h200-v9.md)
    does not move it beyond the fast points' range."""
    k = len(issues) // 2
    seen = [h * slow for h in issues[:k]] + issues[k:]
    points = [(32, i, 0.004 + 0.001 * i, (0.004 + 0.001 * i) / (0.003 + 0.001 * i)) for i in range(len(seen))]
    floor, issue = eager_fit(points, seen)
    assert floor == pytest.approx(0.001, rel=1e-6)
    # slowing can only raise a point: the estimate is never above the fast points, never below the unslowed values
    assert min(issues) <= issue <= max(issues[k:])
    assert eager_fit(points, [0.0] * len(seen))[1] is None  # CPU: the call runs inline


@settings(max_examples=60, deadline=None)
@given(a=st.floats(1e-4, 0.05), b=st.floats(0, 1e-6), outlier=st.floats(1.0, 3.0))
def test_extend_issue_fit_recovers_line_despite_a_warmup_outlier(a, b, outlier):
    xs = [256, 1024, 2048, 4096, 8192]
    ys = [a + b * x for x in xs]
    ys[0] *= outlier  # the first point measured, inflated by warm-up
    got_a, got_b = extend_issue_fit(xs, ys)
    assert got_a == pytest.approx(a, rel=0.02, abs=1e-6)
    assert got_b == pytest.approx(b, rel=0.02, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(ys=st.lists(st.floats(1e-4, 0.05), min_size=2, max_size=8), lo=st.integers(64, 4096),
       span=st.floats(0.0, 0.99))
def test_extend_issue_fit_over_less_than_a_doubling_has_no_slope(ys, lo, span):
    """Invariant "no slope from a narrow range": points of lo..under 2 lo tokens give their
    median as the per-launch issue and 0 s per token. An H100 profile of extends of 960-1,024
    tokens fitted 70.9 us per token from noise and priced an 8,192-token extend's issue at
    0.58 s (docs/measurements/h100-v47.md)."""
    hi = lo + span * lo
    xs = [lo + (hi - lo) * i / (len(ys) - 1) for i in range(len(ys))]
    a, b = extend_issue_fit(xs, ys)
    assert b == 0.0
    assert a == pytest.approx(float(np.median(ys)))


def test_extend_issue_fit_over_a_doubling_still_fits_a_slope():
    a, b = extend_issue_fit([512, 1024], [0.010, 0.011])
    assert b == pytest.approx(0.001 / 512) and a == pytest.approx(0.009)


@pytest.mark.parametrize("overlap", [True, False])
def test_eager_step_issue_keeps_the_host_busy(overlap):
    """Above cuda_graph_max_bs the host issues each decode/verify's kernels itself, so its
    scheduling and result processing cannot hide behind the step: consecutive eager steps
    are gpu.eager_host_issue_s + the loop's host work apart, with or without the overlap
    scheduler (measured on the H200 proxy, docs/measurements/h200-v3-repredict.md: 0.58 ms
    GPU idle between eager verifies in both arms). Graph-replayed steps keep the overlap."""
    issue = 0.02
    prof = _with(tiny_profile(), gpu={"eager_overhead_s": 1e-4, "eager_host_issue_s": issue},
                 host={"schedule_s": 1e-3, "launch_s": 2e-3, "process_s": 1e-3})
    sc = make_scenario(server={"cuda_graph_max_bs": 2, "enable_overlap_schedule": overlap},
                       workload={"num_requests": 6, "input_len": {"kind": "fixed", "value": 200},
                                 "output_len": {"kind": "fixed", "value": 30}})
    for ff in (True, False):
        steps = SimEngine(sc, prof, 1, fast_forward=ff).run().steps.sort_values("gpu_start_s")
        steps = steps[steps.part == "main"]
        gaps = (steps.gpu_start_s.shift(-1) - steps.gpu_end_s).to_numpy()[:-1]
        eager = ((steps["mode"] != "extend") & (steps.batch_size > 2)).to_numpy()[:-1]
        nxt_eager = ((steps["mode"] != "extend") & (steps.batch_size > 2)).to_numpy()[1:]
        both = eager & nxt_eager
        assert both.sum() >= 3
        dur = (steps.gpu_end_s - steps.gpu_start_s).to_numpy()[:-1]
        assert (dur[both] >= issue - 1e-12).all()
        # the host's schedule + launch (3 ms) of the next step waits for the issue
        assert (gaps[both] >= 3e-3 - 1e-9).all(), gaps[both]


def test_inject_issue_is_charged_at_the_inject_launch_only_with_a_drafter():
    """host.launch_per_inject_s is the drafter injection's issue (DSpark prefill): a
    speculative run's TTFT pays it after the extend, a plain-decoding run never does."""
    split = _with(tiny_profile(), host={"launch_per_extend_s": 0.03, "launch_per_inject_s": 0.01})
    merged = _with(tiny_profile(), host={"launch_per_extend_s": 0.04})
    cm = CostModel(split, _one_request().server)
    plan = BatchPlan(step=0, mode=ForwardMode.EXTEND, rids=(0,), extend_lens=(200,), prefix_lens=(0,), num_extend=1)
    assert cm.issue(plan, "inject") == pytest.approx(0.01)
    spec, plain = _one_request(), _one_request(speculative_algorithm="none")
    ttft = {(name, sc_name): run_scenario(sc, seed=1, profile=p).summary["median_ttft_ms"]
            for name, p in (("split", split), ("merged", merged)) for sc_name, sc in (("spec", spec), ("plain", plain))}
    assert ttft["split", "spec"] == pytest.approx(ttft["merged", "spec"], abs=0.5)
    assert ttft["merged", "plain"] - ttft["split", "plain"] == pytest.approx(10.0, rel=0.05)
