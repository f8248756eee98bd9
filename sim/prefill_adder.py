"""The budgets of one prefill pass: SGLang's ``PrefillAdder`` (managers/schedule_policy.py).

A pass admits requests in policy order until one of: ``prefill_max_requests``, the
allocatable-request count (checked by the Scheduler), the KV budget, ``max_prefill_tokens``
or the ``chunked_prefill_size`` budget runs out. At most one request per batch is chunked
(cut to the remaining chunk budget) and that ends admission. With chunking off, the first
request is admitted even if it exceeds max_prefill_tokens. Ordering lives in the policy,
budget checks here.

Invariant (INV-ADDER): no budget handed to an admitted request is ever negative: every
extend length in ``can_run`` is >= 1 and the pass never takes more KV than is free
(a pass whose chunk budget the mixed decode rows used up admits nothing).

Rules that differ between SGLang builds are arguments (see :mod:`sim.semantics`):
``chunk_fill`` (2nd and later requests of a pass) and ``ignore_eos_full_reservation``.

Hybrid sliding-window models add the SWA pool's budget (sglang 0.5.23
mem_cache/prefill_budget.py ``SWAPrefillBudget``): each admitted request charges
``estimate_swa_kv_tokens`` (the extend beyond one window, plus min(extend + output, window),
plus a page) against the SWA pool's free slots; running requests reserve nothing there. A
request that matched a cached prefix is charged its extend only: the Scheduler first takes its
prefix's locked window out of ``swa_rem`` (``KVLedger.swa_prefix_lock``, the lock the
reservation then holds; SGLang pins the prefix under ``_lock_node`` before the check).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from specsched.sim.request import Req

CLIP_MAX_NEW_TOKENS = 4096
"""SGLang's CLIP_MAX_NEW_TOKENS (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, default 4096)."""
IGNORE_EOS_RESERVE_TOKENS = 1
"""sglang 0.5.23 schedule_policy.py IGNORE_EOS_RESERVE_TOKENS: tokens per request the
ignore_eos admission keeps free beyond its projection ("reserve tokens for corner cases")."""

ChunkFill = Literal["exact", "exact_tokens", "stop_at_max_prefill_tokens"]



def swa_peak_tokens(extend: int, new_tokens: int, chunk_limit: int | None, window: int, page: int) -> int:
    """SGLang 0.5.23 ``estimate_swa_kv_tokens``: the peak SWA slots of one request whose
    (page-rounded) ``extend`` tokens are admitted with ``new_tokens`` reserved, at most
    ``chunk_limit`` of them in this forward (None: chunking off)."""
    allocated = extend if chunk_limit is None else min(extend, chunk_limit)
    return max(allocated - window, 0) + min(extend + new_tokens, window) + page


