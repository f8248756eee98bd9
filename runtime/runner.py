"""The model runner: request rows, extend (chunked prefill) and draft injection (eager, or
piecewise graphs at token buckets: :mod:`runtime.prefill_graph`), and the graph cache of
decode/speculative steps (decode and the cycle itself: :mod:`runtime.spec_cycle`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from specsched.runtime.device import Device, default_bs_buckets, pick_bucket
from specsched.runtime.kv_cache import (
    PAD_ROW,
    KVBuffers,
    ReqToTokenPool,
    expand_slots,
    round_up,
)
from specsched.runtime.layers import (
    AttnBatch,
    AttnImpl,
    LlamaProxy,
    graphed_attention,
    position_mask,
)
from specsched.runtime.prefill_graph import PiecewiseExtend
from specsched.runtime.spec_cycle import SpecCycle, StepOut, draft_tree_shape


@dataclass(slots=True)
class RaggedBatch:
    """Device inputs of an extend forward over ragged per-request token counts.

    Attributes:
        rows: ``[B]`` int64 request rows.
        positions: ``[T]`` int64 position of each token.
        attn: :class:`AttnBatch` (padded query layout).
        last_index: ``[B]`` int64 flat index of each request's last token.
        seq_after: ``[B]`` int64 prefix + extend length.
        num_tokens: T (host).
    """

    rows: torch.Tensor
    positions: torch.Tensor
    attn: AttnBatch
    last_index: torch.Tensor
    seq_after: torch.Tensor
    num_tokens: int


@dataclass(slots=True)
class ExtendOut:
    """Result of :meth:`ModelRunner.extend` (device tensors, nothing read back).

    Attributes:
        next_tokens: ``[B]`` int64 first sampled token of requests whose prefill
            completed, -1 for the others (chunked prefill in progress).
        logits: ``[T, vocab]`` float32 when asked for, else None.
        batch: the forward's :class:`RaggedBatch`.
        tokens: ``[T]`` int64 input ids on the device (the inject forward reuses them).
    """

    next_tokens: torch.Tensor
    logits: torch.Tensor | None
    batch: RaggedBatch
    tokens: torch.Tensor



@dataclass(slots=True)
class _Static:
    rows: torch.Tensor
    forced: torch.Tensor
    out: dict[str, torch.Tensor] = field(default_factory=dict)


def _check_extend(rows: Sequence[int], prefix_lens: Sequence[int], extend_lens: Sequence[int]) -> None:
    b = len(rows)
    if b == 0 or not (b == len(prefix_lens) == len(extend_lens)):
        raise ValueError("rows, prefix_lens, extend_lens must be non-empty and of equal length")
    if min(extend_lens) < 1 or min(prefix_lens) < 0:
        raise ValueError("extend_lens must be >= 1 and prefix_lens >= 0")


CTX_BUCKET_STEP = 256
"""Spacing (positions) of the engine's graph context buckets (runtime/engine.py). Every
decode/verify forward attends densely over one bucket width for the whole batch (the
longest request's length bound + the step's width, rounded up to this; spec_cycle
``_prepare``), so the profile says ``gpu.attention_width: padded_max`` with this bucket.
The engine's widest bucket is on this lattice too (:func:`engine_context_width`)."""


def engine_context_width(max_context: int) -> int:
    """The request rows' width (and widest graph context bucket) the engine gives
    ``max_context`` positions: rounded up to :data:`CTX_BUCKET_STEP`, so every decode/verify
    runs at ``round_up(longest bound + width, CTX_BUCKET_STEP)`` positions, the width the
    simulator charges (sim.cost_model.CostModel.attention_width). Rounded to CTX_ALIGN only,
    a widest bucket off the lattice (e.g. 1408) ran steps the simulator charged at 1536."""
    return round_up(max_context, CTX_BUCKET_STEP)


def default_ctx_buckets(max_context: int, smallest: int = 256) -> list[int]:
    """Context buckets for graphs: powers of two from ``smallest`` up, then ``max_context``
    rounded up to :data:`CTX_ALIGN`."""
    top = round_up(max_context)
    out, c = [], smallest
    while c < top:
        out.append(c)
        c *= 2
    out.append(top)
    return out


