"""The fuzzer's strategies under hypothesis (small chunks, pages, mixed chunk with a small
chunk, tight KV and retraction, every policy, speculative algorithm and sync mode, random
profiles), each run checked against the named invariants (benchmarks/fuzz.py), and
determinism across processes with different hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import HealthCheck, example, given, settings

from tests.conftest import ROOT, load_benchmark

fuzz = load_benchmark("fuzz")

# issue 13's crash: DSpark window 4, chunked_prefill_size 7, mixed chunk, 3 requests 20 in / 50 out
ISSUE_13_MIXED_SMALL_CHUNK = (
    {"name": "t", "profile": "fuzz", "seed": 1,
     "server": {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4, "chunked_prefill_size": 7,
                "enable_mixed_chunk": True, "max_total_num_tokens": 100_000},
     "workload": {"kind": "burst", "num_requests": 3, "input_len": {"value": 20}, "output_len": {"value": 50}},
     "acceptance": {"mean_accept_length": 2.0}},
    {"name": "p", "device": "synthetic",
     "gpu": {"extend": {"x": [1, 1000], "seconds": [[1e-6], [1e-3]]}, "verify": {"x": [1, 100], "seconds": [[2e-3], [12e-3]]},
             "decode": {"x": [1, 100], "seconds": [[1e-3], [6e-3]]}}},
    True,
)


# three conversations of three turns sharing a system prompt: their histories stay in the
# radix cache after the run
MULTI_TURN_CASE = (
    {"name": "t", "profile": "fuzz", "seed": 2,
     "server": {"max_total_num_tokens": 20_000},
     "workload": {"kind": "multi_turn", "concurrency": 2, "output_len": {"value": 8},
                  "multi_turn": {"num_conversations": 3, "num_turns": 3, "system_prompt_len": 40,
                                 "first_prompt_len": {"value": 30}, "user_len": {"value": 10}}}},
    ISSUE_13_MIXED_SMALL_CHUNK[1],
    False,
)


# a full-suite run's UnschedulableRequest: EAGLE top-up 128 (topk 2, page 16), mixed chunk,
# KV pool 309, max_running_requests 2, chunk 20, 7 requests ~127 in / 4 out: a chunked
# prompt filled the pool the lone running request's next top-up needed
EAGLE_TOPUP_BESIDE_CHUNK = (
    {"name": "t", "profile": "fuzz", "seed": 3,
     "server": {"speculative_algorithm": "eagle", "speculative_num_draft_tokens": 4, "speculative_num_steps": 3,
                "speculative_eagle_topk": 2, "page_size": 16, "chunked_prefill_size": 16, "enable_mixed_chunk": True,
                "max_running_requests": 2, "max_total_num_tokens": 309, "enable_overlap_schedule": False},
     "workload": {"kind": "burst", "num_requests": 7, "input_len": {"kind": "uniform", "value": 127, "range_ratio": 0.5},
                  "output_len": {"kind": "uniform", "value": 4, "range_ratio": 1.0}},
     "acceptance": {"mean_accept_length": 1.5}},
    {"name": "p", "device": "synthetic",
     "gpu": {"extend": {"x": [1, 1000], "seconds": [[1e-6], [1e-3]]}, "verify": {"x": [1, 100], "seconds": [[2e-3], [12e-3]]},
             "decode": {"x": [1, 100], "seconds": [[1e-3], [6e-3]]},
             "draft_step": {"x": [1, 100], "seconds": [[1e-4], [1e-3]]}}},
    False,
)


def test_topup_beside_chunked_prompt_is_refused_up_front():
    """A pool that cannot hold a lone request's speculative top-up beside a chunked prompt
    is refused before the run in one line naming the field (it used to stop mid-run with
    UnschedulableRequest); the same case with the pool the rule asks for runs."""
    import pytest
    from specsched.sim.config import Scenario
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_fits
    from specsched.sim.pool_fit import topup_beside_chunk_tokens

    sc = Scenario.model_validate(EAGLE_TOPUP_BESIDE_CHUNK[0])
    need = topup_beside_chunk_tokens(sc.server, 127, 4)
    assert need == 272 + 128  # ceil16(127 + 4 + 128) + ceil16(127)
    with pytest.raises(ConfigError, match="server.max_total_num_tokens.*must be at least 400"):
        check_fits(sc)
    assert fuzz.run_case(*EAGLE_TOPUP_BESIDE_CHUNK) == "refused"
    ok = dict(EAGLE_TOPUP_BESIDE_CHUNK[0], server={**EAGLE_TOPUP_BESIDE_CHUNK[0]["server"], "max_total_num_tokens": need})
    assert fuzz.run_case(ok, EAGLE_TOPUP_BESIDE_CHUNK[1], True) == "ran"


# a fuzzed KVPoolExhausted: EAGLE topk 7 / 3 draft tokens, page 16, mixed chunk, chunk 256, pool
# 3155, 7 requests ~1219 in / ~127 out: the mixed decode rows' top-ups filled the pool under a
# chunked (retracted) prompt, whose continuation was capped at the free tokens (1) and so took
# one-token chunks until one started at a page boundary and needed a whole page
EAGLE_PAGED_CHUNK_AT_PAGE_BOUNDARY = (
    {"name": "t", "profile": "fuzz", "seed": 0,
     "server": {"max_running_requests": 3, "max_total_num_tokens": 3155, "chunked_prefill_size": 256,
                "max_prefill_tokens": 64, "page_size": 16, "schedule_conservativeness": 0.3,
                "enable_mixed_chunk": True, "cuda_graph_max_bs": 1, "speculative_algorithm": "eagle",
                "speculative_num_draft_tokens": 3, "speculative_num_steps": 2, "speculative_eagle_topk": 7,
                "enable_overlap_schedule": False},
     "workload": {"kind": "burst", "num_requests": 7,
                  "input_len": {"kind": "uniform", "value": 1219, "range_ratio": 0.05},
                  "output_len": {"kind": "uniform", "value": 127, "range_ratio": 0.05}},
     "acceptance": {"request_spread": 0.0, "window": 2, "rate_decay": 1.0, "mean_accept_length": 1.0}},
    {"name": "p", "device": "synthetic",
     "gpu": {"extend": {"x": [1, 16384], "seconds": [[0.03125], [0.03125]]},
             "verify": {"x": [1, 64], "seconds": [[0.03125], [0.03125]]},
             "decode": {"x": [1, 64], "seconds": [[0.03125], [0.03125]]},
             "draft_step": {"x": [1, 64], "seconds": [[0.0078125], [0.0078125]]}}},
    True,
)


def test_paged_chunk_continuation_never_takes_more_pages_than_are_free():
    """A chunked continuation in a paged pool is capped at the room left in its last page
    plus the free whole pages (it used to be capped at the free tokens and raise
    KVPoolExhausted when a one-token chunk started at a page boundary)."""
    assert fuzz.run_case(*EAGLE_PAGED_CHUNK_AT_PAGE_BOUNDARY) == "ran"


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@example(ISSUE_13_MIXED_SMALL_CHUNK)
@given(fuzz.cases())
def test_fuzzed_runs_keep_every_invariant(case):
    assert fuzz.run_case(*case) == "ran"  # the strategies draw only valid scenarios


def test_check_run_can_fail():
    """The checker is not vacuous: a run whose KV is left held breaks INV-3."""
    from specsched.sim.config import Scenario
    from specsched.sim.engine import SimEngine
    from specsched.sim.profile import Profile

    sc = Scenario.model_validate(ISSUE_13_MIXED_SMALL_CHUNK[0])
    eng = SimEngine(sc, Profile.model_validate(ISSUE_13_MIXED_SMALL_CHUNK[1]), 1)
    res = eng.run()
    assert fuzz.check_run(sc, eng, res) == []
    res.requests.loc[0, "ttft_s"] = res.requests.loc[0, "e2e_s"] + 1
    res.summary["mean_ttft_ms"] = float("inf")
    broken = fuzz.check_run(sc, eng, res)
    assert any(v.startswith("TIMES") for v in broken) and any(v.startswith("FINITE") for v in broken)


_DIGEST = """
import hashlib, sys
from specsched.sim.config import load_scenario
from specsched.sim.engine import run_scenario
h = hashlib.sha256()
for name, arm in (("burst256-ht", "waiting_aware"), ("batch8-ll", "base")):
    sc = load_scenario(name, arm)
    r = run_scenario(sc.model_copy(update={"workload": sc.workload.model_copy(update={"num_requests": 24})}), seed=5)
    for t in (r.requests, r.chunks, r.steps):
        h.update(t.to_csv(index=False).encode())
    h.update(repr(sorted(r.summary.items())).encode())
