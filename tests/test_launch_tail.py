"""The rest of a launch call after its forward is queued (profile host.launch_tail_*).

The runtime's launch of a graph-replayed decode/verify returns only after recording its
events, advancing the host's length bounds and starting the result copy (runtime/engine.py
``_launch``): the GPU runs meanwhile, the host cannot process the previous step's results
yet. On H200 round 5 the first token of a batch-1 request came 1.16 ms after the next
verify's launch began, where the simulator without the tail delivered it 0.49 ms after.
"""

from __future__ import annotations

import numpy as np
import pytest
from specsched.sim.config import ServerArgs
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import SimEngine
from specsched.sim.plan import decode_plan

from tests.conftest import make_scenario, tiny_profile


def _decode_run(tail: float, seed: int = 3):
    sc = make_scenario({"speculative_algorithm": "none", "max_running_requests": 1},
                       {"kind": "closed_loop", "num_requests": 2, "concurrency": 1,
                        "output_len": {"kind": "fixed", "value": 60}})
    res = SimEngine(sc, tiny_profile(launch_tail_s=tail), seed).run()
    s = res.steps[(res.steps["mode"] == "decode") & (res.steps["part"] == "main")]
    return res, s


def test_a_tail_shorter_than_the_forward_is_hidden():
    """GPU-bound (decode 1 ms, host 0.4 ms + tail 0.3 ms per step): every forward keeps its
    time; the host only blocks less (it was busy instead), so a token is delivered at most
    one wake-up (host.sync_wakeup_s, 50 us) away from where it was."""
    base, _ = _decode_run(0.0)
    tail, _ = _decode_run(3e-4)
    keep = [c for c in base.steps.columns if c != "host_blocked_s"]
    np.testing.assert_array_equal(base.steps[keep].to_numpy(), tail.steps[keep].to_numpy())
    for col in ("first_token_s", "finish_s"):
        np.testing.assert_allclose(tail.requests[col], base.requests[col], rtol=0, atol=5e-5 + 1e-12)
    assert tail.steps["host_blocked_s"].sum() < base.steps["host_blocked_s"].sum()


def test_a_tail_longer_than_the_forward_paces_the_loop():
    """Host-bound (tail 3 ms against a 1 ms decode): each decode step starts one tail later
    than without it, since the next launch waits for this call to return."""
    _, s0 = _decode_run(0.0)
    _, s1 = _decode_run(3e-3)
    d0 = np.diff(s0["gpu_start_s"].to_numpy())
    d1 = np.diff(s1["gpu_start_s"].to_numpy())
    assert np.median(d0) == pytest.approx(1e-3, rel=1e-9)                 # GPU-paced without it
    # with it the loop runs at the host's pace: schedule + launch + tail + process per step
    assert np.median(d1) == pytest.approx(1e-4 + 2e-4 + 3e-3 + 1e-4, rel=1e-9)


def test_only_graph_replayed_decode_and_verify_launches_have_a_tail():
    srv = ServerArgs.model_validate({"speculative_algorithm": "none", "cuda_graph_max_bs": 4,
                                     "max_running_requests": 8})
    cost = CostModel(tiny_profile(launch_tail_s=5e-4, launch_tail_per_req_s=1e-5), srv)
    dec = decode_plan(0, False, 1, [0, 1, 2], [100, 100, 100], [100, 100, 100], [10, 10, 10])
    assert cost.launch_tail(dec) == pytest.approx(5e-4 + 3 * 1e-5)
    assert cost.launch_tail(dec, "inject") == 0.0
    eager = decode_plan(0, False, 1, list(range(6)), [100] * 6, [100] * 6, [10] * 6)
    assert cost.launch_tail(eager) == 0.0        # above cuda_graph_max_bs: the issue is the call
    assert CostModel(tiny_profile(), srv).launch_tail(dec) == 0.0   # not measured
