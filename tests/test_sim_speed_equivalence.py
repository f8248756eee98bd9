"""The fast paths give the step-by-step results exactly (docs/performance.md).

- INV-7 (fast path == step by step), whole runs: fast-forward (collapsed decode runs) vs
  ``fast_forward=False``: every table and the summary identical, over random small
  scenarios (hypothesis) and shipped ones;
- INV-7, the scheduler alone: ``Scheduler.decode_stretch`` + ``apply_stretch`` give the
  plans, device commits, deliveries and final state of the same passes of ``schedule()``
  and ``process_result()``, from random scheduler states (hypothesis, no clock);
- the vectorised host timeline vs its scalar reference, bit for bit;
- compact records vs full records: the same requests table and summary (order statistics
  exact, sums to float rounding);
- weighted percentiles vs numpy's on the repeated samples.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim import host_timeline
from specsched.sim.admission import NoDelay
from specsched.sim.config import load_scenario
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.engine import SimEngine
from specsched.sim.metrics import _stats, _stats_weighted, weighted_percentile
from specsched.sim.request import ReqStatus
from specsched.sim.scheduler import Scheduler

from tests.conftest import (
    ROOT,
    arrival_workloads,
    arrive_and_pass,
    clockless_scheduler,
    make_scenario,
    overlap_pass,
    tiny_profile,
    uniform_lengths,
    window_acceptance,
)

servers = st.fixed_dictionaries({
    "max_running_requests": st.integers(1, 24),
    "max_total_num_tokens": st.integers(3_000, 60_000),
    "chunked_prefill_size": st.sampled_from([-1, 256, 1024, 4096]),
    "max_prefill_tokens": st.sampled_from([512, 2048, 16384]),
    "speculative_algorithm": st.sampled_from(["none", "none", "dspark", "eagle"]),
    "speculative_num_draft_tokens": st.integers(2, 6),
    "admission_delay": st.sampled_from(["none", "min_free_slots", "min_free_slots_waiting_aware", "demand_observed"]),
    "sync_mode": st.sampled_from(["host_block", "stream_wait", "cross_queue_wait"]),
    "prefill_slot_expansion_sync": st.booleans(),
    "enable_mixed_chunk": st.booleans(),
    "enable_overlap_schedule": st.sampled_from([True, True, True, False]),
    "schedule_policy": st.sampled_from(["fcfs", "lof", "random"]),
    "sglang_semantics": st.sampled_from(["0.5.23", "0.5.23", "mi355x-dsv41"]),  # both spec KV rules
    "page_size": st.sampled_from([1, 1, 16, 64]),   # plain decoding pages its pool above 1
})
workloads = arrival_workloads()
hosts = st.fixed_dictionaries({
    "ingest_per_request_s": st.sampled_from([0.0, 3e-4]),
    "schedule_s": st.sampled_from([0.0, 1e-4, 3e-3]),
    "launch_s": st.sampled_from([0.0, 2e-4]),
    "launch_tail_s": st.sampled_from([0.0, 0.0, 7e-4]),
    "launch_tail_per_req_s": st.sampled_from([0.0, 5e-6]),
    "process_s": st.sampled_from([0.0, 1e-4, 4e-3]),
    "sync_wakeup_s": st.sampled_from([0.0, 5e-5]),
    "result_path_s": st.sampled_from([0.0, 0.0, 3e-4]),
    "recv_path_per_req_s": st.sampled_from([0.0, 0.0, 2e-5]),
})


def _run(sc, prof, seed, **kw):
    eng = SimEngine(sc, prof, seed, **kw)
    return eng, eng.run()


def assert_same_summary(a: dict, b: dict, rel: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for k, u in a.items():
        v = b[k]
        if isinstance(u, float) and math.isnan(u):
            assert isinstance(v, float) and math.isnan(v), k
        elif rel and isinstance(u, float):
            assert math.isclose(u, v, rel_tol=rel, abs_tol=1e-15), (k, u, v)
        else:
            assert u == v, (k, u, v)


def assert_same_run(a, b, rel: float = 0.0) -> None:
    """Same tables and summary; ``rel`` > 0 allows float times to differ by that relative
    amount (the collapsed timelines add the same durations in another order)."""
    for name in ("requests", "chunks", "steps", "timeseries"):
        if rel:
            pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=False, rtol=rel,
                                          atol=1e-15, obj=name)
        else:
            pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    assert_same_summary(a.summary, b.summary, rel)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, host=hosts, inp=st.integers(1, 1500), out=st.integers(1, 300),
       seed=st.integers(0, 10_000))
def test_inv7_fast_forward_gives_the_step_by_step_run(server, workload, host, inp, out, seed):
    workload = uniform_lengths(workload, inp, out)
    acc = window_acceptance(server)
    sc = make_scenario(server, workload, acc, seed=seed)
    prof = tiny_profile(**host)
    _, step = _run(sc, prof, seed, fast_forward=False)
    eng, fast = _run(sc, prof, seed, fast_forward=True)
    # same decisions exactly; times to 1e-12 (a Poisson run with max_concurrency 1 showed
    # a one-ulp difference in a client's start time: sums taken in another order)
    assert_same_run(step, fast, rel=1e-12)
    assert eng.sched.kv.used == 0 or eng.sched.has_work


def test_inv7_fast_forward_collapses_most_iterations_and_matches_on_the_burst():
    sc = load_scenario(ROOT / "scenarios" / "burst256-ht.yaml")
    step = SimEngine(sc, fast_forward=False).run()
    fast = SimEngine(sc).run()
    assert_same_run(step, fast)
    assert fast.extra["fast_forward_iterations"] > 0.9 * fast.extra["num_passes"]


@pytest.mark.parametrize(("decode", "workload", "spec"), [
    (2, {"kind": "burst", "num_requests": 12}, True),
    (2, {"kind": "burst", "num_requests": 12}, False),
    (3, {"kind": "poisson", "num_requests": 30, "request_rate": 50.0}, True),
])
def test_inv7_fast_forward_gives_the_step_by_step_run_with_several_decode_servers(decode, workload, spec):
    """INV-7 for a prefill-decode deployment whose decode servers share the run's records:
    every table row for row, not only when sorted. The step-by-step path appends the
    servers' rows interleaved by event, the collapsed one a server's decode run at once;
    the tables group the rows by server, each server's in its own order
    (Recorder.write_as), which both paths share."""
    from tests.test_disaggregation import _pd, _profile

    server = {} if spec else {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}
    workload = {**workload, "input_len": {"kind": "fixed", "value": 300}, "output_len": {"kind": "fixed", "value": 200}}
    sc = make_scenario(_pd(1, decode, **server), workload, seed=3)
    step = SimEngine(sc, _profile(), fast_forward=False).run()
    eng = SimEngine(sc, _profile())
    fast = eng.run()
    assert sum(d.ff_iterations for d in eng.decode) > 0   # decode runs were collapsed
    assert len(step.steps) and len(step.chunks) and len(step.timeseries)
    assert_same_run(step, fast, rel=1e-12)


def test_inv7_fast_forward_on_the_poisson_benchmark_workload():
    sc = load_scenario(ROOT / "scenarios" / "poisson8b-fixed.yaml")
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"num_requests": 150})})
    step = SimEngine(sc, fast_forward=False).run()
    fast = SimEngine(sc).run()
    assert_same_run(step, fast)
    assert fast.extra["fast_forward_runs"] >= 100


def _state(s: Scheduler, dev: DeviceTokens) -> tuple:
    reqs = [(r.rid, r.status, r.output_len, r.prefill_done, r.kv_allocated, r.kv_len, r.retractions, r.spec_cycles)
            for r in sorted(s.reqs.values(), key=lambda r: r.rid)]
    return (reqs, [r.rid for r in s.running], [r.rid for r in s.waiting], [r.rid for r in s.decode_batch_reqs],
            s.kv.used, s.kv.peak, s.ratio.value, s.step, s.num_delayed_passes, s.num_retractions,
            dict(dev.committed), {k: v for k, v in dev.cycles.items() if v})  # absent == 0 cycles


def _same_output(a, b) -> None:
    assert a[0] == b[0]
    assert np.array_equal(a[1].committed, b[1].committed)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, kv=st.integers(1_200, 12_000),
       lens=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 150)), min_size=1, max_size=20),
       arrive=st.lists(st.integers(0, 30), min_size=20, max_size=20), frac=st.floats(0.0, 1.0),
       max_iters=st.integers(1, 300), stop_at_finish=st.booleans(), seed=st.integers(0, 10_000))
def test_inv7_decode_stretch_gives_the_step_by_step_passes(server, kv, lens, arrive, frac, max_iters, stop_at_finish,
                                                           seed):
    # a small pool, so that stretches also end where a pass would retract
    sc = make_scenario(dict(server, max_total_num_tokens=kv), acceptance=window_acceptance(server),
                       seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    for p in range(2_000):
        if in_flight is not None:
            finishes_left = len(lens) - sum(r.status is ReqStatus.FINISHED for r in s.reqs.values())
            before = _state(s, dev)
            run = s.decode_stretch(dev, *in_flight, max_iters, stop_at_finish, finishes_left)
            assert _state(s, dev) == before  # decode_stretch changes nothing
            if run is not None:
                n = 1 + int(frac * (run.stop - 1))
                # the reference: n passes step by step, no arrivals (a stretch has none)
                ref_s, ref_dev, ref_flight = copy.deepcopy((s, dev, in_flight))
                for j in range(n):
                    ref_flight, deliv = overlap_pass(ref_s, ref_dev, ref_flight)
                    _same_output(ref_flight, run.plan_at(j))
                    row = run.delivered(n)[j]
                    nz = row > 0
                    assert deliv.rids.tolist() == run.rids[nz].tolist()
                    assert deliv.n_tokens.tolist() == row[nz].tolist()
                    assert deliv.finished.tolist() == (run.finish_iter()[nz] == j).tolist()
                if hasattr(run, "delivered_and_commits"):   # the grid (not the closed form)
                    both = run.delivered_and_commits(n)
                    assert np.array_equal(both[0], run.delivered(n)) and np.array_equal(both[1], run.commits(n))
                in_flight = s.apply_stretch(run, n)
                dev.set_state(run.rids.tolist(), *run.device_after(n))
                _same_output(in_flight, ref_flight)
                assert _state(s, dev) == _state(ref_s, ref_dev)
                continue
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        if done:
            break
    assert not s.has_work and not pending
    assert all(r.output_len == r.max_new_tokens for r in s.reqs.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, out=st.integers(1, 200), seed=st.integers(0, 10_000),
       fast=st.booleans())
def test_compact_records_give_the_full_summary(server, workload, out, seed, fast):
    workload = uniform_lengths(workload, 600, out)
    acc = window_acceptance(server)
    sc = make_scenario(server, workload, acc, seed=seed)
    _, full = _run(sc, tiny_profile(), seed, fast_forward=fast, records="full")
    _, compact = _run(sc, tiny_profile(), seed, fast_forward=fast, records="compact")
    pd.testing.assert_frame_equal(full.requests, compact.requests, check_exact=True)
    assert compact.chunks.empty and compact.steps.empty and compact.timeseries.empty
    assert list(compact.chunks.columns) == list(full.chunks.columns)
    assert compact.extra["num_steps"] == len(full.steps)
    # compact records count each pass without reading its state (the timeseries row it makes
    # in full records)
    assert compact.extra["num_passes"] == full.extra["num_passes"] == len(full.timeseries)
    assert_same_summary(full.summary, compact.summary, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 60), seed=st.integers(0, 2**31), block=st.booleans(),
       wake=st.sampled_from([0.0, 1.6e-5, 9e-5]), t0=st.floats(0.0, 5e4), scale=st.sampled_from([1e-4, 1e-3, 1e-2]),
       tail=st.booleans())
def test_vectorised_timeline_is_the_scalar_chain(k, seed, block, wake, t0, scale, tail):
    rng = np.random.default_rng(seed)
    hs, hl, hp = (rng.choice([0.0, 1.0], k) * rng.random(k) * scale for _ in range(3))
    ht = rng.choice([0.0, 1.0], k) * rng.random(k) * scale if tail else None
    c = rng.random(k) * scale * rng.choice([0.1, 1.0, 10.0])
    e0 = t0 + rng.random() * scale * rng.choice([0.0, 1.0])
    ref = host_timeline.scalar_times(t0, e0, hs, hl, hp, c, wake, block, ht)
    got = host_timeline.run_times(t0, e0, hs, hl, hp, c, wake, block, ht=ht)
    for name in ("T", "S", "E", "pw", "rw"):
        assert np.array_equal(getattr(ref, name), getattr(got, name)), name


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(0.0, 1e3), min_size=1, max_size=40),
       weights=st.lists(st.integers(0, 5), min_size=40, max_size=40), q=st.floats(0.0, 100.0))
def test_weighted_statistics_match_numpy_on_the_repeated_samples(values, weights, q):
    v = np.array(values)
    w = np.array(weights[: len(values)])
    if w.sum() == 0:
        w[0] = 1
    rep = np.repeat(v, w)
    order = np.argsort(v, kind="stable")
    assert weighted_percentile(v[order][w[order] > 0], np.cumsum(w[order][w[order] > 0]), q) == np.percentile(rep, q)
    a: dict[str, float] = {}
    b: dict[str, float] = {}
    _stats("itl", rep / 1000.0, a)
    _stats_weighted("itl", v / 1000.0, w, b)
    for key in a:
        if key.startswith(("mean", "std")):
            assert math.isclose(a[key], b[key], rel_tol=1e-12, abs_tol=1e-12), key
        else:
            assert a[key] == b[key], key


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**31), distinct=st.integers(1, 6))
def test_weighted_order_statistics_do_not_depend_on_the_order_of_equal_values(n, seed, distinct):
    # _stats_weighted sorts with numpy's unstable sort: many equal ITL values (a handful of
    # distinct ones, long arrays, so the sort really reorders them) still give numpy's
    # order statistics of the repeated samples exactly
    rng = np.random.default_rng(seed)
    v = rng.choice(rng.random(distinct) * 0.05, n)
    w = rng.integers(0, 7, n)
    w[0] = max(w[0], 1)
    a: dict[str, float] = {}
    b: dict[str, float] = {}
    _stats("itl", np.repeat(v, w), a)
    _stats_weighted("itl", v, w, b)
    for key in a:
        if not key.startswith(("mean", "std")):
            assert a[key] == b[key], key


@settings(max_examples=80, deadline=None)
@given(n=st.one_of(st.integers(1, 64), st.integers(1, 20_000)), seed=st.integers(0, 2**31),
       decimals=st.sampled_from([None, 2]), owned=st.booleans())
def test_summary_statistics_are_numpys(n, seed, decimals, owned):
    # samples without NaN take the one-sort path (with ``owned``, in the sample's own
    # buffer, mean and std from one sum); the figures must be numpy's own
    v = np.random.default_rng(seed).exponential(0.01, n)
    if decimals is not None:
        v = np.round(v, decimals)  # ties
    got: dict[str, float] = {}
    before = v.copy()
    _stats("itl", v.copy() if owned else v, got, owned=owned)
    assert np.array_equal(v, before)   # a sample not handed over is left as it was (not sorted)
    w = v * 1000.0
    want = {"mean_itl_ms": np.mean(w), "median_itl_ms": np.median(w), "std_itl_ms": np.std(w),
            "p90_itl_ms": np.percentile(w, 90), "p99_itl_ms": np.percentile(w, 99),
            "max_itl_ms": np.max(w), "p95_itl_ms": np.percentile(w, 95)}
    assert got == {k: float(x) for k, x in want.items()}


@settings(max_examples=60, deadline=None)
@given(n=st.one_of(st.integers(1, 12), st.integers(1, 60_000)), seed=st.integers(0, 2**31),
       distinct=st.integers(1, 40))
def test_summary_order_statistics_from_one_partition_are_numpys(n, seed, distinct):
    # _stats partitions the sample at the ranks it reads (_order_ranks), not sorting it: on
    # samples shaped like an ITL sample (a few distinct values, each repeated many times,
    # in no order) every figure is still numpy's own, at odd and even sizes
    from specsched.sim.metrics import _order_ranks

    rng = np.random.default_rng(seed)
    v = rng.choice(rng.exponential(0.01, distinct), n)
    ranks = _order_ranks(n)
    assert ranks == sorted(set(ranks)) and 0 <= ranks[0] and ranks[-1] == n - 1
    got: dict[str, float] = {}
    _stats("itl", v.copy(), got, owned=True)
    w = v * 1000.0
    want = {"mean_itl_ms": np.mean(w), "median_itl_ms": np.median(w), "std_itl_ms": np.std(w),
            "p90_itl_ms": np.percentile(w, 90), "p99_itl_ms": np.percentile(w, 99),
            "max_itl_ms": np.max(w), "p95_itl_ms": np.percentile(w, 95)}
    assert got == {k: float(x) for k, x in want.items()}


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3_000),
       scale=st.sampled_from([1e-9, 1.0, 1e12]))
def test_mean_std_is_numpys_bit_for_bit(values, scale):
    from specsched.sim.metrics import mean_std

    v = np.array(values) * scale
    assert mean_std(v) == (float(np.mean(v)), float(np.std(v)))


@settings(max_examples=40, deadline=None)
@given(n=st.one_of(st.integers(1, 300), st.integers(32_760, 32_780), st.integers(65_530, 65_560),
                   st.integers(100_000, 1_200_000)),
       seed=st.integers(0, 2**31), kind=st.sampled_from(["uniform", "repeated", "spread", "nan"]))
def test_mean_std_in_blocks_is_numpys_on_large_samples(n, seed, kind):
    """mean_std squares the deviations a block at a time and adds the blocks' sums as
    numpy's pairwise sum does: equal to np.mean / np.std bit for bit below, at and well
    above the block size (1 << 15), on ITL-like samples (few distinct values repeated),
    values spread over decades, and with a NaN."""
    from specsched.sim.metrics import _DEVIATION_BLOCK, mean_std

    rng = np.random.default_rng(seed)
    if kind == "repeated":
        v = np.repeat(rng.random(n // 3 + 1) * 0.08, rng.integers(1, 7, n // 3 + 1))[:n]
    elif kind == "spread":
        v = rng.random(n) * 10.0 ** rng.integers(-6, 6, n)
    else:
        v = rng.random(n)
        if kind == "nan":
            v[rng.integers(0, n)] = np.nan
    assert _DEVIATION_BLOCK == 1 << 15
    got, want = mean_std(v), (float(np.mean(v)), float(np.std(v)))
    assert got == want or (kind == "nan" and all(map(np.isnan, got + want)))


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 50), m=st.integers(1, 30), page=st.sampled_from([1, 2, 3, 16, 48, 256, 1000, 1024]),
       lo=st.integers(-600, 600), seed=st.integers(0, 2**31), into=st.sampled_from(["new", "x", "other"]))
def test_ceil_pages_and_page_sums_are_the_division_form(k, m, page, lo, seed, into):
    """sim/pages.py: the page rounding by mask (a power-of-two page) or by division gives
    ``-(-x // p) * p`` (the ledger's step-by-step form) for negative and positive
    integers, into a new array, in place, or into another buffer; page_sums is its row
    sums."""
    from specsched.sim.pages import ceil_pages, page_sums

    x = np.random.default_rng(seed).integers(lo, lo + 5_000, (k, m))
    want = -(-x // page) * page
    assert np.array_equal(want, np.ceil(x / page).astype(np.int64) * page)
    src = x.copy()
    out = {"new": None, "x": src, "other": np.empty_like(x)}[into]
    got = ceil_pages(src, page, out=out)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert (got is src) == (into == "x") and (into != "new" or np.array_equal(src, x))
    assert np.array_equal(page_sums(x.copy(), page), want.sum(axis=1))


@settings(max_examples=100, deadline=None)
@given(k=st.integers(0, 60), lasts=st.lists(st.integers(0, 70), min_size=1, max_size=30))
def test_passes_so_far_is_the_running_count_of_plan_runs(k, lasts):
    """A stretch's plan membership (every column a run of True from row 0, of any length,
    none, or past the grid) counted by the collapsed form is numpy's running count."""
    from specsched.sim.kv_ledger import passes_so_far

    member = np.arange(k)[:, None] < np.array(lasts)
    got = passes_so_far(member)
    assert got.dtype == np.int64 and got.shape == member.shape
    assert np.array_equal(got, np.cumsum(member, axis=0, dtype=np.int64))