def swa_chunk_cap(swa_free: int, new_tokens: int, window: int, page: int) -> int:
    """SGLang 0.5.23 mem_cache/prefill_budget.py ``SWAPrefillBudget._chunk_cap``: the chunk a
    request whose SWA peak can never fit the pool is cut to, ``swa_free`` less its decode
    headroom (``estimate_swa_kv_tokens(0, new_tokens)`` = min(new_tokens, window) + a page),
    page-floored, never negative. "Only the sliding window stays locked between chunks", so
    a smaller chunk bounds the SWA a longer prompt holds at once."""
    return max(0, (swa_free - min(new_tokens, window) - page) // page * page)


def swa_never_admitted(extend: int, new_tokens: int, chunk_limit: int | None, window: int, page: int,
                       swa_size: int, *, ignore_eos_path: bool = False) -> bool:
    """True when SGLang 0.5.23 never admits a request even on an idle SWA pool of ``swa_size``
    slots (mem_cache/prefill_budget.py ``SWAPrefillBudget.check_prefill`` with
    ``remaining_swa`` = the whole pool): its SWA peak (:func:`swa_peak_tokens` of the
    page-rounded ``extend`` with ``new_tokens`` reserved, at most ``chunk_limit`` a forward;
    None: chunking off) is >= the pool (``swa_never_fits``) and either chunking is off or
    :func:`swa_chunk_cap` leaves no page. ``check_prefill`` then answers NO_TOKEN every pass
    and the request waits forever (no abort: managers/scheduler.py validates a prompt only
    against the full pool, tp_worker.py ``get_worker_info`` max_req_input_len from
    ``effective_logical_max_total_num_tokens``, the full pool for hybrid SWA). A longer
    prompt with chunking on is admitted, cut to the free SWA, whatever its length.

    ``ignore_eos_path`` (an ignore_eos request with the prefix cache off: 0.5.23
    schedule_policy.py ``add_one_req_ignore_eos`` with ``SWAPrefillBudget.can_allocate_prefill``):
    no cut to the free SWA there, so it is never admitted once its peak with ``extend`` raw
    exceeds the pool."""
    if ignore_eos_path:
        return swa_peak_tokens(extend, new_tokens, chunk_limit, window, page) > swa_size
    if swa_peak_tokens(extend, new_tokens, chunk_limit, window, page) < swa_size:
        return False
    return chunk_limit is None or swa_chunk_cap(swa_size, new_tokens, window, page) <= 0

class AddResult(Enum):
    """SGLang's AddReqResult."""

    CONTINUE = 0
    NO_TOKEN = 1
    OTHER = 2


# the members as module names (a member read through the enum class costs ~0.1 us, see
# sim/request.py): the admission pass reads them for every request it considers
CONTINUE, NO_TOKEN, OTHER = AddResult.CONTINUE, AddResult.NO_TOKEN, AddResult.OTHER


@dataclass(slots=True)
class KVRefusals:
    """The admission passes of a run that stopped for lack of KV while a request was left
    waiting and the running batch was below max_running_requests: the pool, not the cap,
    bounded the batch (sglang 0.5.23 managers/schedule_policy.py ``PrefillAdder``: its
    budget is the free plus evictable tokens, mem_cache/prefill_budget.py
    ``PrefillBudget._available_and_evictable``, less the running requests' reserved output;
    ``add_one_req`` answers ``AddReqResult.NO_TOKEN`` when a request's extend, clipped
    output and a page do not fit it, or when an admission spends it, and
    managers/scheduler.py ``_get_new_batch_prefill_raw`` then sets ``batch_is_full`` until a
    request leaves; ``OTHER``, the prompt or chunk budget or a cap, is not counted). Owned by
    the :class:`sim.scheduler.Scheduler` that counts them (:meth:`add`); read by the run's
    summary (:func:`sim.scheduler.run_counts`).

    Attributes:
        passes: such passes (a pass the latch skips is not one: SGLang builds no adder then;
            a hybrid sliding-window model's scheduler clears the latch every pass, so there
            nearly every pass while the pool is full is one).
        running_peak: the most requests running (those admitted by the pass included) at one.
        waiting_peak: the most requests left waiting by one.
    """

    passes: int = 0
    running_peak: int = 0
    waiting_peak: int = 0

    def add(self, running: int, waiting: int) -> None:
        """One such pass, ``running`` requests running after it and ``waiting`` left waiting."""
        self.passes += 1
        if running > self.running_peak:
            self.running_peak = running
        if waiting > self.waiting_peak:
            self.waiting_peak = waiting

    @classmethod
    def over(cls, many: Iterable[KVRefusals]) -> KVRefusals:
        """Several schedulers' as one: the passes summed, each peak the largest one's."""
        out = cls()
        for r in many:
            out.passes += r.passes
            out.running_peak = max(out.running_peak, r.running_peak)
            out.waiting_peak = max(out.waiting_peak, r.waiting_peak)
        return out


def ceil_page(n: int, page_size: int) -> int:
    """Round ``n`` tokens up to whole pages."""
    return -(-n // page_size) * page_size


def reserved_decode_tokens(req: Req) -> int:
    """Tokens a running request may still need: min(max_new - out, CLIP_MAX_NEW_TOKENS)
    (``max_new`` SGLang's: :attr:`sim.request.Req.admission_max_new`)."""
    return min(max(req.admission_max_new - req.output_len, 0), CLIP_MAX_NEW_TOKENS)


def admitted_output_reservation(req: Req) -> int:
    """Output tokens the KV budget of a prefill pass takes for a request admitted whole (or
    its last chunk): min(max_new_tokens, CLIP_MAX_NEW_TOKENS), its whole output even when a
    retracted request has committed part of it (sglang 0.5.23 schedule_policy.py
    ``PrefillAdder._select_prefill_admission`` / ``add_chunked_req`` pass
    ``min(req.sampling_params.max_new_tokens, CLIP_MAX_NEW_TOKENS)`` to
    ``_update_prefill_budget``). The admission check itself asks only for what is left
    (:func:`reserved_decode_tokens`). 0 for a request that asked no output
    (:attr:`sim.request.Req.admission_max_new`)."""
    m = req.admission_max_new
    return m if m < CLIP_MAX_NEW_TOKENS else CLIP_MAX_NEW_TOKENS


def running_reservation(running: list[Req], new_token_ratio: float, ignore_eos_full: bool = False) -> float:
    """KV tokens the running batch is assumed to still need (SGLang
    ``PrefillAdder._get_running_request_total_token_offset``, summed).

    Each unfinished request reserves min(max_new - out, 4096) x new_token_ratio; with
    ``ignore_eos_full`` (sglang 0.5.23) a request sent with ignore_eos reserves at ratio 1.0,
    since it cannot stop early. Returns tokens (float).
    """
    total = 0.0
    clip = CLIP_MAX_NEW_TOKENS
    # reserved_decode_tokens inlined (once per running request per pass): the same sum of
    # the same terms in the same order
    for r in running:
        # SGLang's max_new_tokens: 0 for a request that asked none (Req.admission_max_new)
        left = r.max_new_tokens - r.asked_no_output - r.output_len
        if left <= 0:  # finished (not filtered yet), or asked no output: reserves nothing
            continue
        ratio = 1.0 if ignore_eos_full and r.ignore_eos else new_token_ratio
        total += (left if left < clip else clip) * ratio
    return total


@dataclass(slots=True)
class PrefillAdder:
    """Budget state of one prefill pass.

    Attributes:
        rem_total_tokens: KV budget: free (+ evictable) tokens minus running requests'
            reservations, minus what this pass admitted (extend + a page + reserved output).
        rem_input_tokens: what is left of max_prefill_tokens.
        rem_chunk_tokens: what is left of chunked_prefill_size; None when chunking is off.
        page_size: KV page size, tokens.
        kv_free: KV tokens that can physically be allocated now (free + evictable), minus
            what this pass's extends took: the hard cap of a chunk that makes progress.
        prefill_max_requests: SGLang's ``--prefill-max-requests`` (None: no limit).
        chunk_fill: how the 2nd and later requests of a pass meet max_prefill_tokens when
            chunking is on: ``exact`` (sglang 0.5.23 ``_select_prefill_admission``:
            max_prefill_tokens is checked only with chunking off, a later request is cut to
            fill the chunk exactly) or ``stop_at_max_prefill_tokens`` (the reference MI355X
            build: a later request that does not fit max_prefill_tokens ends the pass), or
            ``exact_tokens`` (``exact`` on gfx95: the chunk and prompt budgets take the raw
            extend and a cut has no page floor; sim/semantics.py).
        can_run: (request, extend_len) admitted so far, in order.
        new_chunked: the request cut by chunking in this pass, if any.
        swa_rem: hybrid SWA: the SWA pool's free slots minus this pass's charges
            (``SWAPrefillBudget.remaining_swa``); None without an SWA pool.
        swa_window, swa_size: the sliding window and the SWA pool's size (tokens).
        rem_current_tokens: free (+ evictable) tokens minus this pass's page-rounded extends
            and their pages, without any output reservation (``PrefillBudget.remaining_current``).
        ignore_eos_path: the prefix cache is off, so a request sent with ignore_eos is admitted
            by :meth:`add_one_req_ignore_eos` (sglang 0.5.23 ``add_one_req``:
            ``ignore_eos and getattr(tree_cache, "disable", True)``), hybrid-SWA models too
            (a disabled cache is still a ``UnifiedRadixCache`` with ``disable`` set:
            mem_cache/registry.py ``default_radix_cache_factory``).
        running: the running batch and new_token_ratio, read by that path.
    """

    rem_total_tokens: float
    rem_input_tokens: int
    rem_chunk_tokens: int | None
    page_size: int = 1
    kv_free: int | None = None
    prefill_max_requests: int | None = None
    chunk_fill: ChunkFill = "stop_at_max_prefill_tokens"
    swa_rem: int | None = None
    swa_window: int = 0
    swa_size: int = 0
    rem_current_tokens: float = 0.0
    ignore_eos_path: bool = False
    running: list[Req] = field(default_factory=list)
    new_token_ratio: float = 0.0
    can_run: list[tuple[Req, int]] = field(default_factory=list)
    new_chunked: Req | None = None
    _eos_states: list[tuple[float, int]] | None = None

    @classmethod
    def start(
        cls,
        kv_available: int,
        running: list[Req],
        new_token_ratio: float,
        max_prefill_tokens: int,
        chunked_prefill_size: int,
        page_size: int,
        mixed_with_decode_tokens: int = 0,
        *,
        prefill_max_requests: int | None = None,
        chunk_fill: ChunkFill = "stop_at_max_prefill_tokens",
        ignore_eos_full_reservation: bool = False,
        swa: tuple[int, int, int] | None = None,
        ignore_eos_path: bool = False,
    ) -> PrefillAdder:
        """Open a pass (SGLang ``PrefillAdder.__init__``).

        Args:
            kv_available: KV tokens free plus evictable (tokens).
            running: the running batch (finished-but-unfiltered requests reserve nothing).
            new_token_ratio: the scheduler's current ratio.
            max_prefill_tokens, chunked_prefill_size, page_size: server args (tokens);
                chunked_prefill_size <= 0 turns chunking off.
            mixed_with_decode_tokens: decode tokens riding in this extend batch
                (enable_mixed_chunk); every budget shrinks by them.
            prefill_max_requests, chunk_fill: see the class attributes.
            ignore_eos_full_reservation: running ignore_eos requests reserve at ratio 1.0.
            swa: hybrid SWA models: (SWA slots free, sliding window, SWA pool size).
            ignore_eos_path: the prefix cache is off (see the class attributes).
        """
        reserve = running_reservation(running, new_token_ratio, ignore_eos_full_reservation)
        chunk = chunked_prefill_size if chunked_prefill_size > 0 else None
        if chunk is not None:
            chunk -= mixed_with_decode_tokens
        swa_rem, swa_window, swa_size = swa if swa is not None else (None, 0, 0)
        return cls(kv_available - reserve - mixed_with_decode_tokens, max_prefill_tokens - mixed_with_decode_tokens,
                   chunk, page_size, kv_available - mixed_with_decode_tokens, prefill_max_requests, chunk_fill,
                   swa_rem, swa_window, swa_size, kv_available - mixed_with_decode_tokens, ignore_eos_path,
                   running, new_token_ratio)

    def kv_changed(self, tokens: int) -> None:
        """``tokens`` KV slots became allocatable (a preempted request's) or, negative, were
        pinned (a matched prefix taken out of the evictable budget): every KV budget moves
        (``PrefillBudget._available_and_evictable`` feeds remaining_total and remaining_current)."""
        self.rem_total_tokens += tokens
        self.rem_current_tokens += tokens
        if self.kv_free is not None:
            self.kv_free += tokens

    def budget_state(self) -> AddResult:
        """SGLang ``PrefillAdder.budget_state``: NO_TOKEN when the KV budget is spent, OTHER
        when the prompt or chunk budget is, else CONTINUE."""
        if self.rem_total_tokens <= 0 or (self.swa_rem is not None and self.swa_rem <= 0):
            return NO_TOKEN
        if self.rem_input_tokens <= 0 or (self.rem_chunk_tokens is not None and self.rem_chunk_tokens <= 0):
            return OTHER
        return CONTINUE

    def _swa_tokens(self, extend: int, new_tokens: int, chunk_limit: int | None) -> int:
        """SGLang ``estimate_swa_kv_tokens`` for this pass (:func:`swa_peak_tokens`)."""
        return swa_peak_tokens(extend, new_tokens, chunk_limit, self.swa_window, self.page_size)

    def _spend(self, extend: int, reserve_new: int) -> None:
        # SGLang PrefillBudget.reserve: the KV budget takes the page-rounded extend, one
        # page of allocation slack and the reserved output; the compute budgets the extend
        paged = ceil_page(extend, self.page_size)
        if self.swa_rem is not None:  # SWAPrefillBudget.reserve, at the chunk budget before this extend
            self.swa_rem -= self._swa_tokens(paged, reserve_new, self.rem_chunk_tokens)
        self.rem_total_tokens -= paged + self.page_size + reserve_new
        self.rem_current_tokens -= paged + self.page_size
        # _update_prefill_budget's compute charge: the raw extend under exact_chunk_fill (gfx95)
        charge = extend if self.chunk_fill == "exact_tokens" else paged
        self.rem_input_tokens -= charge
        if self.rem_chunk_tokens is not None:
            self.rem_chunk_tokens -= charge
        if self.kv_free is not None:
            self.kv_free -= extend

    def add_chunked_req(self, req: Req, chunk_limit: int | None = None) -> bool:
        """Continue the chunked request of the previous pass first (SGLang add_chunked_req).

        The next chunk is min(remaining prompt, remaining chunk budget, remaining total KV
        budget) (sglang 0.5.23 ``PrefillBudget.available_chunk_tokens``); when the KV budget
        is spent, a full chunk, so the request makes progress and can release its KV. A
        chunk is never larger than the KV that is free, and when the chunk budget itself is
        spent (mixed decode rows took it) the request sits this pass out. ``chunk_limit``
        (shortest-prefill-first's ``shortest_prefill_chunk_limit``) caps the chunk further.

        Returns True if it is still truncated after this pass (it stays the chunked request).
        """
        remaining = req.extend_remaining
        extend = remaining
        if self.rem_chunk_tokens is not None:
            if self.rem_chunk_tokens <= 0:
                return True
            avail = min(self.rem_chunk_tokens, int(self.rem_total_tokens))
            if self.swa_rem is not None:
                # SWAPrefillBudget.available_chunk_tokens: no chunk unless the SWA pool has room
                avail = min(avail, int(self.swa_rem) - self.page_size)
                if avail <= 0:
                    return True
            extend = min(extend, avail if avail > 0 else self.rem_chunk_tokens)
        if chunk_limit is not None and chunk_limit > 0:
            extend = min(extend, chunk_limit)
        if self.kv_free is not None:
            extend = min(extend, self.kv_free)
            if self.page_size > 1:
                # a paged chunk takes whole pages past the request's last one (KVLedger.reserve,
                # mem_cache/allocator/paged.py alloc_extend): the room left in its last page
                # plus the whole free pages, not the free tokens (a one-token chunk starting at
                # a page boundary needs a page)
                base = req.kv_len if req.kv_len > req.prefill_done else req.prefill_done
                slack = ceil_page(base, self.page_size) - base
                extend = min(extend, slack + max(self.kv_free, 0) // self.page_size * self.page_size)
        if extend <= 0:
            return True
        truncated = extend < remaining
        self.can_run.append((req, extend))
        # the last chunk reserves the whole clipped max_new_tokens, not what is left of it
        self._spend(extend, 0 if truncated else admitted_output_reservation(req))
        return truncated

    def add_one_req(self, req: Req, has_chunked_req: bool = False, spf: bool = False) -> AddResult:
        """Try to admit ``req`` (whole, or chunked if the chunk budget is short).

        Mirrors PrefillAdder.add_one_req / ``_select_prefill_admission``: OTHER at
        prefill_max_requests or when the pass's budgets are already spent; NO_TOKEN if its
        raw extend + remaining output (clipped) + a page does not fit the KV budget; then the
        max_prefill_tokens rule of ``chunk_fill``; a request that does not fit the chunk is
        cut to it (page-aligned) and ends admission. ``spf`` with ``has_chunked_req``:
        shortest-prefill-first never cuts a second request while one is chunked.
        """
        if self.prefill_max_requests is not None and len(self.can_run) >= self.prefill_max_requests:
            return OTHER
        if self.budget_state() is OTHER:
            return OTHER  # the resumed chunk or mixed decode rows spent the pass
        if self.ignore_eos_path and req.ignore_eos:
            return self.add_one_req_ignore_eos(req, has_chunked_req)
        # extend_remaining, ceil_page and reserved_decode_tokens inlined (once per admission)
        page = self.page_size
        extend = req.input_len + req.output_len - req.prefill_done
        input_tokens = -(-extend // page) * page
        left = req.max_new_tokens - req.asked_no_output - req.output_len   # Req.admission_max_new inlined
        new = left if 0 <= left <= CLIP_MAX_NEW_TOKENS else (0 if left < 0 else CLIP_MAX_NEW_TOKENS)
        # the KV check takes the raw extend; only the charge below is page-rounded
        # (0.5.23 add_one_req: total_tokens = extend + max_new + per_req_token_overhead)
        if extend + new + page >= self.rem_total_tokens:
            return NO_TOKEN
        limit = self.rem_chunk_tokens
        if self.swa_rem is not None:
            # SWAPrefillBudget.check_prefill: the request's SWA peak must fit what is free; a
            # request that could never fit the pool is cut to what is free (_chunk_cap)
            need = self._swa_tokens(input_tokens, new, limit)
            if need >= self.swa_rem:
                if limit is None or need < self.swa_size:
                    return AddResult.NO_TOKEN
                limit = min(limit, swa_chunk_cap(int(self.swa_rem), new, self.swa_window, self.page_size))
                if limit <= 0:
                    return AddResult.NO_TOKEN
        check_input = self.rem_chunk_tokens is None or self.chunk_fill == "stop_at_max_prefill_tokens"
        if check_input and self.can_run and input_tokens >= self.rem_input_tokens:
            return OTHER
        # whether it fits whole: against the raw extend under exact_chunk_fill (gfx95)
        raw = self.chunk_fill == "exact_tokens"
        if limit is None or (extend if raw else input_tokens) <= limit:
            self.can_run.append((req, extend))
            self._spend(extend, admitted_output_reservation(req))
        else:
            if has_chunked_req and spf:
                return AddResult.OTHER  # only one unfinished chunked request is tracked
            if has_chunked_req or self.new_chunked is not None:
                # One chunked request at a time: the scheduler tracks one (0.5.23
                # managers/scheduler.py get_new_batch_prefill: ``assert self.chunked_req is
                # None`` before taking ``adder.new_chunked_req``). Before SWA a cut spent the
                # chunk budget and admission ended there; an SWA cut (``_chunk_cap``) leaves
                # chunk budget, and 0.5.23 goes on to cut a second request, overwriting
                # ``new_chunked_req``: the first then counts as fully prefilled (no
                # ``inflight_middle_chunks``) and decodes from a partial prompt. The model
                # stops at the first cut instead (the run used to end in negative SWA use).
                return AddResult.OTHER
            # the cut: page-floored, or the remainder verbatim under exact_chunk_fill
            unit = 1 if raw else self.page_size
            trunc = limit // unit * unit
            if self.kv_free is not None:
                trunc = min(trunc, self.kv_free // unit * unit)
            if trunc <= 0:
                return AddResult.OTHER
            self.can_run.append((req, trunc))
            self.new_chunked = req
            self._spend(trunc, 0)
        return self.budget_state()

    def _eos_state(self, r: Req) -> tuple[float, int] | None:
        """(tokens left, tokens held) of one request for :meth:`add_one_req_ignore_eos`:
        max_new x ratio - output (ratio 1.0 for an ignore_eos request, else
        new_token_ratio; not clipped; ``max_new`` SGLang's, 0 for a request that asked no
        output) and prompt + output; None when nothing is left."""
        left = r.admission_max_new * (1.0 if r.ignore_eos else self.new_token_ratio) - r.output_len
        return (left, r.input_len + r.output_len) if left > 0 else None

    def _eos_states_with(self, req: Req) -> list[tuple[float, int]]:
        """The pass's projection list with ``req`` added, ascending by tokens left: built
        once per pass from ``req``, the running batch and this pass's admissions, then
        ``req`` inserted by SGLang's loop, which places a request that leaves more than
        every other one before the last entry, not after it."""
        states = self._eos_states
        if states is None:
            states = []
            for r in [req, *self.running, *(a for a, _ in self.can_run)]:
                st = self._eos_state(r)
                if st is not None:
                    states.append(st)
            states.sort(key=lambda x: x[0])
            self._eos_states = states
            return states
        st = self._eos_state(req)
        if st is not None:
            i = 0
            for i in range(len(states)):
                if st[0] <= states[i][0]:
                    break
            states.insert(i, st)
        return states

    def add_one_req_ignore_eos(self, req: Req, has_chunked_req: bool = False) -> AddResult:
        """Admit a request sent with ignore_eos while the prefix cache is off (sglang 0.5.23
        schedule_policy.py ``PrefillAdder.add_one_req_ignore_eos``).

        Its page-rounded extend + a page must fit both the total and the current budget
        (its own output is not asked for here); then a projection: with the requests (this
        one, the running batch, this pass's admissions) in order of tokens left, the i-th to
        finish must still find room for every request after it, ``IGNORE_EOS_RESERVE_TOKENS``
        each, counting the prompt + output KV of those finished before. max_prefill_tokens
        is not checked; a request longer than the chunk budget is cut to it exactly (no page
        floor) and ends the pass. Returns NO_TOKEN, OTHER, or the pass's budget state.

        Hybrid-SWA models (``swa_rem`` set) take this path too, with two differences
        (``SWAPrefillBudget.can_allocate_prefill``; ``if not self.is_hybrid_swa`` around the
        projection): the request's SWA peak (raw extend, its remaining output clipped as
        ``_swa_new_tokens``, at most the chunk budget a forward) must be at most the free
        SWA slots, and the projection is skipped ("this mechanism is underestimating the
        memory usage" there). A prompt whose SWA peak can never fit is not cut to the free
        SWA as :meth:`add_one_req` cuts it: it waits.
        """
        extend = req.extend_remaining
        paged = ceil_page(extend, self.page_size) + self.page_size
        if paged > min(self.rem_current_tokens, self.rem_total_tokens):
            return NO_TOKEN
        if self.swa_rem is not None:
            new = reserved_decode_tokens(req)
            if self._swa_tokens(extend, new, self.rem_chunk_tokens) > self.swa_rem:
                return NO_TOKEN
        else:
            states = self._eos_states_with(req)
            cur = self.rem_current_tokens - paged
            freed = 0
            n = len(states)
            for i, (tokens_left, held) in enumerate(states):
                bs = n - i
                if cur + freed - tokens_left * bs <= IGNORE_EOS_RESERVE_TOKENS * bs:
                    return NO_TOKEN
                freed += held
        chunk = self.rem_chunk_tokens
        if chunk is None or extend <= chunk:
            self.can_run.append((req, extend))
            self._spend(extend, admitted_output_reservation(req))
            return self.budget_state()
        if chunk <= 0 or has_chunked_req or self.new_chunked is not None:
            return OTHER  # one chunked request at a time (see add_one_req)
        trunc = chunk if self.kv_free is None else min(chunk, self.kv_free)
        if trunc <= 0:
            return OTHER
        self.can_run.append((req, trunc))
        self.new_chunked = req
        self._spend(trunc, 0)
        return self.budget_state()

