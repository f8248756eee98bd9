"""An extend launched onto an idle stream trails its launch by host.extend_idle_lead_s."""

from __future__ import annotations

import pytest
from specsched.sim.engine import run_scenario

from tests.conftest import make_scenario, tiny_profile


def _run(lead: float, **workload):
    prof = tiny_profile()
    prof = prof.model_copy(update={"host": prof.host.model_copy(update={"extend_idle_lead_s": lead})})
    sc = make_scenario(server={"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}, workload=workload)
    return run_scenario(sc, profile=prof)


def test_idle_stream_extend_ends_later_by_the_lead():
    # one request at t=0: its extend starts on an idle stream, so the first token is later by the lead
    base, lead = _run(0.0, num_requests=1), _run(2e-3, num_requests=1)
    assert lead.requests.ttft_s.iloc[0] == pytest.approx(base.requests.ttft_s.iloc[0] + 2e-3, abs=1e-9)
    s0, s1 = base.steps.iloc[0], lead.steps.iloc[0]
    assert s1.gpu_start_s == s0.gpu_start_s  # the launch is recorded when the stream reaches it
    assert s1.gpu_end_s - s1.gpu_start_s == pytest.approx(s0.gpu_end_s - s0.gpu_start_s + 2e-3)


def test_lead_hidden_behind_a_busy_stream():
    """Invariant: an extend queued behind a forward that outlasts the lead is not delayed,
    and no forward ever ends earlier because of the lead."""
    kw = dict(kind="poisson", request_rate=400.0, num_requests=12)
    base, lead = _run(0.0, **kw), _run(1e-5, **kw)  # 10 us: shorter than any forward here
    b, m = base.steps.set_index(["step", "part"]), lead.steps.set_index(["step", "part"])
    assert (b.num_extend_tokens == m.num_extend_tokens.reindex(b.index)).all()  # same plans
    dur_b, dur_m = b.gpu_end_s - b.gpu_start_s, m.gpu_end_s - m.gpu_start_s
    assert (dur_m >= dur_b - 1e-12).all()
    queued = (m.gpu_start_s - m.gpu_end_s.shift(1)).fillna(1.0) <= 0  # started when the previous ended
    ext = (m.num_extend_tokens > 0) & queued
    assert ext.any()
    assert (dur_m[ext] - dur_b[ext]).abs().max() < 1e-12