@settings(max_examples=60, deadline=None)
@given(window=st.integers(1, 10), spread=st.floats(0.0, 0.5), n=st.integers(0, 700),
       firsts=st.lists(st.integers(0, 600), min_size=1, max_size=12), seed=st.integers(0, 10_000),
       early=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 900)), max_size=8))
def test_batched_accept_draws_are_the_per_cycle_draws(window, spread, n, firsts, seed, early):
    """AcceptanceModel.draws (every request's blocks drawn, compared and counted at once)
    gives what draw() gives cycle by cycle, also after some requests drew earlier cycles
    one at a time (their generators part-way through)."""
    from specsched.sim.acceptance import AcceptanceModel
    from specsched.sim.config import AcceptanceConfig

    cfg = AcceptanceConfig(mean_accept_length=1 + 0.6 * (window - 1), request_spread=spread)
    batched, single = AcceptanceModel(cfg, window, seed), AcceptanceModel(cfg, window, seed)
    rids = np.arange(len(firsts), dtype=np.int64) * 7 + 3
    for i, c in early:  # some requests have drawn before (a step-by-step verify)
        if i < len(firsts):
            batched.draw(int(rids[i]), c)
    got = batched.draws(rids, np.array(firsts, dtype=np.int64), n)
    assert got.shape == (n, len(firsts))
    want = [[single.draw(int(r), c + j) for r, c in zip(rids, firsts, strict=True)] for j in range(n)]
    assert got.tolist() == (want if n else [])
    assert all(batched.level(int(r)) == single.level(int(r)) for r in rids)
    # the running sums, capped at each request's tokens left (drawing stops there)
    third = AcceptanceModel(cfg, window, seed)
    limits = np.array([(seed * 31 + 17 * i) % 900 - 20 for i in range(len(firsts))], dtype=np.int64)
    for i, c in early:
        if i < len(firsts):
            third.draw(int(rids[i]), c)
    out = np.empty((n + 1, len(firsts)), dtype=np.int64)
    third.cumulative(rids, np.array(firsts, dtype=np.int64), n, out, limits=limits)
    sums = np.zeros((n + 1, len(firsts)), dtype=np.int64)
    sums[1:] = np.cumsum(np.array(want, dtype=np.int64).reshape(n, len(firsts)), axis=0)
    assert out.tolist() == np.minimum(sums, limits).tolist()
    assert all(third.level(int(r)) == single.level(int(r)) for r in rids)
    # a later stretch of the same requests, from cycles part-way through the first, and
    # the sums without limits
    later = [c + n // 2 for c in firsts]
    for lim in (limits, None):
        out2 = np.empty((n + 1, len(firsts)), dtype=np.int64)
        third.cumulative(rids, np.array(later, dtype=np.int64), n, out2, limits=lim)
        rows = [[single.draw(int(r), c + j) for r, c in zip(rids, later, strict=True)] for j in range(n)]
        sums2 = np.zeros((n + 1, len(firsts)), dtype=np.int64)
        sums2[1:] = np.cumsum(np.array(rows, dtype=np.int64).reshape(n, len(firsts)), axis=0)
        assert out2.tolist() == (sums2 if lim is None else np.minimum(sums2, lim)).tolist()
    # ... and later draws are unchanged by how many were drawn before
    assert [third.draw(int(r), 1_000) for r in rids] == [single.draw(int(r), 1_000) for r in rids]


@settings(max_examples=80, deadline=None)
@given(window=st.integers(2, 8), seed=st.integers(0, 10_000),
       steps=st.lists(st.lists(st.tuples(st.integers(0, 15), st.integers(1, 900)), min_size=1, max_size=12,
                               unique_by=lambda t: t[0]), min_size=1, max_size=6),
       early=st.lists(st.tuples(st.integers(0, 15), st.integers(0, 600)), max_size=6))
def test_verify_step_draws_are_the_per_row_draws(window, seed, steps, early):
    """DeviceTokens.step of verify plans (a row lacking its draw makes every later row's
    next draw in one prepare) commits what one draw() a row gives, step after step (rows
    joining and leaving, some near their output target, some requests with earlier
    draws), and leaves every later draw and level as it was."""
    from specsched.sim.acceptance import AcceptanceModel
    from specsched.sim.config import AcceptanceConfig
    from specsched.sim.device_tokens import DeviceTokens
    from specsched.sim.plan import decode_plan

    cfg = AcceptanceConfig(mean_accept_length=1 + 0.6 * (window - 1), request_spread=0.3)
    dev, single = DeviceTokens(AcceptanceModel(cfg, window, seed)), AcceptanceModel(cfg, window, seed)
    for i, c in early:
        dev.acceptance.draw(i * 5 + 1, c)
    have: dict[int, int] = {}
    cycles: dict[int, int] = {}
    for k, rows in enumerate(steps):
        rids, caps = [i * 5 + 1 for i, _ in rows], [cap for _, cap in rows]
        before = [have.get(r, 0) for r in rids]
        plan = decode_plan(k, True, window, rids, [100] * len(rids), before, caps)
        want = []
        for r, cap in zip(rids, caps, strict=True):
            h = have.get(r, 0)
            if cap - h <= 0:
                want.append(0)
                continue
            c = cycles.get(r, 0)
            cycles[r] = c + 1
            n = min(single.draw(r, c), cap - h)
            have[r] = h + n
            want.append(n)
        assert dev.step(plan).counts() == want
    assert [dev.acceptance.level(i * 5 + 1) for i in range(16)] == [single.level(i * 5 + 1) for i in range(16)]
    assert [dev.acceptance.draw(i * 5 + 1, 1_000) for i in range(16)] == [single.draw(i * 5 + 1, 1_000) for i in range(16)]


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 300), gamma=st.integers(1, 12), p=st.floats(0.0, 1.0), seed=st.integers(0, 2**31))
def test_leading_true_is_the_argmin_formula(rows, gamma, p, seed):
    from specsched.sim.acceptance import leading_true

    ok = np.random.default_rng(seed).random((rows, gamma)) < p
    assert np.array_equal(leading_true(ok), np.where(ok.all(axis=1), gamma, np.argmin(ok, axis=1)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, page=st.sampled_from([1, 1, 16, 64]), inp=st.integers(1, 1500),
       out=st.integers(1, 200), seed=st.integers(0, 10_000), fast=st.booleans())
def test_queue_order_admission_is_the_policy_order_pass(server, workload, page, inp, out, seed, fast):
    """The fcfs admission pass that walks the waiting queue itself and pops the admitted
    head (``Scheduler._queue_order``) makes the run the general pass makes (the policy's
    ordered copy of the queue, the queue rebuilt without the admitted requests)."""
    server = dict(server, schedule_policy="fcfs", page_size=page)
    workload = uniform_lengths(workload, inp, out)
    acc = window_acceptance(server)
    sc = make_scenario(server, workload, acc, seed=seed)
    prof = tiny_profile()
    lean = SimEngine(sc, prof, seed, fast_forward=fast)
    assert lean.sched._queue_order
    general = SimEngine(sc, prof, seed, fast_forward=fast)
    general.sched._queue_order = False
    assert_same_run(general.run(), lean.run())


@settings(max_examples=60, deadline=None)
@given(level=st.sampled_from(["full", "compact"]), nreq=st.integers(1, 12), seed=st.integers(0, 2**31),
       steps=st.integers(1, 40))
def test_per_step_delivery_lists_record_what_the_arrays_record(level, nreq, seed, steps):
    """``Recorder.deliver_step`` (Python lists, element-wise) leaves the recorder exactly as
    ``Recorder.deliver`` (numpy arrays) does: chunk rows, first/last/finish times, ITL samples."""
    from specsched.sim.records import Recorder

    rng = np.random.default_rng(seed)
    a, b = Recorder(level), Recorder(level)
    for rid in range(nreq):
        for rec in (a, b):
            rec.request_sent(rid, 10, 50, float(rng.random()) if rid % 2 else 0)
    t = 1.0
    for _ in range(steps):
        t += float(rng.exponential(0.01))
        k = int(rng.integers(0, nreq + 1))
        rids = rng.permutation(nreq)[:k].tolist()
        n = rng.integers(1, 5, size=k).tolist()
        fin = (rng.random(k) < 0.1).tolist()
        a.deliver(t, np.array(rids, dtype=np.int64), np.array(n, dtype=np.int64), np.array(fin, dtype=bool))
        b.deliver_step(t, rids, n, fin)
    for name in ("_first", "_last", "_finish"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    for name in ("_c_rid", "_c_t", "_c_n"):
        assert getattr(a, name) == getattr(b, name), name
    for x, y in zip(a.itl.arrays(), b.itl.arrays(), strict=True):
        assert x.tobytes() == y.tobytes()


def _padded_profile(padding_cost: float = 1.0, **host):
    """tiny_profile with a context axis on decode/verify and a dense, padded attention whose
    padding positions cost ``padding_cost`` of a real one."""
    p = tiny_profile(**host)
    g = p.gpu.model_dump()
    for k, base in (("verify", 2e-3), ("decode", 1e-3)):
        g[k] = {"x": [1, 100], "context_len": [256, 2048],
                "seconds": [[base, base + 1e-3], [6 * base, 6 * base + 2e-2]]}
    g.update(attention_width="padded_max", attention_bucket=256, attention_padding_cost=padding_cost)
    return p.model_copy(update={"gpu": type(p.gpu).model_validate(g)})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, inp=st.integers(1, 1500), out=st.integers(1, 300),
       seed=st.integers(0, 10_000), padding_cost=st.sampled_from([1.0, 0.73, 0.0]))
def test_inv7_fast_forward_under_padded_attention(server, workload, inp, out, seed, padding_cost):
    """INV-7 with gpu.attention_width padded_max: the collapsed run keys its costs on the
    grid column the step path reads, the longest context's padded width (mixed lengths make
    it differ from the mean) less the padding positions' discount, which takes the batch's
    mean context when a padding position costs less than a real one
    (gpu.attention_padding_cost < 1)."""
    workload = uniform_lengths(workload, inp, out, input_ratio=0.2)
    acc = window_acceptance(server)
    sc = make_scenario(server, workload, acc, seed=seed)
    prof = _padded_profile(padding_cost)
    _, step = _run(sc, prof, seed, fast_forward=False)
    _, fast = _run(sc, prof, seed, fast_forward=True)
    assert_same_run(step, fast, rel=1e-12)


def _generic_admission(eng: SimEngine) -> SimEngine:
    """``eng`` with the admission pass's shortcuts off: the ``none`` policy is asked at every
    pass (its state built), admitted requests leave the queue by the general rebuild, and
    the finished filter builds its list at every pass."""
    from collections import deque

    sched = eng.sched
    sched._never_delays = False

    def leave_queue(admitted, in_queue_order):
        ids = {id(r) for r in admitted}
        sched.waiting = deque(r for r in sched.waiting if id(r) not in ids)

    def filter_finished():
        kept = [r for r in sched.running if not r.finished]
        if len(kept) < len(sched.running):
            sched.batch_is_full = False
            sched.running = kept

    sched._leave_queue = leave_queue
    sched._filter_finished = filter_finished
    return eng


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, inp=st.integers(1, 1500), out=st.integers(1, 200),
       seed=st.integers(0, 10_000), fast=st.booleans())
