"""The scheduler's host terms of a plain-decoding server (profile host.decode_schedule_* and
host.decode_process_*, runtime/profile_host.py ``host_phase``; charged by
sim.cost_model.CostModel.host).

schedule_* / process_* are timed on verify plans of DSpark requests; a decode plan skips the
draft windows' bookkeeping. Invariants:

- a server without speculative decoding is charged the decode terms where the profile has
  them, a speculative one the verify terms whatever the profile holds;
- without overlap the decode cycle's host gap is the decode terms' (every step pays them),
  with overlap they hide behind the queued forward;
- a profile without them predicts exactly what it did (None: not measured);
- they are given together or not at all, and scaled with the host's speed like the rest.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import SimEngine
from specsched.sim.host_speed import scale_host

from tests.conftest import make_scenario, tiny_profile

VERIFY = dict(schedule_s=2e-4, schedule_per_req_s=5e-6, process_s=1e-4, process_per_req_s=3e-6,
              result_path_per_req_s=1e-6, recv_path_per_req_s=2e-6)
DECODE = dict(decode_schedule_s=5e-5, decode_schedule_per_req_s=1e-6, decode_process_s=2e-5,
              decode_process_per_req_s=5e-7)
PLAIN = {"speculative_algorithm": "none"}


@settings(max_examples=30, deadline=None)
@given(bs=st.integers(1, 256))
def test_a_plain_decoding_server_pays_the_decode_terms_a_speculative_one_the_verify_terms(bs: int) -> None:
    plan = SimpleNamespace(batch_size=bs)   # CostModel.host reads the batch size only
    both = tiny_profile(**VERIFY, **DECODE)
    plain = CostModel(both, make_scenario(PLAIN).server)
    spec = CostModel(both, make_scenario().server)
    assert plain.host("schedule", plan) == pytest.approx(5e-5 + (1e-6 + 2e-6) * bs, rel=1e-12)
    assert plain.host("process", plan) == pytest.approx(2e-5 + (5e-7 + 1e-6) * bs, rel=1e-12)
    assert spec.host("schedule", plan) == pytest.approx(2e-4 + (5e-6 + 2e-6) * bs, rel=1e-12)
    assert spec.host("process", plan) == pytest.approx(1e-4 + (3e-6 + 1e-6) * bs, rel=1e-12)
    # the launch is not a scheduler term: the same either way
    assert plain.host("launch", plan) == CostModel(tiny_profile(**VERIFY), make_scenario(PLAIN).server).host("launch", plan)
    # without the terms a plain-decoding server is charged the verify terms, as before
    old = CostModel(tiny_profile(**VERIFY), make_scenario(PLAIN).server)
    for kind in ("schedule", "process"):
        assert old.host(kind, plan) == spec.host(kind, plan)


def _run(overlap: bool, profile):
    sc = make_scenario({**PLAIN, "enable_overlap_schedule": overlap, "max_running_requests": 8},
                       {"kind": "burst", "num_requests": 8, "output_len": {"kind": "fixed", "value": 80}})
    return SimEngine(sc, profile).run()


def _decode_gaps(run) -> np.ndarray:
    """GPU idle seconds before each decode that follows a decode (steady decoding)."""
    s = run.steps
    both = (s["mode"] == "decode") & (s["mode"].shift() == "decode")
    return (s.gpu_start_s - s.gpu_end_s.shift())[both].to_numpy()


def test_without_overlap_the_decode_gap_is_the_decode_terms() -> None:
    old, new = _run(False, tiny_profile(**VERIFY)), _run(False, tiny_profile(**VERIFY, **DECODE))
    g0, g1 = _decode_gaps(old), _decode_gaps(new)
    assert len(g0) > 20 and len(g0) == len(g1)
    bs = 8
    saved = (2e-4 - 5e-5) + (5e-6 - 1e-6) * bs + (1e-4 - 2e-5) + (3e-6 - 5e-7) * bs
    assert np.median(g0 - g1) == pytest.approx(saved, rel=1e-6)
    assert new.summary["median_tpot_ms"] < old.summary["median_tpot_ms"]


def test_with_overlap_a_gpu_bound_decode_does_not_move() -> None:
    old, new = _run(True, tiny_profile(**VERIFY)), _run(True, tiny_profile(**VERIFY, **DECODE))
    g0, g1 = _decode_gaps(old), _decode_gaps(new)
    assert len(g0) > 20 and len(g0) == len(g1)
    # the next forward is queued before the scheduler's work runs: none of it shows between forwards
    assert np.max(g1) == pytest.approx(0.0, abs=1e-12) and np.max(g0) == pytest.approx(0.0, abs=1e-12)


def test_the_terms_come_together() -> None:
    with pytest.raises(ValidationError, match="decode_process_per_req_s: missing"):
        tiny_profile(**VERIFY, decode_schedule_s=1e-5, decode_schedule_per_req_s=1e-6, decode_process_s=1e-5)
    assert tiny_profile(**VERIFY).host.decode_schedule_s is None


def test_they_scale_with_the_host_speed() -> None:
    p = scale_host(tiny_profile(**VERIFY, **DECODE), 2.0)
    for k, v in DECODE.items():
        assert getattr(p.host, k) == pytest.approx(2 * v, rel=1e-12)
    assert scale_host(tiny_profile(**VERIFY), 2.0).host.decode_schedule_s is None


@pytest.mark.parametrize("speculative", [True, False])
def test_the_profilers_scheduler_reaches_the_steady_plan(speculative: bool) -> None:
    pytest.importorskip("torch")   # runtime.profile_host imports the runtime
    from specsched.runtime.profile_host import _verify_scheduler
    from specsched.sim.plan import ForwardMode

    sched, tokens = _verify_scheduler(4, 4, 1, speculative=speculative)
    plan = sched.schedule()
    assert plan.batch_size == 4
    assert plan.mode is (ForwardMode.VERIFY if speculative else ForwardMode.DECODE)


LAUNCH = dict(launch_s=9e-4, launch_per_req_s=8e-6)
DECODE_LAUNCH = dict(decode_launch_s=5e-4, decode_launch_per_req_s=1e-6)


@settings(max_examples=30, deadline=None)
@given(bs=st.integers(1, 256))
def test_a_plain_decoding_server_pays_the_decode_launch_a_speculative_one_the_verify_launch(bs: int) -> None:
    """INV-DECODE-LAUNCH: a decode launch draws no accepts and prepares no draft window, so a
    server without speculative decoding is charged host.decode_launch_* (timed on decode
    plans, runtime/profile_host.py stall_phase) where the profile has them."""
    plan = SimpleNamespace(batch_size=bs)
    both = tiny_profile(**VERIFY, **LAUNCH, **DECODE_LAUNCH)
    assert CostModel(both, make_scenario(PLAIN).server).host("launch", plan) == pytest.approx(5e-4 + 1e-6 * bs, rel=1e-12)
    assert CostModel(both, make_scenario().server).host("launch", plan) == pytest.approx(9e-4 + 8e-6 * bs, rel=1e-12)
    old = CostModel(tiny_profile(**VERIFY, **LAUNCH), make_scenario(PLAIN).server)
    assert old.host("launch", plan) == pytest.approx(9e-4 + 8e-6 * bs, rel=1e-12)


def test_without_overlap_the_decode_gap_pays_the_decode_launch() -> None:
    old = _run(False, tiny_profile(**VERIFY, **DECODE, **LAUNCH))
    new = _run(False, tiny_profile(**VERIFY, **DECODE, **LAUNCH, **DECODE_LAUNCH))
    g0, g1 = _decode_gaps(old), _decode_gaps(new)
    assert len(g0) > 20 and len(g0) == len(g1)
    assert np.median(g0 - g1) == pytest.approx((9e-4 - 5e-4) + (8e-6 - 1e-6) * 8, rel=1e-6)


def test_the_decode_launch_terms_come_together_and_scale_with_the_host() -> None:
    with pytest.raises(ValidationError, match="decode_launch_per_req_s: missing"):
        tiny_profile(**VERIFY, decode_launch_s=5e-4)
    p = scale_host(tiny_profile(**VERIFY, **DECODE_LAUNCH), 2.0)
    assert (p.host.decode_launch_s, p.host.decode_launch_per_req_s) == pytest.approx((1e-3, 2e-6), rel=1e-12)
    assert p.host.decode_schedule_s is None   # the scheduler's group is its own
