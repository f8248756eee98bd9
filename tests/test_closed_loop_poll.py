"""A closed-loop client's next request reaches the loop's very next poll (no ingest delay)."""

from __future__ import annotations

import pytest
from specsched.sim.engine import run_scenario

from tests.conftest import make_scenario, tiny_profile


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("spec", ["dspark", "none"])
def test_replacement_request_is_in_the_next_batch(overlap, spec):
    """Invariant: in a closed loop whose other requests keep decoding, the first forward
    that starts on the GPU after a request is sent is its extend: the loop polls after the
    delivery that freed the slot (managers/scheduler.py recv_requests at the top of the next
    iteration; runtime/engine.py _recv), so the request never waits out a further decode
    step. Without settling the client's send at the delivery instant it did."""
    server = {"enable_overlap_schedule": overlap, "speculative_algorithm": spec}
    if spec == "none":
        server["speculative_num_draft_tokens"] = 1
    sc = make_scenario(server=server,
                       workload={"kind": "closed_loop", "concurrency": 3, "num_requests": 9,
                                 "output_len": {"kind": "uniform", "value": 40, "range_ratio": 0.8}})
    res = run_scenario(sc, profile=tiny_profile())
    req, steps = res.requests, res.steps
    main = steps[steps.part == "main"].sort_values("gpu_start_s")
    late = req[req.start_s > 0]
    assert len(late) == 6
    for r in late.itertuples():
        nxt = main[main.gpu_start_s >= r.start_s].iloc[0]
        assert nxt.num_extend_tokens > 0, (r.rid, nxt.step, nxt.mode)