def test_admission_shortcuts_change_nothing(server, workload, inp, out, seed, fast):
    """The lean admission pass (Scheduler._never_delays: the ``none`` policy is not asked;
    ``_leave_queue`` pops the one admitted head; ``_filter_finished`` keeps the running list
    when nothing finished) gives the general pass's run exactly."""
    server = dict(server, admission_delay="none")
    workload = uniform_lengths(workload, inp, out)
    acc = window_acceptance(server)
    sc = make_scenario(server, workload, acc, seed=seed)
    prof = tiny_profile()
    lean = SimEngine(sc, prof, seed, fast_forward=fast)
    assert lean.sched._never_delays
    general = _generic_admission(SimEngine(sc, prof, seed, fast_forward=fast))
    assert_same_run(lean.run(), general.run())



@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, workload=workloads, page=st.sampled_from([1, 1, 16, 64]), inp=st.integers(1, 1500),
       out=st.integers(1, 200), seed=st.integers(0, 10_000), fast=st.booleans(), cache=st.booleans(),
       eos=st.booleans(), pmr=st.sampled_from([None, None, 1, 2]), pool=st.sampled_from([None, 2_500, 6_000]),
       conservative=st.sampled_from([1.0, 0.3]), shared=st.booleans())
def test_lone_admission_is_the_general_pass(server, workload, page, inp, out, seed, fast, cache, eos, pmr, pool,
                                            conservative, shared):
    """The admission pass of one waiting request admitted whole (``Scheduler._admit_lone``)
    makes the run the general pass makes (the PrefillAdder, the loops over the queue and
    the admitted list): over fcfs queues, prefix cache on and off (with prompts that share
    prefixes, whose requests take the general pass), ignore_eos on and off, small pools
    (the KV check refuses, the latch is set after an admission), chunk budgets that cut,
    prefill_max_requests and both new_token_ratio starts."""
    server = dict(server, schedule_policy="fcfs", page_size=page, disable_radix_cache=not cache,
                  prefill_max_requests=pmr, schedule_conservativeness=conservative)
    if pool is not None:
        server["max_total_num_tokens"] = pool
    workload = dict(uniform_lengths(workload, inp, out), ignore_eos=eos)
    if shared and cache:
        workload["shared_prefix"] = {"num_groups": 2, "prompts_per_group": 4, "system_prompt_len": 300,
                                     "question_len": 50}
    acc = window_acceptance(server)
    try:
        sc = make_scenario(server, workload, acc, seed=seed)
    except ValueError:
        return   # a combination the scenario schema refuses
    prof = tiny_profile()
    lean = SimEngine(sc, prof, seed, fast_forward=fast)
    assert lean.sched._lone_admission
    general = SimEngine(sc, prof, seed, fast_forward=fast)
    general.sched._lone_admission = False
    try:
        want = general.run()
    except Exception as e:   # the general pass refuses the scenario: the lone one must too
        with pytest.raises(type(e)):
            lean.run()
        return
    assert_same_run(want, lean.run())


