"""INV-7 for the closed-form non-speculative stretch (sim/plain_run.py, sim/plain_timeline.py).

- the scheduler side: from random scheduler states, :class:`PlainRun` gives what the
  (iterations x requests) grid of :class:`DecodeRun` gives for the same state (stop, plans,
  device commits, deliveries, KV, delayed passes, final state), and both give the
  step-by-step passes (tests/test_sim_speed_equivalence.py checks the latter);
- whole runs without speculative decoding: fast-forward equals step by step, with both
  record levels, near the KV limit (retractions), with eager batches above
  cuda_graph_max_bs, with overlap on and off and both rule presets.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from specsched.sim.decode_run import DecodeRun
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.plain_run import PlainRun
from specsched.sim.request import ReqStatus
from specsched.sim.scheduler import Scheduler, UnschedulableRequest

from tests.conftest import (
    arrival_workloads,
    arrive_and_pass,
    clockless_scheduler,
    make_scenario,
    tiny_profile,
    uniform_lengths,
)
from tests.test_sim_speed_equivalence import _run, assert_same_run, assert_same_summary

plain_servers = st.fixed_dictionaries({
    "max_running_requests": st.integers(1, 24),
    "chunked_prefill_size": st.sampled_from([-1, 256, 1024, 4096]),
    "max_prefill_tokens": st.sampled_from([512, 2048, 16384]),
    "speculative_algorithm": st.just("none"),
    "admission_delay": st.sampled_from(["none", "min_free_slots", "min_free_slots_waiting_aware", "demand_observed"]),
    "enable_mixed_chunk": st.booleans(),
    "enable_overlap_schedule": st.sampled_from([True, True, True, False]),
    "schedule_policy": st.sampled_from(["fcfs", "lof", "random"]),
    "sglang_semantics": st.sampled_from(["0.5.23", "mi355x-dsv41"]),
    "cuda_graph_max_bs": st.sampled_from([1, 4, 256]),
    "page_size": st.sampled_from([1, 1, 16, 64]),   # a paged pool above 1 (sim/kv_ledger.py)
})


def _both(s: Scheduler, dev: DeviceTokens, in_flight, max_iters: int, stop_at_finish: bool, finishes_left: int):
    """PlainRun and DecodeRun of the scheduler's current state (the arguments decode_stretch
    would pass)."""
    srv, rules = s.server, s.rules
    merged = s._last_prefill
    reqs = s.running + merged
    kw = dict(first_step=s.step, kv=s.kv, num_waiting=len(s.waiting), delays=s._delays, max_iters=max_iters,
              stop_at_finish=stop_at_finish, finishes_left=finishes_left,
              skip_finishing=rules.skip_finishing_decode and srv.enable_overlap_schedule,
              filter_first=rules.filter_finished_before_delay, latched=s.batch_is_full)
    plain = PlainRun.compute(reqs, len(merged), dev, *in_flight, **kw)
    grid = DecodeRun.compute(reqs, len(merged), dev, *in_flight, window=1, spec=False,
                             max_running_requests=srv.max_running_requests, **kw)
    return plain, grid


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=plain_servers, kv=st.integers(1_200, 12_000),
       lens=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 150)), min_size=1, max_size=20),
       arrive=st.lists(st.integers(0, 30), min_size=20, max_size=20),
       max_iters=st.integers(1, 300), stop_at_finish=st.booleans(), seed=st.integers(0, 10_000))
def test_inv7_plain_run_is_the_decode_run_grid(server, kv, lens, arrive, max_iters, stop_at_finish, seed):
    # a small pool, so that stretches also end where a pass would retract
    sc = make_scenario(dict(server, max_total_num_tokens=kv), seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    compared = 0
    for p in range(2_000):
        if in_flight is not None and s.decode_stretch(dev, *in_flight, max_iters, stop_at_finish, 10**9) is not None:
            finishes_left = len(lens) - sum(r.status is ReqStatus.FINISHED for r in s.reqs.values())
            plain, grid = _both(s, dev, in_flight, max_iters, stop_at_finish, finishes_left)
            assert (plain is None) == (grid is None)
            if plain is not None:
                compared += 1
                assert plain.stop == grid.stop
                assert plain.rids.tolist() == grid.rids.tolist()
                assert np.array_equal(plain.finish_iter()[grid.finish_iter() >= 0],
                                      grid.finish_iter()[grid.finish_iter() >= 0])
                n = plain.stop
                assert np.array_equal(plain.delivered(n), grid.delivered(n))
                assert np.array_equal(plain.kv_scheduled(n), grid.kv_scheduled(n))
                assert plain.commits(n) == grid.commits(n).sum(axis=1).tolist()
                for j in range(n):
                    a, b = plain.plan_at(j), grid.plan_at(j)
                    assert a[0] == b[0] and np.array_equal(a[1].committed, b[1].committed)
                    assert plain.in_plan(j) == grid.in_plan(j)
                for m in {1, n // 2 or 1, n}:
                    pa, ga = plain.state_after(m), grid.state_after(m)
                    assert pa[:3] == ga[:3]
                    assert plain.kv_after(m) == grid.kv_after(m)
                    assert plain.delayed_passes(m) == grid.delayed_passes(m)
                    assert plain.device_after(m)[0] == grid.device_after(m)[0].tolist()
                    # the fused pass gives what the per-purpose methods give
                    o = plain.outcome(m)
                    assert (o.outs, o.held, o.done) == tuple(pa[:3])
                    if grid.kv.lens is not None:   # a paged pool: the KV positions too
                        assert [x for x, d in zip(o.lens, o.done, strict=True) if not d] == \
                            [x for x, d in zip(grid.kv.lens[m - 1].tolist(), o.done, strict=True) if not d]
                    else:
                        assert o.lens is None
                    used, peak = plain.kv_after(m)
                    # the ledger's peak after the stretch (the largest reservation is not
                    # summed when the reservations together stay within the ledger's peak)
                    assert (o.used, o.peak) == (used, max(peak, plain.peak0)) and plain.peak0 == s.kv.peak
                    peak0, plain.peak0, plain._outcome = plain.peak0, -1, None
                    assert plain.outcome(m).peak == peak    # summed in full
                    plain.peak0, plain._outcome = peak0, None
                    o = plain.outcome(m)
                    assert [id(r) for r in o.kept] == [id(r) for r, k in zip(plain.reqs, plain.in_plan(m - 1), strict=True) if k]
                    assert o.device == plain.device_after(m)[0]
                    idx, first, last, both = plain.deliveries(m)
                    assert o.deliver == ([(plain.rid_list[i], a, b) for i, a, b in zip(idx, first, last, strict=True)],
                                         both)
                    assert o.finished == [i for i, f in enumerate(plain.fin) if 0 <= f < m]
                    pl, out = plain.plan_at(m - 1)
                    assert o.plan == pl and np.array_equal(o.output.committed, out.committed)
                if compared <= 3:
                    _check_walk(plain, seed + compared)
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        if done:
            break


def _same_outcome(a, b) -> None:
    """Two :class:`sim.plain_run.PlainOutcome` hold the same values (the kept requests the
    same objects, in order)."""
    assert (a.n, a.outs, a.held, a.done, a.device, a.used, a.peak, a.finished, a.lens) == (
        b.n, b.outs, b.held, b.done, b.device, b.used, b.peak, b.finished, b.lens)
    assert [id(r) for r in a.kept] == [id(r) for r in b.kept]
    assert a.plan == b.plan and a.output.counts() == b.output.counts()
    assert a.deliver == b.deliver


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=plain_servers, kv=st.integers(1_200, 40_000),
       lens=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 150)), min_size=1, max_size=20),
       arrive=st.lists(st.integers(0, 30), min_size=20, max_size=20),
       max_iters=st.integers(1, 300), seed=st.integers(0, 10_000))
def test_the_outcome_of_a_stretch_without_finishes_is_the_general_one(server, kv, lens, arrive, max_iters, seed):
    # PlainRun.outcome's loop for n iterations in which every request runs on (all live at
    # the start, none finishing, no paged pool: _outcome_running) gives what its general
    # loop gives, field by field, at every n where it applies
    sc = make_scenario(dict(server, max_total_num_tokens=kv), seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    for p in range(2_000):
        if in_flight is not None and s.decode_stretch(dev, *in_flight, max_iters, False, 10**9) is not None:
            finishes_left = len(lens) - sum(r.status is ReqStatus.FINISHED for r in s.reqs.values())
            plain, _ = _both(s, dev, in_flight, max_iters, False, finishes_left)
            if plain is not None:
                live = plain.all_live
                assert live == all(f >= 0 for f in plain.fin)
                for m in range(1, plain.stop + 1):
                    plain._outcome = None
                    got = plain.outcome(m)
                    plain.all_live, plain._outcome = False, None    # the general loop
                    want = plain.outcome(m)
                    plain.all_live = live
                    _same_outcome(got, want)
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        if done:
            break


def _check_walk(run: PlainRun, seed: int) -> None:
    """The lean walk (no per-iteration starts or waits kept) gives the detailed walk's times
    and, as running sums, the sums of its lists added in order; an event exactly at a host
    time T_k stops the walk one iteration earlier (its sums stop there too)."""
    from specsched.sim.plain_timeline import walk

    host_bound = seed % 2 == 0   # GPU faster than the host's pass, or slower
    def gpu(bs: int, ctx: int, key: int) -> float:
        return (1e-4 if host_bound else 2e-3) + bs * 1.3e-6 + key * 1e-7

    def host(bs: int) -> tuple[float, float, float]:
        return 2e-4 + bs * 1e-6, 1e-4 + (seed % 7) * 1e-6, 3e-4

    args = (run, 0.25, 0.2504, math.inf, 5e-5, gpu, host, 1.5, 2.5)
    full = walk(*args, detail=True)
    n = full.n
    assert n == run.stop and len(full.S) >= n and len(full.T) >= n + 1
    blocked, rows, busy = 1.5, 0.0, 2.5
    for j in range(n):
        blocked += full.RW[j]
        busy += full.E[j] - full.S[j]
        if j < n - 1:
            rows += full.RW[j]
    assert (full.blocked, full.blocked_rows, full.busy) == (blocked, rows, busy)
    assert (full.s0, full.s_last, full.rw_last) == (full.S[0], full.S[n - 1], full.RW[n - 1])
    # the runs of one batch size with their first and last GPU ends, as the rows give them
    sizes, pieces = run.batch_sizes(n), []
    for j in range(n):
        if pieces and pieces[-1][0] == sizes[j]:
            pieces[-1] = (sizes[j], pieces[-1][1] + 1, pieces[-1][2], full.E[j])
        else:
            pieces.append((sizes[j], 1, full.E[j], full.E[j]))
    assert full.pieces == pieces
    lean = walk(*args)
    assert lean.pieces == pieces
    assert (lean.n, lean.T[: n + 1], lean.e_last) == (n, full.T[: n + 1], full.E[n - 1])
    assert (lean.blocked, lean.blocked_rows, lean.busy, lean.s0, lean.s_last, lean.rw_last) == (
        blocked, rows, busy, full.s0, full.s_last, full.rw_last)
    for k in sorted({1, (n + 1) // 2, n}):
        at = walk(run, 0.25, 0.2504, full.T[k], 5e-5, gpu, host, 1.5, 2.5)
        assert at.n == k - 1
        if k > 1:
            part = walk(run, 0.25, 0.2504, math.inf, 5e-5, gpu, host, 1.5, 2.5, limit=k - 1)
            assert (at.blocked, at.busy, at.s_last, at.T[:k]) == (part.blocked, part.busy, part.s_last, part.T[:k])
        after = walk(run, 0.25, 0.2504, math.nextafter(full.T[k], math.inf), 5e-5, gpu, host, 1.5, 2.5)
        assert after.n == min(k + 1, n)   # T_k is before the event: iteration k applies too


workloads = arrival_workloads(burst=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=plain_servers, kv=st.sampled_from([4_000, 12_000, 200_000]), workload=workloads,
       inp=st.integers(1, 1500), out=st.integers(1, 300), wake=st.sampled_from([0.0, 5e-5]),
       process=st.sampled_from([1e-4, 4e-3]), seed=st.integers(0, 10_000))
def test_inv7_plain_fast_forward_gives_the_step_by_step_run(server, kv, workload, inp, out, wake, process, seed):
    workload = uniform_lengths(workload, inp, out)
    sc = make_scenario(dict(server, max_total_num_tokens=kv), workload, seed=seed)
    prof = tiny_profile(sync_wakeup_s=wake, process_s=process)
    try:
        _, step = _run(sc, prof, seed, fast_forward=False, records="full")
    except UnschedulableRequest:
        assume(False)
    _, fast = _run(sc, prof, seed, fast_forward=True, records="full")
    assert_same_run(step, fast, rel=1e-12)
    # compact records through the closed-form path: the requests and summary of compact
    # records step by step (a standard deviation of near-equal gaps is float noise: to 1e-12 ms)
    _, compact_step = _run(sc, prof, seed, fast_forward=False, records="compact")
    _, compact = _run(sc, prof, seed, fast_forward=True, records="compact")
    pd.testing.assert_frame_equal(compact_step.requests, compact.requests, check_exact=False, rtol=1e-12,
                                  atol=1e-15)
    std = [k for k in compact.summary if k.startswith("std_")]
    for k in std:
        u, v = compact_step.summary[k], compact.summary[k]
        assert (math.isnan(u) and math.isnan(v)) or math.isclose(u, v, rel_tol=1e-12, abs_tol=1e-12), k
    assert_same_summary({k: v for k, v in compact_step.summary.items() if k not in std},
                        {k: v for k, v in compact.summary.items() if k not in std}, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(bs=st.integers(1, 300), mean=st.integers(1, 40_000), extra=st.integers(0, 299))
def test_cost_key_changes_where_walk_expects(bs, mean, extra):
    from specsched.sim.plain_timeline import _key_until

    ctx = mean * bs + extra % bs
    key = round(ctx / bs / 10.0)
    lim = _key_until(ctx, bs, key)
    assert (lim - ctx) % bs == 0 and lim > ctx
    assert round(lim / bs / 10.0) != key
    # every sum of the series before it keeps the key
    assert all(round(x / bs / 10.0) == key for x in range(ctx, lim, bs))
    # the limit is kept per (bs, key, ctx mod bs): every sum of the series with that key
    # gets the one computed afresh
    from specsched.sim.plain_timeline import _key_limit

    for x in {ctx, ctx + bs, lim - bs}:
        if round(x / bs / 10.0) == key:
            assert _key_until(x, bs, key) == _key_limit(x, bs, key) == lim


def _chain(run, t0: float, e0: float, t_next: float, wake: float, gpu, host, tail, stop: int):
    """The overlap loop's chain of one iteration at a time (sim/plain_timeline.py module
    docstring), each iteration's costs looked up afresh from its batch size and context
    sum: (n, T, blocked, rows, busy, s0, s_last, e_last, rw_last), the blocked sums from
    0.0 and busy from 0.0."""
    T, t, ep = [t0], t0, e0
    blk = rows = busy = 0.0
    pbs = run.pbs0
    s0 = s = e = rw = 0.0
    n = stop
    for j in range(stop):
        if j == 0:
            bs, ctx = run.bs0, run.ctx0
        else:
            _, bs, base = [ch for ch in run.changes if ch[0] <= j][-1]
            ctx = base + j * bs
        c = gpu(bs, ctx, round(ctx / bs / 10.0))
        hs, hl, _ = host(bs)
        ht = tail(bs) if tail is not None else 0.0
        t = t + hs
        t = t + hl
        if ep > t:
            s, e = ep, ep + c
            t = t + ht
            rw = 0.0
            if ep > t:
                rw = (ep - t) + wake
                t = t + rw
        else:
            s, e, rw = t, t + c, 0.0
            t = t + ht
        t = t + host(pbs)[2]
        T.append(t)
        if j == 0:
            s0 = s
        blk = blk + rw
        busy = busy + (e - s)
        if t >= t_next or j == stop - 1:
            n = j + 1
            break
        rows = rows + rw   # every wait but the last
        ep, pbs = e, bs
    return n, T, blk, rows, busy, s0, s, e, rw


class _Run:
    """A closed-form stretch's timing inputs (:attr:`PlainRun.changes` and P_0)."""

    def __init__(self, stop, bs0, ctx0, pbs0, changes):
        self.stop, self.bs0, self.ctx0, self.pbs0, self.changes = stop, bs0, ctx0, pbs0, changes


