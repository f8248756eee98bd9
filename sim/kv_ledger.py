"""KV accounting: the one owner of the KV token pool and of every request's KV slots.

SGLang's ``token_to_kv_pool_allocator`` (mem_cache/allocator.py) hands out token slots; the
radix cache can make some evictable. The reference runs flush the radix cache before each
request, so no prefix is ever reused and nothing is evictable: the pool is a count of slots,
and each request holds ``Req.kv_allocated`` of them. Only this module changes either.

The four changes, in SGLang's terms (managers/scheduler.py, managers/schedule_batch.py):

- reserve: a prefill (extend) takes the chunk's slots (``prepare_for_extend``); a decode or
  verify pass takes ``window`` slots per running request (``prepare_for_decode``; the
  speculative worker reserves the verify window the same way);
- commit: a processed decode/verify keeps the slots of the tokens it committed and returns
  the rest of its window (the rejected draft positions, ``process_batch_result``);
- free: a finished request returns every slot it holds (``release_kv_cache``);
- retract: a retracted request returns every slot it holds (``retract_decode``).

With the radix prefix cache (:mod:`sim.radix_cache`), a request's prompt slots pass to the
tree when its prefill completes (``to_tree``; duplicates of what the tree already holds are
``release``d), and the tree gives slots back when it evicts (``evicted``).

INV-2 (KV within capacity): ``0 <= used <= capacity`` after every change; ``peak`` is the
largest ``used`` seen. INV-8 (KV balance): ``used`` equals the sum of ``kv_allocated`` over
all requests plus ``tree`` (the prefix cache's slots): every slot has one holder, so it is
0 once every request finished and nothing is cached. Guarded by tests/test_invariants.py
(``test_inv2_...``, ``test_inv1_inv2_inv8_...``) and tests/test_prefix_cache.py.

Speculative decode reservations follow one of two rules (``SemanticsRules.spec_kv_reservation``):

- window (older builds): each verify pass reserves ``window`` slots per request and
  processing returns the rejected ones (``reserve_window`` then ``commit``);
- top-up (sglang 0.5.23, ``reserve_ahead`` > 0): before each verify pass every request is
  topped up to ``ceil_page(committed + reserve_ahead)`` positions and nothing is returned
  until it finishes or is retracted (:meth:`KVLedger.top_up`). DSpark/DFlash:
  speculative/dflash_info_v2.py ``DFlashDraftInputV2.prepare_for_decode`` (reserve = 2 x
  speculative_num_draft_tokens); EAGLE-family: speculative/eagle_utils.py
  ``eagle_prepare_for_decode`` with mem_cache/allocation_sizing.py
  ``get_alloc_reserve_per_decode`` (2 x max(num_steps x topk, num_draft_tokens)); both size
  with ``page_aligned_decode_alloc_lens``, and the decode memory check is
  managers/schedule_batch.py ``ScheduleBatch._new_tokens_required_next_decode_spec_v2``.

Hybrid sliding-window models (``swa_capacity`` > 0) have a second pool, SGLang's
SWATokenToKVPoolAllocator (mem_cache/allocator/swa.py): every allocation takes the same
positions in both pools, and a request's SWA slots behind its window are freed as it decodes
(:meth:`KVLedger.evict_swa`, managers/schedule_batch.py ``ScheduleBatch.maybe_evict_swa``).
A prompt prefilled in chunks frees its SWA behind the window between chunks too: with the
radix cache each chunk enters the tree before the next is built
(:meth:`KVLedger.swa_prompt_cached`), without it an extend batch frees behind its chunk's
start (:meth:`KVLedger.evict_swa_extend`).
The SWA pool is paged: a request holds whole pages, ``ceil_page(kv_len) - evicted`` of its
own positions (``evicted`` page-aligned, mem_cache/common.py ``free_swa_out_of_window_slots``).
With the radix cache on, a request's prompt enters the tree once prefilled and the tree
locks its last page-aligned window (mem_cache/unified_cache/components/swa.py
``SWAComponent._maybe_split_leaf_for_swa_lock`` and ``acquire_component_lock``); that lock
is held until the request finishes or is retracted (unified_radix_cache.py
``release_swa_prefix_lock`` runs only with SGLANG_OPT_RELEASE_PREFILL_SWA, off by default),
and the request's own eviction never goes below the tree's part (``ReqKvInfo.swa_dead_lo``).
So a request holds ``lock + ceil_page(kv_len) - evicted`` SWA slots. A request that matched a
cached prefix starts the same way: the prefix is the tree's (``evicted`` = the prefix) and its
last window is locked for the request (:meth:`KVLedger.swa_prefix_lock`); it reserves only the
pages past the prefix (:meth:`KVLedger.swa_reserve_need`), what admission charged. INV-2/INV-8 hold for the
SWA pool too: ``0 <= swa_used <= swa_capacity``, and ``swa_used`` is the sum of the
requests' SWA slots (the rest of a cached prompt's SWA is the tree's and evictable, counted
free as SGLang's usage counts it: pool_stats_observer.py ``_get_swa_token_info``).

With ``page_size`` > 1 the full pool is paged too (``paged``), with or without speculative
decoding: SGLang's PagedTokenToKVPoolAllocator (sglang 0.5.23 mem_cache/allocator/paged.py)
hands out whole pages, so a request holds ``ceil_page(kv_len)`` slots. An extend takes the pages its
chunk starts (``alloc_extend``: ``get_num_new_pages`` from the prefix length to the new
length; :meth:`KVLedger.reserve`); a decode pass takes a new page only for the requests whose
KV length is at a page boundary (``alloc_decode``: ``(seq_len - 1) % page_size == 0``;
:meth:`KVLedger.reserve_window`), and the decode memory check asks for exactly that:
managers/schedule_batch.py ``ScheduleBatch.new_tokens_required_next_decode`` counts
``kv_committed_len % page_size == 0`` requests times page_size (:meth:`KVLedger.window_need`),
which ``check_decode_mem`` and the retraction loop of ``retract_decode`` compare with the free
pages. Speculative decoding's reservations are paged the same way: a speculative request's
extend takes its prompt's pages (mem_cache/allocation.py ``alloc_for_extend``, which leaves
``kv_allocated_len`` at the prompt length while the pool holds its last partial page), so its
first top-up takes only the pages from there to the page-aligned target
(``alloc_for_spec_decode`` -> paged ``alloc_extend`` from ``kv_allocated_len``; the memory
check ``_new_tokens_required_next_decode_spec_v2`` counts ``ceil_align(nxt) -
ceil_align(cur)``: :meth:`KVLedger.top_up_need`); under the older window rule a verify
window takes the pages it starts (:meth:`KVLedger.window_need`) and its processing returns
only the whole pages past the committed positions (the paged allocator's ``free`` releases a
page with any of its slots: :meth:`KVLedger.commit`). With page_size 1 every rule above is
the token count it was.

The collapsed decode path (:mod:`sim.decode_run`) uses :meth:`KVLedger.stretch_usage`, the
same four rules over a grid of iterations, and :meth:`KVLedger.settle` to apply them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from specsched.sim.pages import ceil_pages
from specsched.sim.request import Req
from specsched.sim.swa_stretch import StretchSWA, stretch_swa


class KVPoolExhausted(RuntimeError):
    """A reservation exceeds the free slots (a scheduler bug, never user input)."""


@dataclass(frozen=True, slots=True)
class StretchKV:
    """KV usage over k iterations of a decode stretch (:meth:`KVLedger.stretch_usage`).

    Attributes (``m`` requests, ``k`` iterations):
        kv0: int (m,), slots each request held at the start.
        held: int (k, m), slots held after P_j's reservation (speculative windows), or None
            (window 1: one slot per pass).
        unused_cum: int (k, m), verify slots returned up to iteration j, or None (window 1).
        freed: int (k,), slots returned while processing at iteration j.
        scheduled: int (k,), pool slots in use after P_j's reservation.
        lens: int (k, m), each request's KV positions after iteration j's processing, when
            they differ from its slots (a paged pool), else None.
        page_sums: (reserved, processed), int (k,) each: the row sums of the positions
            after P_j's reservation and after j's processing, rounded up to whole pages,
            where the two differ (a paged pool under the window rule, whose processing
            returns positions), else None. The SWA pool pages the same positions
            (:meth:`KVLedger.stretch_swa`).
    """

    kv0: np.ndarray
    held: np.ndarray | None
    unused_cum: np.ndarray | None
    freed: np.ndarray
    scheduled: np.ndarray
    lens: np.ndarray | None = None
    page_sums: tuple[np.ndarray, np.ndarray] | None = None

    def first_over(self, capacity: int) -> int:
        """The first iteration whose reservation would exceed ``capacity`` (it would retract
        instead), or k when none does."""
        over = self.scheduled > capacity
        return int(over.argmax()) if over.any() else len(self.scheduled)

    def held_after(self, n: int, member: np.ndarray, finished: np.ndarray) -> np.ndarray:
        """Slots each request holds after n iterations (0 for the finished ones), int (m,).

        ``member``: the stretch's (k, m) plan membership; ``finished``: bool (m,)."""
        if self.held is None:
            held = self.kv0 + member[:n].sum(axis=0)   # one slot per pass
        elif self.unused_cum is None:
            held = self.held[n - 1]                     # paged: nothing returns
        else:
            held = self.held[n - 1] - self.unused_cum[n - 1]
        return np.where(finished, 0, held)