def _grid_reference(xs: np.ndarray, cs: np.ndarray, v: np.ndarray, x: float, c: float,
                    shift: np.ndarray | None = None) -> float:
    """GridInterp's reading with numpy scalars (np.searchsorted, float64 indexing), the
    implementation the Python-float one replaced: ``__call__`` (context rounded), or
    ``row_shifted`` with ``shift``; under the first ``x``, the line through the first
    doubling, with numpy arrays."""
    def axis(a, q):
        if len(a) == 1:
            return 0, 0, 0.0
        i = min(max(int(np.searchsorted(a, q)) - 1, 0), len(a) - 2)
        return i, i + 1, float((q - a[i]) / (a[i + 1] - a[i]))

    def row(i, j0, j1, wc):
        if wc > 1.0:
            return v[i, j1] + max(0.0, v[i, j1] - v[i, j0]) * (wc - 1.0)
        if wc < 0.0:   # below the first context: the first segment's slope, never negative
            return v[i, j0] + max(0.0, v[i, j1] - v[i, j0]) * wc
        return v[i, j0] * (1 - wc) + v[i, j1] * wc

    i0, i1, wx = axis(xs, x)
    if wx < 0.0:   # under the first x: each column's line through the first doubling (GridInterp._below)
        n = max(2, int((xs <= 2 * xs[0]).sum()))
        slope, icept = np.polyfit(xs[:n], v[:n], 1)
        low = np.where(slope <= 0, v[0], np.minimum(v[0], np.maximum(0.0, icept + slope * x)))
        j0, j1, wc = axis(cs, round(c, -1) if shift is None else c - float(shift[0]))
        if wc > 1.0:
            return float(low[j1] + max(0.0, low[j1] - low[j0]) * (wc - 1.0))
        if wc < 0.0:
            return max(0.0, float(low[j0] + max(0.0, low[j1] - low[j0]) * wc))
        return max(0.0, float(low[j0] * (1 - wc) + low[j1] * wc))
    if shift is None:
        lo, hi = (row(i, *axis(cs, round(c, -1))) for i in (i0, i1))
    else:
        lo, hi = (row(i, *axis(cs, c - float(shift[i]))) for i in (i0, i1))
    if wx > 1.0:   # above the last x: the least-squares slope from half the last x up, never negative
        top = list(range(len(xs) - max(2, int((xs >= 0.5 * xs[-1]).sum())), len(xs)))
        vals = [row(i, *axis(cs, round(c, -1) if shift is None else c - float(shift[i]))) for i in top]
        tx = [float(xs[i]) for i in top]
        mx, mv = sum(tx) / len(tx), sum(vals) / len(vals)
        slope = sum((a - mx) * (b - mv) for a, b in zip(tx, vals, strict=True)) / sum((a - mx) ** 2 for a in tx)
        return max(0.0, vals[-1] + max(0.0, slope) * (x - tx[-1]))
    return max(0.0, float(lo * (1 - wx) + hi * wx))