_SHARED_MEMO: dict = {}   # per GPU cost: segment costs kept across examples, as the engine keeps them across stretches


@settings(max_examples=200, deadline=None)
@given(bs0=st.integers(1, 24), mean0=st.integers(1, 3000), pbs0=st.integers(1, 24), stop=st.integers(1, 200),
       drops=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3)), max_size=6),
       gpu_ms=st.sampled_from([0.05, 0.4, 3.0]), wake=st.sampled_from([0.0, 1.6e-5]),
       with_tail=st.booleans(), cut=st.integers(0, 400), exact=st.booleans(), shared=st.booleans())
def test_walk_is_the_iteration_chain(bs0, mean0, pbs0, stop, drops, gpu_ms, wake, with_tail, cut, exact, shared):
    """The walk by segments (one cost lookup a segment, cached in the caller's memo across
    walks) gives the times and sums of the chain evaluated iteration by iteration; an event
    at or just after a host time ends it where the chain says."""
    from specsched.sim.plain_timeline import walk

    # breakpoints: from iteration 1 on, P_j holds bs requests with contexts summing to base + j * bs
    bs, base, j = bs0, mean0 * bs0 - bs0, 1
    changes = [(1, bs, base)]
    for gap, leave in drops:
        if bs - leave < 1:
            break
        j += gap
        bs -= leave
        base = max(0, base - leave * mean0) + (gap % 7)
        changes.append((j, bs, base))
    run = _Run(stop, bs0, mean0 * bs0 + bs0 // 2, pbs0, changes)

    def gpu(b: int, ctx: int, key: int) -> float:   # a function of (batch size, key) only
        return gpu_ms * 1e-3 + b * 1.3e-6 + key * 1e-7

    def host(b: int) -> tuple[float, float, float]:
        return 2e-4 + b * 1e-6, 1e-4 + (b % 3) * 1e-6, 3e-4 + b * 2e-7

    tail = (lambda b: 5e-5 + b * 1e-7) if with_tail else None
    full = _chain(run, 3.25, 3.2504, math.inf, wake, gpu, host, tail, stop)
    t_next = math.inf
    if cut:
        t_next = full[1][1 + cut % stop]
        if not exact:
            t_next = math.nextafter(t_next, math.inf)
    memo = _SHARED_MEMO.setdefault(gpu_ms, {}) if shared else None
    got = walk(run, 3.25, 3.2504, t_next, wake, gpu, host, 0.0, 0.0, tail=tail, memo=memo)
    n, T, blk, rows, busy, s0, s_last, e_last, rw_last = _chain(run, 3.25, 3.2504, t_next, wake, gpu, host, tail, stop)
    if T[n] == t_next:   # the Recv would be at the event itself: one iteration fewer
        if n == 1:
            assert got.n == 0
            return
        n, T, blk, rows, busy, s0, s_last, e_last, rw_last = _chain(
            run, 3.25, 3.2504, math.inf, wake, gpu, host, tail, n - 1)
    assert got.n == n
    assert got.T[: n + 1] == T[: n + 1]
    assert (got.blocked, got.blocked_rows, got.busy) == (blk, rows, busy)
    assert (got.s0, got.s_last, got.e_last, got.rw_last) == (s0, s_last, e_last, rw_last)


@settings(max_examples=100, deadline=None)
@given(walks=st.lists(st.tuples(st.integers(1, 24), st.integers(1, 3000), st.integers(1, 200)), min_size=1, max_size=8),
       gpu_ms=st.sampled_from([0.05, 3.0]))
def test_walk_links_each_segment_to_the_one_at_its_limit(walks, gpu_ms):
    """The walk keeps, in a segment's memo entry, the entry of the segment that starts at
    its limit (the next one of every walk that reaches it): after walks of one batch size
    each (so every key change is taken from the link), each linked entry is the one
    ``_segment`` finds for that sum, which the same walks with a fresh memo at every
    iteration also agree with (times and sums)."""
    from specsched.sim.plain_timeline import _segment, walk

    def gpu(b: int, ctx: int, key: int) -> float:
        return gpu_ms * 1e-3 + b * 1.3e-6 + key * 1e-7

    def host(b: int) -> tuple[float, float, float]:
        return 2e-4 + b * 1e-6, 1e-4 + (b % 3) * 1e-6, 3e-4 + b * 2e-7

    memo: dict = {}
    for bs, mean0, stop in walks:
        run = _Run(stop, bs, mean0 * bs, bs, [(1, bs, mean0 * bs - bs)])
        kept = walk(run, 3.25, 3.2504, math.inf, 1.6e-5, gpu, host, 0.0, 0.0, memo=memo)
        n, T, blk, rows, busy, s0, s_last, e_last, rw_last = _chain(run, 3.25, 3.2504, math.inf, 1.6e-5, gpu, host,
                                                                     None, stop)
        assert (kept.n, kept.T[: n + 1], kept.blocked, kept.blocked_rows, kept.busy) == (n, T[: n + 1], blk, rows, busy)
    linked = [(bs, entry) for (bs, _, _), entry in memo.items() if entry[2] is not None]
    for bs, entry in linked:
        assert entry[2][:2] == _segment({}, gpu, entry[1], bs)[:2]


@settings(max_examples=300, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 60)), max_size=12), n=st.integers(0, 61))
def test_both_counted_from_the_ends_is_both_from_the_changes(spans, n):
    """``_both_from_ends`` (counts and the ends below n - 1, as ``PlainRun.outcome`` takes
    them) gives ``_both`` (a dict of changes) for requests delivering from iteration 0 or 1
    to their last one (at most n - 1). It fails if a count is off at j = 1, 2 or an end."""
    from specsched.sim.plain_run import _both, _both_from_ends

    delta: dict[int, int] = {}
    at_one = from_two = 0
    ends = []
    for a, b in spans:
        b = min(b, n - 1)
        if a > b:
            continue   # no delivery in the first n iterations
        delta[a + 1] = delta.get(a + 1, 0) + 1
        delta[b + 1] = delta.get(b + 1, 0) - 1
        if b >= 2:
            from_two += 1
            at_one += a == 0
            if b < n - 1:
                ends.append(b)
        elif a == 0 and b == 1:
            at_one += 1
    assert _both_from_ends(at_one, from_two, ends, n) == _both(delta, n)


