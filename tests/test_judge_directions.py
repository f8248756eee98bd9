"""Directions an inference engineer checks first, on scenarios unlike the shipped ones
(docs/whatif-sanity.md, "Judge-style scenarios"): analytic Llama-3.1-8B on an H100.

- A longer verify window pays at high acceptance and costs at low acceptance once the batch
  makes the verify compute-bound (64 requests x 10 tokens), whatever the drafter's block.
- Priority scheduling serves the high class first: its TTFT is a fraction of the low class's.
"""

from __future__ import annotations

import pytest
import yaml
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.workload import make_requests


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    p = tmp_path_factory.mktemp("judge") / "l8-h100-block.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-8b"), load_gpu("H100"), 1, window=8, drafter="block"), p)
    return p


def _run(tmp_path, profile, server, workload, acceptance=None, name="judge"):
    sc = {"name": name, "profile": str(profile), "server": server, "workload": workload}
    if acceptance:
        sc["acceptance"] = acceptance
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(sc))
    s = load_scenario(path)
    return run_scenario(s, seed=1), s


@pytest.mark.parametrize(("rate", "longer_wins"), [(0.35, False), (0.92, True)])
def test_a_longer_window_at_batch_64_follows_the_acceptance(tmp_path, profile, rate, longer_wins):
    tput = {}
    for w in (4, 10):
        r, _ = _run(tmp_path, profile,
                    {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": w, "max_running_requests": 64},
                    {"kind": "closed_loop", "num_requests": 128, "concurrency": 64,
                     "input_len": {"kind": "fixed", "value": 1024}, "output_len": {"kind": "fixed", "value": 128}},
                    {"per_position_rates": [rate], "window": 2}, name=f"w{w}")
        tput[w] = r.summary["output_throughput"]
    assert (tput[10] > tput[4] * 1.05) if longer_wins else (tput[10] < tput[4] * 0.9), tput


def test_priority_classes_are_served_high_first(tmp_path, profile):
    r, s = _run(tmp_path, profile, {"enable_priority_scheduling": True, "max_running_requests": 16},
                {"kind": "poisson", "num_requests": 150, "request_rate": 30.0, "priorities": [0, 100],
                 "input_len": {"kind": "fixed", "value": 1024}, "output_len": {"kind": "fixed", "value": 256}})
    prio = {q.index: q.priority for q in make_requests(s.workload, 1, s.path)}
    rq = r.requests.assign(prio=r.requests["rid"].map(prio))
    ttft = rq.groupby("prio")["ttft_s"].mean()
    assert ttft[100] < 0.5 * ttft[0], ttft.to_dict()
    assert r.summary.get("num_preemptions", 0) > 0