@settings(max_examples=150, deadline=None)
@given(nx=st.integers(1, 8), nc=st.integers(1, 8), seed=st.integers(0, 2**31),
       queries=st.lists(st.tuples(st.one_of(st.integers(0, 600), st.floats(0.0, 600.0)),
                                  st.floats(0.0, 20_000.0)), min_size=1, max_size=30))
def test_grid_lookup_in_python_floats_is_the_numpy_one(nx, nc, seed, queries):
    from specsched.sim.profile import Grid

    rng = np.random.default_rng(seed)
    xs = np.unique(rng.integers(1, 512, nx)).astype(float)
    cs = np.unique(rng.integers(0, 16_000, nc)).astype(float)
    v = rng.random((len(xs), len(cs))) * 0.05 + 1e-4
    interp = Grid(x=xs.tolist(), context_len=cs.tolist(), seconds=v.tolist()).interpolator("t")
    shift = rng.integers(0, 50, len(xs)).astype(float)
    for x, c in queries:
        assert interp(x, c) == _grid_reference(xs, cs, v, x, c)
        assert interp.row_shifted(x, c, shift) == _grid_reference(xs, cs, v, x, c, shift)


def _itl_reference(rid: np.ndarray, t: np.ndarray, n: np.ndarray):
    """The ITL sample (and each value's rid) as the full-length-array version built it."""
    keep = n > 0
    rid, t, n = rid[keep], t[keep], n[keep]
    if len(t) == 0:
        return np.zeros(0), np.zeros(0, dtype=rid.dtype)
    if len(t) > 1 and (np.diff(t) >= 0).all():
        key = rid.astype(np.uint16) if rid.min() >= 0 and rid.max() < 1 << 16 else rid
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((t, rid))
    rid, t, n = rid[order], t[order], n[order]
    later = np.r_[False, rid[1:] == rid[:-1]]
    dt = np.r_[0.0, np.diff(t)][later]
    nn = n[later]
    return np.repeat(dt / nn, nn), np.repeat(rid[later], nn)