def passes_so_far(member: np.ndarray) -> np.ndarray:
    """``np.cumsum(member, axis=0)`` as int64 (k, m) (plans each request has been in up to
    each iteration) of a bool (k, m) grid whose every column is a run of True from row 0, as
    a stretch's plan membership is (a request leaves the batch for good:
    :mod:`sim.decode_run`).

    Collapsed to ``min(j + 1, run length)`` at row j: a column's running count grows by one
    per row while the run lasts, then stays. Exact for such grids (integers, one broadcast
    minimum), and ~4x faster than the accumulate at a burst's 1024 x 256 grid (numpy sums
    down the rows of a C-ordered grid one column at a time, a row's stride apart;
    docs/performance.md, fifteenth round). Not for any other grid: a column with a gap
    would count the rows after it."""
    steps = np.arange(1, len(member) + 1, dtype=np.int64)[:, None]
    return np.minimum(steps, member.sum(axis=0))


def committed_kv(req: Req) -> int:
    """Positions of ``req`` whose KV is written (SGLang ``Req.kv.kv_committed_len``): the
    (re-)prefilled tokens, then one per committed output token after the first (the last
    sampled token's KV is written by the next forward). Set at extend in
    mem_cache/allocation.py, advanced by num_accept_tokens in batch_result_processor.py."""
    return max(req.prefill_done, req.input_len + req.output_len - 1)