class ModelRunner(SpecCycle):
    """Executes extend / inject / decode / verify / speculative cycles for request rows.

    The host side holds only integers (rows, lengths, bounds); every per-token tensor is
    built on the device, and no method syncs the host except
    :meth:`prepare_inject` with ``sync=True`` (on purpose), the constructor (one
    ``setup`` sync) and the explicitly named readers (:meth:`read_seq_lens`).

    Streams: work is queued on the *current* stream, and host data reaches the device
    through :meth:`Device.h2d` on that same stream, so every call must run on one stream
    (the engine enters ``device.use("forward")`` once); reading a runner's outputs on
    another stream needs an event (:meth:`Device.copy_to_host` pairs one).

    Args:
        target: the target model.
        device: the :class:`~runtime.device.Device` (h2d copies, graphs, sync counting).
        max_reqs: concurrent request rows.
        max_context: positions per request (prompt + output + window).
        num_slots: KV slots (default ``max_reqs * max_context + 1``).
        drafter: the drafter (same class, typically fewer layers; same vocab).
        drafter_kind: ``"block"`` (DSpark/DFlash: one parallel forward per cycle) or
            ``"chain"`` (EAGLE/MTP: serial draft steps and a draft extend after the
            verify; a draft tree with ``topk`` > 1); see :mod:`runtime.spec_cycle`.
        spec_window: verify window W = gamma + 1 (>= 2 for speculative cycles; a chain
            drafter's ``speculative_num_draft_tokens`` = ``speculative_num_steps + 1``, a
            tree's ``speculative_num_draft_tokens`` nodes).
        topk: a chain drafter's ``speculative_eagle_topk`` (K > 1: a draft tree of
            ``spec_window`` nodes, :func:`runtime.spec_cycle.draft_tree_shape`).
        num_steps: a tree's ``speculative_num_steps`` (its depth; default ``spec_window - 1``,
            the chain's).
        attn_impl: ``"sdpa"`` or ``"explicit"``.
        mask_token: the drafter's mask token id (default ``vocab - 1``).
        bs_buckets / ctx_buckets: graph buckets (defaults: SGLang-like bs list up to
            ``max_reqs``; powers of two up to ``max_context``).
        external_kv: the caller decides every row's KV slots (:meth:`ReqToTokenPool.hold`,
            from the scheduler's ledger, as :class:`runtime.engine.RuntimeEngine` does);
            steps then only check that their positions are held. False: each step reserves
            what it writes (microbenchmarks, tests).
        prefill_graph_tokens: token buckets of the piecewise extend and inject
            (:class:`runtime.prefill_graph.PiecewiseExtend`; SGLang's
            ``cuda_graph_bs_prefill``). None or empty: extends and injects run eagerly. On
            CPU the pieces run eagerly through the same path (tests).

    Raises:
        ValueError: drafter vocab differs from the target's; a drafter with
            ``spec_window < 2``; an unknown ``drafter_kind``; ``topk`` > 1 without a chain
            drafter, or ``topk`` / ``num_steps`` < 1.
    """

    def __init__(
        self,
        target: LlamaProxy,
        device: Device,
        *,
        max_reqs: int,
        max_context: int,
        num_slots: int | None = None,
        drafter: LlamaProxy | None = None,
        drafter_kind: Literal["block", "chain"] = "block",
        spec_window: int = 1,
        topk: int = 1,
        num_steps: int | None = None,
        attn_impl: AttnImpl = "sdpa",
        mask_token: int | None = None,
        bs_buckets: Sequence[int] | None = None,
        ctx_buckets: Sequence[int] | None = None,
        external_kv: bool = False,
        prefill_graph_tokens: Sequence[int] | None = None,
        token_ids: bool = False,
    ) -> None:
        if drafter is not None:
            if drafter.cfg.vocab_size != target.cfg.vocab_size:
                raise ValueError(f"drafter vocab {drafter.cfg.vocab_size} != target vocab {target.cfg.vocab_size}")
            if spec_window < 2:
                raise ValueError("a drafter needs spec_window >= 2 (gamma >= 1)")
        if drafter_kind not in ("block", "chain"):
            raise ValueError(f"drafter_kind must be 'block' or 'chain', got {drafter_kind!r}")
        if topk < 1 or (num_steps is not None and num_steps < 1):
            raise ValueError(f"topk and num_steps must be >= 1, got {topk}, {num_steps}")
        if topk > 1 and (drafter is None or drafter_kind != "chain"):
            raise ValueError("a draft tree (topk > 1) needs a chain drafter")
        self.target = target
        self.drafter = drafter
        self.chain = drafter is not None and drafter_kind == "chain"
        self.device = device
        self.window = spec_window
        self.gamma = spec_window - 1
        self.topk = topk
        # the serial draft steps + 1 (SGLang's speculative_num_steps; a tree's depth)
        self.num_steps = num_steps or spec_window - 1
        self.tree = draft_tree_shape(self.num_steps, spec_window) if topk > 1 else None
        # the most drafts one cycle accepts: a tree's spine, else every draft
        self.accept_max = self.tree.spine if self.tree is not None else self.gamma
        self.attn_impl = attn_impl
        target.attn_impl = attn_impl
        if drafter is not None:
            drafter.attn_impl = attn_impl
        self.mask_token = target.cfg.vocab_size - 1 if mask_token is None else mask_token
        slots = num_slots if num_slots is not None else max_reqs * max_context + 1
        self.pool = ReqToTokenPool(max_reqs, max_context, slots, spec_window, device, topk=topk, token_ids=token_ids)
        dev, dt = device.torch_device, target.dtype
        # the tree's static shape on the device, made here: a tensor first made during a
        # graph capture holds garbage until replay
        self.tree_anc = (torch.tensor(self.tree.ancestors(), dtype=torch.bool, device=dev)
                         if self.tree is not None else None)
        self.tree_depth = (torch.tensor(self.tree.depth, dtype=torch.int64, device=dev)
                           if self.tree is not None else None)
        self.kv = KVBuffers(target.cfg, slots, dev, dt)
        self.draft_kv = KVBuffers(drafter.cfg, slots, dev, drafter.dtype) if drafter is not None else None
        self.bs_buckets = list(bs_buckets) if bs_buckets else default_bs_buckets(max_reqs)
        width = self.pool.width
        self.ctx_buckets = sorted({min(round_up(c), width) for c in ctx_buckets}) if ctx_buckets else default_ctx_buckets(max_context)
        self._statics: dict[tuple, _Static] = {}
        self.external_kv = external_kv
        self.piecewise: dict[str, PiecewiseExtend] = {}
        if prefill_graph_tokens:
            self.piecewise["extend"] = PiecewiseExtend(target, self.kv, device, prefill_graph_tokens, "extend")
            if drafter is not None and self.draft_kv is not None:
                self.piecewise["inject"] = PiecewiseExtend(drafter, self.draft_kv, device, prefill_graph_tokens, "inject")
        # buffers were filled on the constructing stream; the loop runs on the forward
        # stream: one setup sync (not in the loop) orders them
        device.synchronize("setup")

    # ------------------------------------------------------------------ requests
    def add_request(self) -> int:
        """Allocate a request row (its KV is reserved by the first extend).

        Raises:
            PoolExhausted: no row free.
        """
        return self.pool.alloc_row()

    def free_request(self, row: int) -> None:
        """Free a request's row and KV slots."""
        self.pool.free_row(row)

    def observe_lengths(self, rows: Sequence[int], lengths: Sequence[int]) -> None:
        """Tighten the host's length bounds with exact committed lengths (e.g. from a
        step's copied-back results)."""
        for r, n in zip(rows, lengths, strict=True):
            self.pool.len_bound[r] = n

    def read_seq_lens(self, rows: Sequence[int]) -> list[int]:
        """Committed lengths read back from the device. A HOST SYNC (tests, debugging)."""
        return self.pool.seq_lens[self.device.h2d(rows)].tolist()

    def context_bucket(self, need: int) -> int:
        """The graph context bucket covering ``need`` positions.

        Raises:
            ValueError: ``need`` exceeds ``max_context``.
        """
        c = pick_bucket(need, self.ctx_buckets)
        if c is None:
            raise ValueError(f"context {need} beyond max_context {self.pool.max_context}")
        return c

    def _arange(self, n: int) -> torch.Tensor:
        # not cached: a tensor first made during graph capture holds garbage until replay
        return torch.arange(n, device=self.device.torch_device)

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if t.device == self.device.torch_device:
            return t.to(torch.int64)
        return self.device.h2d(t)

    # -------------------------------------------------------------------- extend
    def prefill_bucket(self, tokens: int) -> int | None:
        """The token bucket an extend of ``tokens`` replays at, or None when it runs eagerly
        (no prefill graphs, above the largest bucket, or padding beyond
        :data:`runtime.prefill_graph.MAX_PADDING_FACTOR`)."""
        pw = self.piecewise.get("extend")
        return None if pw is None else pw.bucket(tokens)

    def capture_prefill(self, max_tokens: int | None = None) -> int:
        """Capture the piecewise extend (and inject) graphs of every bucket up to
        ``max_tokens`` (None: all), as SGLang captures its prefill buckets at start-up; a
        bucket first used later is captured then (two device synchronizations). Returns
        the number of buckets captured per model. Largest bucket first, as SGLang captures
        them (runner/prefill_cuda_graph_runner.py ``_capture_one_stream``:
        ``reversed(capture_num_tokens)``), so the smaller buckets reuse the graph pool's
        blocks the largest freed."""
        n = 0
        for pw in self.piecewise.values():
            todo = [b for b in pw.buckets if max_tokens is None or b <= max(max_tokens, pw.buckets[0])]
            for b in sorted(todo, reverse=True):
                pw.capture(b)
            n = max(n, len(todo))
        return n

    def _forward_extend(self, part: str, model: LlamaProxy, kv: KVBuffers, ids: torch.Tensor, batch: RaggedBatch) -> torch.Tensor:
        pw = self.piecewise.get(part)
        b = None if pw is None else pw.bucket(batch.num_tokens)
        if b is None:
            return model(ids, batch.positions, batch.attn, kv)
        return pw.forward(ids, batch.positions, batch.attn, b)

    def _ragged(self, rows: Sequence[int], prefix_lens: Sequence[int], extend_lens: Sequence[int], sync: bool) -> RaggedBatch:
        _check_extend(rows, prefix_lens, extend_lens)
        b = len(rows)
        t = sum(extend_lens)
        qn = max(extend_lens)
        ctx = min(round_up(max(p + e for p, e in zip(prefix_lens, extend_lens, strict=True))), self.pool.width)
        cum = [0]
        for e in extend_lens[:-1]:
            cum.append(cum[-1] + e)
        meta = self.device.h2d([list(rows), list(prefix_lens), list(extend_lens), cum])
        rows_t, pre_t, ext_t, cum_t = meta[0], meta[1], meta[2], meta[3]
        total = None if sync else t
        dev = self.device
        t0 = time.perf_counter()
        tok_req = expand_slots(self._arange(b), ext_t, total)
        if sync:
            dev.count_sync("slot_expansion", time.perf_counter() - t0)
            t0 = time.perf_counter()
        tok_j = self._arange(t) - expand_slots(cum_t, ext_t, total)
        if sync:
            dev.count_sync("slot_expansion", time.perf_counter() - t0)
        positions = pre_t[tok_req] + tok_j
        out_loc = self.pool.req_to_token[rows_t[tok_req], positions]
        j = self._arange(qn)
        valid = j[None, :] < ext_t[:, None]
        q_index = torch.where(valid, cum_t[:, None] + j[None, :], t).reshape(-1)
        q_pos = torch.where(valid, pre_t[:, None] + j[None, :], -1)
        attn = AttnBatch(
            slots=self.pool.req_to_token[rows_t, :ctx],
            mask=position_mask(q_pos, ctx),
            out_loc=out_loc,
            q_index=q_index,
            tok_index=tok_req * qn + tok_j,
            batch=b,
            q_len=qn,
        )
        return RaggedBatch(rows_t, positions, attn, cum_t + ext_t - 1, pre_t + ext_t, t)

    @torch.no_grad()
    def extend(
        self,
        rows: Sequence[int],
        prefix_lens: Sequence[int],
        extend_lens: Sequence[int],
        tokens: torch.Tensor,
        *,
        completes: Sequence[bool] | None = None,
        return_logits: bool = False,
    ) -> ExtendOut:
        """Target extend (chunked prefill) forward: SGLang ForwardMode.EXTEND.

        With prefill graphs (``prefill_graph_tokens``) the body replays piecewise at the
        token bucket covering ``sum(extend_lens)`` (:meth:`prefill_bucket`), attention
        eager between pieces; the LM head and sampling run eagerly after it, as in SGLang.

        Each request b computes positions ``prefix_lens[b] .. prefix_lens[b] +
        extend_lens[b] - 1`` over its cached prefix; KV slots are reserved first.
        Requests whose prefill completes (``completes[b]``, default all) sample their
        first token (greedy) into ``last_token``; ``seq_lens`` becomes prefix + extend.

        Args:
            rows: request rows (from :meth:`add_request`).
            prefix_lens: tokens already in the cache per request.
            extend_lens: tokens computed now per request (>= 1).
            tokens: ``[sum(extend_lens)]`` int64 input ids, request-major (host or device).
            completes: per request, whether this chunk finishes its prefill.
            return_logits: also return logits for every token (tests).

        Returns:
            :class:`ExtendOut` (device tensors).

        Raises:
            ValueError: inconsistent lengths; beyond max_context.
            PoolExhausted: not enough KV slots.
        """
        _check_extend(rows, prefix_lens, extend_lens)
        if completes is not None and len(completes) != len(rows):
            raise ValueError(f"completes has {len(completes)} entries for {len(rows)} requests")
        if tokens.shape[0] != sum(extend_lens):
            raise ValueError(f"tokens has {tokens.shape[0]} entries, extend_lens sum to {sum(extend_lens)}")
        upto = [p + e for p, e in zip(prefix_lens, extend_lens, strict=True)]
        if self.external_kv:
            self.pool.covers(rows, upto)
        else:
            self.pool.reserve(rows, upto)
        batch = self._ragged(rows, prefix_lens, extend_lens, sync=False)
        ids = self._to_device(tokens)
        hidden = self._forward_extend("extend", self.target, self.kv, ids, batch)
        nxt = torch.argmax(self.target.compute_logits(hidden[batch.last_index]), dim=-1)
        nxt = self.pool.forced(batch.rows, batch.seq_after, nxt)   # the first output token, where known
        comp = self.device.h2d([True] * len(rows) if completes is None else list(completes), torch.bool)
        pool, r = self.pool, batch.rows
        pool.seq_lens[r] = batch.seq_after
        pool.last_token[r] = torch.where(comp, nxt, pool.last_token[r])
        pool.prev_accept.index_fill_(0, r, -1)
        pool.prev_start.index_fill_(0, r, 0)
        # a chain drafter's first draft: the target's first token stands in for what the
        # draft extend over the prompt proposes (the proxy's weights are random)
        pool.draft_next[r] = torch.where(comp, nxt, pool.draft_next[r])
        if pool.draft_topk is not None and pool.draft_logp is not None:
            # a tree's K first drafts: the same token K times, equal scores
            pool.draft_topk[r] = torch.where(comp[:, None], nxt[:, None], pool.draft_topk[r])
            pool.draft_logp[r] = torch.where(comp[:, None], 0.0, pool.draft_logp[r])
        for row, p, e in zip(rows, prefix_lens, extend_lens, strict=True):
            pool.len_bound[row] = p + e
        logits = self.target.compute_logits(hidden) if return_logits else None
        return ExtendOut(torch.where(comp, nxt, -1), logits, batch, ids)

    def prepare_inject(
        self, rows: Sequence[int], prefix_lens: Sequence[int], extend_lens: Sequence[int], *, sync: bool
    ) -> RaggedBatch:
        """Per-token positions and slots for the drafter's prompt injection.

        DSpark's prefill (speculative/dspark_components) expands per-request slots to
        per-token positions with ``repeat_interleave`` on a device ``repeats`` tensor. With
        ``sync=True`` no ``output_size`` is given: called after the target extend was
        queued, this blocks the host until that forward drains (the HIP unified-KV
        backend's behaviour; counted as ``slot_expansion`` host syncs on the device).
        ``sync=False`` passes the host-known total: no sync.
        """
        return self._ragged(rows, prefix_lens, extend_lens, sync=sync)

    @torch.no_grad()
    def inject(self, prepared: RaggedBatch, tokens: torch.Tensor) -> None:
        """Drafter forward over the prompt tokens, filling the draft KV (DSpark injects
        the target's hidden states into the draft KV for every prompt token; this
        proxy runs the drafter over the tokens: same per-token shape of work). Piecewise at
        the token bucket like :meth:`extend` when the runner has prefill graphs.

        Args:
            prepared: from :meth:`prepare_inject` (same rows and lengths as the extend).
            tokens: ``[T]`` device input ids (``ExtendOut.tokens``).

        Raises:
            RuntimeError: no drafter.
        """
        if self.drafter is None or self.draft_kv is None:
            raise RuntimeError("inject needs a drafter")
        self._forward_extend("inject", self.drafter, self.draft_kv, tokens, prepared)

    # ---------------------------------------------------------------------- graphs
    def graph_key(self, kind: str, batch: int, ctx: int, forced: bool) -> tuple | None:
        """``(kind, bs_bucket, ctx_bucket, forced)`` or None if the batch exceeds every bucket."""
        bs = pick_bucket(batch, self.bs_buckets)
        return None if bs is None else (kind, bs, ctx, forced)

    def capture(self, kind: Literal["decode", "spec", "spec_no_steps", "chain_spec", "chain_no_steps", "draft_step"],
                batch: int, ctx: int,
                forced: bool = True) -> tuple:
        """Capture (after warm-up) the graph for ``kind`` at the buckets covering
        ``batch`` and ``ctx``; idempotent. Capture before measuring: a lazy capture in
        the loop costs two device synchronizations.

        Raises:
            ValueError: batch above the largest bucket.
        """
        key = self.graph_key(kind, batch, self.context_bucket(ctx), forced)
        if key is None:
            raise ValueError(f"batch {batch} above the largest graph bucket {max(self.bs_buckets)}")
        self._static(key)
        return key

    def _static(self, key: tuple) -> _Static:
        st = self._statics.get(key)
        if st is not None:
            return st
        kind, bs, ctx, forced = key
        dev = self.device.torch_device
        st = _Static(torch.full((bs,), PAD_ROW, dtype=torch.int64, device=dev), torch.zeros(bs, dtype=torch.int64, device=dev))
        w = 1 if kind in ("decode", "draft_step") else self.window
        st.out = {
            "tokens": torch.zeros(bs, w, dtype=torch.int64, device=dev),
            "accept": torch.zeros(bs, dtype=torch.int64, device=dev),
            "committed": torch.zeros(bs, dtype=torch.int64, device=dev),
        }

        def step() -> None:
            with graphed_attention():  # warm-up and capture pick the same SDPA backend
                o = self._step_dev(kind, st.rows, ctx, st.forced if forced else None)
            for name, t in o.as_dict().items():
                st.out[name].copy_(t)

        with torch.no_grad():
            self.device.graphs.capture(key, step)
        self._statics[key] = st
        return st

    def _step_dev(self, kind: str, rows_t: torch.Tensor, ctx: int, forced: torch.Tensor | None) -> StepOut:
        """The device work of one graph kind: ``decode``, ``spec`` (a whole cycle),
        ``spec_no_steps`` (a chain cycle without its serial draft steps), ``chain_spec`` /
        ``chain_no_steps`` (the same two as a chain drafter's on a block drafter's runner:
        the profiler's ``gpu.draft_step``) or ``draft_step``."""
        if kind == "decode":
            return self._decode_dev(rows_t, ctx)
        if kind == "draft_step":
            return self._draft_only_dev(rows_t, ctx)
        chain = True if kind.startswith("chain") else None
        return self._spec_dev(rows_t, ctx, forced, kind not in ("spec_no_steps", "chain_no_steps"), chain)

    def _run(self, kind: str, rows: Sequence[int], ctx: int, forced: Sequence[int] | None) -> StepOut:
        key = self.graph_key(kind, len(rows), ctx, forced is not None)
        if key is None:  # above the largest bucket: eager, as SGLang does
            return self._step_dev(kind, self.device.h2d(rows), ctx, self.device.h2d(forced) if forced is not None else None)
        st = self._static(key)
        bs, b = key[1], len(rows)
        pad = [PAD_ROW] * (bs - b)
        if forced is not None:
            # rows and forced accepts staged in one pinned buffer: one host-to-device copy
            # (each pinned block costs an event record, a barrier packet on HIP)
            both = self.device.h2d([list(rows) + pad, list(forced) + [0] * (bs - b)])
            st.rows.copy_(both[0])
            st.forced.copy_(both[1])
        else:
            st.rows.copy_(self.device.h2d(list(rows) + pad))
        self.device.graphs.replay(key)
        return StepOut(st.out["tokens"][:b].clone(), st.out["accept"][:b].clone(), st.out["committed"][:b].clone())
