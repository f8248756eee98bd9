"""Whether one request can ever run on one server: its KV pool (and a hybrid
sliding-window model's SWA pool), its speculative KV reservations, a disaggregated decode
server's preallocation, and the server's prompt limit (``max_req_input_len``).

These are the rules the scheduler meets mid-run (:meth:`Scheduler.add_request`,
``DecodeMemory._retract``, ``Disagg._refuse_unpreallocatable``, the SWA admission and
top-up checks), written so that a request that would stop a run partway (SGLang keeps it
waiting for ever) or that SGLang would abort out of memory every time is refused before the
first event with the field at fault: :func:`check_request_pool` is the refusal of one
request, :func:`never_fit_rows` the same rules vectorized over a trace's rows. Each rule
cites the SGLang 0.5.23 function it follows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from specsched.sim.errors import ConfigError
from specsched.sim.kv_ledger import KVLedger, last_top_up_target
from specsched.sim.prefill_adder import (
    CLIP_MAX_NEW_TOKENS,
    ceil_page,
    swa_never_admitted,
    swa_peak_tokens,
)
from specsched.sim.request import Req
from specsched.sim.scheduler_disagg import prealloc_need
from specsched.sim.server_args import swa_pool_tokens

if TYPE_CHECKING:
    pass


def never_fit_rows(srv, ins: np.ndarray, outs: np.ndarray, ignore_eos: bool = True,
                   decode: bool = False) -> np.ndarray:
    """Which requests (prompt ``ins``, output ``outs``, token arrays) a server with
    arguments ``srv`` can never run, vectorized over the rows: exactly those
    :func:`check_request_pool` refuses (and, with ``decode``, :func:`check_decode_prealloc`), which
    are those the scheduler refuses when they arrive or finds stuck alone:
    :meth:`Scheduler.add_request` (page-rounded prompt + output clipped at
    CLIP_MAX_NEW_TOKENS + a page, and the window rule's in-flight verify slots
    (:func:`inflight_slots`), reach the pool; or the top-up rule's last top-up passes it,
    :func:`_top_up_past_pool`, or its first top-up passes the SWA pool,
    :func:`_swa_top_up_past_pool`),
    a prompt of ``pool - 6`` tokens or more (SGLang aborts it: :data:`INPUT_MARGIN`),
    ``_refuse_never_swa_admitted`` (sglang 0.5.23 mem_cache/prefill_budget.py
    ``SWAPrefillBudget.check_prefill`` never admits it), ``DecodeMemory._retract`` (prompt +
    output outgrow the pool by the last token) and ``Disagg._refuse_unpreallocatable``.

    Returns:
        A bool array, True for a row that can never run.
    """
    page, cap = srv.page_size, srv.max_total_num_tokens
    ahead = inflight_slots(srv)
    paged = -(-ins // page) * page
    new = np.minimum(outs, CLIP_MAX_NEW_TOKENS)
    bad = ((paged + page + ahead + new >= cap) | (ins + outs > cap) | (ins > longest_pool_prompt(srv))
           | _top_up_past_pool(srv, ins, outs) | _swa_top_up_past_pool(srv, ins, outs))
    if _ignore_eos_admits(srv, ignore_eos):
        bad |= _ignore_eos_never_admitted(srv, paged, outs)
    if decode:
        bad |= np.maximum(paged + srv.num_reserved_decode_tokens, ins + new) > cap   # prealloc_need
    if srv.swa_max_total_num_tokens:
        # SGLang's SWA admission rule is scalar: once per distinct (prompt, clipped output) of
        # the rows whose SWA peak can reach the pool (swa_peak_tokens is at most the larger of
        # the tokens allocated and the window, plus a page)
        eos_path = ignore_eos and srv.disable_radix_cache
        c = srv.chunked_prefill_size
        chunk = None if c <= 0 else c // srv.attn_dp_size
        extend = ins if eos_path else paged
        allocated = extend if chunk is None else np.minimum(extend, chunk)
        left = np.flatnonzero(~bad & (np.maximum(allocated, srv.sliding_window_size) + page >= srv.swa_max_total_num_tokens))
        if len(left):
            pairs, inverse = np.unique(np.stack([ins[left], new[left]], axis=1), axis=0, return_inverse=True)
            never = np.array([swa_never_admitted(int(i) if eos_path else ceil_page(int(i), page), int(o), chunk,
                                                 srv.sliding_window_size, page, srv.swa_max_total_num_tokens,
                                                 ignore_eos_path=eos_path) for i, o in pairs], dtype=bool)
            bad[left] |= never[inverse.reshape(-1)]
        # a chunked prompt parked for want of SWA (lone_chunk_parked) holds at least the free
        # SWA less a page when it parks, and at most its prompt
        left = np.flatnonzero(~bad & (ins + page >= srv.swa_max_total_num_tokens) & (ins >= 1))
        if len(left) and srv.disable_radix_cache and srv.chunked_prefill_size > 0:
            pairs, inverse = np.unique(np.stack([ins[left], new[left]], axis=1), axis=0, return_inverse=True)
            parked = np.array([lone_chunk_parked(srv, int(i), int(o), ignore_eos=ignore_eos) is not None
                               for i, o in pairs], dtype=bool)
            bad[left] |= parked[inverse.reshape(-1)]
    return bad


def _ignore_eos_admits(srv, ignore_eos: bool) -> bool:
    """Whether a server with arguments ``srv`` admits a request sent with ``ignore_eos`` through
    ``add_one_req_ignore_eos`` with its projection: the prefix cache off (sglang 0.5.23
    ``add_one_req``), not a hybrid-SWA model (it skips the projection), not a disaggregated
    decode server (it preallocates instead: disaggregation/decode.py ``DecodePreallocQueue``)."""
    return (ignore_eos and srv.disable_radix_cache and not srv.swa_max_total_num_tokens
            and srv.disaggregation_mode != "decode")


def _ignore_eos_never_admitted(srv, paged: Any, outs: Any) -> Any:
    """Whether an ignore_eos request with the prefix cache off (page-rounded prompt ``paged``,
    output ``outs``; scalars or arrays) is never admitted, alone on an empty server, by
    sglang 0.5.23 schedule_policy.py ``PrefillAdder.add_one_req_ignore_eos``
    (:meth:`sim.prefill_adder.PrefillAdder.add_one_req_ignore_eos`): its projection keeps
    ``IGNORE_EOS_RESERVE_TOKENS`` free beyond the prompt, a page and the whole output, so the
    pool must exceed ``paged + page + output + 1``. SGLang's own cut of max_new_tokens
    (:func:`output_cut`: ``pool - paged - page - 1``) leaves exactly one token short of that:
    such a request waits for ever (a hybrid-SWA model skips the projection)."""
    from specsched.sim.prefill_adder import IGNORE_EOS_RESERVE_TOKENS

    return paged + srv.page_size + outs + IGNORE_EOS_RESERVE_TOKENS >= srv.max_total_num_tokens


def first_refusal(srv, where: str, i: int, o: int, ignore_eos: bool, decode: bool) -> ConfigError:
    """The refusal :func:`check_request_pool` (or :func:`check_decode_prealloc`) gives a request
    that :func:`never_fit_rows` marks."""
    try:
        check_request_pool("", srv, where, i, o, ignore_eos)
        if decode:
            check_decode_prealloc("", srv, i, o)
    except ConfigError as e:
        return e
    raise AssertionError(f"never_fit_rows marks a request of {i} + {o} tokens that {where} holds")


def inflight_slots(srv) -> int:
    """KV slots beside a request's page-rounded prompt, output and page that the scheduler
    asks free before it admits the request (:meth:`Scheduler.add_request`): under the older
    window rule of speculative decoding (``spec_kv_reservation: window``, each verify pass
    reserves its window), the verify slots of the two passes the overlap loop keeps in
    flight, ``2 x spec_window``; 0 otherwise. Without speculative decoding SGLang 0.5.23's
    admission charges nothing beyond the prompt, the output and a page (schedule_policy.py
    ``PrefillAdder.add_one_req``), and neither does the simulated one: a lone request holds
    at most prompt + output slots (its finishing step is not run again, scheduler.py
    ``_reqs_finishing_inflight``), below what the cut leaves (:func:`output_cut`). Under the
    top-up rule the bound is the last top-up (:func:`_top_up_past_pool`)."""
    window_rule = srv.spec_window > 1 and srv.rules.spec_kv_reservation != "topup"
    return 2 * srv.spec_window if window_rule else 0


def _top_up_past_pool(srv, ins, outs):
    """Whether a request (prompt ``ins``, output ``outs``; ints or int arrays) running alone
    asks, at its last verify pass, more KV than the pool holds under the top-up rule
    (:func:`sim.kv_ledger.last_top_up_target`): SGLang 0.5.23 then aborts it out of memory
    (schedule_batch.py ``retract_decode``); False without the top-up rule."""
    if not srv.spec_kv_reserve or srv.rules.spec_kv_reservation != "topup":
        return np.zeros_like(outs, dtype=bool) if isinstance(outs, np.ndarray) else False
    past = last_top_up_target(ins, outs, srv.spec_kv_reserve, srv.page_size) > srv.max_total_num_tokens
    return past & (outs >= 2)


def _lone_outputs(srv) -> int:
    """Outputs past which :func:`lone_swa_top_up` asks no more: the held SWA span repeats
    within a window and a few pages of tokens plus an eviction interval of passes (the
    interval counts tokens, or passes under the forward cadence; a pass commits
    ``spec_window`` tokens)."""
    k = srv.spec_window
    return (srv.sliding_window_size or 0) + 4 * srv.page_size + k * (srv.swa_eviction_interval + 4)


def lone_swa_top_up(srv, i: int, o: int) -> tuple[int, int]:
    """(SWA slots held, SWA slots needed) at the verify pass where a request with a prompt of
    ``i`` tokens and an output of ``o``, alone on the server, asks the SWA pool the most under
    the top-up rule: the sum the scheduler's decode check compares with the SWA pool
    (:meth:`Scheduler._decode_fits`: the pass's new pages, :meth:`KVLedger.swa_decode_need`,
    against what is free before that pass's SWA eviction). Built with the scheduler's own
    ledger calls, no second formula: the prompt is reserved chunk by chunk
    (``chunked_prefill_size`` per rank, whole with chunking off), each extend freeing the SWA
    behind its window first with the radix cache off (:meth:`KVLedger.evict_swa_extend`),
    the prompt handed to the tree with it on (:meth:`KVLedger.swa_prompt_cached`); then each
    pass checks, evicts behind the window (:meth:`KVLedger.evict_swa`) and tops the request
    up to ``ceil_page(committed + spec_kv_reserve)`` (:meth:`KVLedger.top_up`), every pass
    committing its whole verify window (``spec_window`` tokens: full acceptance, the most a
    pass moves the top-up target ahead of the last eviction, so the largest ask any
    acceptance makes), until the held span repeats (window, eviction interval and a few
    pages of passes) or the output ends. A first chunk the scheduler cuts to the free SWA
    (``_chunk_cap``) is not followed: it only frees more behind the window. (0, 0) without
    an SWA pool or a second output token (with 1, no pass is built). Under the older window
    rule (``spec_kv_reservation: window``, and plain decoding: a window of one token) each
    pass reserves its window instead of a top-up (:meth:`KVLedger.reserve_window`), checked
    the same way (:meth:`KVLedger.swa_decode_need`). Under the overlap schedule each pass is
    built before the previous one's result is processed (managers/scheduler.py
    ``event_loop_overlap``), so its check, eviction and top-up see the output a pass behind."""
    if not srv.swa_max_total_num_tokens or o < 2:
        return 0, 0
    topup = bool(srv.spec_kv_reserve) and srv.rules.spec_kv_reservation == "topup"
    i, page = int(i), srv.page_size
    cache = not srv.disable_radix_cache
    kv = KVLedger(1 << 62, srv.spec_kv_reserve if topup else 0, page, swa_capacity=1 << 62, window=srv.sliding_window_size or 0,
                  swa_interval=srv.swa_eviction_interval, prefix_sharing=cache,
                  swa_by_forward=srv.rules.swa_eviction_cadence == "forward_interval", paged=True)
    c = srv.chunked_prefill_size
    chunk = i if c <= 0 else max(1, c // srv.attn_dp_size)
    overlap = max(c, 0) if srv.enable_overlap_schedule else None
    r = Req(0, i, int(o))
    forward = 0
    while r.prefill_done < i:
        n = min(chunk, i - r.prefill_done)
        if not cache:
            kv.evict_swa_extend(r, r.prefill_done, overlap)
        kv.reserve(r, n)
        r.prefill_done += n
        forward += 1
    if cache:
        kv.swa_prompt_cached(r)
    r.output_len = 1   # the prefill's token
    worst, k, last = (0, 0), srv.spec_window, min(int(o), _lone_outputs(srv))
    lagged, lag = srv.enable_overlap_schedule, 0
    while r.output_len < last:
        held, need = kv.swa_held(r), kv.swa_decode_need([r], k)
        if held + need > sum(worst):
            worst = (held, need)
        kv.evict_swa([r], forward)
        if topup:
            kv.top_up([r])
        else:
            kv.reserve_window([r], k)
        # under the overlap schedule the next pass is built before this one's result is
        # processed: its check, eviction and top-up see the output one pass behind
        r.output_len += lag if lagged else k
        lag = k
        forward += 1
    return worst


def _swa_top_up_past_pool(srv, ins, outs):
    """Whether a request (prompt ``ins``, output ``outs``; ints or int arrays) running alone
    can never get its first verify pass's SWA slots: what it holds and what the pass takes
    (:func:`lone_swa_top_up`) pass the SWA pool. SGLang 0.5.23 checks the same pass against
    min(full, SWA) free slots (mem_cache/allocator/base.py ``check_decode_capacity`` with
    mem_cache/allocator/swa.py ``SWATokenToKVPoolAllocator.available_size``) and, with the
    request alone, aborts it out of memory (managers/schedule_batch.py
    ``ScheduleBatch.retract_decode``); the simulator stops the run there
    (UnschedulableRequest). Needs an output of 2 or more (with 1, no pass is built)."""
    swa = srv.swa_max_total_num_tokens
    if isinstance(outs, np.ndarray):
        if not sum(lone_swa_top_up(srv, 1, 2)):   # no SWA pool (the need is a page or more with one)
            return np.zeros(outs.shape, dtype=bool)
        bad = np.zeros(outs.shape, dtype=bool)
        last, page = np.minimum(outs, _lone_outputs(srv)), srv.page_size
        # the walk holds at most every page up to its last target (committed <= prompt +
        # output walked) and the prompt's window lock: rows below that never reach the pool
        most = -(-(ins + last + max(srv.spec_kv_reserve, srv.spec_window)) // page) * page + ceil_page(srv.sliding_window_size or 0, page)
        left = np.flatnonzero((most > swa) & (outs >= 2))
        if len(left):
            pairs, inverse = np.unique(np.stack([ins[left], last[left]], axis=1), axis=0, return_inverse=True)
            past = np.array([sum(lone_swa_top_up(srv, int(i), int(o))) > swa for i, o in pairs], dtype=bool)
            bad[left] = past[inverse.reshape(-1)]
        return bad
    return sum(lone_swa_top_up(srv, ins, outs)) > swa


def check_request_pool(file: str, srv, where: str, i: int, o: int, ignore_eos: bool = True,
                       served_at: Callable[[int], int] | None = None) -> None:
    """Refuse a prompt of ``i`` and an output of ``o`` tokens that the pool of a server with
    arguments ``srv`` (named ``where`` in the scenario) can never hold. ``served_at``: the
    output SGLang would serve the request with a pool of a given size (its cut of
    max_new_tokens, :func:`sim.served.output_cut`; ``o`` is it at this pool): a least pool
    named in a refusal is the one that holds the output it then serves, not this pool's cut
    one (130 tokens asked for 192, computed for the output cut to 49; at 192 the output is
    not cut and 208 are needed)."""
    page, cap = srv.page_size, srv.max_total_num_tokens
    pool = f"{where}.max_total_num_tokens"
    ahead = inflight_slots(srv)
    fixed = page + ahead  # a page of headroom plus the window rule's in-flight verify slots (Scheduler.add_request)
    prompt = ceil_page(i, page) + fixed
    if prompt >= cap:
        slots = f" and {ahead} verify slots" if ahead else ""
        raise ConfigError(file, "workload.input_len", i,
                          f"a prompt of {i} tokens needs {prompt} KV tokens (page-rounded, + a page{slots}); "
                          f"{pool} is {cap} and must exceed that (SGLang refuses an input "
                          "that reaches its limit: managers/utils.py validate_input_length)")
    if i > longest_pool_prompt(srv):
        raise ConfigError(file, "workload.input_len", i,
                          f"must be at most {longest_pool_prompt(srv)} tokens: {pool} is {cap}, and SGLang aborts a prompt "
                          f"of min(context_len, pool) - {INPUT_MARGIN} tokens or more (managers/tp_worker.py "
                          "max_req_input_len = min(context_len - 1, pool - 1) - 5; managers/utils.py validate_input_length)")
    _check_swa_pool(file, srv, where, i, o, ignore_eos)
    _check_parked_chunk(file, srv, where, i, o, ignore_eos)
    need = prompt + min(o, CLIP_MAX_NEW_TOKENS)
    if i + o > cap:
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens: the KV pool holds the whole context by the last "
                          f"token; {pool} is {cap}")
    if need >= cap:
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens need {need} KV tokens as the scheduler reserves them "
                          f"(output clipped at {CLIP_MAX_NEW_TOKENS}); {pool} is {cap} and must exceed that")
    if _ignore_eos_admits(srv, ignore_eos) and _ignore_eos_never_admitted(srv, ceil_page(i, page), o):
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens with the prefix cache off: SGLang's ignore_eos admission "
                          f"(schedule_policy.py add_one_req_ignore_eos) keeps 1 token free beyond the page-rounded "
                          f"prompt, a page and the whole output, which {pool} = {cap} does not hold even alone (its "
                          "cut of max_new_tokens, init_req_max_new_tokens, leaves one token short): the request "
                          "waits for ever; turn the radix cache on or shorten the output")
    if _top_up_past_pool(srv, i, o):
        target = last_top_up_target(i, o, srv.spec_kv_reserve, page)
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens: the last verify pass tops the request up to "
                          f"{target} KV positions (committed + {srv.spec_kv_reserve} reserved, page-rounded; "
                          f"allocation_sizing.py page_aligned_decode_alloc_lens), past {pool} = {cap}; SGLang aborts "
                          "it out of memory (schedule_batch.py retract_decode), which the simulator does not model")
    if _swa_top_up_past_pool(srv, i, o):
        held, need = lone_swa_top_up(srv, i, o)
        swa, total, fits = srv.swa_max_total_num_tokens, (cap // page) * page, held + need
        ratio = _least_swa_ratio(srv, -(-fits * 10_000 // total), lambda pool: pool >= fits)
        fix = (f"set {where}.swa_full_tokens_ratio to at least {ratio} (an SWA pool of {fits})" if ratio is not None
               else f"{pool} must be at least {fits} at a ratio of 1")
        if srv.spec_kv_reserve and srv.rules.spec_kv_reservation == "topup":
            ask = (f"its top-up to prompt + {srv.spec_kv_reserve} reserved positions (page-rounded; "
                   f"{where}.speculative_eagle_topk, speculative_num_steps and page_size = {page} size the reserve)")
            lower = ", or lower the speculative reserve"
        else:
            ask, lower = f"the pass's {srv.spec_window}-token window (page-rounded)", ""
        raise ConfigError(file, f"{where}.swa_full_tokens_ratio", srv.swa_full_tokens_ratio,
                          f"the SWA pool of {swa} ({pool} = {cap} x {where}.swa_full_tokens_ratio, page-aligned) "
                          f"cannot hold one request alone at its largest decode/verify pass: a prompt of {i} tokens holds "
                          f"{held} SWA slots and {ask} takes {need} more; SGLang aborts it out of memory (schedule_batch.py "
                          f"retract_decode); {fix}{lower}")
    beside = topup_beside_chunk_tokens(srv, i, o)
    if beside > cap:
        # the cut output grows with the pool: walk to the least pool that holds the output it serves
        o_at = o
        for _ in range(64 if served_at is not None else 0):
            o_next = served_at(beside)
            need = topup_beside_chunk_tokens(srv, i, o_next)
            o_at = o_next
            if need <= beside:
                break
            beside = need
        raise ConfigError(file, pool, cap,
                          f"must be at least {beside}: a running request's speculative top-up (prompt {i} + "
                          f"output {o_at} + {srv.spec_kv_reserve} reserved, page-rounded) beside a chunked prompt of "
                          f"{i} tokens; SGLang would abort the request out of memory")


def _check_swa_pool(file: str, srv, where: str, i: int, o: int, ignore_eos: bool = True) -> None:
    """Refuse a prompt of ``i`` tokens with ``o`` output that a hybrid sliding-window
    server's SWA budget never admits, even with its SWA pool empty (sim/prefill_adder.py
    ``swa_never_admitted``: sglang 0.5.23 mem_cache/prefill_budget.py
    ``SWAPrefillBudget.check_prefill``, ``swa_never_fits``, ``_chunk_cap``; SGLang keeps
    such a request waiting forever). A prompt longer than the SWA pool passes with chunked
    prefill on: SGLang cuts its chunks to the free SWA and holds only the window between
    them, except an ignore_eos request with the prefix cache off, which is never cut
    (``add_one_req_ignore_eos``). Under DP attention the chunk is a rank's
    (dp_attention.py ``rank_server_args``)."""
    swa = srv.swa_max_total_num_tokens
    if not swa:
        return
    page, window, c = srv.page_size, srv.sliding_window_size, srv.chunked_prefill_size
    chunk = None if c <= 0 else c // srv.attn_dp_size
    eos_path = ignore_eos and srv.disable_radix_cache
    extend, new = (i if eos_path else ceil_page(i, page)), min(o, CLIP_MAX_NEW_TOKENS)
    if not swa_never_admitted(extend, new, chunk, window, page, swa, ignore_eos_path=eos_path):
        return
    need = swa_peak_tokens(extend, new, chunk, window, page)
    head = (f"a prompt of {i} tokens with {o} output needs {need} SWA slots at admission "
            f"(estimate_swa_kv_tokens), not fewer than the SWA pool of {swa} "
            f"({where}.max_total_num_tokens x {where}.swa_full_tokens_ratio)")
    if chunk is None:
        raise ConfigError(file, "workload.input_len", i,
                          f"{head}, and {where}.chunked_prefill_size is -1: SGLang admits it only whole; "
                          "turn chunking on or enlarge the SWA pool")
    if eos_path:
        raise ConfigError(file, "workload.input_len", i,
                          f"{head}, and with {where}.disable_radix_cache and ignore_eos SGLang never cuts the "
                          f"chunk to the free SWA (add_one_req_ignore_eos); lower {where}.chunked_prefill_size "
                          "or enlarge the SWA pool")
    raise ConfigError(file, "workload.input_len", i,
                      f"{head}, and a first chunk cut to the pool less its decode headroom (min(output, "
                      f"{window}) + a page of {page}) has no page left; enlarge the SWA pool")


def lone_chunk_parked(srv, i: int, o: int, swa: int | None = None, ignore_eos: bool = True) -> int | None:
    """The prompt position at which a request with a prompt of ``i`` tokens and an output of
    ``o``, alone on a hybrid sliding-window server, gets no next chunk for ever, or None
    when its prompt completes. Only without a prefix cache and with chunking on: a chunk's
    SWA is then freed behind the window only as a later extend batch of the same request is
    prepared, and under the overlap schedule its first two extend batches free nothing
    (sglang 0.5.23 managers/schedule_batch.py ``ScheduleBatch.maybe_evict_swa``, the extend
    branch), so two chunks can fill the pool; the next chunk is offered only the free SWA
    less a page (mem_cache/prefill_budget.py ``SWAPrefillBudget.available_chunk_tokens``),
    nothing when none is left, and SGLang parks the request (``add_chunked_req``) with
    nothing that could free its slots. The walk takes the scheduler's own calls: the first
    chunk from :meth:`PrefillAdder.add_one_req` (cut to the free SWA when its peak never
    fits, ``_chunk_cap``), each later one from :meth:`PrefillAdder.add_chunked_req`, each
    extend freeing behind its window first (:meth:`KVLedger.evict_swa_extend`) before its
    reservation (:meth:`KVLedger.reserve`). ``swa``: the SWA pool (default the server's);
    the chunk is a DP rank's (``chunked_prefill_size // dp_size``)."""
    swa = srv.swa_max_total_num_tokens if swa is None else swa
    c = srv.chunked_prefill_size
    if not swa or not srv.disable_radix_cache or c <= 0 or i < 1:
        return None
    from specsched.sim.prefill_adder import PrefillAdder

    page, window = srv.page_size, srv.sliding_window_size or 0
    chunk = max(1, c // srv.attn_dp_size)
    kv = KVLedger(1 << 62, srv.spec_kv_reserve, page, swa_capacity=swa, window=window,
                  swa_interval=srv.swa_eviction_interval, prefix_sharing=False,
                  swa_by_forward=srv.rules.swa_eviction_cadence == "forward_interval", paged=True)
    overlap = chunk if srv.enable_overlap_schedule else None
    r = Req(0, int(i), max(int(o), 1), ignore_eos=ignore_eos)
    first = True
    while r.prefill_done < r.input_len:
        adder = PrefillAdder.start(1 << 62, [], 1.0, 1 << 62, chunk, page, prefill_max_requests=None,
                                   chunk_fill=srv.rules.chunk_fill,
                                   ignore_eos_full_reservation=srv.rules.ignore_eos_full_reservation,
                                   swa=(kv.swa_available, window, swa), ignore_eos_path=True)
        if first:
            adder.add_one_req(r)
        else:
            adder.add_chunked_req(r)
        if not adder.can_run:
            return None if first else r.prefill_done   # never admitted: _check_swa_pool's refusal
        n = adder.can_run[-1][1]
        kv.evict_swa_extend(r, r.prefill_done, overlap)
        if n > kv.swa_available:
            return r.prefill_done
        kv.reserve(r, n)
        r.prefill_done += n
        first = False
    return None


def _least_swa_ratio(srv, first: int, holds: Callable[[int], bool]) -> float | None:
    """The smallest ``swa_full_tokens_ratio``, in steps of 1e-4 from ``first`` / 1e4 up to 1,
    whose SWA pool beside the server's full pool (:func:`sim.server_args.swa_pool_tokens`, the
    pool SGLang sizes at that ratio) ``holds``; None when none does."""
    for r in range(first, 10_001):
        if holds(swa_pool_tokens(srv.max_total_num_tokens, srv.page_size, r / 10_000)):
            return r / 10_000
    return None


def _check_parked_chunk(file: str, srv, where: str, i: int, o: int, ignore_eos: bool = True) -> None:
    """Refuse a prompt that, alone on the server, gets no next chunk for want of SWA slots
    (:func:`lone_chunk_parked`; SGLang parks it for ever, the simulator stopped partway:
    ``Scheduler._refuse_parked_chunk``), naming the smallest ``swa_full_tokens_ratio`` whose
    pool lets it through."""
    at = lone_chunk_parked(srv, i, o, ignore_eos=ignore_eos)
    if at is None:
        return
    cap, swa = srv.max_total_num_tokens, srv.swa_max_total_num_tokens
    ratio = _least_swa_ratio(srv, int(srv.swa_full_tokens_ratio * 10_000) + 1,
                             lambda pool: lone_chunk_parked(srv, i, o, pool, ignore_eos) is None)
    fix = (f"set {where}.swa_full_tokens_ratio to at least {ratio}" if ratio is not None
           else f"enlarge {where}.max_total_num_tokens")
    raise ConfigError(file, f"{where}.swa_full_tokens_ratio", srv.swa_full_tokens_ratio,
                      f"the SWA pool of {swa} ({where}.max_total_num_tokens = {cap} x {where}.swa_full_tokens_ratio, "
                      f"page-aligned) leaves a prompt of {i} tokens, alone, no SWA for its next chunk at position {at}: "
                      f"with {where}.disable_radix_cache a chunk's SWA is freed only as a later chunk is prepared, "
                      "not in the first two extend batches under the overlap schedule (schedule_batch.py "
                      "maybe_evict_swa), and SGLang parks the request for ever (prefill_budget.py "
                      f"available_chunk_tokens); {fix}, lower {where}.chunked_prefill_size or turn the radix cache on")


def check_decode_prealloc(file: str, srv, i: int, o: int) -> None:
    """Refuse a decode pool that can never preallocate the largest request: SGLang's
    ``DecodePreallocQueue.pop_preallocated`` (disaggregation/decode.py) needs
    ``max(prompt + num_reserved_decode_tokens, prompt + min(max_new_tokens, 4096))`` within
    the pool even when nothing else is active (``_required_admission_tokens``,
    ``_allocatable_token_budgets``), and a request it never preallocates waits at the head of
    the FIFO queue for ever (only a prompt above the pool is aborted,
    ``_check_if_req_exceed_kv_capacity``). The scheduler refuses the same request when it
    arrives (:meth:`sim.scheduler_disagg.Disagg._refuse_unpreallocatable`)."""
    cap, reserve = srv.max_total_num_tokens, srv.num_reserved_decode_tokens
    need = prealloc_need(ceil_page(i, srv.page_size), i, o, reserve)
    if need > cap:
        raise ConfigError(file, "server.disaggregation.decode.server.max_total_num_tokens", cap,
                          f"must be at least {need}: a decode server preallocates a prompt of {i} tokens plus "
                          f"num_reserved_decode_tokens={reserve} (or plus its output of up to {o} tokens) before "
                          "the prefill starts; SGLang would keep the request waiting for ever")


def topup_beside_chunk_tokens(srv, i: int, o: int) -> int:
    """KV tokens the pool needs so that a lone running request can always get its next
    speculative top-up while a second request is mid chunked prefill; 0 where the case
    cannot arise (no top-up reservation, no chunked prefill, or max_running_requests 1).

    sglang 0.5.23 charges a running request only its remaining output x new_token_ratio
    when admitting prefill (managers/schedule_policy.py
    ``PrefillAdder._get_running_request_total_token_offset``), not the ``spec_kv_reserve``
    positions its next top-up takes (mem_cache/allocation_sizing.py
    ``page_aligned_decode_alloc_lens``). A chunked prefill can so fill the pool; the chunked
    request is not in the running batch, so ``ScheduleBatch.retract_decode`` cannot free it
    and, with one request left that still does not fit, aborts that request ("Out of memory
    even after retracting all other requests"). The simulator does not model the abort:
    such a pool is refused before the run.

    Args:
        srv: the server arguments (``ServerArgs``).
        i: the largest prompt (tokens).
        o: the largest output (tokens).

    Returns:
        ``ceil_page(i + o + spec_kv_reserve)`` (the lone request's largest top-up target)
        plus ``ceil_page(i)`` (what the chunked request can hold), in tokens, or 0.
    """
    if (srv.spec_kv_reserve == 0 or srv.rules.spec_kv_reservation != "topup"
            or srv.chunked_prefill_size <= 0 or srv.max_running_requests < 2):
        return 0
    page = srv.page_size
    return ceil_page(i + o + srv.spec_kv_reserve, page) + ceil_page(i, page)


INPUT_MARGIN = 6
"""Tokens below the context length at which SGLang 0.5.23's scheduler aborts a prompt: it
sets ``max_req_len = min(context_len - 1, kv_capacity - 1)`` and ``max_req_input_len =
max_req_len - 5`` (managers/tp_worker.py), and aborts an input of ``max_req_input_len``
tokens or more (managers/utils.py ``validate_input_length``, called from scheduler.py
``handle_generate_request``; truncated instead with ``--allow-auto-truncate``): a prompt of
``context_len - 6`` tokens or more, though the tokenizer let it through."""


def longest_prompt(ctx: int) -> int:
    """The longest prompt (tokens) a server of context length ``ctx`` serves: ``ctx - 7``
    (:data:`INPUT_MARGIN`; the tokenizer's own bound, ``< ctx``, is looser)."""
    return ctx - INPUT_MARGIN - 1


def max_req_input_len(pool: int, ctx: int | None) -> int:
    """SGLang 0.5.23's ``max_req_input_len`` (managers/tp_worker.py): ``min(context_len - 1,
    pool - 1) - 5``, the prompt length from which ``validate_input_length`` aborts (or, under
    ``--allow-auto-truncate``, truncates to); the pool's alone where the context is not known."""
    return longest_prompt(pool if ctx is None else min(ctx, pool)) + 1


def longest_pool_prompt(srv) -> int:
    """The longest prompt (tokens) a server with arguments ``srv`` holds in its pool: the
    longest it serves as sent (:func:`longest_prompt` of the pool), or under
    ``allow_auto_truncate`` one more, ``max_req_input_len`` itself, the length
    managers/utils.py ``validate_input_length`` truncates a longer prompt to and serves."""
    return longest_prompt(srv.max_total_num_tokens) + (1 if srv.allow_auto_truncate else 0)
