"""Hybrid sliding-window KV: a separate SWA pool whose per-request use is capped by the
window, budgeted as sglang 0.5.23 does (mem_cache/allocator/swa.py
``SWATokenToKVPoolAllocator``, mem_cache/prefill_budget.py ``SWAPrefillBudget``,
managers/schedule_batch.py ``maybe_evict_swa``, scheduler.py ``get_new_batch_prefill``'s
batch_is_full reset). Each test fails on the model without an SWA pool."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from specsched.sim.admission import make_policy
from specsched.sim.config import ServerArgs
from specsched.sim.plan import StepOutput
from specsched.sim.prefill_adder import PrefillAdder
from specsched.sim.request import Req, ReqStatus
from specsched.sim.scheduler import Scheduler, UnschedulableRequest

from specsched.cli import main
from tests.conftest import ROOT


def sched(**kw) -> Scheduler:
    args = dict(max_running_requests=16, max_total_num_tokens=100_000, chunked_prefill_size=4096,
                max_prefill_tokens=4096, sliding_window_size=128, swa_full_tokens_ratio=0.1,
                disable_radix_cache=True)
    args.update(kw)
    s = ServerArgs(**args)
    return Scheduler(s, make_policy(s))


def step(s: Scheduler, n: int = 1):
    """One pass, its results processed at once (non-overlapped driving)."""
    plan = s.schedule()
    if plan is None:
        return None
    out = {rid: 1 for rid in plan.rids[: plan.num_extend] if rid in plan.new_rids}
    out.update({rid: n for rid in plan.decode_rids})
    s.process_result(plan, StepOutput.from_mapping(plan, out))
    return plan


def swa_held(s: Scheduler) -> int:
    return sum(s.kv.swa_held(r) for r in s.reqs.values())


def test_pool_size_is_full_times_ratio_page_aligned():
    """pool_configurator.py ``_solve_pool_sizes``: swa = int(full x ratio), page-aligned."""
    assert ServerArgs(max_total_num_tokens=2_600_000, sliding_window_size=128,
                      swa_full_tokens_ratio=0.2784).swa_max_total_num_tokens == 723_840
    assert ServerArgs(max_total_num_tokens=1000, page_size=64, sliding_window_size=128,
                      swa_full_tokens_ratio=0.5).swa_max_total_num_tokens == 448
    assert ServerArgs().swa_max_total_num_tokens == 0  # no sliding window: no SWA pool


@settings(max_examples=80, deadline=None)
@given(total=st.integers(1_000, 2_000_000), page=st.sampled_from([1, 16, 64, 256]), window=st.integers(1, 4096),
       ratio=st.floats(1e-6, 1.0))
@example(total=400_000, page=64, window=128, ratio=0.0005)
@example(total=1250, page=1, window=1, ratio=0.001953125)   # 0.0024 was offered: int(1250 x 0.0024) = 2
def test_a_small_swa_pool_is_refused_with_the_users_arithmetic_and_a_ratio_that_passes(total, page, window, ratio):
    """A refused SWA pool shows int(full pool x ratio) as computed from the user's values,
    then its page-aligned size when that differs (was: the page-aligned size labelled as
    the int(), e.g. 192 for int(400000 x 0.0005) = 200), and the least ratio it names is
    accepted."""
    from specsched.sim.errors import FieldError

    total = max(total, page)
    kw = {"max_total_num_tokens": total, "page_size": page, "sliding_window_size": window,
          "chunked_prefill_size": max(page, 8192)}
    try:
        s = ServerArgs(swa_full_tokens_ratio=ratio, **kw)
    except ValueError as e:
        cause = e.errors()[0]["ctx"]["error"] if hasattr(e, "errors") else e
        assert isinstance(cause, FieldError) and cause.key == "server.swa_full_tokens_ratio"
        full = total // page * page
        raw = int(full * ratio)
        assert f"x {ratio}) = {raw} tokens" in cause.allowed
        aligned = raw // page * page
        assert (f"page-aligned to {aligned})" in cause.allowed) == (aligned != raw)
        m = re.search(r"a ratio >= ([0-9.e-]+)", cause.allowed)
        if m:
            assert ServerArgs(swa_full_tokens_ratio=float(m.group(1)), **kw).swa_max_total_num_tokens > window + page
        else:
            assert "no ratio <= 1" in cause.allowed
            with pytest.raises(ValueError):
                ServerArgs(swa_full_tokens_ratio=1.0, **kw)
    else:
        assert s.swa_max_total_num_tokens > window + page


def test_swa_use_per_request_is_capped_by_the_window():
    """``maybe_evict_swa`` / ``free_swa_out_of_window_slots``: a decoding request's SWA
    slots behind the window are freed once swa_eviction_interval have slid out, so its SWA
    use stays under window + interval + a step, while its full-pool use grows."""
    s = sched(swa_eviction_interval=32)
    s.add_request(Req(0, 1000, 400))
    step(s)                                   # prefill: 1000 slots in both pools
    assert s.kv.swa_used == 1000 == swa_held(s)
    for i in range(398):
        step(s)
        assert s.kv.swa_used == swa_held(s)   # INV-8 for the SWA pool
        if i >= 1:                            # the first decode pass evicts nothing
            assert s.kv.swa_used <= 128 + 32 + 2
    r = s.reqs[0]
    assert r.kv_allocated > 1300 and s.kv.swa_peak == 1001
    step(s)
    assert r.finished and s.kv.swa_used == 0 and s.kv.used == 0


def test_forward_interval_cadence_frees_every_nth_forward():
    """0.5.23 ``_swa_eviction_trigger``: the older forward-interval cadence (kept for AMD's
    MegaMoE DSV4 path) frees on every swa_eviction_interval-th forward only."""
    s = sched(swa_eviction_interval=50, semantics_rules={"swa_eviction_cadence": "forward_interval"})
    s.add_request(Req(0, 1000, 400))
    seen = []
    for _ in range(120):
        step(s)
        seen.append(s.kv.swa_used)
    drops = [i for i in range(1, len(seen)) if seen[i] < seen[i - 1]]
    assert drops and all(i % 50 == 0 for i in drops)   # seen[i] follows plan P_i


def test_swa_pool_is_paged():
    """mem_cache/allocator/swa.py ``SWATokenToKVPoolAllocator`` hands out whole pages in both
    pools, and ``free_swa_out_of_window_slots`` frees page-floored ranges: a request holds
    ceil_page(kv_len) - evicted SWA slots, and a decode pass takes a new page only when it
    crosses a page boundary (``new_tokens_required_next_decode``)."""
    s = sched(page_size=16, swa_eviction_interval=16, max_total_num_tokens=100_000)
    s.add_request(Req(0, 20, 200))
    step(s)                                   # prefill: 20 positions, 2 pages
    assert s.kv.swa_used == 32 == swa_held(s)
    r = s.reqs[0]
    for _ in range(150):
        before, need = s.kv.swa_used, s.kv.swa_decode_need([r], 1)
        assert need == (16 if r.kv_len % 16 == 0 else 0)
        step(s)
        assert s.kv.swa_used == swa_held(s) and s.kv.swa_used % 16 == 0
        assert s.kv.swa_used <= before + need
    # the window (128) plus the interval (16) and a page behind the newest position
    assert s.kv.swa_used <= 128 + 16 + 2 * 16


def test_prompt_tail_stays_locked_in_the_tree_until_the_request_leaves():
    """With the radix cache, the tree takes the prompt's whole pages once prefilled and locks
    the last page-aligned window for the request (mem_cache/unified_cache/components/swa.py
    ``_maybe_split_leaf_for_swa_lock``, ``acquire_component_lock``); nothing releases that
    lock while the request decodes (unified_radix_cache.py ``release_swa_prefix_lock`` only
    with SGLANG_OPT_RELEASE_PREFILL_SWA, off by default), and the request's own eviction
    stays above it (schedule_batch.py ``ReqKvInfo.swa_dead_lo``). So a long decode holds the
    locked tail plus its own window: lock + ceil_page(kv_len) - floor_page(pre - keep)."""
    p, w = 16, 24
    s = sched(page_size=p, sliding_window_size=w, swa_eviction_interval=8, disable_radix_cache=False,
              swa_full_tokens_ratio=0.5, max_total_num_tokens=20_000)
    s.add_request(Req(0, 100, 300))
    step(s)                                   # prefill 100: the tree takes 96, locks 32 of them
    r = s.reqs[0]
    assert s.kv.swa_used == 32 + 112 - 96 == swa_held(s)
    keep = 32                                 # ceil_page(max(window, page))
    for _ in range(250):
        step(s)
    pre = r.input_len + r.output_len - 1
    own = -(-r.kv_len // p) * p - max(96, (pre - keep) // p * p)
    assert s.kv.swa_used == 32 + own == swa_held(s)
    assert own <= keep + 2 * p and s.kv.swa_used > own   # the tail is still held at output 250
    while not r.finished:
        step(s)
    assert s.kv.swa_used == 0


@pytest.mark.parametrize(("page", "window", "chunk", "ratio"), [(4, 9, 256, 0.02), (16, 24, 64, 0.05), (1, 5, 32, 0.01)])
def test_a_chunked_prompt_holds_only_the_locked_window_and_its_last_chunk(page, window, chunk, ratio):
    """Between chunks "only the sliding window stays locked" (sglang 0.5.23
    mem_cache/prefill_budget.py ``SWAPrefillBudget._chunk_cap``): before the next pass is
    built, the chunked request's computed prefix enters the radix cache (scheduler.py
    ``get_next_batch_to_run`` -> ``stash_chunked_request`` -> ``checkpoint_kv_cache``), the
    tree's lock moves to the new leaf and covers its last ceil_page(window) tokens, and the
    SWA behind them is the tree's, evictable, counted free. So while it is chunked a request
    holds that lock plus its own pages from the cached page boundary on.

    The request here was retracted after 88 output tokens and re-extends prompt + output,
    more positions than the SWA pool has: holding every chunk's SWA it would park with its
    next chunk unschedulable and nothing else to free the pool (the model's livelock)."""
    s = sched(page_size=page, sliding_window_size=window, chunked_prefill_size=chunk, max_prefill_tokens=512,
              disable_radix_cache=False, swa_full_tokens_ratio=ratio, max_total_num_tokens=18_400,
              swa_eviction_interval=1)
    cap = s.kv.swa_capacity
    prompt = cap - 2 * page - 16                  # fits the pool; its re-extension does not
    r = Req(0, prompt, 200)
    r.output_len, r.retractions = 88, 1           # what a retraction leaves: output kept, no KV
    s.add_request(r)
    fill = r.fill_len
    assert fill > cap                             # the re-extension alone outgrows the pool
    lock = -(-window // page) * page
    chunks = 0
    for _ in range(2 * fill):
        pre = r.prefill_done
        plan = s.schedule()
        assert plan is not None, f"parked at {r.prefill_done} of {fill}, {s.kv.swa_available} SWA free"
        if r.status is not ReqStatus.PREFILLING:
            break
        chunks += 1
        cached = pre // page * page
        assert s.kv.swa_held(r) == -(-r.prefill_done // page) * page - cached + min(lock, cached)
        assert s.kv.swa_used == swa_held(s) <= cap
        out = {0: 1} if 0 in plan.new_rids else {}
        s.process_result(plan, StepOutput.from_mapping(plan, out))
    assert chunks >= 2 and r.prefill_done == fill
    while s.has_work:
        step(s)
    assert r.finished and s.kv.swa_used == 0


def _retracted_reextension(**kw):
    """A scheduler with the livelock case's pools (SWA 368 slots, window 9, pages of 4,
    chunks of 256) and request 0 retracted after 88 output tokens: it re-extends 432
    positions, more than the SWA pool holds."""
    s = sched(page_size=4, sliding_window_size=9, chunked_prefill_size=256, max_prefill_tokens=512,
              swa_full_tokens_ratio=0.02, max_total_num_tokens=18_400, swa_eviction_interval=1, **kw)
    r = Req(0, s.kv.swa_capacity - 24, 200)
    r.output_len, r.retractions = 88, 1
    s.add_request(r)
    assert r.fill_len > s.kv.swa_capacity
    return s, r


def test_without_the_radix_cache_an_extend_frees_the_swa_behind_its_chunk():
    """With the radix cache off nothing is inserted into a tree; preparing an extend batch
    frees each request's SWA behind its chunk's start instead (sglang 0.5.23
    mem_cache/allocation.py ``alloc_for_extend`` -> schedule_batch.py ``maybe_evict_swa``,
    the extend branch for a cache without prefix sharing -> common.py
    ``free_swa_out_of_window_slots``: positions up to prefix_len - window, page-floored). So
    the retracted request's re-extension, larger than the pool, takes every chunk."""
    s, r = _retracted_reextension(disable_radix_cache=True, enable_overlap_schedule=False)
    fill, w, p, evicted = r.fill_len, 9, 4, 0
    for _ in range(fill):
        pre = r.prefill_done
        plan = step(s)
        assert plan is not None, f"parked at {r.prefill_done} of {fill}, {s.kv.swa_available} SWA free"
        if not plan.num_extend:
            break
        evicted = max(evicted, max(pre - w, 0) // p * p)
        assert s.kv.swa_held(r) == -(-(pre + plan.extend_lens[0]) // p) * p - evicted
    assert r.prefill_done == fill and evicted > 0
    while s.has_work:
        step(s)
    assert r.finished and s.kv.swa_used == 0


def test_a_chunk_parked_for_swa_with_nothing_to_free_it_is_refused_not_stalled():
    """Under the overlap schedule a request's first two extend batches free no SWA (the
    previous chunk may still run: ``maybe_evict_swa`` skips extend_batch_idx < 2). Without
    the radix cache the retracted request's first two chunks (256 + 108) then fill the pool
    to 4 free slots, ``SWAPrefillBudget.available_chunk_tokens`` parks its next chunk, and
    only an extend batch could free its SWA: SGLang waits forever. The model stops with
    UnschedulableRequest naming the request, not an idle loop."""
    s, r = _retracted_reextension(disable_radix_cache=True, enable_overlap_schedule=True)
    with pytest.raises(UnschedulableRequest, match="request 0: its chunked prefill holds 364 SWA slots"):
        for _ in range(10):
            step(s)
    assert r.prefill_done == 364 and not s.running


def test_prefill_admission_charges_the_swa_estimate():
    """``SWAPrefillBudget.check_prefill`` / ``estimate_swa_kv_tokens``: a request is admitted
    only if extend beyond one window + min(extend + output, window) + a page is below the free
    SWA slots; running requests reserve nothing there."""
    a = PrefillAdder.start(100_000, [], 0.7, 16384, 16384, 1, swa=(3000, 128, 10_000))
    assert a.add_one_req(Req(0, 2000, 100)) is not None and len(a.can_run) == 1
    assert a.swa_rem == 3000 - (2000 - 128 + 128 + 1)
    assert a.add_one_req(Req(1, 1000, 100)).name == "NO_TOKEN"      # 1001 >= 999 free
    b = PrefillAdder.start(100_000, [], 0.7, 16384, 16384, 1)        # no SWA pool: admitted
    b.add_one_req(Req(0, 2000, 100))
    b.add_one_req(Req(1, 1000, 100))
    assert len(b.can_run) == 2


def test_a_prompt_that_never_fits_the_swa_pool_is_cut_to_what_is_free():
    """``SWAPrefillBudget._chunk_cap``: a request whose SWA peak is >= the pool's size is
    chunked to the free SWA slots minus its decode headroom."""
    a = PrefillAdder.start(100_000, [], 0.7, 16384, 16384, 1, swa=(5000, 128, 6000))
    a.add_one_req(Req(0, 8000, 100))
    assert a.can_run == [(a.can_run[0][0], 5000 - 100 - 1)] and a.new_chunked is not None


def test_decode_retracts_when_the_swa_pool_is_short():
    """``check_decode_capacity``: a decode needs its tokens free in both pools
    (``SWATokenToKVPoolAllocator.available_size`` = min(full, swa))."""
    s = sched(max_running_requests=4)
    for i in range(3):
        r = Req(i, 100, 500, output_len=5, status=ReqStatus.RUNNING)
        s.reqs[i] = r
        s.kv.reserve(r, 104)
        r.prefill_done = 100
        s.running.append(r)
    s.kv.reserve(Req(9, 1, 1), s.kv.swa_available - 2)      # the SWA pool has 2 slots left
    assert s.kv.available > 10_000
    s.schedule()
    assert s.num_retractions >= 1


def test_a_decode_short_of_swa_pages_after_retraction_says_so():
    """Under the older build's retraction stop (``decode_steps_headroom``: retract until 20
    tokens per kept request are free, min(full, swa) counted in tokens) the kept requests
    can still need more whole SWA pages than are free; the run stops naming the SWA pool
    and how many requests were kept, not a full pool with millions of tokens free."""
    s = sched(page_size=64, max_running_requests=4, sglang_semantics="mi355x-dsv41")
    for i, out in enumerate((9, 8, 1)):
        r = Req(i, 128 if i < 2 else 1, 500, output_len=out, status=ReqStatus.RUNNING)
        s.reqs[i] = r
        s.kv.reserve(r, 128 if i < 2 else 1)     # requests 0 and 1 end on a page boundary
        r.prefill_done = r.input_len
        s.running.append(r)
    s.kv.reserve(Req(9, 1, 1), s.kv.swa_available)            # the SWA pool is full
    with pytest.raises(UnschedulableRequest, match=r"the 2 requests retraction kept .* SWA slots .* "
                                                   r"\(128 needed, 64 free of the SWA pool's .*"
                                                   r"server.swa_full_tokens_ratio = \d+ x 0.1: raise.*"
                                                   r"a smaller server.page_size \(now 64"):
        s.schedule()


def test_batch_is_full_is_reset_every_pass_for_hybrid_swa():
    """scheduler.py ``get_new_batch_prefill``: ``if enable_priority_preemption or
    is_hybrid_swa: running_batch.batch_is_full = False``."""
    for window, latched in ((128, False), (None, True)):
        s = sched(sliding_window_size=window)
        r = Req(0, 100, 50, status=ReqStatus.RUNNING)
        s.reqs[0] = r
        s.kv.reserve(r, 100)
        r.prefill_done = 100
        s.running.append(r)
        s.batch_is_full = True
        s.add_request(Req(1, 100, 50))
        plan = s.schedule()
        assert (plan.num_extend == 0) == latched, window


@pytest.mark.parametrize(("cache", "chunks"), [(True, [989, 871, 140]), (False, [989, 10, 861, 10, 130])])
def test_a_prompt_longer_than_the_swa_pool_is_prefilled_in_chunks_capped_by_free_swa(cache, chunks):
    """sglang 0.5.23 validates a prompt only against the full pool; its SWA budget admits a
    prompt whose SWA peak never fits the pool with the chunk cut to the free SWA less its
    decode headroom (mem_cache/prefill_budget.py ``SWAPrefillBudget.check_prefill`` ->
    ``_chunk_cap``: 1000 - (min(10, 128) + 1) = 989), and each next chunk takes the free SWA
    less a page (``available_chunk_tokens``), since only the window stays held between
    chunks. With the radix cache the chunk enters the tree before the next pass (the lock
    keeps its last 128): 871, then the 140 left. Without it the extend batch frees behind
    prefix_len - window only after admission (``alloc_for_extend`` -> ``maybe_evict_swa``),
    so chunks alternate: 10 (989 held), 861 (138 held), 10, 130."""
    s = sched(swa_full_tokens_ratio=0.01, disable_radix_cache=not cache, enable_overlap_schedule=False)
    assert s.kv.swa_capacity == 1000
    r = Req(0, 2000, 10, ignore_eos=False)   # add_one_req's cut (an ignore_eos one is never cut: below)
    s.add_request(r)
    seen = []
    while not r.finished:
        plan = step(s)
        assert plan is not None, f"parked at {r.prefill_done}, {s.kv.swa_available} SWA free"
        if plan.num_extend:
            seen.append(plan.extend_lens[0])
        assert 0 <= s.kv.swa_used == swa_held(s) <= s.kv.swa_capacity
    assert seen == chunks and sum(chunks) == 2000
    assert r.finished and r.output_len == 10 and s.kv.swa_used == 0
    assert s.kv.swa_peak <= s.kv.swa_capacity


def test_a_prompt_the_swa_budget_never_admits_is_refused():
    """What SGLang never admits, even on an empty SWA pool, is refused at arrival (it would
    wait forever: ``check_prefill`` answers NO_TOKEN every pass): with chunked prefill off a
    prompt whose SWA peak is not below the pool (``swa_never_fits`` and no chunk limit to
    cap), and with it on a pool that leaves no page once the decode headroom is taken
    (``_chunk_cap`` <= 0). A prompt of the pool's size with chunking on is admitted."""
    s = sched(swa_full_tokens_ratio=0.01, chunked_prefill_size=-1)              # 1000 SWA slots
    s.add_request(Req(0, 998, 10, ignore_eos=False))     # peak 870 + 128 + 1 = 999 < 1000
    with pytest.raises(UnschedulableRequest, match=r"request 1: 999 prompt .* 1000 SWA slots .* chunked prefill off"):
        s.add_request(Req(1, 999, 10, ignore_eos=False))
    # an SWA pool of 144 > window 120 + page 16, chunks of 4096: every long prompt's peak is
    # >= the pool, and the first chunk is the pool less min(output, 120) + 16, page-floored
    s = sched(page_size=16, sliding_window_size=120, swa_full_tokens_ratio=0.00145, chunked_prefill_size=4096)
    assert s.kv.swa_capacity == 144
    s.add_request(Req(0, 5000, 100, ignore_eos=False))   # 144 - 100 - 16 = 28: a chunk of 16
    with pytest.raises(UnschedulableRequest, match="request 1: .* no page left"):
        s.add_request(Req(1, 5000, 120, ignore_eos=False))   # 144 - 120 - 16 = 8: no page


def test_an_ignore_eos_request_with_the_cache_off_skips_the_projection_and_is_never_cut():
    """sglang 0.5.23 ``add_one_req`` sends an ignore_eos request to ``add_one_req_ignore_eos``
    when the cache is off (a disabled cache is a ``UnifiedRadixCache`` with ``disable`` set,
    hybrid SWA too: mem_cache/registry.py ``default_radix_cache_factory``). For hybrid SWA
    that path skips the projection (``if not self.is_hybrid_swa``) and checks
    ``SWAPrefillBudget.can_allocate_prefill``: the raw extend's SWA peak at the chunk budget
    must be at most the free SWA (``<=``, where ``check_prefill`` asks ``<``), with no cut to
    the free SWA (``_chunk_cap``) for a peak that never fits."""
    from specsched.sim.prefill_adder import AddResult
    run = [Req(0, 10, 1000, prefill_done=10, status=ReqStatus.RUNNING)]
    # the projection of the non-SWA path refuses this one (2012 - 11 - 2 x 1000 = 1 <= 2) ...
    a = PrefillAdder.start(2012, run, 0.7, 10**6, -1, 1, ignore_eos_full_reservation=True, ignore_eos_path=True)
    assert a.add_one_req(Req(1, 10, 1000)) is AddResult.NO_TOKEN
    # ... the SWA path does not project: its SWA peak (10 + 128 + 1 = 139 of 5000 free) fits
    a = PrefillAdder.start(2012, run, 0.7, 10**6, -1, 1, ignore_eos_full_reservation=True, ignore_eos_path=True,
                           swa=(5000, 128, 6000))
    assert a.add_one_req(Req(1, 10, 1000)) is not AddResult.NO_TOKEN and len(a.can_run) == 1
    # a peak equal to the free SWA fits here (raw 999: 871 + 128 + 1 = 1000), not on add_one_req
    for eos_path, fits in ((True, True), (False, False)):
        a = PrefillAdder.start(100_000, [], 0.7, 16384, -1, 1, ignore_eos_path=eos_path, swa=(1000, 128, 6000))
        a.add_one_req(Req(1, 999, 10))
        assert bool(a.can_run) is fits, eos_path
    # a peak that never fits the pool waits (add_one_req would cut it to 5000 - 100 - 1)
    a = PrefillAdder.start(100_000, [], 0.7, 16384, 16384, 1, ignore_eos_path=True, swa=(5000, 128, 6000))
    assert a.add_one_req(Req(0, 8000, 100)) is AddResult.NO_TOKEN and not a.can_run
    # the Scheduler takes that path for hybrid SWA with the cache off, and refuses at arrival
    # what would wait forever there (chunks of 4096, 1000 SWA slots: 1872 + 128 + 1 > 1000)
    s = sched(swa_full_tokens_ratio=0.01)
    with pytest.raises(UnschedulableRequest, match=r"request 0: 2000 prompt .* more than .* never cut"):
        s.add_request(Req(0, 2000, 10))
    s.add_request(Req(1, 2000, 10, ignore_eos=False))   # add_one_req cuts it: admitted
    s = sched(swa_full_tokens_ratio=0.01, disable_radix_cache=False)
    s.add_request(Req(0, 2000, 10))                     # the cache on: add_one_req, cut


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), inp=st.integers(1, 600), out=st.integers(1, 80), ratio=st.floats(0.05, 0.5),
       interval=st.integers(1, 64), spec=st.booleans(), cache=st.booleans(), long=st.integers(1, 8),
       chunk=st.sampled_from([256, 4096]), overlap=st.booleans(), eos=st.booleans())
@example(n=1, inp=600, out=10, ratio=0.05, interval=1, spec=False, cache=True, long=8, chunk=4096, overlap=True,
         eos=False)
@example(n=1, inp=600, out=10, ratio=0.05, interval=1, spec=False, cache=False, long=8, chunk=4096, overlap=False,
         eos=False)
@example(n=3, inp=600, out=10, ratio=0.05, interval=1, spec=False, cache=False, long=1, chunk=256, overlap=False,
         eos=True)
@example(n=2, inp=538, out=3, ratio=0.05078125, interval=1, spec=False, cache=False, long=5, chunk=256, overlap=True,
         eos=False)
def test_swa_pool_invariants(n, inp, out, ratio, interval, spec, cache, long, chunk, overlap, eos):
    """INV-2/INV-8 for the SWA pool: 0 <= swa_used <= swa_capacity after every pass, equal to
    the requests' SWA slots; empty once every request finished. The first request's prompt
    is up to 8 x 600 tokens, longer than SWA pools under 4800: it is prefilled in chunks cut
    to the free SWA (``SWAPrefillBudget._chunk_cap``, the two examples: 4800 tokens, a pool
    of 1000, radix cache on and off), and every request finishes. The one refusal allowed
    on the way: without the radix cache under the overlap schedule a request's first two
    extend batches free no SWA, and a chunk parked with nothing running is refused (SGLang
    waits forever there). With ``eos`` the requests are sent with ignore_eos: with the cache
    off they take ``add_one_req_ignore_eos``, which never cuts, so a first prompt whose SWA
    peak exceeds the pool is refused at arrival instead. A request may also be aborted out
    of memory (sglang 0.5.23 ``ScheduleBatch.retract_decode``: the last request of the
    batch cannot get its next decode's SWA even alone), the last example: the long prompt
    decodes alone while the second request's chunks fill the SWA pool to its last slot
    (a continuing chunk takes the free SWA less a page), and the decode check comes before
    that pass's SWA eviction; SGLang aborts it there too."""
    kw = dict(speculative_algorithm="dspark", speculative_num_draft_tokens=4) if spec else {}
    s = sched(max_total_num_tokens=20_000, swa_full_tokens_ratio=ratio, swa_eviction_interval=interval,
              disable_radix_cache=not cache, chunked_prefill_size=chunk, enable_overlap_schedule=overlap, **kw)
    try:
        s.add_request(Req(0, inp * long, out, ignore_eos=eos))   # refused only on the no-cut path
        for i in range(1, n):
            s.add_request(Req(i, inp, out, ignore_eos=eos))
    except UnschedulableRequest as e:
        assert eos and not cache and "never cut" in str(e), e
        return
    for _ in range(20_000):
        if not s.has_work:
            break
        try:
            step(s, 2 if spec else 1)
        except UnschedulableRequest as e:
            assert not cache and overlap and "its chunked prefill holds" in str(e), e
            return
        assert 0 <= s.kv.swa_used <= s.kv.swa_capacity
        assert s.kv.swa_used == swa_held(s)
    assert not s.has_work and s.kv.swa_used == 0
    assert all(r.finished or (r.rid in s.oom_aborted and r.status is ReqStatus.FINISHED) for r in s.reqs.values())


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("swa_full_tokens_ratio", "1.5", "must be <= 1"),
    ("swa_full_tokens_ratio", "0.00004", "sliding_window_size"),
    ("swa_full_tokens_ratio", "0.0002", "no page left"),   # a pool of 512: 512 - 128 - 256 < a page
    ("semantics_rules", "{swa_eviction_cadence: sometimes}", "swa_eviction_cadence"),
])
def test_bad_swa_input_is_one_line_and_exit_2(tmp_path, capsys, key, value, allowed):
    src = (ROOT / "scenarios" / "burst256-ht.yaml").read_text()
    src = "\n".join(x for x in src.splitlines() if not x.startswith(f"  {key}:"))  # the cell sets some
    src = src.replace("server:\n", f"server:\n  {key}: {value}\n", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text(src)
    assert main(["run", str(bad), "--out", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(bad) in err and allowed in err and (key in err or "workload.input_len" in err), err
    assert not (tmp_path / "res").exists()


def test_a_scenario_whose_prompts_outgrow_the_swa_pool_is_checked_as_sglang_admits_them():
    """The check before a run (sim/pool_fit.py ``_check_swa_pool``) refuses only what SGLang's
    SWA budget never admits. The HT burst (prompts up to 4300 tokens, 256-token pages,
    window 128, chunks of 16384) on an SWA pool of 2560 tokens: SGLang admits each prompt
    with its first chunk cut to 2560 - 128 - 256 = 2176 -> 2048 (``_chunk_cap``) and runs
    it; with chunked prefill off a prompt must fit whole and never does: one line naming
    workload.input_len and chunked_prefill_size."""
    from specsched.sim.config import load_scenario
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_fits

    sc = load_scenario(ROOT / "scenarios" / "burst256-ht.yaml")
    small = {**sc.server.model_dump(), "swa_full_tokens_ratio": 0.001}
    sc = sc.model_copy(update={"server": ServerArgs.model_validate(small)})
    assert sc.server.swa_max_total_num_tokens == 2560
    check_fits(sc)
    off = sc.model_copy(update={"server": ServerArgs.model_validate({**small, "chunked_prefill_size": -1})})
    with pytest.raises(ConfigError, match=r"workload.input_len = \d+: .*SWA pool of 2560 .*"
                                          r"server.chunked_prefill_size is -1") as e:
        check_fits(off)
    assert "\n" not in str(e.value)


def _burst(**server):
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import SimEngine

    sc = load_scenario(ROOT / "scenarios" / "burst256-ht.yaml")
    sc = sc.model_copy(update={"server": ServerArgs.model_validate({**sc.server.model_dump(), **server})})
    eng = SimEngine(sc)
    eng.run()
    return sc, eng


def test_reference_ht_burst_swa_pool_of_724k_peaks_near_28_percent_without_retraction():
    """The MI355X reference (docs/reference-data.md, System A): the 724K-token SWA pool
    peaks at about 28 % on the 256 x 4K burst and nothing retracts. The cell carries that
    pool, DeepSeek-V4's 256-token pages (arg_groups/model_overrides/deepseek_v4.py) and its
    window of 128; each request then holds its locked prompt tail (256) plus about two pages
    of its own window. Without pages and the locked tail the model peaked at 20 %."""
    sc, eng = _burst()
    assert sc.server.page_size == 256 and sc.server.swa_max_total_num_tokens == 723_968
    kv = eng.sched.kv
    assert eng.sched.num_retractions == 0
    assert 0.25 * kv.swa_capacity < kv.swa_peak <= 0.31 * kv.swa_capacity


def test_older_branch_230k_swa_pool_retracts_under_the_forward_cadence():
    """The reference's older branch had a 230K SWA pool and retracted on the same burst. With
    the forward-interval eviction cadence (sglang 0.5.23 schedule_batch.py
    ``_swa_eviction_trigger``: the older cadence, every 128th forward for every request),
    all requests accumulate about 128 verify cycles of tokens between evictions at once, and
    the paged pool peaks above 230K: the burst retracts. The same pool under the token
    cadence (the measured build's) peaks at about 90 % and does not; the 724K pool does not
    retract under either."""
    ratio = 230_000 / 2_600_000
    _, older = _burst(swa_full_tokens_ratio=ratio, semantics_rules={"swa_eviction_cadence": "forward_interval"})
    assert older.sched.num_retractions > 0 and older.sched.kv.swa_peak == older.sched.kv.swa_capacity
    _, current = _burst(swa_full_tokens_ratio=ratio)
    assert current.sched.num_retractions == 0 and current.sched.kv.swa_peak > 0.8 * current.sched.kv.swa_capacity
    _, big = _burst(semantics_rules={"swa_eviction_cadence": "forward_interval"})
    assert big.sched.num_retractions == 0


# --------------------------------------------------------------- prefix hits (radix cache on)
def _toks(*parts) -> np.ndarray:
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])


def test_a_prefix_hit_reserves_its_extend_and_the_prefix_window_lock_not_the_prefix():
    """sglang 0.5.23 allocates a prefix-hit request's extend only (mem_cache/allocation.py
    ``alloc_for_extend``; the prefix's indices are the tree's) and its SWA budget charges the
    same (mem_cache/prefill_budget.py ``estimate_swa_kv_tokens`` of the extend, with the
    prefix's window pinned: unified_cache/components/swa.py ``acquire_component_lock``).
    The reservation of a request matching 992 cached positions with page 16 and window 24
    takes the prefix's 32-token window lock plus 208 new positions, never the 1200 of the
    whole sequence, and stays within what admission checked (lock + the estimate)."""
    p, w = 16, 24
    s = sched(page_size=p, sliding_window_size=w, disable_radix_cache=False, swa_full_tokens_ratio=0.5,
              max_total_num_tokens=20_000)
    base = np.arange(1000)
    s.add_request(Req(0, 1000, 4, tokens=_toks(base)))
    while s.has_work:
        step(s)
    s.add_request(Req(1, 1200, 10, tokens=_toks(base, np.arange(5000, 5200))))
    plan = s.schedule()
    r = s.reqs[1]
    assert plan.prefix_lens[0] == r.cached_len == 992 and plan.extend_lens[0] == 208
    assert s.kv.swa_used == swa_held(s) == 32 + 208
    assert s.kv.swa_prefix_lock(992) == 32
    from specsched.sim.prefill_adder import swa_peak_tokens
    assert s.kv.swa_used <= 32 + swa_peak_tokens(208, 10, 4096, w, p)
    s.process_result(plan, StepOutput.from_mapping(plan, {1: 1}))
    while s.has_work:
        step(s)
        assert s.kv.swa_used == swa_held(s)
    assert s.kv.swa_used == 0 and r.finished


def test_a_prefix_hit_whose_extend_fits_only_without_its_lock_is_refused_in_one_line():
    """An SWA pool of 256 (page 16, window 24): a prompt of 1000 runs in chunks; then a
    request matching its 992 cached positions extends 208 more, an SWA peak of 224
    (``estimate_swa_kv_tokens``), below the pool so ``_chunk_cap`` never cuts it, but not
    below the 224 left beside its pinned 32-token window (``SWAPrefillBudget.check_prefill``
    with the prefix locked): with nothing running SGLang waits forever. The simulator
    refuses it in one line naming the scenario keys; it must never reserve the prefix's
    1200 positions (the bug: KVPoolExhausted with a traceback)."""
    p, w = 16, 24
    s = sched(page_size=p, sliding_window_size=w, disable_radix_cache=False, max_total_num_tokens=20_000,
              swa_full_tokens_ratio=256 / 20_000)
    assert s.kv.swa_capacity == 256
    base = np.arange(1000)
    s.add_request(Req(0, 1000, 4, tokens=_toks(base)))
    while s.has_work:
        step(s)
    s.add_request(Req(1, 1200, 10, tokens=_toks(base, np.arange(5000, 5200))))
    with pytest.raises(UnschedulableRequest, match=r"request 1: .*locks 32 .*server\.swa_full_tokens_ratio"
                                                   r".*server\.sliding_window_size") as e:
        step(s)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("scenario", "extra"), [
    ("multi-turn-example", []),
    ("trace-example", ["--arm", "mooncake", "--set", "workload.num_requests=20"]),
])
def test_hybrid_swa_with_the_radix_cache_runs_prefix_sharing_workloads(tmp_path, capsys, scenario, extra):
    """The reported crash: window 128, swa_full_tokens_ratio 0.01, radix cache on, prompts that
    reuse cached prefixes (multi-turn histories; the Mooncake trace's shared system prompts).
    Admission charged a prefix hit's extend while the reservation took its whole sequence
    in the SWA pool: ``KVPoolExhausted`` with a traceback. Both now run to the end."""
    out = tmp_path / "res"
    rc = main(["run", scenario, *extra, "--set", "server.sliding_window_size=128",
               "--set", "server.swa_full_tokens_ratio=0.01", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err, err
    assert (out / "summary.json").exists() or any(out.iterdir())


def test_a_multi_turn_run_on_an_swa_pool_too_small_for_a_turn_says_so_in_one_line(tmp_path, capsys):
    """An SWA pool of 1300 (ratio 0.0005): a later turn's new text plus its history's locked
    window never fits beside nothing: one line, exit 2, naming the keys (no stall)."""
    rc = main(["run", "multi-turn-example", "--set", "server.sliding_window_size=128",
               "--set", "server.swa_full_tokens_ratio=0.0005", "--out", str(tmp_path / "res")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert "Traceback" not in "\n".join(err) and "server.swa_full_tokens_ratio" in err[-1], err


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 10), shared=st.integers(0, 700), suffix=st.integers(1, 300), out=st.integers(1, 60),
       ratio=st.floats(0.02, 0.5), page=st.sampled_from([1, 4, 16]), window=st.integers(4, 160),
       gap=st.integers(0, 30), chain=st.booleans(), chunk=st.sampled_from([128, 4096]), spec=st.booleans(),
       overlap=st.booleans())
@example(n=4, shared=600, suffix=200, out=20, ratio=0.05, page=16, window=128, gap=10, chain=True, chunk=4096,
         spec=False, overlap=True)
def test_swa_pool_invariants_with_shared_prefixes(n, shared, suffix, out, ratio, page, window, gap, chain,
                                                  chunk, spec, overlap):
    """INV-2/INV-8 for the SWA pool with the radix cache on and prompts that share prefixes:
    a generated shared prefix (``chain`` False: every request is the shared prefix plus its
    own suffix) or a multi-turn chain (``chain`` True: request i resends request i-1's
    prompt and adds its suffix). Requests arrive every ``gap`` passes, so later ones hit
    what earlier ones cached. No reservation exceeds the free SWA (no KVPoolExhausted),
    0 <= swa_used <= swa_capacity and swa_used equals the requests' SWA slots after every
    pass, and every request finishes; the one refusal allowed is the one-line error for a
    head request that cannot fit beside its own prefix lock on an idle SWA pool."""
    kw = dict(speculative_algorithm="dspark", speculative_num_draft_tokens=4) if spec else {}
    s = sched(max_total_num_tokens=20_000, swa_full_tokens_ratio=ratio, page_size=page, sliding_window_size=window,
              disable_radix_cache=False, chunked_prefill_size=chunk, enable_overlap_schedule=overlap, **kw)
    rng = np.random.default_rng(n * 1000 + shared)
    prefix = rng.integers(0, 50_000, shared)
    reqs, prev = [], prefix
    for i in range(n):
        toks = _toks(prev if chain else prefix, rng.integers(50_000, 100_000, suffix))
        reqs.append(Req(i, len(toks), out, tokens=toks))
        prev = toks
    passes = 0
    for _ in range(20_000):
        while reqs and passes >= gap * reqs[0].rid:
            try:
                s.add_request(reqs.pop(0))
            except UnschedulableRequest:
                return                      # too long for the SWA pool at all (checked elsewhere)
        if not s.has_work and not reqs:
            break
        passes += 1
        try:
            step(s, 2 if spec else 1)
        except UnschedulableRequest as e:
            assert "server.swa_full_tokens_ratio" in str(e), e
            assert not s.running and s.kv.swa_used == 0
            return
        assert 0 <= s.kv.swa_used <= s.kv.swa_capacity
        assert s.kv.swa_used == swa_held(s)
    assert not s.has_work and not reqs and s.kv.swa_used == 0
    assert all(r.finished for r in s.reqs.values())


def test_only_one_request_is_cut_per_pass_when_the_swa_cap_leaves_chunk_budget():
    """An SWA cut (``_chunk_cap``) leaves chunk budget, and a second prompt that never fits
    the pool was cut in the same pass; the first, no longer the chunked request, joined the
    running batch after one partial chunk and its SWA eviction freed slots it never held
    (gpt-oss-120b on an H100 with swa_full_tokens_ratio 0.01 ended in 'stretch SWA: -10994
    in use', or stalled step by step with a request lost). SGLang 0.5.23 cuts both and decodes
    the first from its partial prompt (scheduler.py takes only the last ``new_chunked_req``);
    the model keeps one chunked request, as before SWA."""
    a = PrefillAdder.start(100_000, [], 0.7, 16384, 16384, 1, swa=(5000, 128, 6000))
    a.add_one_req(Req(0, 8000, 100))                     # cut to 4899; 100 SWA slots left
    assert a.add_one_req(Req(1, 8000, 10)).name == "OTHER"   # would be cut to 89
    assert [r.rid for r, _ in a.can_run] == [0] and a.new_chunked.rid == 0
    s = sched(max_total_num_tokens=20_000, swa_full_tokens_ratio=0.05, disable_radix_cache=False)
    for i in range(4):
        s.add_request(Req(i, 3000, 100 - 30 * i))   # shorter outputs: smaller headroom, room for a second cut
    for _ in range(20_000):
        if not s.has_work:
            break
        step(s)
        assert 0 <= s.kv.swa_used <= s.kv.swa_capacity and s.kv.swa_used == swa_held(s)
        assert all(r.prefill_done >= r.input_len for r in s.running)   # nothing decodes a partial prompt
    assert all(r.finished for r in s.reqs.values())