@settings(max_examples=150, deadline=None)
@given(rows=st.integers(0, 300), nreq=st.integers(1, 40), big_ids=st.booleans(), ordered=st.booleans(),
       seed=st.integers(0, 2**31))
def test_itl_sample_is_the_reference_order_and_values(rows, nreq, big_ids, ordered, seed):
    # the ITL sample's order is kept exactly (the summary's mean and std sum it in order)
    from specsched.sim.metrics import _itl_of

    rng = np.random.default_rng(seed)
    rid = rng.integers(0, nreq, rows) * (70_001 if big_ids else 1)
    t = rng.random(rows).round(2)   # ties
    if ordered:
        t = np.sort(t)
    n = rng.integers(-1, 7, rows)
    vals, rids = _itl_of(rid, t, n, with_rids=True)
    want_v, want_r = _itl_reference(rid, t, n)
    assert vals.tobytes() == want_v.tobytes() and rids.tolist() == want_r.tolist()


@settings(max_examples=200, deadline=None)
@given(logits=st.lists(st.floats(-8.0, 8.0), min_size=1, max_size=12), spread=st.floats(0.0, 3.0))
def test_population_mean_is_the_per_node_mean(logits, spread):
    # the quadrature over request levels, all nodes at once, bit for bit the per-node loop
    from specsched.sim.acceptance import _HERMITE, _population_mean, expit, mean_accept_length

    nodes, weights = _HERMITE
    base = np.array(logits)
    means = [mean_accept_length(expit(base + spread * z)) for z in nodes]
    assert _population_mean(base, spread) == float(np.dot(weights, means) / weights.sum())


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["single", "pair", "gaps", "wide", "array"]), st.integers(1, 30),
                              st.integers(0, 2**31)), max_size=40),
       small_flush=st.booleans(), pair_times=st.sampled_from([None, 1, 3, 16]))
def test_itl_stream_stores_the_pairs_in_order(ops, small_flush, pair_times):
    """``ItlSamples``: single pairs, gaps between two times and runs of times (the stream,
    subtracted at the copy) and arrays give the values and multiplicities, in the order
    added (arrays first at each copy, then the stream; zero multiplicities dropped), that
    a plain list of pairs gives; copies in between change nothing else, and neither does the
    stream turned into its pairs ahead of the copy (``pair_times``: every few times, where
    the run does it every 4,096). Fails if the stream's times are paired across pieces or its order is
    lost, or if a multiplicity above 255 (``wide``: a step of a large batch) is cut to the
    byte the copy packs the smaller ones in."""
    from specsched.sim import compact_records
    from specsched.sim.compact_records import ItlSamples

    pairing = compact_records.PAIR_TIMES
    if pair_times is not None:
        compact_records.PAIR_TIMES = pair_times
    try:
        _itl_stream_case(ItlSamples(), ops, small_flush)
    finally:
        compact_records.PAIR_TIMES = pairing