print(h.hexdigest())
"""


def test_results_identical_across_processes_with_different_hash_seeds():
    digests = set()
    for hs in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hs}
        r = subprocess.run([sys.executable, "-c", _DIGEST], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        digests.add(r.stdout.strip())
    assert len(digests) == 1


def test_random_profiles_reach_the_result_path_and_per_token_ingest_terms():
    """The fuzzer's profiles charge the host terms the loop and the tokenizer FIFO read
    (host.result_path_* / recv_path_*: CostModel.host; host.ingest_per_token_s:
    Clients._ingest_s) with non-zero values too, not only their default 0."""
    seen: set[str] = set()

    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz.profiles(False))
    def collect(profile):
        seen.update(k for k, v in profile["host"].items() if v)

    collect()
    assert {"result_path_s", "result_path_per_req_s", "recv_path_s", "recv_path_per_req_s",
            "ingest_per_token_s"} <= seen


# --------------------------------------------------------------- deployments (pd, dp)
def _pd_case(decode: int = 2, reserve: int = 0, dp: int = 1) -> tuple[dict, dict, bool]:
    """Two decode servers behind one prefill server (``dp`` attention ranks on the decode
    side), a small decode pool, num_reserved_decode_tokens ``reserve``."""
    case = ISSUE_13_MIXED_SMALL_CHUNK
    server = {**case[0]["server"], "num_reserved_decode_tokens": reserve, "max_total_num_tokens": 2_000,
              "disaggregation": {"prefill": {"instances": 1},
                                 "decode": {"instances": decode, "server": {
                                     "max_total_num_tokens": 400, **({"enable_dp_attention": True, "dp_size": dp} if dp > 1 else {})}}}}
    workload = {"kind": "burst", "num_requests": 12, "input_len": {"kind": "uniform", "value": 120, "range_ratio": 0.5},
                "output_len": {"kind": "uniform", "value": 60, "range_ratio": 0.5}}
    profile = {**case[1], "kv_transfer": {"bytes_per_token": 1e5, "link_bytes_per_s": 1e10, "latency_s": 1e-3}}
    return {**case[0], "server": server, "workload": workload}, profile, True


def _engine(case):
    from specsched.sim.config import Scenario
    from specsched.sim.engine import SimEngine
    from specsched.sim.profile import Profile

    sc = Scenario.model_validate(case[0])
    eng = SimEngine(sc, Profile.model_validate(case[1]), sc.seed)
    return sc, eng, eng.run()


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@example(_pd_case())
@given(fuzz.kind_cases(("pd", "dp")))
def test_fuzzed_deployments_keep_every_invariant(case):
    """Disaggregated deployments and DP-attention servers: every scheduler's invariants,
    the prefill->decode handoff, no hang (run_case raises on any of them)."""
    assert fuzz.run_case(*case) in ("ran", "refused", "unschedulable")


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(fuzz.kind_cases(("client",)))
def test_fuzzed_client_and_scheduler_features_keep_every_invariant(case):
    """The features the other kinds leave at their defaults (ignore_eos off, priorities
    with preemption, the recv and stream intervals, gamma arrivals, the prefill cadence
    knobs, multi-turn and shared-prefix workloads whose prefixes the radix cache keeps)."""
    assert fuzz.run_case(*case) in ("ran", "refused", "unschedulable")


def test_kv_a_radix_cache_keeps_is_not_a_leak():
    """INV-3 counts what the radix cache still holds at the end (unlocked, evictable) as
    held by no request: a multi-turn run keeps its conversations' prefixes there."""
    sc, eng, res = _engine(MULTI_TURN_CASE)
    assert eng.sched.cache.total_size > 0 and eng.sched.kv.used == eng.sched.cache.total_size
    assert fuzz.check_run(sc, eng, res) == []
    eng.sched.kv.used += 1   # one token no request nor the cache accounts for
    assert any(v.startswith("INV-3") for v in fuzz.check_run(sc, eng, res))


