"""Metamorphic invariants: relations between two runs that the real server obeys, whatever
its calibration. Each compares runs of small scenarios (a second or less each).

- INV-M-SCALE time comes only from the profile and the workload: every profile second
  (GPU grids, host terms, lead tables, the KV link's latency) x k and every client time
  (arrival gaps, trace timestamps, think times) x k gives the same schedule with every time
  x k: the same steps, TTFT/TPOT/ITL/E2E x k, throughputs / k (dimensional analysis; a
  constant second written into the code instead of a profile breaks it). Colocated and
  prefill-decode deployments alike.
- INV-M-POOL a KV pool that never binds changes nothing: a pool larger than every request's
  prompt + output + window together gives the run the same as one ten times larger
  (SGLang's PrefillAdder and decode check read the pool only through what is free).
- INV-M-CHUNK a lone prompt is prefilled in ceil(prompt / chunked_prefill_size) extend
  passes with one-token pages (managers/scheduler.py get_new_batch_prefill, one chunk per
  pass; the first cut is floored to a page, :func:`chunk_passes`), so a larger chunk never
  adds passes.
- INV-M-GPU2X a lone request's TPOT with every GPU cost doubled is at least its TPOT and at
  most twice it (host work is unchanged; a step is at most its host and GPU parts summed).
- INV-M-CAUSAL later arrivals cannot change the past: replaying the first k rows of a trace
  gives every request that finished before row k+1 arrived the same times as the whole
  trace.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.config import Scenario
from specsched.sim.engine import run_scenario
from specsched.sim.profile import Profile, load_profile

PROFILES = ["h200-1b", "mi355x-dsv41-flash-tp4", "h100-llama-3.1-8b-eagle3-analytic"]
_LOADED: dict[str, Profile] = {}


def profile(name: str) -> Profile:
    if name not in _LOADED:
        _LOADED[name] = load_profile(name)
    return _LOADED[name]


def scaled(p: Profile, k: float, gpu_only: bool = False) -> Profile:
    """``p`` with every time x ``k`` (``gpu_only``: only the GPU block's): grid seconds,
    every ``*_s`` field, lead tables; the KV link's bandwidth / ``k``. Host-speed
    references are speeds, not durations: kept."""
    d = copy.deepcopy(p.model_dump())

    def walk(node):
        if isinstance(node, dict):
            for key, v in node.items():
                if key in ("reference_work_s", "reference_work_by_term") or v is None:
                    continue
                if key.endswith("_per_s"):        # a rate: link_bytes_per_s
                    node[key] = v / k
                elif key == "seconds" or (key.endswith("_s") and isinstance(v, float)):
                    node[key] = np.multiply(v, k).tolist()
                else:
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    for block in (["gpu"] if gpu_only else ["gpu", "host", "kv_transfer"]):
        walk(d.get(block))
    return Profile.model_validate(d)


def scenario(prof: str, server: dict, workload: dict, acceptance: dict | None = None, seed: int = 1) -> Scenario:
    d = {"name": "m", "profile": prof, "seed": seed, "server": server, "workload": workload}
    if server.get("speculative_algorithm", "none") != "none":
        d["acceptance"] = acceptance or {"mean_accept_length": 2.2, "request_spread": 0.3}
    return Scenario.model_validate(d)


BASE_SERVER = {"max_running_requests": 16, "max_total_num_tokens": 60_000, "chunked_prefill_size": 1024,
               "max_prefill_tokens": 4096, "cuda_graph_max_bs": 8}

spec = st.sampled_from([
    {"speculative_algorithm": "none"},
    {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4},
    {"speculative_algorithm": "eagle", "speculative_num_draft_tokens": 3, "speculative_num_steps": 2},
])
knobs = st.fixed_dictionaries({}, optional={
    "enable_mixed_chunk": st.booleans(),
    "enable_overlap_schedule": st.booleans(),
    "max_running_requests": st.sampled_from([2, 5, 16]),
    "chunked_prefill_size": st.sampled_from([256, 1024, -1]),
    "page_size": st.sampled_from([1, 16]),
    "sync_mode": st.sampled_from(["host_block", "stream_wait", "cross_queue_wait"]),
    "admission_delay": st.sampled_from(["none", "min_free_slots"]),
    "schedule_policy": st.sampled_from(["fcfs", "lof"]),
})
workloads = st.sampled_from([
    {"kind": "poisson", "request_rate": 40.0, "num_requests": 14},
    {"kind": "poisson", "request_rate": 400.0, "num_requests": 14, "burstiness": 0.3, "max_concurrency": 6},
    {"kind": "closed_loop", "concurrency": 4, "num_requests": 12},
    {"kind": "burst", "num_requests": 12},
])
lengths = st.sampled_from([
    {"input_len": {"kind": "uniform", "value": 900, "range_ratio": 0.2}, "output_len": {"kind": "uniform", "value": 40, "range_ratio": 0.3}},
    {"input_len": {"kind": "fixed", "value": 2500}, "output_len": {"kind": "fixed", "value": 3}},
])


def _scale_workload(w: dict, k: float) -> dict:
    w = dict(w)
    if w.get("request_rate") is not None:
        w["request_rate"] = w["request_rate"] / k
    return w


def _comparable(p: Profile, srv: dict) -> bool:
    """The profile prices the decoding ``srv`` asks for: plain decode needs a decode grid (the
    MI355X profile has none), chain drafters a draft_step grid (the h200-1b proxy has none)."""
    alg = srv.get("speculative_algorithm", "none")
    return (p.gpu.decode is not None if alg == "none" else
            p.gpu.draft_step is not None if alg == "eagle" else True)


TIME_KEYS = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_itl_ms", "p99_itl_ms",
             "mean_e2e_latency_ms", "duration")
RATE_KEYS = ("output_throughput", "request_throughput", "input_throughput")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROFILES), spec, knobs, workloads, lengths, st.sampled_from([0.5, 3.0]), st.integers(1, 3),
       st.sampled_from([None, (1, 1), (1, 2)]))
def test_inv_m_scale_every_time_scales_with_the_profile_and_the_clients(prof, sp, kn, wl, ln, k, seed, pd):
    p = profile(prof)
    srv = {**BASE_SERVER, **sp, **kn}
    if pd is not None and p.kv_transfer is not None:   # prefill and decode servers, the KV link scaled too
        srv["disaggregation"] = {"prefill": {"instances": pd[0]}, "decode": {"instances": pd[1]}}
    if not _comparable(p, srv):
        return
    a = run_scenario(scenario(prof, srv, {**wl, **ln}, seed=seed), seed=seed, profile=p)
    b = run_scenario(scenario(prof, srv, {**_scale_workload(wl, k), **ln}, seed=seed), seed=seed, profile=scaled(p, k))
    sa, sb = a.summary, b.summary
    assert sa["completed"] == sb["completed"] and sa["total_output_tokens"] == sb["total_output_tokens"]
    assert len(a.steps) == len(b.steps)
    assert list(a.steps["batch_size"]) == list(b.steps["batch_size"])
    for key in TIME_KEYS:
        assert sb[key] == pytest.approx(sa[key] * k, rel=1e-6, abs=1e-9), key
    for key in RATE_KEYS:
        assert sb[key] == pytest.approx(sa[key] / k, rel=1e-6), key


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROFILES), spec, knobs, workloads, lengths, st.integers(1, 3))
def test_inv_m_pool_a_pool_that_never_binds_changes_nothing(prof, sp, kn, wl, ln, seed):
    p = profile(prof)
    srv = {**BASE_SERVER, **sp, **kn}
    if not _comparable(p, srv):
        return
    n = wl["num_requests"]
    need = n * (ln["input_len"]["value"] + ln["output_len"]["value"] + 64 + 16)
    small = {**srv, "max_total_num_tokens": max(need, 4096 + 16)}
    big = {**srv, "max_total_num_tokens": 10 * small["max_total_num_tokens"]}
    a = run_scenario(scenario(prof, small, {**wl, **ln}, seed=seed), seed=seed, profile=p)
    b = run_scenario(scenario(prof, big, {**wl, **ln}, seed=seed), seed=seed, profile=p)
    assert a.summary["num_retractions"] == b.summary["num_retractions"] == 0
    for key in TIME_KEYS + RATE_KEYS:
        assert b.summary[key] == pytest.approx(a.summary[key], rel=1e-9, abs=1e-12), key


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["h200-1b", "h100-llama-3.1-8b-eagle3-analytic"]), st.integers(100, 9000),
       st.sampled_from([64, 100, 256, 1000, 2048, 4096, 8192]), st.sampled_from([1, 16]), spec)
def test_inv_m_chunk_a_lone_prompt_takes_ceil_prompt_over_chunk_passes(prof, prompt, chunk, page, sp):
    p = profile(prof)
    srv = {**BASE_SERVER, **sp, "max_prefill_tokens": 16384, "page_size": page, "max_total_num_tokens": 40_000}
    if not _comparable(p, srv):
        return
    passes = []
    for c in (chunk, 2 * chunk):
        r = run_scenario(scenario(prof, {**srv, "chunked_prefill_size": c},
                                  {"kind": "burst", "num_requests": 1, "input_len": {"kind": "fixed", "value": prompt},
                                   "output_len": {"kind": "fixed", "value": 4}}), profile=p)
        st_ = r.steps
        ext = st_[(st_["part"] == "main") & st_["num_extend_tokens"].gt(0) & ~st_["mode"].isin(["decode", "verify"])]
        passes.append(len(ext))
    assert passes[0] == chunk_passes(prompt, chunk, page)
    assert passes[1] <= passes[0]


def chunk_passes(prompt: int, chunk: int, page: int) -> int:
    """Extend passes of a lone prompt (sglang 0.5.23 schedule_policy.py, off gfx95): whole
    when its page-ceiled length fits the chunk (``_select_prefill_admission``); else a first
    cut of the chunk floored to a page, then ``add_chunked_req`` continues with whole
    chunks (not page-aligned) until the rest fits."""
    if math.ceil(prompt / page) * page <= chunk:
        return 1
    return 1 + math.ceil((prompt - chunk // page * page) / chunk)


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(PROFILES), spec, st.booleans(), st.sampled_from([300, 3000]), st.integers(1, 3))
def test_inv_m_gpu2x_a_lone_requests_tpot_at_most_doubles(prof, sp, overlap, prompt, seed):
    p = profile(prof)
    srv = {**BASE_SERVER, **sp, "enable_overlap_schedule": overlap}
    if not _comparable(p, srv):
        return
    wl = {"kind": "closed_loop", "concurrency": 1, "num_requests": 3,
          "input_len": {"kind": "fixed", "value": prompt}, "output_len": {"kind": "fixed", "value": 60}}
    a = run_scenario(scenario(prof, srv, wl, seed=seed), seed=seed, profile=p).summary
    b = run_scenario(scenario(prof, srv, wl, seed=seed), seed=seed, profile=scaled(p, 2.0, gpu_only=True)).summary
    assert a["mean_tpot_ms"] <= b["mean_tpot_ms"] * (1 + 1e-9)
    assert b["mean_tpot_ms"] <= 2 * a["mean_tpot_ms"] * (1 + 1e-9)
    assert a["mean_ttft_ms"] <= b["mean_ttft_ms"] <= 2 * a["mean_ttft_ms"] * (1 + 1e-9)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(PROFILES), spec, knobs, st.integers(0, 2**31 - 1), st.integers(3, 10))
def test_inv_m_causal_later_arrivals_do_not_change_the_past(tmp_path, prof, sp, kn, draw, k):
    p = profile(prof)
    srv = {**BASE_SERVER, **sp, **kn}
    if not _comparable(p, srv):
        return
    rng = np.random.default_rng(draw)
    n = 14
    t = np.cumsum(rng.exponential(0.03, n))
    rows = ["timestamp,input_length,output_length"] + [
        f"{t[i]:.6f},{int(rng.integers(50, 1500))},{int(rng.integers(1, 60))}" for i in range(n)]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    wl = {"kind": "trace", "trace": {"path": str(tmp_path / "trace.csv")}}
    full = run_scenario(scenario(prof, srv, wl), profile=p).requests
    head = run_scenario(scenario(prof, srv, {**wl, "num_requests": k}), profile=p).requests
    full = full.set_index("rid").sort_index()
    head = head.set_index("rid").sort_index()
    t0 = float(full["start_s"].min())
    cut = t[k] - t[0] + t0     # row k+1's arrival on the runs' clock
    done = head[head["finish_s"] < cut - 1e-9].index
    for col in ("first_token_s", "finish_s"):
        assert np.allclose(full.loc[done, col].to_numpy(float), head.loc[done, col].to_numpy(float), rtol=0, atol=1e-12), col


def test_scaled_profile_scales_every_second():
    """scaled() itself: a scaled profile's costs are k times the original's."""
    p = profile("h200-1b")
    q = scaled(p, 2.0)
    assert q.gpu.decode.seconds[0][0] == pytest.approx(2 * p.gpu.decode.seconds[0][0])
    assert q.host.launch_s == pytest.approx(2 * p.host.launch_s)
    pd = profile("h100-llama-3.1-8b-eagle3-analytic")
    assert scaled(pd, 2.0).kv_transfer.link_bytes_per_s == pytest.approx(pd.kv_transfer.link_bytes_per_s / 2)
    assert yaml.safe_dump(q.model_dump()) != yaml.safe_dump(p.model_dump())
