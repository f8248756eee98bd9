"""The loop's result path (profile host.result_path_* and host.recv_path_*: the host's work
from a step's results to the next schedule pass beyond ``process_result`` and
``schedule()``; measured by runtime/profile_host.py ``stall_phase``'s no-overlap loop,
charged by sim.cost_model.CostModel.host with process_* and schedule_*).

- it is host time between the results and the next launch: without overlap every step
  pays it in full before the next forward;
- with overlap and a forward queued it runs under that forward: a GPU-bound decode does
  not slow down, while the first tokens, delivered after the extend's results, come later
  by the part before the delivery;
- a profile without it times nothing differently (0 is the default).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import SimEngine

from tests.conftest import make_scenario, tiny_profile

PATH = dict(result_path_s=3e-4, recv_path_s=2e-4)


def _run(overlap: bool, **host):
    # no host block anywhere: with overlap every forward is queued behind the previous one
    sc = make_scenario({"enable_overlap_schedule": overlap, "max_running_requests": 8, "sync_mode": "stream_wait",
                        "prefill_slot_expansion_sync": False},
                       {"kind": "burst", "num_requests": 8, "output_len": {"kind": "fixed", "value": 80}})
    return SimEngine(sc, tiny_profile(**host)).run()


def _verify_gaps(run) -> np.ndarray:
    """GPU idle seconds before each verify that follows a verify (steady decoding)."""
    s = run.steps
    s = s[s.part == "main"].reset_index(drop=True)
    both = (s["mode"] == "verify") & (s["mode"].shift() == "verify")
    return (s.gpu_start_s - s.gpu_end_s.shift())[both].to_numpy()


def test_without_overlap_every_step_pays_the_path_before_the_next_launch() -> None:
    base, path = _run(False), _run(False, **PATH)
    g0, g1 = _verify_gaps(base), _verify_gaps(path)
    assert len(g0) > 20 and len(g0) == len(g1)
    assert np.median(g1 - g0) == pytest.approx(PATH["result_path_s"] + PATH["recv_path_s"], abs=1e-9)
    assert path.summary["median_tpot_ms"] > base.summary["median_tpot_ms"]


def test_with_overlap_it_hides_behind_the_queued_forward() -> None:
    base, path = _run(True), _run(True, **PATH)
    # the decode is GPU-bound: the next forward is queued before the path runs
    assert np.max(_verify_gaps(path)) == pytest.approx(0.0, abs=1e-12)
    assert path.summary["median_tpot_ms"] == pytest.approx(base.summary["median_tpot_ms"], rel=1e-9)
    # the first pass pays the receive before the first launch (recv_path_s) and the
    # extend's first tokens are delivered after its results (result_path_s)
    d = path.summary["median_ttft_ms"] - base.summary["median_ttft_ms"]
    assert d == pytest.approx((PATH["result_path_s"] + PATH["recv_path_s"]) * 1e3, rel=1e-6)


def test_a_profile_without_the_terms_charges_the_scheduler_alone() -> None:
    server = make_scenario().server
    plan = SimpleNamespace(batch_size=8)   # CostModel.host reads the batch size only
    p = tiny_profile(process_s=1e-4, process_per_req_s=3e-6, schedule_s=2e-4, schedule_per_req_s=5e-6)
    assert p.host.result_path_s == p.host.recv_path_s == 0.0
    cost = CostModel(p, server)
    assert cost.host("process", plan) == 1e-4 + 3e-6 * 8
    assert cost.host("schedule", plan) == 2e-4 + 5e-6 * 8
    with_path = CostModel(tiny_profile(process_s=1e-4, process_per_req_s=3e-6, schedule_s=2e-4,
                                       schedule_per_req_s=5e-6, result_path_s=3e-4, result_path_per_req_s=1e-6,
                                       recv_path_s=2e-4, recv_path_per_req_s=2e-6), server)
    assert with_path.host("process", plan) == pytest.approx(4e-4 + 4e-6 * 8, rel=1e-12)
    assert with_path.host("schedule", plan) == pytest.approx(4e-4 + 7e-6 * 8, rel=1e-12)