def test_check_run_reads_every_scheduler_of_a_deployment():
    """check_run is not the first scheduler's alone: KV left held on the second decode
    server, a request left in a DP rank's retracted queue, a request prefilled twice or a
    KV transfer lost each break a named invariant, labelled with the server and rank."""
    sc, eng, res = _engine(_pd_case(dp=2))
    assert fuzz.check_run(sc, eng, res) == []
    rank = eng.decode[1].sched.ranks[1]
    rank.kv.used += 3
    assert any(v.startswith("INV-3") and "decode 1 rank 1" in v for v in fuzz.check_run(sc, eng, res))
    rank.kv.used -= 3
    some = next(iter(eng.decode[0].sched.ranks[0].reqs.values()))
    rank.retracted_queue.append(some)
    assert any(v.startswith("DRAINED") and "decode 1 rank 1" in v for v in fuzz.check_run(sc, eng, res))
    rank.retracted_queue.pop()
    eng.prefill[0].sched.reqs[10_000] = some
    assert any(v.startswith("INV-PD-HANDOFF") for v in fuzz.check_run(sc, eng, res))
    del eng.prefill[0].sched.reqs[10_000]
    eng.transfer_s.pop()
    assert fuzz.check_run(sc, eng, res) == ["INV-PD-HANDOFF one KV transfer per request (11)"]


def test_a_run_past_its_event_bound_is_a_failure_not_a_hang():
    """bounded_run turns a run that does not end within its bound on simulated events into
    a Hung failure (the fuzzer reports it and goes on)."""
    import pytest
    from specsched.sim.config import Scenario
    from specsched.sim.engine import SimEngine
    from specsched.sim.profile import Profile

    case = _pd_case()
    sc = Scenario.model_validate(case[0])
    with pytest.raises(fuzz.Hung, match="HANG: more than 50 simulated events"):
        fuzz.bounded_run(SimEngine(sc, Profile.model_validate(case[1]), 1), 50)
    assert fuzz.bounded_run(SimEngine(sc, Profile.model_validate(case[1]), 1), fuzz.event_bound(sc)).summary["completed"] == 12
