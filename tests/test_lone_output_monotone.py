"""INV-M-OUTPUT: a lone request's end-to-end latency never falls when it asks for more
output tokens (metamorphic, two runs): the same prompt, the same seeded accept draws, and
every token of the shorter output is committed by the same forward in both runs (a request
stops only at its length: sglang 0.5.23 managers/schedule_batch.py ``Req.check_finished``),
so the longer one ends no earlier. It holds whatever the profile's calibration: seeds,
drafters, chunk and page sizes, overlap and the sync mode are drawn.

Not asserted: the same of the prompt's length (INV-M-PROMPT). A measured extend grid may
fall between two token counts (a GEMM's tile choice, a host-bound plateau timed with noise:
the H100 round-43 profile times 448 tokens at 22.4 ms and 480 at 18.6 ms at both its context
columns), and the model reads the grid as measured.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import run_scenario

from tests.test_metamorphic import BASE_SERVER, _comparable, profile, scenario

PROFILES = ["h200-1b", "mi355x-dsv41-flash-tp4", "h100-llama-3.1-8b-eagle3-analytic"]

spec = st.sampled_from([
    {"speculative_algorithm": "none"},
    {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 6},
    {"speculative_algorithm": "eagle", "speculative_num_draft_tokens": 4, "speculative_num_steps": 3},
])
knobs = st.fixed_dictionaries({}, optional={
    "enable_overlap_schedule": st.booleans(),
    "chunked_prefill_size": st.sampled_from([512, 2048, 8192, -1]),
    "page_size": st.sampled_from([1, 16, 64]),
    "sync_mode": st.sampled_from(["host_block", "stream_wait", "cross_queue_wait"]),
})


def _lone(prof: str, srv: dict, prompt: int, output: int, seed: int) -> dict:
    wl = {"kind": "burst", "num_requests": 1, "input_len": {"kind": "fixed", "value": prompt},
          "output_len": {"kind": "fixed", "value": output}}
    return run_scenario(scenario(prof, srv, wl, seed=seed), seed=seed, profile=profile(prof), warn=False).summary


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROFILES), spec, knobs, st.integers(1, 400), st.integers(1, 200), st.integers(1, 5))
def test_inv_m_output_a_longer_output_never_lowers_a_lone_e2e(prof, sp, kn, output, more, seed):
    srv = {**BASE_SERVER, **sp, **kn, "max_prefill_tokens": 16384, "max_total_num_tokens": 60_000}
    if not _comparable(profile(prof), srv):
        return
    a = _lone(prof, srv, 1500, output, seed)["mean_e2e_latency_ms"]
    b = _lone(prof, srv, 1500, output + more, seed)["mean_e2e_latency_ms"]
    assert b >= a * (1 - 1e-9), (output, output + more, a, b)
