"""A device that runs each forward inside its launch call (torch on CPU): the overlap loop
launches step N+1 before it processes step N's results, so on such a device those results,
and the tokens they deliver, wait for step N+1's forward (docs/runtime.md, CPU)."""

from __future__ import annotations

from specsched.sim.engine import SimEngine
from specsched.sim.profile import Profile

from tests.conftest import make_scenario, tiny_profile


def _inline(p: Profile) -> Profile:
    data = p.model_dump()
    data["gpu"]["forward_in_launch"] = True
    return Profile.model_validate(data)


def _first_delivery_and_first_verify_end(profile: Profile) -> tuple[float, float]:
    # four prompts of 500 tokens: one extend (chunk 2048), then verifies
    res = SimEngine(make_scenario(workload={"num_requests": 4}), profile).run()
    steps = res.table("steps").frame()
    first_verify = steps[(steps["mode"] != "extend") & (steps["batch_size"] > 0)].iloc[0]
    return float(res.table("chunks").frame()["time_s"].min()), float(first_verify["gpu_end_s"])


def test_tokens_wait_for_the_next_forward_when_the_launch_runs_it():
    """Measured on CPU (tiny preset, h200-batch8 at 8 x 128 tokens): first tokens at 19.8 ms,
    at the end of the first verify (19.6 ms); predicted at the prefill's end (13.6 ms)."""
    first, verify_end = _first_delivery_and_first_verify_end(_inline(tiny_profile()))
    assert first >= verify_end
    # a GPU's launch returns before its forward runs: the prefill's tokens come during the verify
    first, verify_end = _first_delivery_and_first_verify_end(tiny_profile())
    assert first < verify_end


def test_the_host_never_waits_for_a_forward_that_ran_in_its_launch():
    res = SimEngine(make_scenario(server={"sync_mode": "host_block"}), _inline(tiny_profile())).run()
    assert res.summary["host_blocked_s"] < 0.01 * res.summary["duration"]
