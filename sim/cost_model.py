"""The cost model: GPU and host seconds for a batch plan, from a profile.

GPU time of a forward is a function of the batch composition (SGLang's simulator reduces a
batch to (extend_len, past_kv_len) per request the same way, tools/sglang-simulator):
extend tokens and their attention context for prefill; for decode and verify the batch
size, the mean context, the verify window and the drafter. Host time is per step plus per
request. The breakdown is returned, not one number.

A speculative cycle (DSpark/DFlash block drafter, EAGLE/MTP chain drafter) costs, for a
batch of ``bs`` requests at mean context ``c`` with verify window ``W`` (the profile's
``gpu.verify`` measured at ``W0 = gpu.verify_window``; ``V``, ``D`` its verify and
draft-step grids; ``c0`` V's first context column; ``P(bs)`` the captured graph batch that
``bs`` is padded to)::

    token part   V(P(bs) W / W0, c0)          GEMM/MoE work of bs x W query tokens (and of
                                              the one draft forward over them), padded rows
                                              included (they run every GEMM)
    + R(P(bs)) - R(P(bs) W / W0)              the c0 column's KV read stays per request:
                                              R(n) = c0 (V(n, c1) - V(n, c0)) / (c1 - c0)
    context part V(bs, c) - V(bs, c0)         KV read of the real requests at their context
    + D(P(bs) W, c)                           when V holds no draft forward
    + (k - 1) D(P(bs) topk, c)                chain drafters: the serial draft steps beyond
                                              the draft extend (speculative/eagle_worker_v2.py
                                              ``draft_forward``: num_steps - 1 forwards)
    + eager overhead                          when bs > cuda_graph_max_bs (then no padding)

An extend (and the drafter's injection) on CUDA replays its non-attention work from
piecewise graphs captured at token buckets, the token count padded up to the bucket
(:meth:`CostModel.extend_s`); attention runs eagerly on the real tokens.

Under the profile's ``gpu.attention_width: padded_max`` (dense attention over one width for
the batch, as the runtime's proxy does) ``c`` is the padded width of the longest request,
read over the padded rows ``P(bs)`` at the column timed at that width:
``V(P(bs), width - round_up(W, a) - (1 - f) pad / P(bs)) + token part`` (``a`` =
``gpu.attention_grid_align``; ``pad = P(bs) width - bs (c + W)`` the positions not holding a
request's own KV, each costing ``f = gpu.attention_padding_cost`` of a real one).

A mixed step (``enable_mixed_chunk``) is one extend forward: the running requests are
one-token extend rows at their context (0.5.23 schedule_batch.py ``mix_with_running``),
priced as the chunk's extend, the rows' token work off the extend grid and the rows' KV
reads, the decode grid's context part at the rows (:meth:`CostModel.mixed_extend_s`);
under ``gpu.mixed_forward: extend_then_decode`` (the runtime's profiles) the chunk's extend
and then the running rows' decode step, as runtime/engine.py runs it.

An extend of ``T`` tokens costs the extend grid ``E(T, c)`` at its attention context:
ragged (SGLang's extend kernels) ``c = sum_i e_i (p_i + e_i / 2) / T``; under
``gpu.extend_attention: padded_max`` (the proxy's dense ``[B, Q, C]`` extend attention) the
dense keys per token ``k = B Q C / T``, each grid row ``x`` read at ``k - s(x)``, where
``s(x) = x / (2 ceil(x / L))`` is half its measured layout's per-request length (``L`` =
``gpu.extend_layout_len``): the column where that row's own batch did ``k`` keys per token.
Where the profile holds ``gpu.extend_split`` (extends of unequal lengths timed whole), an
extend whose extend lengths differ adds, per request whose queries are padded (``e_i < Q``)
and in proportion to its padded share ``(Q - e_i) / Q``, the time such requests added beyond
that dense reading when timed
(:meth:`CostModel.unequal_extend_s`): an empirical term of the runtime's dense attention.

A block drafter runs one draft forward per cycle whatever the window; a chain drafter
``speculative_num_steps`` of them, serially. A decode step is the same with ``W = W0 = 1``
and no draft. Profiles without ``verify_window`` keep their old meaning: ``V(bs, c)`` at
every window. Every term reduces to the old model when the window equals the profile's and
the batch is a captured size, so old profiles give the results they gave.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
from specsched.sim.defaults import hardware_of
from specsched.sim.errors import ConfigError
from specsched.sim.grid_range import (
    PADDED_WIDTH_COUNTS,
    ROWS_READ,
    DecodeFromVerify,
    EagerUnpriced,
    GridExit,
    RangeNote,
    warning_lines,
)
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import GridInterp, Profile
from specsched.sim.server_args import ServerArgs, prefill_graph_bucket


@dataclass(frozen=True, slots=True)
class GpuCost:
    """Seconds of GPU work of one launch, split by what it does."""

    extend_s: float = 0.0
    decode_s: float = 0.0
    penalty_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.extend_s + self.decode_s + self.penalty_s


def padded_share(extend_lens) -> float:
    """Sum over an extend's requests of the share of its ``Q = max(extend_lens)`` query rows
    that are padding, ``(Q - e_i) / Q``: 0 for equal lengths, near 0 for nearly equal ones,
    near 1 per request much shorter than the longest (:meth:`CostModel.unequal_extend_s`)."""
    q = max(extend_lens)
    return sum((q - e) / q for e in extend_lens) if q > 0 else 0.0


def _round_up(x: int, multiple: int) -> int:
    """``x`` rounded up to a multiple of ``multiple`` (>= 1)."""
    return -(-x // multiple) * multiple


def attention_context(extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int]) -> float:
    """The extend batch's attention context (tokens): sum_i e_i (p_i + e_i / 2) / sum_i e_i.

    Causal attention of e new tokens after a prefix p costs e (p + e / 2) query-key pairs,
    so (extend tokens) x (this context) is the batch's quadratic attention work whatever
    the mix of lengths. For equal extend lengths it is mean prefix + e / 2.
    """
    tokens = sum(extend_lens)
    if tokens <= 0:
        return 0.0
    return sum(e * (p + e / 2) for e, p in zip(extend_lens, prefix_lens, strict=False)) / tokens


def dense_keys_per_token(extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int],
                         bucket: int = 1) -> float:
    """Keys a dense padded extend attention visits per extend token: ``B Q C / T``.

    ``B`` requests, ``Q = max e_i`` (queries padded to the longest extend), ``C`` the
    longest ``p_i + e_i`` rounded up to ``bucket`` (every request's keys gathered to one
    width), ``T = sum e_i`` (runtime/runner.py ``_ragged``). A mask hides the non-causal and
    padded pairs but the kernel still visits them. Never below :func:`attention_context`.
    0 for an empty batch.
    """
    tokens = sum(extend_lens)
    if tokens <= 0:
        return 0.0
    return len(extend_lens) * max(extend_lens) * dense_width(extend_lens, prefix_lens, bucket) / tokens


def dense_width(extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int],
                bucket: int = 1) -> int:
    """``C`` of a dense padded extend: the longest ``p_i + e_i`` rounded up to ``bucket``,
    the width every request's keys are gathered to (runtime/runner.py ``_ragged``)."""
    return _round_up(max(p + e for e, p in zip(extend_lens, prefix_lens, strict=False)), bucket)


