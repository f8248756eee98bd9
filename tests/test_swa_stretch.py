"""INV-7 (fast path == step by step) for hybrid sliding-window KV: the collapsed decode
stretch (sim/swa_stretch.py through ``Scheduler.decode_stretch`` / ``apply_stretch``) gives
the SWA pool's counts, evictions, decode checks and the plans of the passes it replaces,
under both eviction cadences, paged pools, the prefix cache's locked prompt tails and both
spec KV rules; and whole runs with fast-forward equal step-by-step runs."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.request import ReqStatus
from specsched.sim.scheduler import UnschedulableRequest

from tests.conftest import (
    arrive_and_pass,
    clockless_scheduler,
    make_scenario,
    overlap_pass,
    tiny_profile,
    window_acceptance,
)
from tests.test_sim_speed_equivalence import _same_output, _state, assert_same_run

swa_servers = st.fixed_dictionaries({
    "max_running_requests": st.integers(1, 16),
    "max_total_num_tokens": st.integers(2_000, 40_000),
    "chunked_prefill_size": st.sampled_from([-1, 256, 1024]),
    "max_prefill_tokens": st.sampled_from([512, 2048, 16384]),
    "speculative_algorithm": st.sampled_from(["none", "dspark", "dspark", "eagle"]),
    "speculative_num_draft_tokens": st.integers(2, 6),
    "admission_delay": st.sampled_from(["none", "min_free_slots", "min_free_slots_waiting_aware"]),
    "enable_overlap_schedule": st.sampled_from([True, True, False]),
    "sglang_semantics": st.sampled_from(["0.5.23", "mi355x-dsv41"]),
    "semantics_rules": st.sampled_from([{}, {"swa_eviction_cadence": "tokens"},
                                        {"swa_eviction_cadence": "forward_interval"}]),
    "page_size": st.sampled_from([1, 1, 4, 16]),
    "sliding_window_size": st.integers(1, 64),
    "swa_full_tokens_ratio": st.floats(0.01, 0.6),
    "swa_eviction_interval": st.integers(1, 24),
    "disable_radix_cache": st.booleans(),
})


def _scenario(server, workload=None, seed=1):
    acc = window_acceptance(server)
    try:
        return make_scenario(server, workload, acc, seed=seed)
    except ValueError:
        assume(False)   # an SWA pool smaller than window + page is refused (tested elsewhere)


def _swa_state(s) -> tuple:
    kv = s.kv
    return (kv.swa_used, kv.swa_peak, dict(kv._swa_evicted), dict(kv._swa_lock),
            {k: v for k, v in kv._decode_idx.items()})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=swa_servers,
       # short prompts under a long window: decode outgrows what admission charged, and
       # stretches end where a pass would retract for SWA
       lens=st.lists(st.tuples(st.one_of(st.integers(1, 30), st.integers(1, 300)), st.integers(1, 150)),
                     min_size=1, max_size=16),
       arrive=st.lists(st.integers(0, 30), min_size=16, max_size=16), frac=st.floats(0.0, 1.0),
       max_iters=st.integers(1, 300), stop_at_finish=st.booleans(), seed=st.integers(0, 10_000))
# the collapsed run retracted request 0 after 88 tokens; its re-extension (388 positions, SWA
# pool 368) held every chunk's SWA and parked with 4 slots free, forever: a chunk's SWA behind
# the window must pass to the tree before the next chunk (Scheduler._stash_chunked_swa)
@example(server={"max_running_requests": 7, "max_total_num_tokens": 18400, "chunked_prefill_size": 256,
                 "max_prefill_tokens": 512, "speculative_algorithm": "none", "speculative_num_draft_tokens": 2,
                 "admission_delay": "none", "enable_overlap_schedule": True, "sglang_semantics": "mi355x-dsv41",
                 "semantics_rules": {}, "page_size": 4, "sliding_window_size": 9, "swa_full_tokens_ratio": 0.02,
                 "swa_eviction_interval": 1, "disable_radix_cache": False},
         lens=[(300, 91), (1, 1), (14, 149), (16, 39), (1, 1), (1, 1), (1, 41), (1, 1), (17, 79), (1, 146), (1, 1),
               (272, 130), (1, 1), (1, 19), (21, 149), (15, 105)],
         arrive=[17, 0, 0, 0, 24, 0, 30, 0, 29, 29, 0, 29, 16, 0, 23, 0], frac=0.0, max_iters=1,
         stop_at_finish=True, seed=0)
# an SWA pool of 25 under three decodes of window 4 and eviction interval 15: request 7 is
# retracted, re-admitted at once cut to the free SWA (0.5.23 SWAPrefillBudget.check_prefill's
# _chunk_cap), re-prefilled a few tokens a pass while the decodes wait, retracted again at
# its first decode; the kept requests commit a token each cycle and the run ends at pass
# 3,001: slow, not stalled
@example(server={"max_running_requests": 8, "max_total_num_tokens": 2001, "chunked_prefill_size": 1024,
                 "max_prefill_tokens": 512, "speculative_algorithm": "none", "speculative_num_draft_tokens": 2,
                 "admission_delay": "none", "enable_overlap_schedule": True, "sglang_semantics": "0.5.23",
                 "semantics_rules": {}, "page_size": 1, "sliding_window_size": 4, "swa_full_tokens_ratio": 0.0125,
                 "swa_eviction_interval": 15, "disable_radix_cache": False},
         lens=[(1, 1), (1, 1), (1, 136), (1, 1), (1, 1), (1, 1), (26, 113), (103, 74), (1, 1), (1, 1)],
         arrive=[0, 0, 11, 0, 0, 0, 11, 11, 0, 0, 0, 0, 0, 0, 0, 0], frac=0.0, max_iters=1,
         stop_at_finish=False, seed=0)
# an SWA pool of 266 under one running slot: request 2 (265 + 3 tokens) is aborted out of memory at
# its first decode, which leaves new_token_ratio at 0 (the retraction estimate of an empty batch);
# the next decode pass lifts it to the floor 0.098 (max(ratio - decay, floor)), where the stretch
# stopped decaying at once ("at or below the floor") and kept 0
@example(server={"max_running_requests": 1, "max_total_num_tokens": 2913, "chunked_prefill_size": -1,
                 "max_prefill_tokens": 512, "speculative_algorithm": "none", "speculative_num_draft_tokens": 2,
                 "admission_delay": "none", "enable_overlap_schedule": True, "sglang_semantics": "0.5.23",
                 "semantics_rules": {}, "page_size": 1, "sliding_window_size": 1,
                 "swa_full_tokens_ratio": 0.09132822517610734, "swa_eviction_interval": 1,
                 "disable_radix_cache": True},
         lens=[(1, 1), (1, 2), (265, 3)], arrive=[0, 1] + [0] * 14, frac=0.0, max_iters=1,
         stop_at_finish=False, seed=0)
def test_inv7_swa_decode_stretch_gives_the_step_by_step_passes(server, lens, arrive, frac, max_iters,
                                                               stop_at_finish, seed):
    sc = _scenario(server, seed=seed)
    s, dev, pending = clockless_scheduler(sc, lens, arrive, seed)
    in_flight = None
    collapsed = 0
    # a stall is no token committed and no request finished for longer than prefilling
    # every prompt and output again a token a pass takes (the longest that extends can hold
    # the decodes off); a small SWA pool's retract / re-prefill cycles are slow, not stalled
    # (each commits a token), so the run goes on while it makes tokens
    stall_after = 2 * sum(a + b for a, b in lens) + max(arrive) + 100
    made, made_at = -1, 0
    for p in range(200_000):
        now = sum(r.output_len + (r.status is ReqStatus.FINISHED) for r in s.reqs.values())
        if now > made:
            made, made_at = now, p
        assert p - made_at <= stall_after, f"stalled: nothing committed from pass {made_at} to {p}"
        if in_flight is not None:
            finishes_left = len(lens) - sum(r.status is ReqStatus.FINISHED for r in s.reqs.values())
            before = (_state(s, dev), _swa_state(s))
            run = s.decode_stretch(dev, *in_flight, max_iters, stop_at_finish, finishes_left)
            assert (_state(s, dev), _swa_state(s)) == before  # decode_stretch changes nothing
            if run is not None:
                n = 1 + int(frac * (run.stop - 1))
                ref_s, ref_dev, ref_flight = copy.deepcopy((s, dev, in_flight))
                for j in range(n):
                    ref_flight, _ = overlap_pass(ref_s, ref_dev, ref_flight)
                    _same_output(ref_flight, run.plan_at(j))
                    assert ref_s.kv.swa_used == run.swa.after[j]
                in_flight = s.apply_stretch(run, n)
                dev.set_state(run.rids.tolist(), *run.device_after(n))
                _same_output(in_flight, ref_flight)
                assert _state(s, dev) == _state(ref_s, ref_dev)
                assert _swa_state(s) == _swa_state(ref_s)
                collapsed += n
                continue
        done, in_flight = arrive_and_pass(s, dev, pending, p, in_flight)
        if done:
            break
    assert not s.has_work and not pending
    assert s.kv.swa_used == 0 and collapsed >= 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=swa_servers, n=st.integers(1, 24), inp=st.integers(1, 800), out=st.integers(1, 200),
       seed=st.integers(0, 10_000))
@example(server={"max_running_requests": 16, "max_total_num_tokens": 2000, "chunked_prefill_size": -1,
                 "max_prefill_tokens": 512, "speculative_algorithm": "none", "speculative_num_draft_tokens": 2,
                 "admission_delay": "none", "enable_overlap_schedule": True, "sglang_semantics": "mi355x-dsv41",
                 "semantics_rules": {}, "page_size": 1, "sliding_window_size": 1, "swa_full_tokens_ratio": 0.0173,
                 "swa_eviction_interval": 6, "disable_radix_cache": False},
         n=6, inp=1, out=104, seed=0)  # a retracted request outgrows the SWA pool: refused, not a stall
def test_inv7_swa_fast_forward_gives_the_step_by_step_run(server, n, inp, out, seed):
    workload = {"kind": "burst", "num_requests": n,
                "input_len": {"kind": "uniform", "value": inp, "range_ratio": 0.5},
                "output_len": {"kind": "uniform", "value": out, "range_ratio": 0.3}}
    sc = _scenario(server, workload, seed)
    step = SimEngine(sc, tiny_profile(), seed, fast_forward=False)
    try:
        a = step.run()
    except UnschedulableRequest:
        assume(False)   # a prompt the SWA pool can never hold: nothing to compare
    fast = SimEngine(sc, tiny_profile(), seed)
    b = fast.run()
    assert_same_run(a, b, rel=1e-12)
    assert fast.sched.kv.swa_peak == step.sched.kv.swa_peak


_LONG_PROMPT_SERVER = {"max_running_requests": 4, "max_total_num_tokens": 4000, "chunked_prefill_size": 256,
                       "max_prefill_tokens": 512, "speculative_algorithm": "none", "speculative_num_draft_tokens": 2,
                       "admission_delay": "none", "enable_overlap_schedule": True, "sglang_semantics": "0.5.23",
                       "semantics_rules": {}, "page_size": 4, "sliding_window_size": 16, "swa_full_tokens_ratio": 0.1,
                       "swa_eviction_interval": 8, "disable_radix_cache": False}


@pytest.mark.parametrize("server", [
    _LONG_PROMPT_SERVER,
    {**_LONG_PROMPT_SERVER, "disable_radix_cache": True, "enable_overlap_schedule": False},
    {**_LONG_PROMPT_SERVER, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4},
], ids=["radix", "no-radix", "radix-dspark"])
def test_inv7_prompts_longer_than_the_swa_pool_run_the_same_fast_and_step_by_step(server):
    """Prompts of 600 to 1800 tokens against an SWA pool of 400 (SGLang chunks them to the
    free SWA, mem_cache/prefill_budget.py ``SWAPrefillBudget._chunk_cap``): every request
    finishes, the SWA peak stays within the pool, and the collapsed decode stretches give
    the step-by-step run."""
    workload = {"kind": "burst", "num_requests": 6,
                "input_len": {"kind": "uniform", "value": 1200, "range_ratio": 0.5},
                "output_len": {"kind": "uniform", "value": 120, "range_ratio": 0.3}}
    sc = make_scenario(server, workload, window_acceptance(server), seed=3)
    step = SimEngine(sc, tiny_profile(), 3, fast_forward=False)
    a = step.run()
    assert step.sched.kv.swa_capacity == 400 and max(a.requests["input_len"]) > 400
    assert 0 < step.sched.kv.swa_peak <= step.sched.kv.swa_capacity
    fast = SimEngine(sc, tiny_profile(), 3)
    b = fast.run()
    assert_same_run(a, b, rel=1e-12)
    assert fast.sched.kv.swa_peak == step.sched.kv.swa_peak and fast.sched.kv.swa_used == 0


def _reference_swa(a: dict):
    """The SWA rules pass by pass (sim/kv_ledger.py's ``evict_swa``, paged reservations and
    frees), written plainly: check, reserved and after per iteration, final frontiers."""
    k, m = a["member"].shape
    p, w, keep, iv = a["page"], a["window"], a["keep"], a["interval"]
    pg = lambda x: -(-int(x) // p) * p  # noqa: E731
    e, idx = a["ev0"].tolist(), a["idx0"].tolist()
    holds = [int(x) > 0 for x in a["len0"]]
    other = a["used"] - sum(pg(a["len0"][i]) - e[i] + a["lock"][i] for i in range(m) if holds[i])
    gone = [False] * m
    used, out = a["used"], []
    for j in range(k):
        before = [a["len0"][i] if j == 0 else a["lenproc"][j - 1][i] for i in range(m)]
        need = sum(pg(a["lenres"][j][i]) - pg(before[i]) for i in range(m) if a["member"][j][i])
        check = used + need
        due = (a["first_step"] + j) % iv == 0
        for i in range(m):
            if not a["member"][j][i]:
                continue
            n, idx[i] = idx[i], idx[i] + 1
            if n < 1 or (a["by_forward"] and not due):
                continue
            pre = int(a["pre"][j][i])
            if pre - w < e[i] + (1 if a["by_forward"] else iv):
                continue
            e[i] = max(e[i], (pre - keep) // p * p)
        res = other + sum(pg(a["lenres"][j][i]) - e[i] + a["lock"][i] for i in range(m) if holds[i] and not gone[i])
        for i in range(m):
            gone[i] = gone[i] or bool(a["fin"][j][i])
        used = other + sum(pg(a["lenproc"][j][i]) - e[i] + a["lock"][i] for i in range(m) if holds[i] and not gone[i])
        out.append((check, res, used, list(e), list(idx)))
    return out


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 40), m=st.integers(1, 6), page=st.sampled_from([1, 2, 8]), window=st.integers(1, 20),
       interval=st.integers(1, 12), by_forward=st.booleans(), prefix=st.booleans(), first_step=st.integers(0, 30),
       topup=st.booleans(), seed=st.integers(0, 2**31), shift=st.sampled_from([0, -1, 3]), sums=st.booleans())
def test_stretch_swa_is_the_pass_by_pass_rules(k, m, page, window, interval, by_forward, prefix, first_step, topup,
                                               seed, shift, sums):
    """sim/swa_stretch.py ``stretch_swa`` (the vectorised moves and row sums) gives, for
    every iteration, what the SWA rules give pass by pass, on random stretches of the shape
    a decode run has (each request in a first run of plans, lengths constant after it);
    with ``sums`` the caller hands it the grids' page sums (as the full pool's paged
    window rule does) and the grids are left as they were."""
    import numpy as np
    from specsched.sim.pages import page_sums
    from specsched.sim.swa_stretch import stretch_swa

    rng = np.random.default_rng(seed)
    keep = -(-max(window, page) // page) * page if prefix else window
    member = np.zeros((k, m), dtype=bool)
    fin = np.zeros((k, m), dtype=bool)
    pre = np.zeros((k, m), dtype=np.int64)
    lenres = np.zeros((k, m), dtype=np.int64)
    lenproc = np.zeros((k, m), dtype=np.int64)
    len0 = np.zeros(m, dtype=np.int64)
    ev0 = np.zeros(m, dtype=np.int64)
    lock = np.zeros(m, dtype=np.int64)
    idx0 = rng.integers(0, 3, m)
    for i in range(m):
        if rng.random() < 0.15:
            idx0[i] = 0
            continue                                # finished before the stretch: holds nothing
        last = int(rng.integers(0, k + 1))
        p0 = int(rng.integers(0, 200))
        ev0[i] = min(int(rng.integers(0, p0 + 1)) // page * page, max(0, p0 - keep) // page * page)
        lock[i] = int(rng.integers(0, 3)) * page if prefix else 0
        len0[i] = p0 + 1 + int(rng.integers(0, 8))
        cur, prev = p0, int(len0[i])
        for j in range(k):
            if j < last:
                member[j, i] = True
                if topup:   # up to the page-aligned target, nothing returned
                    lenres[j, i] = max(prev, -(-(cur + 6) // page) * page)
                else:       # a window reserved, part of it returned at processing
                    lenres[j, i] = max(prev, cur + 1) + int(rng.integers(0, 8))
                lenproc[j, i] = lenres[j, i] if topup else lenres[j, i] - int(rng.integers(0, lenres[j, i] - cur))
            else:
                lenres[j, i] = lenproc[j, i] = prev
            pre[j, i] = cur
            prev = int(lenproc[j, i])
            if j < last:
                cur = min(cur + int(rng.integers(0, 5)), prev - 1)
        f = last - int(rng.integers(0, 2))
        if 0 <= f < k and rng.random() < 0.6:
            fin[f, i] = True
    a = dict(used=int(rng.integers(0, 50)), page=page, window=window, keep=keep, interval=interval,
             by_forward=by_forward, first_step=first_step, len0=len0, ev0=ev0, lock=lock, idx0=idx0,
             lenres=lenres, lenproc=lenres if topup else lenproc, member=member, fin=fin, pre=pre)
    a["used"] += sum(-(-int(len0[i]) // page) * page - int(ev0[i]) + int(lock[i]) for i in range(m) if len0[i])
    # the function overwrites lenres/lenproc (one array under top-up) and reads pre less a shift
    if sums:
        lp = a["lenproc"].copy()
        got = stretch_swa(**dict(a, lenres=None, lenproc=lp, pre=pre - shift, pre_shift=shift,
                                 sums=(page_sums(a["lenres"].copy(), page), page_sums(lp.copy(), page))))
        assert np.array_equal(lp, a["lenproc"])
    else:
        lr = a["lenres"].copy()
        got = stretch_swa(**dict(a, lenres=lr, lenproc=lr if topup else a["lenproc"].copy(), pre=pre - shift,
                                 pre_shift=shift))
    ref = _reference_swa(a)
    for j, (check, res, after, e, idx) in enumerate(ref):
        assert (got.check[j], got.reserved[j], got.after[j]) == (check, res, after), j
        assert got.evicted_after(j + 1).tolist() == e and got.passes_after(j + 1).tolist() == idx, j


@pytest.mark.parametrize("fast_forward", [False, True])
def test_retracted_request_that_outgrows_the_swa_pool_is_refused_not_stalled(fast_forward: bool) -> None:
    """With chunked prefill off, a request retracted after it made output re-extends prompt
    + output; once that needs more SWA slots than the whole pool holds it can never be
    admitted again (0.5.23 SWAPrefillBudget.check_prefill): the run stops with
    UnschedulableRequest naming the request, not an idle loop."""
    server = {"max_running_requests": 16, "max_total_num_tokens": 2000, "chunked_prefill_size": -1,
              "max_prefill_tokens": 512, "speculative_algorithm": "none", "speculative_num_draft_tokens": 2,
              "admission_delay": "none", "enable_overlap_schedule": True, "sglang_semantics": "mi355x-dsv41",
              "semantics_rules": {}, "page_size": 1, "sliding_window_size": 1, "swa_full_tokens_ratio": 0.0173,
              "swa_eviction_interval": 6, "disable_radix_cache": False}
    workload = {"kind": "burst", "num_requests": 6, "input_len": {"kind": "uniform", "value": 1, "range_ratio": 0.5},
                "output_len": {"kind": "uniform", "value": 104, "range_ratio": 0.3}}
    sc = _scenario(server, workload, 0)
    with pytest.raises(UnschedulableRequest, match="re-extending .* SWA pool"):
        SimEngine(sc, tiny_profile(), 0, fast_forward=fast_forward).run()