def _itl_stream_case(a, ops, small_flush) -> None:
    """:func:`test_itl_stream_stores_the_pairs_in_order` on the samples ``a``."""
    want_v: list[float] = []
    want_w: list[int] = []
    arrays: list[tuple[float, int]] = []    # pending arrays since the last copy ...
    stream: list[tuple[float, int]] = []    # ... and the stream's pairs

    def copy() -> None:
        for v, w in arrays + stream:
            if w:
                want_v.append(v)
                want_w.append(w)
        arrays.clear()
        stream.clear()

    for kind, k, seed in ops:
        rng = np.random.default_rng(seed)
        if kind == "single":
            for _ in range(k):
                v, w = float(rng.random()), int(rng.integers(1, 4))
                a.add_pair(v, w)
                stream.append((v, w))
        elif kind == "pair":   # a gap between two delivery times, as Recorder.deliver_ones adds it
            prev = float(rng.random())
            t = prev + float(rng.exponential(0.01))
            a.add_stream([prev, t], [1, 0], 1)
            stream.append((t - prev, 1))
        elif kind == "array":
            v, w = rng.random(k), rng.integers(1, 4, k)
            a.add(v, w)
            arrays.extend(zip(v.tolist(), w.tolist(), strict=True))
        else:
            times = np.cumsum(rng.exponential(0.01, k)).tolist()
            counts = rng.integers(0, 3 if kind == "gaps" else 1 << 20, k - 1).tolist()
            a.add_gaps(times, counts)
            stream.extend((times[j + 1] - times[j], c) for j, c in enumerate(counts))
        if small_flush:
            a._flush()
            copy()
    copy()
    v, w = a.arrays()
    assert v.tobytes() == np.array(want_v, dtype=np.float64).tobytes()
    assert w.tobytes() == np.array(want_w, dtype=np.int32).tobytes()


@settings(max_examples=60, deadline=None)
@given(rids=st.lists(st.integers(0, 5000), max_size=30, unique=True), ints=st.booleans(),
       before=st.lists(st.integers(5001, 6000), max_size=3, unique=True))
def test_requests_sent_at_once_are_the_rows_sent_one_by_one(rids, ints, before):
    """``Recorder.requests_sent`` (open arrivals, at once) leaves the recorder as calling
    ``request_sent`` for each request in the same order does."""
    from specsched.sim.records import Recorder

    a, b = Recorder("compact"), Recorder("compact")
    for rec in (a, b):
        for rid in before:
            rec.request_sent(rid, 3, 4, 1)
    starts = [rid if ints else rid * 0.5 for rid in rids]
    ins, outs = [rid % 7 + 1 for rid in rids], [rid % 5 + 1 for rid in rids]
    a.requests_sent(rids, ins, outs, starts)
    for rid, i, o, t in zip(rids, ins, outs, starts, strict=True):
        b.request_sent(rid, i, o, t)
    assert a._int_starts == b._int_starts and a._n == b._n
    for name in ("_rid", "_in", "_out", "_start", "_first", "_finish", "_last"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert a.rows(np.array(rids + before, dtype=np.int64)).tolist() == b.rows(np.array(rids + before, dtype=np.int64)).tolist()


@settings(max_examples=200, deadline=None)
@given(seed=st.one_of(st.integers(0, 2**32 - 1), st.integers(2**32, 2**70), st.sampled_from([0, 2**32 - 1, 2**32])),
       rid=st.one_of(st.integers(0, 2**32 - 1), st.integers(2**32, 2**40), st.sampled_from([0, 1, 2**32 - 1])))
def test_accept_seed_words_are_the_list_seed(seed, rid):
    """A request's accept generator seeded from the uint32 words (acceptance._entropy) is
    the one seeded from the list [seed, stream, rid]: same SeedSequence entropy, same
    state, same draws; a seed of two or more words keeps the list. A rid of two words
    would lengthen the key (sim/seed_streams.py): refused."""
    from specsched.sim import seed_streams
    from specsched.sim.acceptance import _entropy

    if rid >= 2**32:
        with pytest.raises(ValueError, match="rid must be in"):
            _entropy(seed, rid)
        return
    want = np.random.default_rng([seed, seed_streams.ACCEPT, rid])
    got = np.random.default_rng(_entropy(seed, rid))
    assert got.bit_generator.state == want.bit_generator.state
    assert np.random.default_rng(seed_streams.key("accept", seed, rid)).bit_generator.state == want.bit_generator.state
    assert got.random(4).tolist() == want.random(4).tolist()


def _device_step_reference(dev: DeviceTokens, plan) -> list[int]:
    """DeviceTokens.step as written before its extend-only shortcut: the new requests from
    a set, then the (empty) loop over decode rows."""
    out = [0] * plan.batch_size
    before, caps = plan.committed_before, plan.max_new_tokens
    n_ext = plan.num_extend
    new = set(plan.new_rids)
    for i, rid in enumerate(plan.rids[:n_ext]):
        if rid in new:
            b = before[i]
            c = b + 1 if b + 1 < caps[i] else caps[i]
            dev.committed[rid] = c
            out[i] = c - b
    for i in range(n_ext, plan.batch_size):
        rid = plan.rids[i]
        have = dev.committed.get(rid, before[i])
        if caps[i] - have > 0:
            dev.committed[rid] = have + 1
            out[i] = 1
    return out


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5), st.integers(1, 6), st.booleans()),
                     min_size=1, max_size=9, unique_by=lambda r: r[0]),
       n_dec=st.integers(0, 3), known=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 6)), max_size=6))
def test_extend_only_device_step_is_the_general_step(rows, n_dec, known):
    """DeviceTokens.step with the new requests read from the plan's tuple (a set only above
    four) and an early return for an extend-only forward commits what the set-and-loop
    version commits: the same counts per row, the same device state after (requests whose
    prefill completes or not, outputs at and below their target, decode rows or none)."""
    from specsched.sim.plan import EXTEND, MIXED, BatchPlan

    n_dec = min(n_dec, len(rows) - 1)
    n_ext = len(rows) - n_dec
    rids = tuple(r[0] for r in rows)
    before = tuple(min(r[1], r[2]) for r in rows)
    caps = tuple(r[2] for r in rows)
    new = tuple(r[0] for r in rows[:n_ext] if r[3])
    plan = BatchPlan(3, MIXED if n_dec else EXTEND, rids, (1,) * len(rows), (0,) * len(rows), n_ext, None, new, 1,
                     before, caps)
    a, b = DeviceTokens(None), DeviceTokens(None)
    a.acceptance = b.acceptance = type("A", (), {"draw": None, "made": None})()
    for rid, c in known:
        a.committed[rid] = b.committed[rid] = c
    assert a.step(plan).counts() == _device_step_reference(b, plan)
    assert a.committed == b.committed


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 5)), max_size=12), full=st.booleans())
def test_finished_filter_is_the_list_rebuild(rows, full):
    """``Scheduler._filter_finished`` (scan, and build a list only when a request finished)
    leaves the running batch and the batch_is_full latch as the rebuild at every pass does;
    with none finished the running list is the same object."""
    from specsched.sim.request import Req

    s = Scheduler(make_scenario().server, NoDelay())
    reqs = [Req(i, 8, cap, output_len=min(out, cap)) for i, (out, cap) in enumerate(rows)]
    s.running, s.batch_is_full = list(reqs), full
    before = s.running
    s._filter_finished()
    kept = [r for r in reqs if not r.finished]
    assert [id(r) for r in s.running] == [id(r) for r in kept]
    any_finished = len(kept) < len(reqs)
    assert s.batch_is_full == (full and not any_finished)
    assert (s.running is before) == (not any_finished)



