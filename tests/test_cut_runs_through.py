"""A trace the up-front check passes runs to its end: every row whose output SGLang 0.5.23
cuts (managers/scheduler.py ``init_req_max_new_tokens``) runs with that cut, and the
simulated scheduler never stops mid-run for want of KV on such a row."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.limits import check_fits

from tests.conftest import make_scenario, tiny_profile


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(cap=st.integers(200, 3000), page=st.sampled_from([1, 4, 16, 64]),
       spec=st.sampled_from(["none", "dspark2", "dspark4", "dspark8"]),
       overlap=st.booleans(), mixed=st.booleans(), seed=st.integers(1, 5),
       rows=st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 4000)), min_size=1, max_size=8),
       mrr=st.sampled_from([1, 2, 4, 16]), chunk=st.sampled_from([64, 128, 1024]))
def test_a_trace_the_check_passes_runs_to_its_end(cap, page, spec, overlap, mixed, seed, rows, mrr, chunk):
    """Invariant: rows arriving together on a small pool (any page size, with and without
    speculative decoding, overlap and mixed chunks) either are refused before the first
    event, in one line, or all run to their end: the cut outputs and the top-up check leave
    no row that exhausts the KV pool mid-run."""
    srv = {"max_total_num_tokens": cap, "page_size": page, "chunked_prefill_size": chunk,
           "max_prefill_tokens": 256, "max_running_requests": mrr, "cuda_graph_max_bs": 16,
           "enable_overlap_schedule": overlap, "enable_mixed_chunk": mixed}
    if spec == "none":
        srv.update(speculative_algorithm="none", speculative_num_draft_tokens=1)
    else:
        srv.update(speculative_algorithm="dspark", speculative_num_draft_tokens=int(spec[6:]))
    d = Path(tempfile.mkdtemp())
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2024-05-01 10:00:00.{k},{i},{o}\n" for k, (i, o) in enumerate(rows))
    (d / "t.csv").write_text(text)
    try:
        sc = make_scenario(server=srv, seed=seed, acceptance={"mean_accept_length": 1.8}, workload={
            "kind": "trace", "trace": {"path": str(d / "t.csv"), "layout": "azure"}, "num_requests": None,
            "input_len": None, "output_len": None})
        check_fits(sc)
    except (ConfigError, ValueError):   # refused up front, in one line
        return
    res = SimEngine(sc, tiny_profile()).run()
    assert len(res.requests) == len(rows)
