"""The runtime's KV cache and pools (SGLang names, mem_cache/memory_pool.py and allocator.py).

- :class:`ReqToTokenPool`: ``req_to_token[row, position] -> KV slot`` (ReqToTokenPool),
  the free-slot list on the device (TokenToKVPoolAllocator; per token at any page size: the
  scheduler's paged ledger sizes each row in whole pages, :meth:`ReqToTokenPool.hold`), and per-row
  device state the overlap loop relays without the host (FutureMap,
  managers/overlap_utils.py): committed length ``seq_lens``, last sampled token
  ``last_token``, and the previous verify window for the drafter's KV catch-up.
  Row 0 and slot 0 are reserved padding (graph replays pad the batch with row 0).
- :class:`KVBuffers`: ``k, v[layer, slot, kv_head, head_dim]`` for one model
  (MHATokenToKVPool); the target and the drafter each have one, sharing the slot mapping
  (SGLang's draft worker shares req_to_token_pool, owns its token_to_kv_pool).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from specsched.runtime.device import Device
from specsched.runtime.model_config import ModelConfig

PAD_ROW = 0
PAD_SLOT = 0
CTX_ALIGN = 64
"""Attention context widths are multiples of this (aligned strides for the fused SDPA
kernels, e.g. cuDNN's on H200)."""


def round_up(n: int, k: int = CTX_ALIGN) -> int:
    """``n`` rounded up to a multiple of ``k`` (default: an attention context width)."""
    return -(-n // k) * k



class KVBuffers:
    """One model's KV cache: ``k, v[layer, slot, kv_head, head_dim]`` (SGLang's
    MHATokenToKVPool, mem_cache/memory_pool.py). Slot 0 is the padding slot.

    Args:
        cfg: the model's config.
        num_slots: token slots (incl. the padding slot).
        device: torch device.
        dtype: cache dtype (the model's).
    """

    def __init__(self, cfg: ModelConfig, num_slots: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (cfg.num_layers, num_slots, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes held (K and V)."""
        return 2 * self.k.numel() * self.k.element_size()

    def write(self, layer: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k, v`` (``[T, kv_heads, head_dim]``) at slots ``loc`` (``[T]`` int64)."""
        self.k[layer][loc] = k
        self.v[layer][loc] = v

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V at ``slots`` (``[B, C]``): two ``[B, C, kv_heads, head_dim]`` tensors."""
        return self.k[layer][slots], self.v[layer][slots]



class PoolExhausted(RuntimeError):
    """No free request row or not enough free KV slots (the scheduler's KV budget should
    have prevented it: the runtime pool is sized from the scenario)."""


def expand_slots(values: torch.Tensor, repeats: torch.Tensor, total: int | None) -> torch.Tensor:
    """Per-request values -> per-token values: ``repeat_interleave(values, repeats)``.

    Args:
        values: ``[N]`` per-request values (row ids, start positions...).
        repeats: ``[N]`` int64 tokens per request (device tensor).
        total: ``sum(repeats)`` when the host knows it: passed as ``output_size``, no host
            sync. None: torch must read ``repeats`` back to size the output: a host sync
            that waits for all queued work on the stream (DSpark's prefill slot expansion
            on the HIP unified-KV backend does exactly this, twice;
            speculative/dspark_components; reproduced on purpose by
            ``ModelRunner.prepare_inject(sync=True)``).

    Returns:
        ``[sum(repeats)]`` tensor of ``values``' dtype.
    """
    return torch.repeat_interleave(values, repeats, output_size=total)


class ReqToTokenPool:
    """Request rows, token positions -> KV slots, and the per-row device state.

    Combines SGLang's ReqToTokenPool (``req_to_token``), TokenToKVPoolAllocator (free
    slots as a device tensor, allocation by slicing: no host sync) and the FutureMap
    buffers (managers/overlap_utils.py) that let step N+1 read step N's outputs on the
    GPU without the host: ``seq_lens`` and ``last_token`` per row.

    Position -> slot mappings are reserved ahead (:meth:`reserve`) from host-known upper
    bounds, so a verify can write its whole window without allocating: rejected positions
    stay reserved and are overwritten by the next cycle ("rollback by not advancing").
    All slots a row owns return to the free list when the row is freed.

    With the radix prefix cache a row's first ``shared[row]`` positions point at slots the
    tree owns (SGLang: ``req_to_token[row, :prefix_len]`` = the matched nodes' values,
    schedule_batch.py ``prepare_for_extend``); the row owns positions ``shared .. reserved - 1``
    only. :meth:`attach` maps a matched prefix, :meth:`to_tree` hands a row's slots to the
    tree (freeing those the tree already had), :meth:`free_tree` takes back evicted slots.
    With KV pages (page_size P > 1) ``shared`` is a multiple of P (the tree keeps whole pages)
    and a row keeps its partial last page among the positions it owns (sglang 0.5.23
    mem_cache/radix_cache.py ``checkpoint``: ``cache_protected_len`` marks the tree's part).
    INV-POOL: ``num_free_slots + sum(reserved - shared) + tree_slots`` = every slot but the
    padding slot, each in exactly one of the three (tests/test_runtime_radix.py).

    Args:
        max_reqs: request rows (row 0 extra, padding).
        max_context: positions per row.
        num_slots: KV slots (slot 0 extra, padding).
        window: verify window (spec state width; 1 without spec).
        device: the :class:`~runtime.device.Device`.

    Attributes (device tensors, int64, one entry per row incl. padding row 0):
        req_to_token: ``[rows, width]`` slot of each position (0 = unmapped/padding);
            ``width`` = max_context rounded up to :data:`CTX_ALIGN` (positions past
            max_context are never reserved: they only pad the attention context).
        seq_lens: ``[rows]`` committed tokens whose KV is in the cache.
        last_token: ``[rows]`` last sampled token (its KV is not yet written).
        prev_window / prev_start / prev_accept: ``[rows, window]`` / ``[rows]`` / ``[rows]``
            the previous verify window, its first position and its accepted drafts
            (-1: none; the drafter's KV catch-up reads these).
        draft_next: ``[rows]`` a chain drafter's first draft token of the next cycle, which
            the draft extend after each verify proposes (EAGLE's ``topk_index``).
        draft_topk / draft_logp: ``[rows, topk]`` a draft tree's K first drafts and their
            log-probabilities (EAGLE's ``topk_index`` / ``topk_p``; ``topk`` > 1 only).
        token_ids / token_len: ``[rows, width]`` / ``[rows]`` with ``token_ids`` on
            (:meth:`set_ids`, :meth:`forced`): each row's known token ids (a multi-turn turn's
            prompt and the output the next turn resends) and how many; None otherwise.
    Host attributes: ``reserved[row]`` positions mapped, ``len_bound[row]`` upper bound of
    ``seq_lens[row]`` (exact after extend/decode and forced-accept cycles), ``shared[row]``
    leading positions whose slots the prefix tree owns, ``tree_slots`` slots the tree owns.
    """

    def __init__(self, max_reqs: int, max_context: int, num_slots: int, window: int, device: Device,
                 topk: int = 1, token_ids: bool = False) -> None:
        if max_reqs < 1 or max_context < 2 or num_slots < 2 or window < 1 or topk < 1:
            raise ValueError(f"bad pool sizes: max_reqs={max_reqs}, max_context={max_context}, num_slots={num_slots}, "
                             f"window={window}, topk={topk}")
        dev = device.torch_device
        self.device = device
        self.max_context = max_context
        self.width = round_up(max_context)
        rows = max_reqs + 1
        self.req_to_token = torch.zeros(rows, self.width, dtype=torch.int64, device=dev)
        self.seq_lens = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.last_token = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.prev_window = torch.zeros(rows, window, dtype=torch.int64, device=dev)
        self.prev_start = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.prev_accept = torch.full((rows,), -1, dtype=torch.int64, device=dev)
        self.draft_next = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.draft_topk = torch.zeros(rows, topk, dtype=torch.int64, device=dev) if topk > 1 else None
        self.draft_logp = torch.zeros(rows, topk, dtype=torch.float32, device=dev) if topk > 1 else None
        self.token_ids = torch.zeros(rows, self.width, dtype=torch.int64, device=dev) if token_ids else None
        self.token_len = torch.zeros(rows, dtype=torch.int64, device=dev) if token_ids else None
        self.free_slots = torch.arange(1, num_slots, dtype=torch.int64, device=dev)
        self.num_free_slots = num_slots - 1
        self._free_rows = list(range(max_reqs, 0, -1))
        self.reserved = [0] * rows
        self.len_bound = [0] * rows
        self.shared = [0] * rows
        self.tree_slots = 0
        self.num_slots = num_slots - 1

    @property
    def num_free_rows(self) -> int:
        return len(self._free_rows)

    def alloc_row(self) -> int:
        """A free request row (>= 1).

        Raises:
            PoolExhausted: none left.
        """
        if not self._free_rows:
            raise PoolExhausted("no free request row")
        row = self._free_rows.pop()
        self.reserved[row] = 0
        self.len_bound[row] = 0
        self.shared[row] = 0
        return row

    def free_row(self, row: int) -> None:
        """Return ``row`` and the slots it owns (no host sync); positions it shares with the
        prefix tree stay the tree's (SGLang ``release_kv_cache`` frees
        ``req_to_token[row, cache_protected_len:]`` only).

        Raises:
            ValueError: row 0 or a row not in use.
        """
        if row <= 0 or row in self._free_rows:
            raise ValueError(f"row {row} is not an allocated request row")
        n, s = self.reserved[row], self.shared[row]
        if n > s:
            self.free_slots = torch.cat([self.free_slots, self.req_to_token[row, s:n]])
            self.num_free_slots += n - s
        if n:
            self.req_to_token[row, :n].fill_(PAD_SLOT)
        self.reserved[row] = 0
        self.len_bound[row] = 0
        self.shared[row] = 0
        self._free_rows.append(row)

    def attach(self, row: int, slots: torch.Tensor, n: int) -> None:
        """Point a fresh row's positions ``0 .. n - 1`` at ``slots`` (``[n]``), a matched
        prefix the tree owns (SGLang ``match_prefix`` returns the matched nodes' values;
        ``prepare_for_extend`` writes them into ``req_to_token``).

        Raises:
            ValueError: the row already maps positions.
        """
        if self.reserved[row]:
            raise ValueError(f"row {row} already maps {self.reserved[row]} positions")
        if n:
            self.req_to_token[row, :n] = slots
        self.reserved[row] = self.shared[row] = n

    def to_tree(self, row: int, present: int, upto: int, path: torch.Tensor) -> torch.Tensor:
        """The row's positions up to ``upto`` become the tree's (SGLang 0.5.23
        mem_cache/radix_cache.py ``cache_unfinished_req`` / ``cache_finished_req``): its own
        slots of positions ``shared .. present - 1`` duplicate what the tree already holds
        (``path``, the slots of the inserted path's positions ``0 .. >= present - 1``): they
        are freed and the row points at the tree's; its slots of ``present .. upto - 1`` go
        to the new leaf and are returned (a copy of the row's mapping, ``[upto - present]``).

        Raises:
            ValueError: ``upto`` beyond what the row maps.
        """
        s = self.shared[row]
        if upto > self.reserved[row]:
            raise ValueError(f"row {row}: cannot cache {upto} positions, it maps {self.reserved[row]}")
        if present > s:
            self.free_slots = torch.cat([self.free_slots, self.req_to_token[row, s:present]])
            self.num_free_slots += present - s
            self.req_to_token[row, s:present] = path[s:present]
        lo = max(s, present)
        value = self.req_to_token[row, lo:upto].clone()
        if upto > lo:
            self.tree_slots += upto - lo
        self.shared[row] = max(s, upto)
        return value

    def free_tree(self, slots: torch.Tensor, n: int) -> None:
        """Evicted tree slots (``[n]``) go back to the free list (SGLang ``RadixCache.evict``
        -> ``token_to_kv_pool_allocator.free(node.value)``)."""
        if n:
            self.free_slots = torch.cat([self.free_slots, slots])
            self.num_free_slots += n
            self.tree_slots -= n

    def reserve(self, rows: Sequence[int], upto: Sequence[int]) -> None:
        """Map positions ``reserved[row] .. upto - 1`` of each row to fresh slots.

        Per-token (row, position) pairs come from :func:`expand_slots` with the total
        known on the host (no sync). Rows already reserved that far are skipped.

        Raises:
            ValueError: ``upto`` beyond ``max_context``.
            PoolExhausted: not enough free slots.
        """
        need, rs, starts = [], [], []
        for r, u in zip(rows, upto, strict=True):
            if u > self.max_context:
                raise ValueError(f"row {r}: position {u - 1} beyond max_context {self.max_context}")
            n = u - self.reserved[r]
            if n > 0:
                need.append(n)
                rs.append(r)
                starts.append(self.reserved[r])
        total = sum(need)
        if total == 0:
            return
        if total > self.num_free_slots:
            raise PoolExhausted(f"need {total} KV slots, {self.num_free_slots} free")
        for r, s, n in zip(rs, starts, need, strict=True):
            self.reserved[r] = s + n
        slots = self.free_slots[:total]
        self.free_slots = self.free_slots[total:]
        self.num_free_slots -= total
        tok_rows, tok_pos = self._positions(rs, starts, need)
        self.req_to_token[tok_rows, tok_pos] = slots

    def release(self, rows: Sequence[int], keep: Sequence[int]) -> None:
        """Return the slots of positions ``keep[row] .. reserved[row] - 1`` of each row to
        the free list (no host sync; rows already at or below ``keep`` are skipped).

        SGLang frees a verify's rejected positions once its result is processed
        (``process_batch_result``); stream order makes the forwards queued before this call
        finish with those slots before a later forward reuses them.

        Raises:
            ValueError: ``keep`` below the positions the row shares with the prefix tree.
        """
        cut, rs, starts = [], [], []
        for r, k in zip(rows, keep, strict=True):
            if k < self.shared[r]:
                raise ValueError(f"row {r}: keep {k} below its {self.shared[r]} positions shared with the prefix tree")
            n = self.reserved[r] - k
            if n > 0:
                cut.append(n)
                rs.append(r)
                starts.append(k)
                self.reserved[r] = k
        total = sum(cut)
        if total == 0:
            return
        tok_rows, tok_pos = self._positions(rs, starts, cut)
        self.free_slots = torch.cat([self.free_slots, self.req_to_token[tok_rows, tok_pos]])
        self.req_to_token[tok_rows, tok_pos] = PAD_SLOT
        self.num_free_slots += total

    def hold(self, rows: Sequence[int], counts: Sequence[int]) -> None:
        """Make each row own exactly ``counts[row]`` KV slots (positions ``shared .. shared +
        count - 1``, after the prefix the tree holds for it): the tails above their count
        are released first, then the rows below it reserved.

        This is how the runtime obeys the scheduler's KV ledger: ``counts`` are the slots
        the ledger says each request holds (``Req.kv_allocated``), so the device pool holds
        what the scheduler accounted for, never more (a retracted or finished request
        holds 0 and its row is freed by the caller).

        Raises:
            ValueError: a count beyond ``max_context``.
            PoolExhausted: the reservations exceed the free slots (the ledger's total is
                above the pool's size).
        """
        upto = [self.shared[r] + c for r, c in zip(rows, counts, strict=True)]
        self.release(rows, [min(u, self.reserved[r]) for r, u in zip(rows, upto, strict=True)])
        self.reserve(rows, upto)

    def covers(self, rows: Sequence[int], upto: Sequence[int]) -> None:
        """Check that each row already holds positions ``0 .. upto - 1`` (the step about to
        run writes no further).

        Raises:
            PoolExhausted: a row holds fewer (the scheduler reserved less than the step
                needs: a KV accounting bug).
        """
        for r, u in zip(rows, upto, strict=True):
            if u > self.reserved[r]:
                raise PoolExhausted(f"row {r}: the step writes KV position {u - 1}, the scheduler's ledger "
                                    f"holds {self.reserved[r]} slots for it")

    def _positions(self, rows: Sequence[int], starts: Sequence[int], counts: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token ``(row, position)`` device tensors of the ranges ``start .. start + count - 1``
        of each row (host-known total: no sync)."""
        total = sum(counts)
        cum = [0]
        for n in counts[:-1]:
            cum.append(cum[-1] + n)
        meta = self.device.h2d([list(rows), list(counts), list(starts), cum])
        rows_t, n_t, start_t, cum_t = meta[0], meta[1], meta[2], meta[3]
        tok_rows = expand_slots(rows_t, n_t, total)
        ar = torch.arange(total, device=rows_t.device)
        return tok_rows, expand_slots(start_t - cum_t, n_t, total) + ar

    def set_ids(self, row: int, ids: torch.Tensor | None) -> None:
        """Row ``row``'s known token ids (a device int64 tensor within the vocabulary; None:
        none, every token the model's own). Device work only (no host sync)."""
        if self.token_ids is None or self.token_len is None:
            return
        n = 0 if ids is None else min(int(ids.numel()), self.width)
        if n:
            self.token_ids[row, :n] = ids[:n]
        self.token_len.select(0, row).fill_(n)

    def forced(self, rows_t: torch.Tensor, pos: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        """``tok`` (``[B]`` or ``[B, k]``, the tokens the model chose for positions ``pos``,
        same shape) with each position a row's known ids cover replaced by that id: the
        token then fed at ``pos`` is the one the workload says is there, so the KV written
        for it is that token's (a multi-turn history that the next turn matches in the
        prefix cache). Unchanged without ``token_ids``."""
        if self.token_ids is None or self.token_len is None:
            return tok
        at = pos.clamp(0, self.width - 1)
        if pos.dim() == 2:
            return torch.where(pos < self.token_len[rows_t][:, None], self.token_ids[rows_t[:, None], at], tok)
        return torch.where(pos < self.token_len[rows_t], self.token_ids[rows_t, at], tok)

    def reset_padding(self) -> None:
        """Put padding row 0's device state back (graph replays pad with row 0).

        Scalar writes use ``fill_`` (a kernel argument): ``t[i] = 0`` would copy a
        pageable CPU scalar, a hidden host-to-device copy that graph capture rejects.
        """
        self.seq_lens.select(0, PAD_ROW).fill_(0)
        self.last_token.select(0, PAD_ROW).fill_(0)
        self.prev_start.select(0, PAD_ROW).fill_(0)
        self.prev_accept.select(0, PAD_ROW).fill_(-1)
        self.draft_next.select(0, PAD_ROW).fill_(0)
        if self.draft_topk is not None and self.draft_logp is not None:
            self.draft_topk.select(0, PAD_ROW).fill_(0)
            self.draft_logp.select(0, PAD_ROW).fill_(0)