@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 6), n=st.integers(0, 6), which=st.integers(0, 2))
def test_per_request_lists_of_unequal_length_are_refused(m, n, which):
    """The hot per-request loops read parallel lists by index (a ``zip(..., strict=True)``
    per call costs ~0.4 us there); each checks the lengths first, so a list longer or
    shorter than the others still raises instead of being cut short or read past."""
    from specsched.sim.kv_ledger import KVLedger
    from specsched.sim.records import Recorder
    from specsched.sim.request import Req

    if n == m:
        return
    lens = [m, m, m]
    lens[which] = n        # one of the three parallel lists has the other length
    reqs = [Req(rid=i, input_len=4, max_new_tokens=8) for i in range(lens[0])]
    with pytest.raises(ValueError):
        KVLedger(1000).settle(reqs, [0] * lens[1], 0, 0, finished=[False] * lens[2])
    with pytest.raises(ValueError):
        DeviceTokens(None).set_state(list(range(m)), [0] * n, None)
    rec = Recorder("compact")
    for i in range(max(m, n)):
        rec.request_sent(i, 4, 8, 0.0)
    with pytest.raises(ValueError):
        rec.deliver_step(1.0, list(range(lens[0])), [1] * lens[1], [False] * lens[2])


@settings(max_examples=80, deadline=None)
@given(n=st.one_of(st.integers(1, 40), st.integers(1, 5_000)), seed=st.integers(0, 2**31),
       decimals=st.sampled_from([None, 1]), qs=st.lists(st.sampled_from([0, 1, 50, 90, 95, 99, 100]), min_size=1,
                                                       max_size=4))
def test_finite_percentiles_are_numpys(n, seed, decimals, qs):
    """bench_serving's p90/p95 figures without np.percentile (whose first call imports
    numpy.ma): each value is np.percentile's, ties and the extremes included, and the
    input is left as it was."""
    from specsched.sim.metrics import finite_percentiles

    v = np.random.default_rng(seed).exponential(30.0, n)
    if decimals is not None:
        v = np.round(v, decimals)
    before = v.copy()
    got = finite_percentiles(v, tuple(qs))
    assert got == [float(np.percentile(v, q)) for q in qs]
    assert v.tobytes() == before.tobytes()


def test_finite_percentiles_leave_numpy_ma_unimported():
    code = ("import sys\nimport numpy as np\nfrom specsched.sim.metrics import finite_percentiles\n"
            "finite_percentiles(np.arange(100.0), (90, 95))\nprint('numpy.ma' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stdout + r.stderr


@settings(max_examples=500, deadline=None)
@given(c=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6).map(lambda k: k * 10.0),
                   st.integers(-10**20, 10**20).map(float), st.integers(-10**6, 10**6)))
def test_round_tens_is_round_to_tens(c):
    """profile.round_tens (a multiple of 10 kept as it is) is round(c, -1): the same value,
    sign and type, for any float (multiples of 10, halves, huge, signed zeros, NaN, inf)
    and int."""
    from specsched.sim.profile import round_tens

    got, want = round_tens(c), round(c, -1)
    assert type(got) is type(want)
    if want != want:
        assert got != got
    else:
        assert got == want and math.copysign(1, got) == math.copysign(1, want)


@settings(max_examples=400, deadline=None)
@given(axis=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=12, unique=True).map(sorted),
       q=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**7, 10**7)))
def test_grid_axis_clip_is_the_min_max_clip(axis, q):
    """GridInterp._axis (its segment index clipped by comparisons) gives the segment and
    weight of the min/max clip it replaces, for any sorted axis and query (below, inside,
    above, on a point, NaN, infinite, int)."""
    import bisect

    from specsched.sim.profile import GridInterp

    got = GridInterp._axis(axis, q)
    if len(axis) == 1:
        assert got == (0, 0, 0.0)
        return
    i = min(max((bisect.bisect_left(axis, q) if q == q else len(axis)) - 1, 0), len(axis) - 2)
    w = float((q - axis[i]) / (axis[i + 1] - axis[i]))
    assert got[:2] == (i, i + 1)
    assert got[2] == w or (got[2] != got[2] and w != w)


@settings(max_examples=200, deadline=None)
@given(iterations=st.lists(st.integers(1, 3_000), min_size=1, max_size=300))
def test_mostly_running_is_the_last_horizon_half_live(iterations):
    """sim/engine_stretch.py ``mostly_running``: the largest k at which at least half the
    (iteration x request) cells of a stretch are expected to be live, by brute force."""
    from specsched.sim.engine_stretch import mostly_running

    m = len(iterations)

    def live(k):
        return sum(min(e, k) for e in iterations)

    k = mostly_running(iterations)
    assert k >= min(iterations) and 2 * live(k) >= m * k and 2 * live(k + 1) < m * (k + 1)


@settings(max_examples=25, deadline=None)
@given(n=st.one_of(st.integers(1, 300), st.integers((1 << 15) - 40, (1 << 15) + 40), st.integers(100_000, 1_300_000)),
       seed=st.integers(0, 2**31), kind=st.sampled_from(["itl", "spread", "zero_weights"]))
def test_weighted_moments_in_blocks_are_the_whole_arrays(n, seed, kind):
    """The compact records' ITL mean and std (metrics._stats_weighted) make each block's
    products and squared deviations a buffer at a time (metrics.pairwise_sum): the same
    floats as the block-sized temporaries numpy sums whole, below, at and well above the
    buffer and across the 1 << 20 blocks."""
    from specsched.sim.metrics import _stats_weighted

    rng = np.random.default_rng(seed)
    v = rng.random(n) * (0.08 if kind != "spread" else 10.0 ** rng.integers(-6, 3, n))
    w = rng.integers(0 if kind == "zero_weights" else 1, 9, n).astype(np.int32)
    if kind == "zero_weights":
        w[0] = 1
    keep = w > 0
    vk, wk = v[keep], w[keep]
    total = 0.0
    for i in range(0, vk.size, 1 << 20):
        x = vk[i : i + (1 << 20)] * 1000.0
        x *= wk[i : i + (1 << 20)]
        total += float(np.add.reduce(x))
    m = int(wk.sum(dtype=np.int64))
    mean = total / m
    sq = 0.0
    for i in range(0, vk.size, 1 << 20):
        d = vk[i : i + (1 << 20)] * 1000.0 - mean
        d *= d
        d *= wk[i : i + (1 << 20)]
        sq += float(np.add.reduce(d))
    out: dict[str, float] = {}
    _stats_weighted("itl", v, w, out)
    assert out["mean_itl_ms"] == mean and out["std_itl_ms"] == float(np.sqrt(sq / m))