def layout_shift(xs: list[float], layout_len: int) -> np.ndarray:
    """Per extend-grid row ``x``: half the per-request extend length of its measured batch
    (``ceil(x / layout_len)`` near-equal requests, runtime/profile_harness.py
    ``extend_layout``), i.e. dense keys per token minus the grid's column context there."""
    return np.array([x / (2 * max(1, -(-int(round(x)) // layout_len))) for x in xs], dtype=float)


_NO_BUCKET_YET = object()
"""extend_bucket's memo: a token count not asked yet (None is an answer: eager)."""


def _column_read(grid: GridInterp, n: float, c0: float, c1: float) -> float:
    """GPU seconds ``n`` requests spend reading the KV of ``grid``'s first context column
    ``c0``: ``c0`` times the grid's marginal cost per context token at ``n`` between its first
    two columns ``c0`` and ``c1`` (KV bytes read grow linearly with context)."""
    return c0 * (grid.peek(n, c1) - grid.peek(n, c0)) / (c1 - c0)


class CostModel:
    """Times plans for one (profile, server args) pair.

    Args:
        profile: the device profile.
        server: the scenario's server args (window, drafter, graph sizes).

    Raises:
        ConfigError: the profile lacks a grid the server args need (``gpu.verify`` for
            speculative decoding, ``gpu.decode`` otherwise (or ``gpu.verify`` with its
            ``gpu.verify_window``, read at window 1: :meth:`step_at`), ``gpu.draft_step`` for a chain
            drafter's serial steps or for a ``verify`` without its draft forward).
    """

    def __init__(self, profile: Profile, server: ServerArgs) -> None:
        g = profile.gpu
        self.profile = profile
        self.server = server
        self.h = profile.host
        self._eager_unpriced = False  # an eager step priced as its graph replay (range_notes)
        src = profile.path or profile.name
        spec = server.speculative_algorithm
        self.spec = spec.enabled
        # a profile fitted on speculative runs only (the MI355X reference's) times no decode
        # forward: plain decoding is then priced through its verify grid (step_at)
        self.decode_via_verify = not spec.enabled and g.decode is None and g.verify is not None
        on_verify = spec.enabled or self.decode_via_verify
        grid = g.verify if on_verify else g.decode
        key = "gpu.verify" if on_verify else "gpu.decode"
        if spec.enabled and not spec.is_block and g.verify_chain is not None:
            # a chain drafter's cycle as the profile timed it: its draft extend over the
            # window, not a block drafter's forward over twice the window
            grid, key = g.verify_chain, "gpu.verify_chain"
        if grid is None:
            need = (f"speculative decoding (server.speculative_algorithm = {spec.value}) needs one cycle's cost"
                    if spec.enabled else "plain decoding (server.speculative_algorithm = none) needs one decode forward's cost")
            raise ConfigError(src, key, "<missing>", need)
        if self.decode_via_verify and not g.verify_window:
            raise ConfigError(src, "gpu.decode", "<missing>",
                              "plain decoding needs gpu.decode, or gpu.verify with its gpu.verify_window "
                              "(tokens verified per request) to read one decode forward's token work from it")
        self.extend = g.extend.interpolator("gpu.extend")
        self.inject = g.draft_inject.interpolator("gpu.draft_inject") if g.draft_inject is not None else None
        self.step_grid = grid.interpolator(key)
        self.c0 = float(grid.context_len[0])
        # a mixed step's running rows read their KV as a decode forward's rows do: priced by
        # the decode grid's context part (the step grid's where the profile has no decode grid)
        rows = g.decode if g.decode is not None else grid
        # its own reader, named for what it prices: a range warning of these reads names the
        # KV read, not a decode/verify step (an extend's 60-token cached prefix warned as
        # "verify context 60" among ~4K-token prompts)
        self.rows_grid = rows.interpolator(f"{'gpu.decode' if rows is g.decode else key}{ROWS_READ}")
        self.rows_c = tuple(float(c) for c in rows.context_len[:2])
        # a DSpark prefill whose slot expansion blocks the host: the extend and its injection
        # are launched apart, the block between them (runtime/engine.py ``_host_block``)
        self.block_splits_prefill = bool(server.prefill_slot_expansion_sync and spec.enabled and spec.is_block)
        # the grid's second context column (None: one column, no per-context slope)
        self.c1 = float(grid.context_len[1]) if len(grid.context_len) > 1 else None
        self.window = server.spec_window
        self.ref_window = (g.verify_window if on_verify else 1) or self.window
        self.topk = server.speculative_eagle_topk or 1
        self.extra_draft_steps = max(0, server.num_draft_forwards - 1)
        self.draft_in_verify = g.verify_includes_draft or not spec.enabled
        needs_draft = spec.enabled and (self.extra_draft_steps > 0 or not self.draft_in_verify)
        if needs_draft and g.draft_step is None:
            why = (f"a chain drafter ({spec.value}) runs {self.extra_draft_steps} serial draft step(s) per cycle besides the one in gpu.verify"
                   if self.extra_draft_steps else "gpu.verify_includes_draft is false, so the draft forward must be timed")
            raise ConfigError(src, "gpu.draft_step", "<missing>",
                              f"{why}: give one draft-model forward's cost by tokens and context (specsched profile "
                              "times it since the runtime runs chain drafters: re-profile, or use an analytic profile)")
        self.draft_step = g.draft_step.interpolator("gpu.draft_step") if g.draft_step is not None and spec.enabled else None
        self.draft_c0 = float(g.draft_step.context_len[0]) if g.draft_step is not None else 0.0
        # the draft forward a verify-grid point holds, taken out of a decode read from it
        self.verify_draft = (g.draft_step.interpolator("gpu.draft_step")
                             if self.decode_via_verify and g.verify_includes_draft and g.draft_step is not None else None)
        self.graph_bs = server.graph_batch_sizes
        # no decode graph at all with disable_decode_cuda_graph: every batch runs eagerly
        self.graph_max = 0 if server.disable_decode_cuda_graph else self.graph_bs[-1]
        self.padded_attention = g.attention_width == "padded_max"
        self.attention_bucket = g.attention_bucket
        # the grid column timed at a given width: column c ran at round_up(c + W, align),
        # which the kernel pays as round_up(that, tile) (gpu.attention_tile; 1: no tile)
        align = g.attention_grid_align
        self.attention_tile = g.attention_tile
        self.padding_cost = g.attention_padding_cost
        self.width_offset = _round_up(_round_up(self.window, align), self.attention_tile)
        self.padded_extend = g.extend_attention == "padded_max"
        self.mixed_split = g.mixed_split
        if self.padded_extend:
            self._ext_shift = layout_shift(g.extend.x, g.extend_layout_len)
            self._inj_shift = layout_shift(g.draft_inject.x, g.extend_layout_len) if g.draft_inject is not None else None
        # per measured token count: (widths, seconds a fully padded request adds there), from gpu.extend_split
        self._split: list[tuple[float, np.ndarray, np.ndarray]] | None = None
        if self.padded_extend and g.extend_split:
            self._split = self._split_rows(g.extend_split)
        # prefill graphs are SGLang's default on CUDA only (cuda_graph_config.py
        # default_prefill_backend: breakable if is_cuda() else disabled)
        hw = hardware_of(profile)
        self.prefill_buckets = server.prefill_graph_tokens if hw is not None and hw.platform == "cuda" else []
        self._buckets: dict[int, int | None] = {}   # extend_bucket's answers by token count
        self.inject_c0 = float(g.draft_inject.context_len[0]) if g.draft_inject is not None else 0.0
        self.extend_c0 = float(g.extend.context_len[0])
        # pure extend forwards' costs by (extend_lens, prefix_lens): a Poisson run's prefills
        # repeat a few shapes (the cost is a function of those lengths and the profile only)
        self._extend_memo: dict[tuple[tuple[int, ...], tuple[int, ...]], GpuCost] = {}
        self._rescale_memo: dict[tuple[float, int], float] = {}   # _token_rescale's
        self._sum_host_terms()

    # ------------------------------------------------------------ decode / verify
    def padded_batch(self, bs: int) -> int | None:
        """The captured graph batch size ``bs`` runs at (smallest captured >= bs), or None
        when it runs eagerly (above every captured size)."""
        if bs > self.graph_max:
            return None
        return self.graph_bs[bisect.bisect_left(self.graph_bs, bs)]

    def attention_width(self, max_ctx: int) -> int:
        """Tokens a ``padded_max`` attention spans for a batch whose longest request holds
        ``max_ctx`` tokens: that context plus the step's new tokens (the window; 1 for
        decode), rounded up to ``gpu.attention_bucket`` (runtime/spec_cycle.py
        ``_prepare``: the context bucket covering the largest length bound + width)."""
        return _round_up(int(max_ctx) + self.window, self.attention_bucket)

    def step_s(self, bs: int, ctx: float, max_ctx: float | None = None) -> float:
        """GPU seconds of one decode forward or speculative cycle of ``bs`` requests at mean
        context ``ctx`` tokens (the formula in the module docstring): :meth:`step_at` of
        :meth:`step_column`."""
        return self.step_at(bs, self.step_column(bs, ctx, max_ctx))

    def step_column(self, bs: int, ctx: float, max_ctx: float | None = None) -> float:
        """The step grid's context column (tokens, rounded to 10) a decode forward or
        speculative cycle of ``bs`` requests at mean context ``ctx`` is read at. Ragged
        attention: ``ctx``. Under ``gpu.attention_width: padded_max`` the padded width
        (:meth:`attention_width` of ``max_ctx``, the longest request's context; ``ctx`` when
        not given) less the window (the grid's columns were timed at width context +
        window), read over the padded graph rows, since every row attends the full width;
        the positions of that width not holding a request's own KV (``rows x width - bs (ctx
        + window)``) move the column down by ``(1 - gpu.attention_padding_cost)`` of them per
        row (1: none), so the column depends on the mean context as well as the longest one
        whenever a padding position costs less than a real one."""
        if self.padded_attention:
            pad = self.padded_batch(bs)
            rows = pad if pad is not None else bs
            width = _round_up(self.attention_width(ctx if max_ctx is None else max_ctx), self.attention_tile)
            # positions of the dense [rows, width] not holding a request's own KV (its tail
            # and the padded rows) cost gpu.attention_padding_cost of a real one
            padding = rows * width - bs * (ctx + self.window)
            ctx = max(0.0, width - self.width_offset - (1.0 - self.padding_cost) * max(padding, 0.0) / rows)
        return round(ctx, -1)

    def step_at(self, bs: int, ctx: float) -> float:
        """GPU seconds of one decode forward or speculative cycle of ``bs`` requests read at
        the step grid's column ``ctx`` (:meth:`step_column`): the grid at the batch (its
        padded graph rows under ``padded_max``), the window's token work, the drafter's
        forwards, and the eager overhead above the captured graphs.

        Plain decoding on a profile with no ``gpu.decode`` (one fitted on speculative runs
        only) reads ``gpu.verify`` at window 1: its token work at ``rows x 1 / W0`` of the
        grid's window ``W0`` (a decode forward is the same target forward over one token
        per request: SGLang 0.5.23 model_runner.py ``forward_decode`` and
        ``forward_target_verify`` run one model, ``ForwardMode.DECODE`` vs
        ``TARGET_VERIFY``), its per-request KV read at ``rows``, less the draft forward that
        grid point holds (``gpu.verify_includes_draft``: ``gpu.draft_step`` over ``rows``
        tokens, and its growth with context over the batch's ``bs x W0`` tokens, which the
        grid's context part at the batch holds). What a verify adds besides (its tree
        mask, acceptance sampling) stays in; the run says so once (:class:`sim.grid_range.DecodeFromVerify`)."""
        grid = self.step_grid
        pad = self.padded_batch(bs)
        rows = pad if pad is not None else bs
        bs_attn = rows if self.padded_attention else bs
        x_tok = rows * self.window / self.ref_window
        if self.c1 is None:
            # one context column: no context part to read at the batch's own row, whose
            # lookup would only note a batch the price never reads (a plain decode on a
            # verify grid, a window below the grid's: the token work is at x_tok)
            t = grid(x_tok, ctx)
        else:
            t = grid(bs_attn, ctx)
            if x_tok != bs_attn:
                t += self._token_rescale(x_tok, bs_attn)
        if self.verify_draft is not None:
            # the grid point read for the token work (x_tok requests x W0 tokens = rows
            # tokens) holds one draft forward over those tokens: a decode runs none
            t -= self.verify_draft(rows, self.draft_c0)
            if ctx != self.c0:
                # and the context growth read at the batch (grid(bs_attn, ctx) - grid(bs_attn,
                # c0)) holds that batch's draft forward's, over bs_attn x W0 tokens
                # (gpu.draft_step keeps its share of each column): a decode reads no draft KV
                x_draft = bs_attn * self.ref_window
                t -= self.verify_draft(x_draft, ctx) - self.verify_draft(x_draft, self.draft_c0)
        if self.draft_step is not None:
            if not self.draft_in_verify:
                t += self.draft_s(rows, bs_attn, self.window, ctx)
            if self.extra_draft_steps:
                t += self.extra_draft_steps * self.draft_s(rows, bs_attn, self.topk, ctx)
        t = max(t, 0.0)
        if pad is None:
            g = self.profile.gpu
            if g.eager_overhead_s is not None:
                t += g.eager_overhead_s + self.extra_draft_steps * g.eager_draft_overhead_s
                if g.eager_host_issue_s is not None:
                    # kernels issued one by one run as they arrive: host-bound below this
                    t = max(t, self.eager_issue_s(bs))
            else:
                t *= g.eager_factor
                if g.eager_factor == 1.0 and g.eager_host_issue_s is None:
                    self._eager_unpriced = True
        return t

    def _token_rescale(self, x_tok: float, bs_attn: int) -> float:
        """What moving the window's token work from ``bs_attn`` to ``x_tok`` rows adds to a
        step read at the batch's own row: the c0 column's KV read is each request's, not
        each query token's, so it stays at the batch's requests when the window rescales
        the token work, and off the padded graph rows, which hold no context (SGLang fills
        their seq_lens with seq_len_fill_value, 1: cuda_graph_runner.py), under ragged
        attention. A function of the two row counts alone (no context), memoized: a
        stretch prices hundreds of contexts at one batch size."""
        key = (x_tok, bs_attn)
        v = self._rescale_memo.get(key)
        if v is None:
            grid = self.step_grid
            v = self._rescale_memo[key] = (grid(x_tok, self.c0) - grid(bs_attn, self.c0) + self._c0_read(bs_attn)
                                           - self._c0_read(x_tok))
        return v

    def _c0_read(self, n: float) -> float:
        """GPU seconds ``n`` requests spend reading the KV of the step grid's first context
        column ``c0``: ``c0`` times the grid's marginal cost per context token at ``n``
        between its first two columns (KV bytes read grow linearly with context, as the
        context part's extrapolation assumes). 0 for a grid with one context column.

        The grid's token part ``V(n, c0)`` holds this read. It is per request (every
        request reads its own KV once per forward whatever its query tokens), so when the
        verify window ``W`` differs from the grid's ``W0`` and the token work is read at
        ``rows x W / W0``, the read stays at ``rows``. Measured on H200 (the 1b proxy,
        docs/measurements/h200-v19.md): a window-2 verify at batch 32 ran 4.57 ms where the
        rescaled token part alone gave 4.13 (this term: +0.33 ms); the same rescaling gave
        window 8 at batch 24 0.11 ms too much and window 4 at batch 16 0.08 ms too little
        (rounds 17-18; this term: -0.10 and +0.04 ms)."""
        if self.c1 is None:
            return 0.0
        return _column_read(self.step_grid, n, self.c0, self.c1)

    def draft_s(self, rows: int, requests: int, per_request: int, ctx: float) -> float:
        """GPU seconds of one draft-model forward over ``rows`` (graph-padded) requests with
        ``per_request`` tokens each at context ``ctx``, of which ``requests`` read their KV.

        SGLang 0.5.23 reads each request's KV once per draft forward however many tokens
        it carries: a chain drafter's step with ``speculative_eagle_topk`` > 1 runs the topk
        branches of a request as one query group over the shared prefix (FA3's cascade,
        layers/attention/flashattention_backend.py: draft decode metadata with
        ``max_seq_len_q = topk`` and ``cu_seqlens_q`` stepping by topk over the request's
        page table, plus the branch-local "expand" part), and the draft extend after verify
        runs ``speculative_num_draft_tokens`` tokens per request as one extend row
        (speculative/eagle_worker_v2.py ``_draft_extend_for_decode``,
        eagle_worker_common.py ``prepare_for_draft_extend``: ``extend_num_tokens = bs x
        num_draft_tokens``). When the profile says its grid's tokens per request
        (``gpu.draft_step_tokens_per_request`` ``q0``), the forward is its token part at
        the grid's first context column plus its context part at the requests' own rows:
        ``D(rows x q, c0) + D(requests x q0, ctx) - D(requests x q0, c0)``. Otherwise the
        grid is read at the forward's tokens, ``D(rows x q, ctx)``.
        """
        d = self.draft_step
        q0 = self.profile.gpu.draft_step_tokens_per_request
        if q0 is None:
            return d(rows * per_request, ctx)
        c0 = self.draft_c0
        return d(rows * per_request, c0) + d(requests * q0, ctx) - d(requests * q0, c0)

    # -------------------------------------------------------------------- public
    def gpu(self, plan: BatchPlan, part: str = "main", cross_queue: bool = False) -> GpuCost:
        """GPU seconds of one launch of ``plan`` (``part`` = ``main`` or ``inject``).

        ``cross_queue``: a wait is queued from a separate schedule stream; graph-replayed
        decode/verify launches pay the profile's cross_queue_penalty_s. A pure extend's cost
        is a function of its extend and prefix lengths only: it is kept per shape.
        """
        n_ext = plan.num_extend
        if n_ext == plan.batch_size and part == "main":
            key = (plan.extend_lens, plan.prefix_lens)
            cost = self._extend_memo.get(key)
            if cost is None:
                if len(self._extend_memo) >= 1 << 12:
                    self._extend_memo.clear()
                cost = self._extend_memo[key] = self._gpu(plan, part, cross_queue)
            return cost
        return self._gpu(plan, part, cross_queue)

    def _gpu(self, plan: BatchPlan, part: str, cross_queue: bool) -> GpuCost:
        n_ext = plan.num_extend
        if part == "inject":
            tokens = plan.num_extend_tokens
            if self.inject is not None:
                return GpuCost(extend_s=self.extend_s(plan.extend_lens[:n_ext], plan.prefix_lens[:n_ext], inject=True))
            # old profiles: a per-token injection cost, over the padded bucket's tokens
            return GpuCost(extend_s=(self.extend_bucket(tokens) or tokens) * self.profile.gpu.draft_inject_per_token_s)
        extend_s = 0.0
        if plan.mode is ForwardMode.MIXED and not self.mixed_split:
            # the running rows of a mixed step are one-token extend rows (0.5.23
            # schedule_batch.py mix_with_running: extend_end = prefix_len + 1; no verify with
            # speculative decoding): one extend forward over all rows, its weights read once.
            # A profile whose mixed steps run the rows' own decode after the extend
            # (gpu.mixed_forward, the runtime's) prices them below as decode rows
            rows = plan.prefix_lens[n_ext:]
            return GpuCost(extend_s=self.mixed_extend_s(plan.extend_lens[:n_ext], plan.prefix_lens[:n_ext], rows))
        if n_ext:
            extend_s = self.extend_s(plan.extend_lens[:n_ext], plan.prefix_lens[:n_ext])
        decode_s = penalty = 0.0
        n_dec = plan.batch_size - n_ext
        if n_dec:
            pre = plan.prefix_lens[n_ext:]
            decode_s, penalty = self._decode(n_dec, sum(pre), max(pre) if self.padded_attention else None,
                                             cross_queue and plan.mode is not ForwardMode.MIXED)
        return GpuCost(extend_s, decode_s, penalty)

    def after_step_ratio(self, plan: BatchPlan, previous: ForwardMode | None) -> float:
        """:meth:`ratio_after` for ``plan`` (its mode and extend tokens)."""
        return self.ratio_after(plan.mode, plan.num_extend_tokens, previous)

    def ratio_after(self, mode: ForwardMode, tokens: int, previous: ForwardMode | None) -> float:
        """The factor on the extend GPU time of a forward of ``mode`` extending ``tokens`` tokens,
        queued right behind a forward of mode ``previous`` (profile ``gpu.extend_after_step``,
        read at ``tokens``): the GPU's clock under decode or verify steps differs from the one
        under back-to-back extends, which the extend grid was timed behind (runtime/
        profile_gpu.py ``extend_after_phase``). 1.0 unless ``mode`` is a pure extend and
        ``previous`` a decode step or verify cycle, and for profiles without the table."""
        table = self.profile.gpu.extend_after_step
        if table is None or mode is not ForwardMode.EXTEND:
            return 1.0
        ratios = table.get("decode" if previous is ForwardMode.DECODE else
                           "verify" if previous is ForwardMode.VERIFY else None)
        return ratios.at(tokens) if ratios is not None else 1.0

    def mixed_extend_s(self, extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int],
                       row_ctx: tuple[int, ...] | list[int], read: tuple[int, float] | None = None) -> float:
        """GPU seconds of a mixed step run as one extend forward (``gpu.mixed_forward``
        ``one_extend``): the chunk's extends of ``extend_lens`` after ``prefix_lens`` and one
        one-token row per running request at its context ``row_ctx``.

        The chunk costs what it costs alone (:meth:`extend_s`); each row's token goes
        through the forward's GEMMs with the chunk's, the extend grid's token work at its
        first context column ``c0`` from the chunk's tokens to the whole forward's (each
        side at the token bucket its piecewise graph pads it to, as :meth:`extend_bucket`
        says); and each row's attention reads its own KV once, as a decode row does
        (SGLang 0.5.23 schedule_batch.py ``mix_with_running`` makes each running request an
        extend of one token after its ``prefix_len`` cached ones, and the ragged extend
        attention walks every request's cached KV): :meth:`rows_context_s`. The extend
        grid alone cannot price that read: its context axis is the batch's mean attended
        keys per extend token, where a one-token row weighs one token whatever KV it
        reads, so a 256-token chunk beside 12 rows at 16K tokens of context was priced
        below the rows' own decode step (Llama-3.1-8B, H100: 9.4 ms against 16.2 ms)
        although the forward reads all of their KV and runs the chunk besides.

        ``read``: (rows, mean context) whose KV read the forward waits for, where it is not
        ``row_ctx``'s own (DP attention: the slowest rank's, sim/dp_attention.py)."""
        t = self.extend_s(extend_lens, prefix_lens)
        n = len(row_ctx)
        if not n:
            return t
        tokens = sum(extend_lens)
        c0 = self.extend_c0
        # the rows' token work: the padded forward's tokens at c0 over the chunk's alone
        alone = self.extend_bucket(tokens) or tokens
        whole = self.extend_bucket(tokens + n) or tokens + n
        t += max(0.0, self.extend.peek(whole, c0) - self.extend.peek(alone, c0))
        return t + self.rows_context_s(*(read or (n, sum(row_ctx) / n)))

    def rows_context_s(self, n: int, ctx: float) -> float:
        """GPU seconds ``n`` one-token rows at mean context ``ctx`` spend on their context
        (each reads its KV once): the decode grid's context part at ``n`` rows measured from
        no context, ``D(n, ctx) - D(n, c0)`` plus the ``c0`` column's read (KV bytes read
        grow linearly with context; :meth:`_c0_read`). Read off the step grid where the
        profile has no decode grid (a verify grid's context part at ``n`` requests: their KV
        read, and its draft forward's where the grid holds one). 0 for a grid with one
        context column (no per-context slope)."""
        c0, *rest = self.rows_c
        if not rest:
            return 0.0
        grid = self.rows_grid
        return max(0.0, grid(n, ctx) - grid.peek(n, c0) + _column_read(grid, n, c0, rest[0]))

    def _decode(self, n_dec: int, ctx_sum: int, max_ctx: int | None, cross_queue: bool) -> tuple[float, float]:
        """(decode seconds, cross-queue penalty) of a launch's ``n_dec`` decode/verify rows
        whose contexts sum to ``ctx_sum`` (``max_ctx``: the longest, under ``padded_max``
        attention); ``cross_queue``: a wait queued from the schedule stream (not a mixed step)."""
        decode_s = self.step_s(n_dec, ctx_sum / n_dec, max_ctx)
        penalty = self.h.cross_queue_penalty_s if cross_queue and n_dec <= self.graph_max else 0.0
        return decode_s, penalty

    def decode_launch_s(self, bs: int, ctx_sum: int, cross_queue: bool = False, max_ctx: int | None = None) -> float:
        """``gpu(plan, "main", cross_queue).total_s`` of a decode/verify plan of ``bs`` >= 1
        requests whose contexts sum to ``ctx_sum`` tokens (``ctx_sum`` >= 0), the longest
        holding ``max_ctx`` (None: one request holding them all): the shape plans of the
        simulator's collapsed stretches (sim/engine_stretch.py, ~660 distinct shapes a
        256-request burst). The same :meth:`_decode` and sum as :meth:`gpu`, without
        building a plan of ``bs`` rows and summing its prefix lengths (about half of such a
        lookup's time)."""
        longest = ctx_sum if max_ctx is None else max_ctx
        decode_s, penalty = self._decode(bs, ctx_sum, longest if self.padded_attention else None, cross_queue)
        return 0.0 + decode_s + penalty   # GpuCost(0.0, decode_s, penalty).total_s

    def extend_s(self, extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int],
                 inject: bool = False) -> float:
        """GPU seconds of one extend forward (``inject``: the block drafter's injection over
        the same tokens, profile ``gpu.draft_inject``) of requests extending ``extend_lens``
        tokens after ``prefix_lens`` cached ones (module docstring: ragged, or under
        ``gpu.extend_attention: padded_max`` the grid read at the dense keys per token).

        On CUDA a piecewise-graphed extend runs every non-attention op (embedding, QKV,
        MLP, norms) over its token bucket's ``B`` rows, the padded ones included, and
        attention over the real ``T`` rows only (SGLang 0.5.23
        runner/prefill_cuda_graph_runner.py ``replay`` with base_cuda_graph_runner.py
        ``_pad_to_bucket``; the breakable graph's eager attention, layers/radix_attention.py
        ``_eager_attention``). So the reading above plus the padded rows' token work, read at
        the grid's first context column ``c0`` (where attention weighs least):
        ``+ max(0, E(B, c0) - E(T, c0))``.

        A ragged extend whose requests hold cached prefixes costs at least its token work
        ``E(T, c0)`` plus each request's read of its prefix's KV, priced as a decode row's
        (:meth:`rows_context_s`): the grid's context axis is the attended keys per extend
        token, and it reads the prefix KV of requests taken 1024 tokens long (the analytic
        profile's assumption), so a batch of short extends after long prefixes (follow-up
        turns of conversations, each resending its history) read a fraction of the KV its
        requests hold. Eight 20-token turns after 30K-token histories (Llama-3.1-8B, H100)
        cost 12.0 ms, below a decode step of those eight requests (18.3 ms), which reads
        the same KV for one token each; their KV alone takes 11.7 ms at the HBM rate. An extend that runs eagerly
        (:meth:`extend_bucket` None) pays no padding. Under ``padded_max`` an extend of unequal
        lengths adds :meth:`unequal_extend_s` where the profile measured it (the injection
        does not: its layouts were not timed).
        """
        interp = self.inject if inject else self.extend
        tokens = sum(extend_lens)
        if not self.padded_extend:
            t = interp(tokens, attention_context(extend_lens, prefix_lens))
            if not inject and (cached := sum(prefix_lens)):
                # every request reads its cached prefix's KV at least once
                n = len(extend_lens)
                t = max(t, interp.peek(tokens, self.extend_c0) + self.rows_context_s(n, cached / n))
        else:
            t = self._dense_extend_s(extend_lens, prefix_lens, inject)
            if not inject and self._split is not None:
                t += self.unequal_extend_s(extend_lens, prefix_lens)
        bucket = self.extend_bucket(tokens)
        if bucket is not None and bucket > tokens:
            c0 = self.inject_c0 if inject else self.extend_c0
            t += max(0.0, interp(bucket, c0) - interp(tokens, c0))
        return t

    def _dense_extend_s(self, extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int],
                        inject: bool = False) -> float:
        """The extend grid (``inject``: the injection's) read at the dense keys per token
        (``padded_max`` only; the module docstring), without the bucket's padded rows."""
        keys = dense_keys_per_token(extend_lens, prefix_lens, self.profile.gpu.extend_attention_bucket)
        interp = self.inject if inject else self.extend
        return interp.row_shifted(sum(extend_lens), keys, self._inj_shift if inject else self._ext_shift)

    def _split_rows(self, splits: list) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """``gpu.extend_split`` as the time a fully padded request would add beyond the dense
        reading: per token count ``T`` (ascending), the widths ``C`` (ascending) and the
        seconds there, ``max(0, (measured - dense reading) / padded_share)`` (the mean
        where one ``(T, C)`` was timed twice). Reading the grid here must not count as a
        run's query beyond its range (:meth:`range_notes`), so its notes are put back."""
        bucket = self.profile.gpu.extend_attention_bucket
        above, below = dict(self.extend.above), dict(self.extend.below)
        pts: dict[int, dict[int, list[float]]] = {}
        for sp in splits:
            lens, pre = sp.extend_lens, sp.prefix_lens
            extra = max(0.0, (sp.seconds - self._dense_extend_s(lens, pre)) / padded_share(lens))
            width = dense_width(lens, pre, bucket)
            pts.setdefault(sum(lens), {}).setdefault(width, []).append(extra)
        self.extend.above, self.extend.below = above, below
        rows = []
        for t in sorted(pts):
            widths = sorted(pts[t])
            rows.append((float(t), np.array(widths, dtype=float),
                         np.array([sum(pts[t][w]) / len(pts[t][w]) for w in widths], dtype=float)))
        return rows

    def unequal_extend_s(self, extend_lens: tuple[int, ...] | list[int], prefix_lens: tuple[int, ...] | list[int]) -> float:
        """GPU seconds an extend of unequal extend lengths takes beyond its dense reading
        under ``gpu.extend_attention: padded_max``, from ``gpu.extend_split`` (0 without it,
        under ``ragged``, for one request, and for equal lengths).

        An empirical term of the runtime's dense ``[B, Q, C]`` extend attention
        (runtime/runner.py ``_ragged``: the shorter requests' queries padded to ``Q``;
        mechanism unknown, docs/measurements/h200-extend-layouts.md): what the timed splits
        added beyond the dense reading per unit of :func:`padded_share`, at the batch's extend
        tokens ``T`` and its dense width ``C`` (the longest prefix + extend rounded up to
        ``gpu.extend_attention_bucket``), times the batch's :func:`padded_share` (each
        request's ``(Q - e_i) / Q``). Why this form: on an H200 the missing time grew with
        ``C`` (0.6-0.7 ms at 448, ~1.8 ms at 2048, 512 tokens) and came per padded request
        (three requests with two padded missed 2.5-2.9 times what two did), while whole
        prompts of nearly equal lengths batched together (poisson-nospec, 2-7 requests of
        700-1000 tokens at prefix 0) missed nothing: charged once per padded request, their
        extends were predicted 4-8 % long and median TTFT +5..+14 %; weighted by the padded
        share, +3..+11 % (docs/measurements/h200-v40.md). The share is what makes equal
        lengths cost nothing and nearly equal ones nearly nothing. It under-reads one probe
        layout, 200@1800+312@0 (share 0.36, measured like a share near 1: -5 %). Per
        measured ``T``: linear in ``C`` through its widths (beyond them the
        nearest segment's line, rising or flat beyond the last width; one width: flat),
        at least 0; between the ``T`` rows linear, beyond them the nearest row's value
        (the term's dependence on tokens outside the timed ones is not known). A mixed
        step read as one extend (:meth:`gpu`, ``gpu.mixed_forward: one_extend``) counts its
        one-token running rows as nearly fully padded requests. Never negative, so an extend never costs less than its dense reading."""
        if self._split is None or len(extend_lens) < 2:
            return 0.0
        share = padded_share(extend_lens)
        if not share:
            return 0.0
        width = dense_width(extend_lens, prefix_lens, self.profile.gpu.extend_attention_bucket)
        ts, vals = [], []
        for t, ws, xs in self._split:
            if len(ws) == 1:
                v = float(xs[0])
            else:
                i = min(max(int(np.searchsorted(ws, width)) - 1, 0), len(ws) - 2)
                slope = (xs[i + 1] - xs[i]) / (ws[i + 1] - ws[i])
                if width > ws[-1]:
                    slope = max(0.0, slope)
                v = float(xs[i] + slope * (width - ws[i]))
            ts.append(t)
            vals.append(max(0.0, v))
        return share * float(np.interp(sum(extend_lens), ts, vals))

    def extend_bucket(self, tokens: int) -> int | None:
        """The token bucket an extend (or injection) of ``tokens`` replays its piecewise
        graphs at; None when it runs eagerly (no prefill graphs on this platform or with
        ``disable_prefill_cuda_graph``, above ``cuda_graph_max_bs_prefill``, or padded more
        than 2x: :func:`sim.server_args.prefill_graph_bucket`). Kept per token count: an
        extend launch asks it for its issue and again for its cost, and a Poisson run's
        prefills repeat a few counts."""
        b = self._buckets.get(tokens, _NO_BUCKET_YET)
        if b is _NO_BUCKET_YET:
            if len(self._buckets) >= 1 << 12:
                self._buckets.clear()
            b = self._buckets[tokens] = prefill_graph_bucket(tokens, self.prefill_buckets) if self.prefill_buckets else None
        return b

    def idle_lead_s(self, plan: BatchPlan, part: str = "main") -> float:
        """Seconds a forward launched onto an idle stream ends later than its device time
        says (sim.engine: its device work begins no earlier than launch + this), read at the
        plan's extend tokens (the lead shrinks for large extends:
        docs/measurements/h200-v5-repredict.md); 0 for decode/verify-only launches. Each
        lead is the one the profiler timed over the launch sequence the loop makes:

        - the extend, launched with its injection right behind it (no slot-expansion block;
          plain decoding too): host.extend_idle_lead_by_tokens, the idle wall of extend +
          ``prepare_inject`` + inject less both device times, else the scalar
          host.extend_idle_lead_s;
        - the extend of a DSpark prefill whose slot expansion blocks the host
          (``server.prefill_slot_expansion_sync``): the block launches the injection apart,
          so the extend pays its own lead, host.extend_own_idle_lead_by_tokens, where the
          profile has it (timing events between the two launches, runtime/profile_gpu.py
          ``_idle_lead``). The combined lead charged the injection twice there, once in the
          extend's lead and once after the block: on H200 round 20, where the profiling
          host ran slow and that lead was 9.5 ms at 256 tokens, small-chunk's host_block
          TPOT came out +131 % (+32 % with the extend's own);
        - a block drafter's injection: host.inject_idle_lead_by_tokens (after a block it is
          launched onto a drained stream), 0 where the profile has none.

        Charging the extend's own lead without a block too, and the injection its unprepared
        lead (host.inject_unprepared_idle_lead_by_tokens: recorded, not charged), predicted
        worse: 299 against 309 of 450 H200 figures within 5 % over rounds 17-20
        (docs/measurements/h200-v20.md), plain decoding, which has no injection, included."""
        h = self.h
        if part == "inject":
            table = h.inject_idle_lead_by_tokens
            return table.at(plan.num_extend_tokens) if table is not None else 0.0
        if part != "main" or not plan.num_extend:
            return 0.0
        table = h.extend_own_idle_lead_by_tokens if self.block_splits_prefill else None
        if table is None:
            table = h.extend_idle_lead_by_tokens
        return table.at(plan.num_extend_tokens) if table is not None else h.extend_idle_lead_s

    def launch_tail(self, plan: BatchPlan, part: str = "main") -> float:
        """Host seconds a launch call goes on after its forward is queued (profile
        host.launch_tail_s + launch_tail_per_req_s x batch): the host is busy, the GPU runs.
        Only for a graph-replayed decode/verify (an eager step's host time is its kernel
        issue, :meth:`issue`; an extend-only launch's is the extend's issue); 0 for the
        inject part."""
        n_dec = plan.batch_size - plan.num_extend
        if part != "main" or n_dec <= 0 or n_dec > self.graph_max:
            return 0.0
        h = self.h
        return h.launch_tail_s + h.launch_tail_per_req_s * plan.batch_size

    def host(self, kind: str, plan: BatchPlan) -> float:
        """Host seconds of ``kind`` (schedule / launch / launch_tail / process) for ``plan``.

        ``process`` (the loop's ``HostWork("process")``, right after the step's results,
        before its tokens are delivered) is ``Scheduler.process_result``'s own time
        (host.process_*) plus the loop's path from the results to the delivery's stamp
        (host.result_path_*: the result copy's wait past the forward's end, the timing
        reads); ``schedule`` is ``Scheduler.schedule()``'s (host.schedule_*) plus the path
        from the delivery's stamp to the pass (host.recv_path_*: the delivery's recording,
        the receive, the pass's bookkeeping). runtime/engine.py ``LoopHost``
        ``_results`` / ``_deliver`` / ``_recv`` / ``_pass``; SGLang 0.5.23
        managers/scheduler.py ``event_loop_overlap``: ``process_batch_result`` of the
        previous batch (scheduler_components/batch_result_processor.py: its ``copy_done``
        wait; output_streamer.py ``stream_output``), then the next iteration's
        ``ingest_requests`` and ``get_next_batch_to_run``. It is host time like the rest:
        with the GPU busy (overlap, a forward queued) it runs under the forward and costs
        nothing; after a forward the GPU drained (no overlap, a host block, an idle
        server's first launch) the next launch waits for it. Profiles without the terms: 0
        (no change).

        ``launch`` is host.launch_s + launch_per_req_s x batch for every launch, an
        extend-only one too. The profiler fits it from a verify's launch (its preparation and
        graph replay), which an extend-only launch does not run, and the extend's own
        preparation is in its issue (:meth:`issue`), so no code is charged twice; the
        engine's extend launch call holds host work of about that size outside the extend
        (the KV sync, the marks, the step record: runtime/engine.py ``_launch_call``), which
        no other term times. Over the H200 rounds 11-24 the engine's extend call came out
        1.02x the charge at the run's host level (1.11x the issue alone), and charging an extend-only launch its
        issue alone took the figures within 5 % from 1070 to 1021 of 1525 (docs/measurements/h200-v24.md "The
        extend's charge, across rounds").

        A server without speculative decoding is charged the scheduler's own terms measured
        on a plain-decoding scheduler (host.decode_schedule_* / decode_process_*) where the
        profile has them: schedule_* / process_* are timed on verify plans of DSpark
        requests, whose per-request bookkeeping a decode plan does not run, and without
        overlap every step pays them on the critical path
        (docs/measurements/h200-nooverlap.md). Likewise its launch is charged the decode
        launch's own stall (host.decode_launch_*, timed on decode plans) where the profile
        has it: a decode launch draws no accepts and prepares no draft window
        (docs/measurements/h200-v38.md). Measured on an H200 the two stalls came out alike
        (0.80 ms + 8.3 us a request against 0.84 ms + 8.4 us: h200-v39.md), and the no-overlap
        decode step's serial path on that machine matched the charge at its host level."""
        if kind == "launch_tail":
            return self.launch_tail(plan)
        # the two terms of each kind, summed once (_host_terms): the same additions, then a
        # + b x batch as before
        a, b = self._host_terms.get(kind, self._process_terms)
        return a + b * plan.batch_size

    def _sum_host_terms(self) -> None:
        """Each host kind's (fixed, per-request) seconds for :meth:`host`, from the profile
        (frozen, so once): schedule and process add the loop's path to the scheduler's own
        terms (a + b x batch with a = own + path, b = own per request + path per request:
        the very additions :meth:`host` made at every call, in the same order)."""
        h = self.h
        plain = not self.spec and h.decode_schedule_s is not None
        s, s_req = (h.decode_schedule_s, h.decode_schedule_per_req_s) if plain else (h.schedule_s, h.schedule_per_req_s)
        if not self.spec and h.decode_launch_s is not None:
            launch = (h.decode_launch_s, h.decode_launch_per_req_s)
        else:
            launch = (h.launch_s, h.launch_per_req_s)
        p, p_req = (h.decode_process_s, h.decode_process_per_req_s) if plain else (h.process_s, h.process_per_req_s)
        self._process_terms = (p + h.result_path_s, p_req + h.result_path_per_req_s)
        self._host_terms = {"schedule": (s + h.recv_path_s, s_req + h.recv_path_per_req_s), "launch": launch,
                            "process": self._process_terms}

    def eager_issue_s(self, n_dec: int) -> float:
        """Host seconds to issue one eager decode step's or spec cycle's kernels (profile
        gpu.eager_host_issue_s; for a spec cycle gpu.eager_spec_issue_s when the profile
        gives it, plus each further chain draft step's eager_draft_overhead_s) for
        ``n_dec`` decoding requests: 0 when they replay a graph (``n_dec`` <=
        cuda_graph_max_bs) or the profile did not measure it."""
        g = self.profile.gpu
        if n_dec <= self.graph_max or g.eager_host_issue_s is None:
            return 0.0
        if self.spec and g.eager_spec_issue_s is not None:
            # a cycle issues the draft forward(s) too (profile gpu.eager_spec_issue_s)
            return g.eager_spec_issue_s + self.extra_draft_steps * g.eager_draft_overhead_s
        return g.eager_host_issue_s

    def issue(self, plan: BatchPlan, part: str = "main", prepared: bool = False) -> float:
        """Host seconds to issue a forward's kernels one by one: an eager extend's (profile
        host.launch_per_extend_s and launch_per_extend_token_s; measured with the GPU kept
        busy, runtime/profile_fit.py) plus, for a decode/verify batch above
        cuda_graph_max_bs, the eager step's (:meth:`eager_issue_s`); for the inject launch,
        the drafter injection's (host.launch_per_inject_s and launch_per_inject_token_s;
        0 in profiles whose extend terms include it). 0 for a graph-replayed step. The host is
        busy this long after the launch, and the forward cannot end before the issue does,
        since its kernels run as they are issued: an eager step's host time cannot overlap
        the loop's scheduling and result processing (the overlap scheduler hides them only
        behind a graph replay; SGLang's eager fallback, cuda_graph_runner.py can_run).
        ``prepared``: the injection was prepared inside a slot-expansion block (the loop
        keeps that batch: runtime/engine.py ``_host_block``), so its launch issues without
        the preparation (host.inject_prepare_s, which launch_per_inject_s holds). A mixed step
        run as one extend forward issues as one extend of the chunk's and its rows' tokens
        (its bucket, graph or eager, is the whole forward's), with no decode step of its own."""
        h = self.h
        # a mixed step run as one extend forward (mix_with_running) is bucketed as the whole
        # forward, chunk and one-token rows together (0.5.23 prefill graph runner: the batch's
        # token count picks the bucket), and has no decode rows of its own to issue
        one_forward = plan.mode is ForwardMode.MIXED and not self.mixed_split and part == "main"
        rows = plan.batch_size - plan.num_extend
        tokens = plan.num_extend_tokens + (rows if one_forward else 0)
        eager = self.extend_bucket(tokens) is None
        if part != "main":
            base = h.launch_per_inject_s
            if eager and h.launch_per_inject_eager_s is not None:
                base = max(base, h.launch_per_inject_eager_s)
            t = base + h.launch_per_inject_token_s * plan.num_extend_tokens
            return max(0.0, t - h.inject_prepare_s) if prepared else t
        t = 0.0 if one_forward else self.eager_issue_s(rows)
        if plan.num_extend:
            # an extend the piecewise prefill graph cannot take runs eagerly (SGLang 0.5.23
            # model_runner.py forward_extend: eager_runner.execute): where the profile gives that
            # issue apart from the graph's (analytic CUDA profiles), it is the one paid
            base = h.launch_per_extend_s
            if eager and h.launch_per_extend_eager_s is not None:
                base = max(base, h.launch_per_extend_eager_s)
            t += base + h.launch_per_extend_token_s * tokens
        return t

    def range_notes(self) -> list[RangeNote]:
        """Where this model's queries left the profile's measured grids so far: per (grid,
        axis) the largest query beyond the range (:class:`sim.grid_range.GridExit`); for the
        extend and injection grids also the smallest token count under their first point
        (a forward of fewer tokens than the profile timed: ``GridExit.below`` says why it
        matters; the decode/verify grids start at batch 1, and a verify window below the
        grid's reads its token work at a fraction of a batch by design, ``step_at``); and
        whether an eager step was priced as its graph replay
        (:class:`sim.grid_range.EagerUnpriced`). A run's notes are its cost models' together,
        written once when it ends (:mod:`sim.grid_range`)."""
        name = self.profile.name
        notes: list[RangeNote] = []
        for interp in (self.step_grid, self.extend, self.inject, self.draft_step, self.rows_grid):
            if not isinstance(interp, GridInterp):
                continue
            # a padded_max profile reads its decode/verify grid at the padded width, which
            # may lie well past every request's own context: say so (a CPU review read it
            # as a request's context)
            counts = (PADDED_WIDTH_COUNTS if interp is self.step_grid and self.padded_attention else None)
            # a window longer than the grid's reads its token work at batch x W / W0 (step_s):
            # the largest batch queried is then that, not a count of requests
            longer = interp is self.step_grid and self.window > self.ref_window
            for axis, q in interp.above.items():
                pts = interp.x if axis == "x" else interp.c
                # a grid that says the contexts its measurements spanned is warned past them
                span = axis == "context_len" and interp.span is not None
                lo, hi = interp.span if span else (float(pts[0]), float(pts[-1]))
                # the KV read's requests on the steps' own grid: one batch line with the steps'
                # (on the decode grid of a speculative run no decode step ran: named as the read)
                base = interp.name.removesuffix(ROWS_READ)
                grid = base if axis == "x" and base == self.step_grid.name else interp.name
                notes.append(GridExit(name, grid, axis, float(q), lo, hi,
                                      context_counts=counts, columns=(float(pts[0]), float(pts[-1])) if span else None,
                                      x_window=(self.window, self.ref_window) if longer and axis == "x" else None))
            for axis, q in interp.below.items():
                if axis == "context_len":   # under the grid's context_span (GridInterp._note_context)
                    notes.append(GridExit(name, interp.name, axis, float(q), *interp.span, below=True,
                                          context_counts=counts, columns=(float(interp.c[0]), float(interp.c[-1]))))
                elif interp is self.extend or interp is self.inject:
                    notes.append(GridExit(name, interp.name, axis, float(q), float(interp.x[0]), float(interp.x[-1]),
                                          below=True))
        if self.decode_via_verify:
            notes.append(DecodeFromVerify(name, self.ref_window, self.verify_draft is not None))
        if self._eager_unpriced:
            why = ("every decode/verify step runs eagerly (server.disable_decode_cuda_graph)" if self.graph_max == 0
                   else f"batches above server.cuda_graph_max_bs ({self.graph_max}) run eagerly")
            notes.append(EagerUnpriced(name, why))
        return notes

    def range_warnings(self) -> list[str]:
        """:meth:`range_notes` as warning lines (:func:`sim.grid_range.warning_lines`)."""
        return warning_lines(self.range_notes())
