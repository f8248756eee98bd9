"""``RuntimeEngine.set_scenario``: another arm on an engine already built (benchmarks/gpu_validate.py
runs a cell's arms on one engine, benchmarks/measure_sweep.py its rates) must run what a fresh
engine for that arm would run, or refuse as the constructor refuses.

It took an arm the constructor refuses (DP attention over 2 ranks, run as one rank without a
word; the radix cache on over prompts that share prefixes, ``PoolExhausted`` mid-run, before the
runtime shared a cached prefix's KV), kept the
first arm's served requests (an arm's ``context_length`` / ``allow_auto_truncate`` cut outputs
in the simulator, not in the measurement), and its captured decode/verify graph batch sizes
(an arm's ``cuda_graph_bs`` with the same largest entry). An arm that serves other requests or
pads to other graphs now needs a fresh engine, which benchmarks/gpu_validate.py builds when
``accepts`` says no.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.sim.config import Scenario  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402
from specsched.sim.errors import ConfigError  # noqa: E402

from tests.conftest import make_scenario, tiny_profile  # noqa: E402

SMALL = {"num_requests": 3, "input_len": {"kind": "fixed", "value": 24}, "output_len": {"kind": "fixed", "value": 8}}


def _engine(sc: Scenario) -> RuntimeEngine:
    return RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)


def _trace(tmp_path, server: dict) -> Scenario:
    """Eight requests at t=0 from a Mooncake-layout trace whose prompts share leading blocks."""
    rows = [(40, 38), (26, 27), (87, 34), (90, 8), (87, 4), (117, 34), (43, 39), (39, 16)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 0, "input_length": i, "output_length": o,
                                        "hash_ids": [k % 3, 10 + k]}) + "\n" for k, (i, o) in enumerate(rows)))
    srv = {"max_running_requests": 16, "max_total_num_tokens": 20_000, "chunked_prefill_size": 2048,
           "max_prefill_tokens": 4096, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4, **server}
    return Scenario.model_validate({
        "name": "t", "profile": "tiny", "seed": 1, "server": srv, "path": str(tmp_path / "t.yaml"),
        "acceptance": {"mean_accept_length": 2.5, "request_spread": 0.3},
        "workload": {"kind": "trace", "trace": {"path": str(path), "layout": "mooncake", "block_size": 16}}})


@pytest.mark.parametrize("server, key", [
    ({"enable_dp_attention": True, "dp_size": 2}, "server.dp_size"),
    ({"disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1}}}, "server.disaggregation"),
])
def test_an_arm_the_constructor_refuses_is_refused_by_set_scenario(server: dict, key: str) -> None:
    eng = _engine(make_scenario(workload=SMALL))
    arm = make_scenario(server=server, workload=SMALL)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        _engine(arm)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        eng.set_scenario(arm)


def test_a_radix_cache_arm_over_shared_prefixes_runs_on_the_same_engine(tmp_path) -> None:
    """Was refused (the runtime shared no KV between rows); now the arm runs with the same
    cache hits as the simulator's, and so does an arm with KV pages over them (the tree keeps
    whole pages, a row its partial last one)."""
    two = {"max_running_requests": 2}   # the later requests find what the first ones cached
    eng = _engine(_trace(tmp_path, {"disable_radix_cache": True, **two}))
    assert "cache_hit_rate" not in eng.run().summary
    on = _trace(tmp_path, two)
    eng.set_scenario(on)
    measured = eng.run()
    simulated = SimEngine(on, tiny_profile(ingest_per_request_s=0.0)).run()
    assert measured.summary["completed"] == 8
    assert measured.summary["cache_hit_rate"] == simulated.summary["cache_hit_rate"] > 0
    paged = _trace(tmp_path, {"page_size": 16, **two})
    eng.set_scenario(paged)
    assert eng.run().summary["cache_hit_rate"] == SimEngine(paged, tiny_profile(ingest_per_request_s=0.0)).run().summary["cache_hit_rate"]


def test_an_arm_that_cuts_other_outputs_needs_another_engine(tmp_path) -> None:
    eng = _engine(_trace(tmp_path, {"disable_radix_cache": True}))
    arm = _trace(tmp_path, {"disable_radix_cache": True, "context_length": 64, "allow_auto_truncate": True})
    simulated = SimEngine(arm, tiny_profile(ingest_per_request_s=0.0)).run()
    assert simulated.requests.sort_values("rid")["output_len"].tolist() == [22, 27, 34, 8, 4, 34, 19, 16]
    assert not eng.accepts(arm)
    with pytest.raises(ValueError, match="build a new engine"):
        eng.set_scenario(arm)
    # an arm that serves the same requests is taken
    same = _trace(tmp_path, {"disable_radix_cache": True, "context_length": 4096, "sync_mode": "stream_wait"})
    assert eng.accepts(same)
    eng.set_scenario(same)
    assert eng.run().requests.sort_values("rid")["output_len"].tolist() == [38, 27, 34, 8, 4, 34, 39, 16]


def test_another_graph_batch_list_needs_another_engine() -> None:
    eng = _engine(make_scenario(server={"cuda_graph_max_bs": 8}, workload=SMALL))
    assert eng.accepts(make_scenario(server={"cuda_graph_max_bs": 8}, workload=SMALL))
    other = make_scenario(server={"cuda_graph_bs": [1, 3, 8]}, workload=SMALL)
    assert other.server.cuda_graph_max_bs == 8
    assert not eng.accepts(other)