def last_top_up_target(input_len, max_new_tokens, reserve_ahead: int, page_size: int):
    """KV positions the top-up rule asks for a request (prompt ``input_len``, output
    ``max_new_tokens``; ints or int arrays) at the last verify pass that can be built for it:
    ``ceil_page(committed + reserve_ahead)`` (:meth:`KVLedger.top_up`) with ``committed =
    input_len + max_new_tokens - 2`` (:func:`committed_kv` when ``max_new_tokens - 1`` output
    tokens are known; a pass is built only before the last token). A request alone on the
    server whose target passes the pool cannot be topped up there: SGLang 0.5.23 aborts it
    (managers/schedule_batch.py ``ScheduleBatch.retract_decode``, "Out of memory even after
    retracting all other requests"), as the overlap loop's skip of finishing requests
    (scheduler.py ``_reqs_finishing_inflight``) spares only a pass whose in-flight step
    commits the last token. Meaningful for ``max_new_tokens >= 2`` (with 1, no pass is built).
    """
    return -(-(input_len + max_new_tokens - 2 + reserve_ahead) // page_size) * page_size


class KVLedger:
    """The KV pool of ``capacity`` token slots and each request's share.

    Args:
        capacity: slots (SGLang's max_total_num_tokens), >= 1.
        reserve_ahead: 0: speculative passes reserve a window per pass (``reserve_window``);
            > 0: the top-up rule, positions kept reserved past each request's committed KV
            (:meth:`top_up`; ``ServerArgs.spec_kv_reserve``).
        page_size: tokens per KV page (top-up targets are page-aligned).
        swa_capacity: slots of the SWA pool (``ServerArgs.swa_max_total_num_tokens``); 0:
            no sliding-window layers, no SWA pool.
        window: the model's sliding window (tokens), with swa_capacity.
        swa_interval: SWA tokens slid out of the window before they are freed.
        prefix_sharing: a radix cache is on (SGLang then keeps a page-rounded window).
        swa_by_forward: the forward-interval eviction cadence (``swa_eviction_cadence``).
        paged: the full pool hands out whole pages (page_size > 1; module docstring):
            extends, decode passes and speculative reservations take new pages only.

    Attributes:
        capacity: slots in the pool. used: slots held (read only outside this class).
        peak: the largest ``used`` seen after a reservation.

    Raises:
        ValueError: capacity < 1.
    """

    __slots__ = ("capacity", "used", "peak", "tree", "reserve_ahead", "page_size", "swa_capacity", "swa_used",
                 "swa_peak", "window", "swa_interval", "prefix_sharing", "swa_by_forward", "_swa_evicted", "_decode_idx",
                 "_swa_lock", "_extend_idx", "paged")

    def __init__(self, capacity: int, reserve_ahead: int = 0, page_size: int = 1, swa_capacity: int = 0,
                 window: int = 0, swa_interval: int = 128, prefix_sharing: bool = False,
                 swa_by_forward: bool = False, paged: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"KV capacity must be >= 1 token, got {capacity}")
        if reserve_ahead < 0 or page_size < 1:
            raise ValueError(f"bad reservation: reserve_ahead={reserve_ahead}, page_size={page_size}")
        self.capacity = capacity
        self.reserve_ahead = reserve_ahead
        self.page_size = page_size
        self.swa_capacity = swa_capacity
        self.swa_used = self.swa_peak = 0
        self.window = window
        self.swa_interval = swa_interval
        self.prefix_sharing = prefix_sharing
        self.swa_by_forward = swa_by_forward
        self.paged = paged and page_size > 1
        self._swa_evicted: dict[int, int] = {}  # rid -> positions whose SWA slots were freed
        self._decode_idx: dict[int, int] = {}   # rid -> decode passes taken (decode_batch_idx)
        self._swa_lock: dict[int, int] = {}     # rid -> its prompt tail's SWA the tree keeps locked
        self._extend_idx: dict[int, int] = {}   # rid -> extend batches taken (extend_batch_idx)
        self.used = 0
        self.peak = 0
        self.tree = 0

    @property
    def available(self) -> int:
        """Free token slots."""
        return self.capacity - self.used

    @property
    def swa_available(self) -> int:
        """Free SWA slots (0 without an SWA pool)."""
        return self.swa_capacity - self.swa_used

    def _swa_take(self, n: int) -> None:
        if self.swa_capacity:
            if n > self.swa_capacity - self.swa_used:
                raise KVPoolExhausted(f"need {n} SWA tokens, {self.swa_available} free of {self.swa_capacity}")
            self.swa_used += n
            if self.swa_used > self.swa_peak:
                self.swa_peak = self.swa_used

    def _pages(self, n: int) -> int:
        """Positions 0..n-1 rounded up to whole pages (tokens)."""
        p = self.page_size
        return -(-n // p) * p

    def swa_held(self, req: Req) -> int:
        """SWA slots ``req`` holds: its pages not yet evicted, plus its prompt tail the tree
        keeps locked for it (0 once it left)."""
        if not req.kv_len:
            return 0
        rid = req.rid
        return self._pages(req.kv_len) - self._swa_evicted.get(rid, 0) + self._swa_lock.get(rid, 0)

    def _swa_grow(self, req: Req, new_len: int) -> int:
        """SWA slots ``req`` takes to grow from ``kv_len`` to ``new_len`` positions (new pages)."""
        return self._pages(new_len) - self._pages(req.kv_len)

    def swa_decode_need(self, reqs: Sequence[Req], window: int) -> int:
        """SWA slots the next decode/verify pass of ``reqs`` takes (new pages): the top-up, or
        ``window`` positions each (sglang 0.5.23 ``ScheduleBatch.new_tokens_required_next_decode``
        counts pages: a new page when the committed length is page-aligned, and for spec v2
        ``ceil_align(nxt) - ceil_align(cur)``)."""
        if self.reserve_ahead:
            return sum(max(0, self._top_up_target(r) - self._pages(r.kv_len)) for r in reqs)
        return sum(self._swa_grow(r, r.kv_len + window) for r in reqs)

    def _swa_release(self, req: Req) -> None:
        """``req`` leaves: its SWA slots (pages not yet evicted, the locked prompt tail) return."""
        if self.swa_capacity:
            self.swa_used -= self.swa_held(req)
            self._swa_evicted.pop(req.rid, None)
            self._swa_lock.pop(req.rid, None)
            self._decode_idx.pop(req.rid, None)
            self._extend_idx.pop(req.rid, None)

    def _take(self, n: int) -> None:
        if n > self.capacity - self.used:  # INV-2 (the scheduler retracts before it comes to this)
            raise KVPoolExhausted(f"need {n} KV tokens, {self.available} free of {self.capacity}")
        self.used += n
        if self.used > self.peak:
            self.peak = self.used

    # ------------------------------------------------------------- the four changes
    def swa_prefix_lock(self, prefix_len: int) -> int:
        """SWA slots the radix cache locks for a request that matched ``prefix_len`` cached
        positions: the prefix's last page-aligned window (sglang 0.5.23 mem_cache/
        unified_cache/components/swa.py ``SWAComponent.acquire_component_lock``, nodes back
        from the matched node until one window is covered; the SWA behind it is the
        tree's, tombstoned or evictable, and counted free here as the rest of the tree's
        SWA is). Taken out of the SWA budget while the request is considered for admission
        (managers/schedule_policy.py ``PrefillAdder.add_one_req`` under ``_lock_node``, so
        ``SWAPrefillBudget.remaining_swa`` no longer counts it evictable) and held from
        the reservation (:meth:`reserve`) until the request leaves. 0 without an SWA pool
        or a match. Each holder counts its own lock (SGLang counts a node locked by two
        requests once): conservative for requests that share a window."""
        if not self.swa_capacity or prefix_len <= 0:
            return 0
        return min(self._pages(self.window), self._prefix_base(prefix_len))

    def _prefix_base(self, prefix_len: int) -> int:
        """The whole pages of a matched prefix of ``prefix_len`` positions: the tree's part."""
        return prefix_len // self.page_size * self.page_size

    def swa_reserve_need(self, req: Req, n: int) -> int:
        """SWA slots :meth:`reserve` takes for a chunk of ``n`` tokens of ``req``: its new
        pages; for a request that starts at a prefix matched in the radix cache
        (``kv_len`` 0, ``prefill_done`` > 0) only the pages past the prefix, plus the
        prefix's window lock (:meth:`swa_prefix_lock`). sglang 0.5.23 allocates a
        prefix-hit request's extend only (mem_cache/allocation.py ``alloc_for_extend``:
        ``extend_num_tokens`` slots in both pools, the prefix's indices come from the
        tree), and its admission charges the same: mem_cache/prefill_budget.py
        ``estimate_swa_kv_tokens`` of the extend ("reserve only its uncached tail plus
        decode headroom", a cached prefix already locks one window) against
        ``SWAPrefillBudget.remaining_swa`` with the prefix pinned. The Scheduler's
        admission takes the same lock (:meth:`swa_prefix_lock`) out of the SWA budget and
        charges :func:`sim.prefill_adder.swa_peak_tokens` of the extend, which is never
        less than the extend's pages, so a reservation never exceeds what admission
        checked (tests/test_swa_pool.py)."""
        new_len = max(req.kv_len, req.prefill_done + n)
        if not req.kv_len and req.prefill_done:
            return self.swa_prefix_lock(req.prefill_done) + self._pages(new_len) - self._prefix_base(req.prefill_done)
        return self._swa_grow(req, new_len)

    def reserve(self, req: Req, n: int) -> None:
        """Reserve ``n`` >= 0 slots for ``req`` (a prefill chunk of n tokens).

        Raises:
            KVPoolExhausted: fewer than n slots are free (INV-2 would break).
        """
        if n < 0:
            raise ValueError(f"cannot reserve {n} tokens")
        # max(kv_len, prefill_done + n), before the caller advances prefill_done (written
        # out: builtin max parses its arguments through a tuple on every call in 3.11)
        new_len = req.prefill_done + n
        if new_len <= req.kv_len:
            new_len = req.kv_len
        if self.swa_capacity:
            self._swa_take(self.swa_reserve_need(req, n))
            if not req.kv_len and req.prefill_done:  # a prefix hit: the prefix is the tree's
                self._swa_evicted[req.rid] = self._prefix_base(req.prefill_done)
                self._swa_lock[req.rid] = self.swa_prefix_lock(req.prefill_done)
        if self.paged:
            # alloc_extend: the pages from the prefix (the request's own positions, or a
            # matched prefix's, which are the tree's) to the new length
            base = req.kv_len if req.kv_len >= req.prefill_done else req.prefill_done
            n = self._pages(new_len) - self._pages(base) if new_len > base else 0
        self._take(n)
        req.kv_allocated += n
        req.kv_len = new_len

    def window_need(self, reqs: Sequence[Req], window: int) -> int:
        """Slots :meth:`reserve_window` takes for ``reqs``: ``window`` each, or in a paged pool
        the new pages (sglang 0.5.23 managers/schedule_batch.py
        ``ScheduleBatch.new_tokens_required_next_decode``: page_size for each request whose
        ``kv_committed_len`` is a multiple of page_size, mem_cache/allocator/paged.py
        ``alloc_decode``)."""
        if not self.paged:
            return window * len(reqs)
        pages = self._pages
        return sum(pages(r.kv_len + window) - pages(r.kv_len) for r in reqs)

    def reserve_window(self, reqs: Sequence[Req], window: int) -> None:
        """Reserve ``window`` positions for each of ``reqs`` (one decode/verify pass): their
        :meth:`window_need` slots.

        Raises:
            KVPoolExhausted: fewer than :meth:`window_need` slots are free.
        """
        if self.swa_capacity:
            self._swa_take(sum(self._swa_grow(r, r.kv_len + window) for r in reqs))
        if self.paged:
            self._take(self.window_need(reqs, window))
            pages = self._pages
            for r in reqs:
                r.kv_allocated += pages(r.kv_len + window) - pages(r.kv_len)
                r.kv_len += window
            return
        self._take(window * len(reqs))
        for r in reqs:
            r.kv_allocated += window
            r.kv_len += window

    def _top_up_target(self, r: Req) -> int:
        p = self.page_size
        return -(-(committed_kv(r) + self.reserve_ahead) // p) * p

    def _held_to(self, n: int) -> int:
        """Slots a request's first ``n`` positions take: whole pages in a paged pool, else n."""
        return self._pages(n) if self.paged else n

    def top_up_need(self, reqs: Sequence[Req]) -> int:
        """Slots :meth:`top_up` would take for ``reqs`` (the decode memory check, sglang
        0.5.23 ``ScheduleBatch._new_tokens_required_next_decode_spec_v2``: ``ceil_align(nxt)
        - ceil_align(cur)`` from the allocated length ``cur``, so in a paged pool a request
        whose extend left a partial last page needs only the pages past it)."""
        need = 0
        held_to = self._held_to
        for r in reqs:
            d = self._top_up_target(r) - held_to(r.kv_len)
            if d > 0:
                need += d
        return need

    def top_up(self, reqs: Sequence[Req]) -> None:
        """The top-up rule: each of ``reqs`` gets slots up to ``ceil_page(committed +
        reserve_ahead)`` positions and keeps what it has beyond (sglang 0.5.23
        mem_cache/allocation_sizing.py ``page_aligned_decode_alloc_lens``: nxt = max(cur,
        ceil_page(committed + reserve))). Nothing is returned after the pass.

        Raises:
            KVPoolExhausted: fewer than :meth:`top_up_need` slots are free.
        """
        need = self.top_up_need(reqs)
        if self.swa_capacity:
            self._swa_take(self.swa_decode_need(reqs, 0))
        self._take(need)
        held_to = self._held_to
        for r in reqs:
            target = self._top_up_target(r)
            if target > r.kv_len:
                # paged: the pages from the extend's last (partial) page to the target
                # (mem_cache/allocation.py alloc_for_spec_decode -> paged alloc_extend from
                # kv_allocated_len to nxt); the target is page-aligned
                r.kv_allocated += target - held_to(r.kv_len)
                r.kv_len = target

    def commit(self, reqs: Sequence[Req], unused: Sequence[int]) -> None:
        """After a processed decode/verify: each of ``reqs`` returns its ``unused`` (> 0)
        reserved positions (window minus tokens committed). In a paged pool only the whole
        pages past the committed positions return: the paged allocator frees a page with
        any of its slots (sglang 0.5.23 mem_cache/allocator/paged.py
        ``PagedTokenToKVPoolAllocator.free``: ``free_index // page_size``), so a page still
        holding a committed token is kept."""
        total = swa = 0
        pages = self._pages
        for r, u in zip(reqs, unused, strict=True):
            back = pages(r.kv_len) - pages(r.kv_len - u)   # whole pages only
            if self.swa_capacity:
                swa += back
            if not self.paged:
                back = u
            r.kv_allocated -= back
            r.kv_len -= u
            total += back
        self._give_back(total)
        self.swa_used -= swa

    def free(self, reqs: Sequence[Req]) -> None:
        """Finished requests return every slot they hold."""
        total = 0
        for r in reqs:
            self._swa_release(r)
            total += r.kv_allocated
            r.kv_allocated = 0
            r.kv_len = 0
        self._give_back(total)

    def retract(self, req: Req) -> None:
        """A retracted request returns every slot it holds (it re-prefills later)."""
        self._swa_release(req)
        self._give_back(req.kv_allocated)
        req.kv_allocated = 0
        req.kv_len = 0

    def evict_swa(self, reqs: Sequence[Req], forward: int = 0) -> None:
        """A decode pass of ``reqs`` is prepared: free SWA slots that slid out of the window,
        then count the pass (sglang 0.5.23 managers/schedule_batch.py
        ``ScheduleBatch.maybe_evict_swa`` with ``_swa_eviction_trigger``, and
        mem_cache/common.py ``free_swa_out_of_window_slots``). A request is skipped on its
        first decode pass (its prefill may still be running under overlap); otherwise, once
        ``seqlen - 1 - window >= evicted + swa_interval``, positions up to ``seqlen - 1 -
        window`` (a page-rounded window with a prefix cache), page-floored, are freed. With
        ``swa_by_forward`` the trigger is instead the pass index ``forward`` being a multiple
        of ``swa_interval`` (every request then frees what slid out). Call before the pass's
        reservation (the decode memory check came first)."""
        if not self.swa_capacity:
            return
        w, p, iv = self.window, self.page_size, self.swa_interval
        if self.swa_by_forward:
            due = forward % iv == 0
            iv = 1
        keep = -(-max(w, p) // p) * p if self.prefix_sharing else w
        idx, ev = self._decode_idx, self._swa_evicted
        freed = 0
        for r in reqs:
            rid = r.rid
            n = idx.get(rid, 0)
            idx[rid] = n + 1
            if n < 1 or (self.swa_by_forward and not due):
                continue
            pre = r.input_len + r.output_len - 1
            lo = ev.get(rid, 0)
            if pre - w < lo + iv:
                continue
            new = (pre - keep) // p * p
            if new > lo:
                ev[rid] = new
                freed += new - lo
        self.swa_used -= freed

    def evict_swa_extend(self, req: Req, pre_len: int, overlap_chunk: int | None) -> None:
        """An extend batch holding ``req``, whose chunk starts at position ``pre_len``, is
        prepared without a prefix cache: free its SWA slots behind the window (sglang 0.5.23
        mem_cache/allocation.py ``alloc_for_extend`` -> managers/schedule_batch.py
        ``ScheduleBatch.maybe_evict_swa``, the extend branch, taken only when the tree cache
        does not ``supports_prefix_sharing()``, as with the radix cache disabled; then
        mem_cache/common.py ``free_swa_out_of_window_slots`` with supports_prefix_sharing
        False: once a position slid out, positions up to ``pre_len - window``, page-floored).
        Under the overlap schedule (``overlap_chunk`` not None) the previous chunk may still
        run: a request's first two extend batches free nothing, later ones free behind
        ``pre_len - overlap_chunk`` (chunked_prefill_size; 0 with chunking off). Call before
        the chunk's reservation. With a prefix cache a chunk's SWA passes to the tree
        instead (:meth:`swa_prompt_cached`)."""
        if not self.swa_capacity or self.prefix_sharing:
            return
        rid = req.rid
        n = self._extend_idx.get(rid, 0)
        self._extend_idx[rid] = n + 1
        if overlap_chunk is not None:
            if n < 2:
                return
            pre_len -= overlap_chunk
        lo = self._swa_evicted.get(rid, 0)
        if pre_len - self.window < lo + 1:
            return
        new = (pre_len - self.window) // self.page_size * self.page_size
        if new > lo:
            self._swa_evicted[rid] = new
            self.swa_used -= new - lo

    def swa_prompt_cached(self, req: Req) -> None:
        """``req``'s computed prefix (``prefill_done`` positions) entered the radix cache: its
        last chunk's results were processed, or, while it is chunked, the next pass is being
        built (``stash_chunked_request``, Scheduler._stash_chunked_swa).

        The tree takes the prompt's whole pages (``cache_protected_len`` = the page-floored
        prompt; the partial last page stays the request's) and locks the last page-aligned
        window of them for the request (sglang 0.5.23 mem_cache/unified_cache/components/
        swa.py ``_maybe_split_leaf_for_swa_lock``: the fresh leaf is cut to
        ceil_page(window) tokens, and ``acquire_component_lock`` locks nodes back to the
        window). The rest becomes the tree's and evictable, so it counts as free
        (``SWAPrefillBudget.remaining_swa`` and ``evict_to_free_tokens`` reclaim it). The
        lock is held until the request leaves (:meth:`free`, :meth:`retract`): with
        SGLANG_OPT_RELEASE_PREFILL_SWA off (the default) ``maybe_evict_swa`` never releases
        it, and the request's own eviction starts above it (``ReqKvInfo.swa_dead_lo``).
        A prompt whose last chunk is shorter than the window locks part of the chunk before
        it too; that is not modelled (the lock is the last ceil_page(window) tokens)."""
        if not self.swa_capacity:
            return
        p, rid = self.page_size, req.rid
        protected = req.prefill_done // p * p
        lo = self._swa_evicted.get(rid, 0)
        if protected <= lo:
            return
        lock = min(-(-self.window // p) * p, protected)
        old_lock = self._swa_lock.get(rid, 0)
        self._swa_evicted[rid] = protected
        self._swa_lock[rid] = lock
        self.swa_used -= (protected - lo) - (lock - old_lock)

    # ------------------------------------------------------------- the prefix cache
    def to_tree(self, req: Req, n: int) -> None:
        """``req`` hands ``n`` of its slots to the prefix cache (its prompt was inserted)."""
        if not 0 <= n <= req.kv_allocated:
            raise ValueError(f"cannot move {n} of {req.kv_allocated} slots to the tree")
        req.kv_allocated -= n
        self.tree += n

    def release(self, req: Req, n: int) -> None:
        """``req`` returns ``n`` of its slots (duplicates of tokens the tree already holds)."""
        if not 0 <= n <= req.kv_allocated:
            raise ValueError(f"cannot release {n} of {req.kv_allocated} slots")
        req.kv_allocated -= n
        self._give_back(n)

    def evicted(self, n: int) -> None:
        """The prefix cache evicted ``n`` tokens: their slots are free."""
        if not 0 <= n <= self.tree:
            raise ValueError(f"cannot evict {n} of {self.tree} cached slots")
        self.tree -= n
        self._give_back(n)

    def _give_back(self, n: int) -> None:
        if n < 0 or n > self.used:
            raise ValueError(f"cannot free {n} tokens ({self.used} in use)")
        self.used -= n

    # ------------------------------------------------------- the collapsed decode path
    def stretch_usage(self, kv0: np.ndarray, member: np.ndarray, finish: np.ndarray, window: int,
                      committed: np.ndarray | None, processed: np.ndarray | None,
                      len0: np.ndarray | None = None, pos: np.ndarray | None = None) -> StretchKV:
        """The four rules over k iterations of a decode stretch (:mod:`sim.decode_run`).

        At iteration j, plan P_j reserves ``window`` slots for each member; processing
        returns each processed decode entry's unused window (``window - committed``, window
        > 1 only: a plain decode commits its one slot) and every slot of the requests that
        finish there.

        Args:
            kv0: int (m,), slots each request holds now.
            member: bool (k, m), request in P_j; each column a run of True from row 0
                (a request leaves the batch for good: :func:`passes_so_far`).
            finish: bool (k, m), request finishes while processing at iteration j.
            window: slots reserved per member per pass.
            committed: int (k, m), tokens committed by the entries processed at iteration
                j (window > 1 only, else None); its buffer is reused (overwritten).
            processed: bool (k, m), decode entries processed at iteration j (window > 1).
            len0, pos: the top-up rule only (``reserve_ahead`` > 0): int (m,) each request's
                ``kv_len`` now, and int (k, m) its committed KV positions when P_j is built.
                A paged pool with window 1 takes ``len0`` too (its new pages follow it).

        Returns:
            A :class:`StretchKV`; ``scheduled[j] > capacity`` marks a pass that would retract.
        """
        if self.reserve_ahead and window > 1:
            # top-up: P_j raises each member to ceil_page(pos + reserve); nothing returns
            # until the request finishes (the same rule as top_up, over the grid)
            p = self.page_size
            target = pos + self.reserve_ahead
            ceil_pages(target, p, out=target)
            lens = np.maximum.accumulate(np.where(member, target, 0), axis=0)
            np.maximum(lens, len0, out=lens)
            if self.paged:
                # whole pages: a request not yet topped up holds its extend's pages (kv0),
                # a topped-up one its page-aligned target (top_up)
                held = ceil_pages(lens, p)
                held -= ceil_pages(len0, p) - kv0
            else:
                held = lens - (len0 - kv0)
            unused_cum = np.zeros_like(held)
            freed = (held * finish).sum(axis=1)
            scheduled = self.used + held.sum(axis=1) - int(kv0.sum())
            scheduled[1:] -= np.cumsum(freed[:-1])
            return StretchKV(kv0, held, unused_cum, freed, scheduled, lens if self.paged else None)
        if self.paged and window > 1 and len0 is not None:
            return self._stretch_paged_window(kv0, member, finish, window, committed, processed, len0)
        if self.paged and window == 1 and len0 is not None:
            # a paged pool (reserve_window's rule over the grid): a request that rode t
            # passes holds kv0 + ceil_page(len0 + t) - ceil_page(len0); nothing returns
            # until it finishes
            p = self.page_size
            lens = passes_so_far(member)
            lens += len0
            held = ceil_pages(lens, p)
            held += kv0 - ceil_pages(len0, p)
            jj, ii = np.nonzero(finish)
            freed = np.zeros(len(member), dtype=np.int64)
            np.add.at(freed, jj, held[jj, ii])
            scheduled = self.used + held.sum(axis=1) - int(kv0.sum())
            scheduled[1:] -= np.cumsum(freed[:-1])
            return StretchKV(kv0, held, None, freed, scheduled, lens)
        # (two (k, m) grids at most, updated in place: the stretch's grids are large, and
        # fresh memory for each intermediate costs more than the arithmetic)
        jj, ii = np.nonzero(finish)      # a request finishes at one iteration at most
        if window > 1:
            held = passes_so_far(member)
            held *= window
            held += kv0
            unused = np.subtract(window, committed, out=committed)
            np.maximum(unused, 0, out=unused)
            unused *= processed
            freed = unused.sum(axis=1)
            unused_cum = np.cumsum(unused, axis=0, out=unused)
            np.add.at(freed, jj, held[jj, ii] - unused_cum[jj, ii])
        else:
            # a request finishing at iteration j holds kv0 plus one slot per pass it rode
            held = unused_cum = None
            freed = np.zeros(len(member), dtype=np.int64)
            np.add.at(freed, jj, kv0[ii] + passes_so_far(member)[jj, ii])
        scheduled = self.used + window * np.cumsum(member.sum(axis=1))
        scheduled[1:] -= np.cumsum(freed[:-1])
        return StretchKV(kv0, held, unused_cum, freed, scheduled)

    def _stretch_paged_window(self, kv0: np.ndarray, member: np.ndarray, finish: np.ndarray, window: int,
                              committed: np.ndarray, processed: np.ndarray, len0: np.ndarray) -> StretchKV:
        """:meth:`stretch_usage` of the window rule on a paged pool (:meth:`reserve_window`
        and :meth:`commit` over the grid): a request's positions after P_j's reservation are
        ``len0 + window x passes - returned before j``, after j's processing less what it
        returned there, and it holds the whole pages of its positions (less the prefix
        cache's part, ``ceil_page(len0) - kv0``), so a pass takes the pages its window
        starts and processing returns only the whole pages past the committed positions.
        ``held`` is the slots after each reservation, ``unused_cum`` the slots returned at
        that iteration's processing (their difference is what :meth:`StretchKV.held_after`
        reads)."""
        p = self.page_size
        unused = np.subtract(window, committed, out=committed)
        np.maximum(unused, 0, out=unused)
        unused *= processed
        lres = passes_so_far(member)
        lres *= window
        lres += len0
        lproc = np.cumsum(unused, axis=0)        # returned up to j ...
        lres[1:] -= lproc[:-1]
        np.subtract(lres, unused, out=lproc)     # ... and the positions after j's processing
        # (the grids' buffers reused once read: a stretch's grids are large, and fresh
        # memory for each intermediate costs more than the arithmetic)
        off = ceil_pages(len0, p) - kv0
        held = ceil_pages(lres, p, out=lres)
        pages_res = held.sum(axis=1)
        held -= off                              # slots after P_j's reservation
        kept = ceil_pages(lproc, p, out=unused)
        pages_proc = kept.sum(axis=1)
        kept -= off                              # ... and after j's processing
        jj, ii = np.nonzero(finish)
        gone = np.zeros(len(member), dtype=np.int64)
        np.add.at(gone, jj, kept[jj, ii])        # a finished request returns the rest
        back = np.subtract(held, kept, out=kept)  # whole pages returned at j's processing
        freed = pages_res - pages_proc + gone    # (back's row sums)
        scheduled = self.used + pages_res - (int(off.sum()) + int(kv0.sum()))   # (held's row sums)
        scheduled[1:] -= np.cumsum(gone[:-1])
        return StretchKV(kv0, held, back, freed, scheduled, lproc, (pages_res, pages_proc))

    def stretch_swa(self, reqs: Sequence[Req], usage: StretchKV, member: np.ndarray, fin: np.ndarray,
                    pre: np.ndarray, first_step: int) -> StretchSWA:
        """The SWA pool over a decode stretch (:func:`sim.swa_stretch.stretch_swa`): the rules
        of :meth:`evict_swa`, the paged reservations and the frees of this ledger, over the
        stretch's grid.

        Args:
            reqs: the stretch's m requests (their SWA state now is read).
            usage: the stretch's full-pool usage (:meth:`stretch_usage`), whose holdings give
                each request's ``kv_len`` per iteration.
            member, fin: bool (k, m), request in P_j; finishes at j's processing.
            pre: int (k, m), prompt + output when P_j is built (the positions evicted
                from are one less).
            first_step: the plan index of P_0.
        """
        rids = [r.rid for r in reqs]
        len0 = np.array([r.kv_len for r in reqs], dtype=np.int64)
        kv0 = usage.kv0
        if usage.page_sums is not None:   # paged, window rule: the full pool's pages summed already
            lenres, lenproc = None, usage.lens
        elif usage.lens is not None:    # a paged full pool: positions apart from slots
            lenres = lenproc = usage.lens.copy()   # (stretch_swa pages it in place)
        elif usage.held is None:        # one position per pass
            lenres = passes_so_far(member)
            lenres += len0
            lenproc = lenres
        else:                           # held counts slots reserved so far; unused_cum what returned
            lenres = usage.held + (len0 - kv0)
            if self.reserve_ahead:      # the top-up returns nothing
                lenproc = lenres
            else:
                lenproc = lenres - usage.unused_cum
                lenres[1:] -= usage.unused_cum[:-1]
        w, p = self.window, self.page_size
        ev, lock, idx = self._swa_evicted, self._swa_lock, self._decode_idx
        return stretch_swa(
            used=self.swa_used, page=p, window=w, keep=-(-max(w, p) // p) * p if self.prefix_sharing else w,
            interval=self.swa_interval, by_forward=self.swa_by_forward, first_step=first_step, len0=len0,
            ev0=np.array([ev.get(rid, 0) for rid in rids], dtype=np.int64),
            lock=np.array([lock.get(rid, 0) for rid in rids], dtype=np.int64),
            idx0=np.array([idx.get(rid, 0) for rid in rids], dtype=np.int64),
            lenres=lenres, lenproc=lenproc, member=member, fin=fin, pre=pre, pre_shift=-1, sums=usage.page_sums)

    def settle_swa(self, reqs: Sequence[Req], swa: StretchSWA, n: int, finished: Sequence[bool]) -> None:
        """Apply the first n iterations of a stretch's SWA counts (after :meth:`settle`):
        eviction frontiers and decode-pass counts move, finished requests leave.

        Raises:
            KVPoolExhausted: the result breaks INV-2 or INV-8 for the SWA pool.
        """
        ev, idx = self._swa_evicted, self._decode_idx
        e_n, passes = swa.evicted_after(n).tolist(), swa.passes_after(n).tolist()
        used = int(swa.after[n - 1])
        for i, (r, f) in enumerate(zip(reqs, finished, strict=True)):
            rid = r.rid
            if f:
                ev.pop(rid, None)
                self._swa_lock.pop(rid, None)
                idx.pop(rid, None)
                continue
            if e_n[i]:
                ev[rid] = e_n[i]
            if passes[i]:
                idx[rid] = passes[i]
        peak = int(swa.reserved[:n].max())
        if not 0 <= used <= self.swa_capacity or peak > self.swa_capacity:
            raise KVPoolExhausted(f"stretch SWA: {used} in use, peak {peak}, of {self.swa_capacity}")
        self.swa_used = used
        if peak > self.swa_peak:
            self.swa_peak = peak

    def settle(self, reqs: Sequence[Req], held: Sequence[int], used: int, peak: int,
               finished: Sequence[bool] | None = None, lens: Sequence[int] | None = None) -> None:
        """Apply a stretch: each of ``reqs`` now holds ``held`` slots, the pool ``used``;
        ``peak`` is the stretch's largest reservation; ``finished`` marks the requests that
        completed (they hold nothing, the prefix cache's positions included); ``lens``: each
        request's KV positions now, where they do not move with its slots (a paged pool).

        Raises:
            KVPoolExhausted: the result breaks INV-2 or INV-8 (the stretch's counts are wrong).
        """
        delta = 0
        fin = finished if finished is not None else [False] * len(held)
        if not len(reqs) == len(held) == len(fin):
            raise ValueError(f"settle: {len(reqs)} requests, {len(held)} held counts, {len(fin)} finished flags")
        for i, r in enumerate(reqs):   # by index: a zip(..., strict=True) per stretch costs more
            h = held[i]
            d = h - r.kv_allocated
            delta += d
            r.kv_allocated = h
            if lens is None:
                r.kv_len = 0 if fin[i] else r.kv_len + d
            else:
                r.kv_len = 0 if fin[i] else lens[i]
        if self.used + delta != used or not 0 <= used <= self.capacity or peak > self.capacity:
            raise KVPoolExhausted(f"stretch KV: {self.used} + {delta} != {used} or over {self.capacity}")
        self.used = used
        if peak > self.peak:
            self.peak = peak