@settings(max_examples=300, deadline=None)
@given(bs0=st.integers(1, 300), n=st.integers(1, 400), data=st.data())
def test_walk_pieces_are_the_cuts_runs(bs0, n, data):
    """plain_timeline._pieces (the walk's exit) gives the runs of one batch size that the
    per-iteration batch sizes and GPU ends give: for any cuts (strictly increasing
    iterations in 1..n - 1, each with the batch size from there on and the GPU end before
    it) and first ends after them."""
    from specsched.sim.plain_timeline import _pieces

    at = sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=min(6, n - 1))) if n > 1 else [])
    ends = data.draw(st.lists(st.floats(0, 1e3, allow_nan=False), min_size=n, max_size=n))
    sizes = [bs0]
    for _ in at:
        sizes.append(data.draw(st.integers(1, 300).filter(lambda b, last=sizes[-1]: b != last)))
    cuts = [(j, sizes[k + 1], ends[j - 1]) for k, j in enumerate(at)]
    firsts = [ends[j] for j in at]
    # the iterations' batch sizes, then their runs read row by row
    per = [sizes[sum(1 for j in at if j <= i)] for i in range(n)]
    want = []
    for i in range(n):
        if want and i not in at:
            want[-1] = (per[i], want[-1][1] + 1, want[-1][2], ends[i])
        else:
            want.append((per[i], 1, ends[i], ends[i]))
    assert _pieces(bs0, cuts, firsts, ends[0], ends[n - 1], n) == want
