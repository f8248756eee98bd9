"""Profiles: the measured costs that time a forward and the host's work, with provenance.

A profile is a YAML file (``profiles/<name>.yaml``). GPU times are grids of measured (or
fitted) seconds interpolated linearly (and extrapolated linearly from the two nearest points
at the edges); host times are per step plus per request. Every value's source is recorded
in ``provenance`` (dotted key -> text). The MI355X profile is fitted to the reference
measurements; GPU profiles are written by ``specsched profile`` from microbenchmarks.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from specsched.sim.bundled import in_bundled_folder, profiles_dir
from specsched.sim.config import read_yaml, validation_error
from specsched.sim.disagg_config import KVTransferCost
from specsched.sim.errors import ConfigError
from specsched.sim.hardware import Hardware
from specsched.sim.input_files import is_input_file

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


MAX_SECONDS = 3600.0
"""Largest cost a profile may hold (s): one forward or host step of an hour is a unit mistake."""

Seconds = Annotated[float, Field(ge=0.0, le=MAX_SECONDS, allow_inf_nan=False)]
"""A cost in seconds: finite, non-negative, at most :data:`MAX_SECONDS`."""
AxisPoint = Annotated[float, Field(ge=0.0, le=1e9, allow_inf_nan=False)]


class Grid(BaseModel):
    """Seconds on a grid of (x, context_len): ``seconds[i][j]`` at ``x[i]``, ``context_len[j]``.

    ``x`` is the batch size (verify, decode), the tokens of one draft forward (draft_step)
    or the batch's extend tokens (extend, draft_inject); ``context_len`` the batch's mean
    context (tokens). Axes strictly increasing; a single-point axis means no dependence.
    Every value finite, in [0, 3600] s, and not all zero (a forward takes time).

    ``context_span``: ``[lo, hi]``, the contexts the grid's measurements spanned, where
    its columns reach further than what was measured (the MI355X reference cells ran
    ~4K-token prompts with up to 3072 output tokens: their fitted column says nothing of
    32K contexts, and the second column is derived, sim/calibrate.py step 5). A query past
    ``hi``, or under ``lo``, gets the range warning (:class:`sim.grid_range.GridExit`
    ``columns``); a grid of one column is read at every context alike. None: the columns
    are the measured range.
    """

    model_config = _STRICT

    x: list[AxisPoint] = Field(min_length=1)
    context_len: list[AxisPoint] = Field(default=[0.0], min_length=1)
    seconds: list[list[Seconds]]
    context_span: list[AxisPoint] | None = Field(None, min_length=2, max_length=2)

    @model_validator(mode="after")
    def _shape(self) -> Grid:
        if len(self.seconds) != len(self.x) or any(len(row) != len(self.context_len) for row in self.seconds):
            raise ValueError(f"seconds must be {len(self.x)} rows x {len(self.context_len)} columns")
        if self.context_span is not None:
            if self.context_span[1] < self.context_span[0]:
                raise ValueError(f"context_span must be [lo, hi] with lo <= hi, not {self.context_span}")
        for name, axis in (("x", self.x), ("context_len", self.context_len)):
            if any(b <= a for a, b in zip(axis, axis[1:], strict=False)):
                raise ValueError(f"{name} must be strictly increasing")
        if not any(v > 0 for row in self.seconds for v in row):
            raise ValueError("every value is 0 s: a forward takes time")
        return self

    def interpolator(self, name: str = "") -> GridInterp:
        return GridInterp(self, name)


def round_tens(c: float) -> float:
    """``round(c, -1)``: ``c`` itself when it is a multiple of 10 already (a float multiple
    of 10 rounds to itself, and ``%`` is exact), which the grid lookups mostly get (a
    column the cost model rounded, :meth:`sim.cost_model.CostModel.step_column`); a float's
    ``round`` to tens goes through a decimal conversion (~0.45 us, against ~0.05 us for the
    test). NaN and infinities fail the test and are rounded as before."""
    return c if c % 10 == 0 else round(c, -1)


class GridInterp:
    """Interpolation of a :class:`Grid`: bilinear inside, linear extrapolation outside.

    Above the last ``context_len`` the value continues linearly from the last measured
    segment with a non-negative slope (a decode/verify forward reads every context token's
    KV once, so its time grows linearly with context; never a clamp, never below the last
    measured value). Above the last ``x``: from the last point, the slope of the least-squares
    line through the points from half the last ``x`` up (at least the last two; on a doubling
    grid that is the last segment), never negative (a forward of more requests or tokens never
    costs less than the last measured one; a noisy grid whose last segment fell priced batches
    past it at 0 s). A single segment's slope carries a single point's noise: a profile whose
    extend grid ended 1,023 -> 1,024 tokens read flat there and priced an 8,192-token extend
    as a 1,024-token one (docs/measurements/h100-v47.md), and the finer batch grids' last
    segment (56 -> 64) is one point's repeat noise apart. Below the first context
    point it continues linearly from the first segment with that slope never negative (less
    context never costs more: a noisy CPU extend row, 38.3 ms at 512 keys per token and 34.0 ms
    at 768, priced 62 keys per token at 45.9 ms), so never above the first point; the result
    is clamped at 0 s. The
    query context is rounded to 10 tokens (steps repeat shapes; the engine memoizes on the
    same key).

    Below the first ``x`` (:meth:`_below`), each column continues the least-squares line
    through its points up to twice the first ``x`` (at least the first two), never above
    the first point's time and never below 0 s: a fixed cost plus a per-token (per-request)
    one. A forward of a few tokens still runs every layer, reads every weight and launches
    every kernel; the first segment alone, on a token grid whose next point is one prefill
    graph bucket on (256 -> 288 tokens, +16 % on an H200), ran to 0 s at ~60 tokens, while
    extends of 13-254 tokens spanned 8.0-11.9 ms on the GPU (docs/measurements/h200-v31.md,
    sharegpt-lengths; the line through 256-512 gives ~6.3-12.8 ms there). Where the first
    two points are all there is in that range (a batch grid 1, 2, 4...), the line is the
    first segment, as before.

    ``above``: per axis (``x``, ``context_len``), the largest query beyond the measured
    range so far (for the range warning, :meth:`sim.cost_model.CostModel.range_notes`).
    ``below``: the smallest ``x`` query under the first measured point so far (the same
    warning, for the extend and injection grids' token axis), and the smallest context
    under the first of a ``context_span`` (``context_len``).
    """

    __slots__ = ("name", "x", "c", "v", "_xl", "_cl", "_vl", "_low", "_top", "_cache", "above", "below", "span", "_peeked")

    def __init__(self, g: Grid, name: str = "") -> None:
        self.name = name
        self.x = np.asarray(g.x, dtype=float)
        self.c = np.asarray(g.context_len, dtype=float)
        self.v = np.asarray(g.seconds, dtype=float)
        # the same values as Python floats: a lookup reads a handful of them, and numpy's
        # per-call cost (searchsorted ~2 us, a scalar read ~0.1 us) is most of a lookup;
        # float64 arithmetic is the same either way
        self._xl, self._cl, self._vl = self.x.tolist(), self.c.tolist(), self.v.tolist()
        self._low = self._low_lines()
        self._top = self._top_rows()
        self._cache: dict[tuple[float, float], float] = {}
        self._peeked: dict[tuple[float, float], float] = {}   # peek's, apart: a peek notes nothing
        self.above: dict[str, float] = {}
        self.below: dict[str, float] = {}
        # the contexts the grid's measurements spanned (Grid.context_span)
        self.span: tuple[float, float] | None = tuple(g.context_span) if g.context_span is not None else None

    @staticmethod
    def _axis(axis: list[float], q: float) -> tuple[int, int, float]:
        """The segment of the sorted ``axis`` that ``q`` is read on (i, i + 1) and its weight
        there (below 0 or above 1 outside the axis)."""
        n = len(axis)
        if n == 1:
            return 0, 0, 0.0
        # the segment index, clipped to [0, len - 2]: bisect_left is np.searchsorted's
        # default side on a sorted axis (a NaN query goes last, as numpy sorts NaN). The
        # clip written out: builtin min/max parse their arguments through a tuple on every
        # call in 3.11 (~0.5 us a lookup, several lookups a decode shape priced)
        i = (bisect.bisect_left(axis, q) if q == q else n) - 1
        if i < 0:
            i = 0
        elif i > n - 2:
            i = n - 2
        w = (q - axis[i]) / (axis[i + 1] - axis[i])
        return i, i + 1, float(w)

    @staticmethod
    def _row(v: list[float], j0: int, j1: int, wc: float) -> float:
        """A row's values ``v`` (one per context column) between columns ``j0`` and ``j1``."""
        if wc > 1.0:  # beyond the last context: the last segment's slope, never negative
            return v[j1] + max(0.0, v[j1] - v[j0]) * (wc - 1.0)
        if wc < 0.0:  # below the first context: the first segment's slope, never negative
            return v[j0] + max(0.0, v[j1] - v[j0]) * wc
        return v[j0] * (1 - wc) + v[j1] * wc

    def __call__(self, x: float, context: float = 0.0) -> float:
        key = (x, round_tens(context))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self._note_x(x)
        self._note_context(key[1])
        out = self._value(x, key[1])
        if len(self._cache) < 200_000:
            self._cache[key] = out
        return out

    def peek(self, x: float, context: float) -> float:
        """The value at ``(x, context)`` without recording it as a query beyond the range:
        for reads of the grid's own columns (sim/cost_model.py ``_c0_read``), which are the
        model's arithmetic, not a forward the run prices."""
        key = (x, round_tens(context))
        hit = self._peeked.get(key)
        if hit is None:
            hit = self._peeked[key] = self._value(x, key[1])
        return hit

    def _value(self, x: float, context: float) -> float:
        i0, i1, wx = self._axis(self._xl, x)
        j0, j1, wc = self._axis(self._cl, context)
        if wx < 0.0 and self._low:
            out = self._below(x, j0, j1, wc)
        elif wx > 1.0:
            out = self._above(x, [self._row(self._vl[i], j0, j1, wc) for i in self._top])
        else:
            out = self._along_x(self._row(self._vl[i0], j0, j1, wc), self._row(self._vl[i1], j0, j1, wc), wx)
        return out

    @staticmethod
    def _along_x(lo: float, hi: float, wx: float) -> float:
        """Between two ``x`` rows' values at weight ``wx`` (0 <= ``wx`` <= 1 or a one-row
        axis); at least 0 s."""
        return max(0.0, float(lo * (1 - wx) + hi * wx))

    def _top_rows(self) -> list[int]:
        """Indices of the ``x`` points the extrapolation above the grid fits: from half the
        last ``x`` up, at least the last two; none for a one-point axis (never read above)."""
        n = len(self._xl)
        if n < 2:
            return []
        k = sum(1 for x in self._xl if x >= 0.5 * self._xl[-1])
        return list(range(n - max(2, k), n))

    def _above(self, x: float, vals: list[float]) -> float:
        """The value at ``x`` above the last measured ``x``, given ``vals``, the
        :meth:`_top_rows` rows' values at the query's context: the last row's value plus the
        least-squares slope through them (never negative) times the distance."""
        xs = [self._xl[i] for i in self._top]
        mx = sum(xs) / len(xs)
        mv = sum(vals) / len(vals)
        slope = sum((a - mx) * (b - mv) for a, b in zip(xs, vals, strict=True)) / sum((a - mx) ** 2 for a in xs)
        return max(0.0, vals[-1] + max(0.0, slope) * (x - xs[-1]))

    def _low_lines(self) -> list[tuple[float, float]]:
        """Per column, (intercept s, slope s per x unit) of the least-squares line through
        the points with ``x`` up to twice the first (at least the first two); [] for a
        one-point ``x`` axis. See the class docstring (below the first ``x``)."""
        if len(self._xl) < 2:
            return []
        n = max(2, int(np.count_nonzero(self.x <= 2.0 * self.x[0])))
        slope, intercept = np.polyfit(self.x[:n], self.v[:n], 1)
        return [(float(a), float(b)) for a, b in zip(np.atleast_1d(intercept), np.atleast_1d(slope), strict=True)]

    def _below(self, x: float, j0: int, j1: int, wc: float) -> float:
        """The value at ``x`` under the first measured ``x``, between columns ``j0`` and
        ``j1`` at weight ``wc`` (:meth:`_row` of the row each column's low line gives there):
        each column at most its first point's time, at least 0 s; a column whose line falls
        as ``x`` grows keeps its first point's time."""
        row = [first if b <= 0.0 else min(first, max(0.0, a + b * x))
               for first, (a, b) in zip(self._vl[0], self._low, strict=True)]
        return max(0.0, self._row(row, j0, j1, wc))

    def _note_x(self, x: float) -> None:
        if len(self.x) > 1:
            if x > self.x[-1] and x > self.above.get("x", 0.0):
                self.above["x"] = x
            elif x < self.x[0] and x < self.below.get("x", float("inf")):
                self.below["x"] = x

    def _note_context(self, c: float) -> None:
        hi = self.span[1] if self.span is not None else (self.c[-1] if len(self.c) > 1 else None)
        if hi is not None and c > hi and c > self.above.get("context_len", 0.0):
            self.above["context_len"] = c
        # under the contexts a grid says its measurements spanned: no measurement there either
        # (a grid without a span starts its measured range at its first column)
        elif self.span is not None and c < self.span[0] and c < self.below.get("context_len", float("inf")):
            self.below["context_len"] = c

    def row_shifted(self, x: float, context: float, shift: np.ndarray) -> float:
        """Like a call at ``(x, context)``, but row ``i`` is read at column
        ``context - shift[i]`` (``shift``: one value per ``x`` point, tokens).

        For grids whose rows were measured with different layouts, so that one column
        value means different work per row: :meth:`sim.cost_model.CostModel.extend_s`
        under ``gpu.extend_attention: padded_max`` reads every row where its own layout
        does the plan's dense attention work per token. Not memoized on ``shift``: the
        caller keeps one ``shift`` per interpolator. The context is not rounded (dense
        work per token jumps with the batch's longest request, not in 10-token steps).

        Raises:
            ValueError: ``shift`` has not one value per ``x`` point.
        """
        if len(shift) != len(self.x):
            raise ValueError(f"{self.name}: {len(shift)} row shifts for {len(self.x)} rows")
        key = (x, context, -1.0)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        i0, i1, wx = self._axis(self._xl, x)
        self._note_x(x)
        if wx < 0.0 and self._low:  # under the first x: the first row's layout, as _below says
            c = context - float(shift[0])
            self._note_context(c)
            out = self._below(x, *self._axis(self._cl, c))
            if len(self._cache) < 200_000:
                self._cache[key] = out
            return out
        vals = []
        for i in (self._top if wx > 1.0 else (i0, i1)):
            c = context - float(shift[i])  # not rounded: extends rarely repeat a shape
            self._note_context(c)
            j0, j1, wc = self._axis(self._cl, c)
            vals.append(self._row(self._vl[i], j0, j1, wc))
        out = self._above(x, vals) if wx > 1.0 else self._along_x(vals[0], vals[1], wx)
        if len(self._cache) < 200_000:
            self._cache[key] = out
        return out


class ExtendSplit(BaseModel):
    """One extend of several requests of unequal extend length, timed as the extend grid is
    (``gpu.extend_split``): per request its extend and prefix tokens, and the device seconds.

    Raises (pydantic ValidationError) on lists of different lengths, fewer than two
    requests, an extend length < 1, a prefix < 0, or extend lengths all equal (no padded
    query rows: the extend grid's own kind of batch, read right without this table)."""

    model_config = _STRICT

    extend_lens: list[Annotated[int, Field(ge=1, le=10_000_000)]] = Field(min_length=2)
    prefix_lens: list[Annotated[int, Field(ge=0, le=10_000_000)]]
    seconds: Seconds

    @model_validator(mode="after")
    def _shape(self) -> ExtendSplit:
        if len(self.prefix_lens) != len(self.extend_lens):
            raise ValueError(f"extend_lens and prefix_lens need the same length, got {len(self.extend_lens)} and "
                             f"{len(self.prefix_lens)}")
        if len(set(self.extend_lens)) == 1:
            raise ValueError(f"extend_lens {self.extend_lens} are all equal: a split needs unequal extend lengths")
        if self.seconds <= 0:
            raise ValueError("seconds is 0: a forward takes time")
        return self


def _check_token_table(tokens: list[float], values: list[float], name: str) -> None:
    """A table by extend tokens (:class:`AfterStepRatios`, :class:`LeadTable`): ``tokens`` and
    ``values`` (called ``name``) of one non-zero length, ``tokens`` strictly increasing.

    Raises:
        ValueError: saying which (pydantic reports it as the table's validation error)."""
    if not tokens or len(tokens) != len(values):
        raise ValueError(f"tokens and {name} need the same non-zero length, got {len(tokens)} and {len(values)}")
    if any(b <= a for a, b in zip(tokens, tokens[1:], strict=False)):
        raise ValueError(f"tokens must increase strictly, got {tokens}")


class AfterStepRatios(BaseModel):
    """An extend's device time right behind decode or verify steps, as a ratio to the extend
    grid's time (which is timed behind the same extend), by extend tokens:
    ``ratios[i]`` at ``tokens[i]`` (tokens strictly increasing, at least one point); read by
    :meth:`at` (linear between points, end values outside).

    Raises (pydantic ValidationError) on lengths that differ, an empty table, tokens that do
    not increase, or a ratio outside 0.5-2 (a clock state moves a forward by percents)."""

    model_config = _STRICT

    tokens: list[AxisPoint]
    ratios: list[Annotated[float, Field(ge=0.5, le=2.0, allow_inf_nan=False)]]

    @model_validator(mode="after")
    def _shape(self) -> AfterStepRatios:
        _check_token_table(self.tokens, self.ratios, "ratios")
        return self

    def at(self, tokens: float) -> float:
        """The ratio at ``tokens`` (numpy.interp: linear, clamped to the end values)."""
        return float(np.interp(tokens, self.tokens, self.ratios))


class GpuProfile(BaseModel):
    """GPU seconds per forward (the schema every profile follows; all costs in seconds).

    extend: target prefill (extend) forward by the batch's extend tokens (x) and its
        attention context (context_len: sum over requests of e_i (p_i + e_i / 2) / sum e_i
        for extend lengths e_i after prefixes p_i: causal attention's FLOPs per token, so
        x times it is the batch's quadratic attention work). Device time only: from the
        forward's start on the GPU to its end, without the host's time to issue it, which
        the loop charges as host work (host.launch_*) and which a busy loop overlaps with
        the previous forward.
    draft_inject_per_token_s: DSpark prefill: injecting target hidden states into the draft
        KV, per prompt token (a separate launch after slot expansion).
    draft_inject: the same as a grid by the batch's extend tokens and context (used instead
        of the per-token cost when given: it keeps a measured per-launch intercept).
    verify: one speculative cycle's GPU work by batch size (requests) and mean context,
        graph-replayed at a captured batch size: the target's verify forward over
        ``verify_window`` tokens per request plus, when ``verify_includes_draft``, one
        draft-model forward over the same tokens (a block drafter's draft forward, or a
        chain drafter's draft extend after verify: SGLang speculative/eagle_worker_v2.py).
    verify_window: the verify window (tokens per request) ``verify`` was measured at. Other
        windows are predicted by moving the token part along the grid: the value at the
        same number of tokens (batch x window / verify_window requests at the first
        context column) replaces the one at the real batch, while the context part (KV
        read, per request) stays at the real batch. None (old profiles): ``verify`` is used
        for every window unchanged.
    verify_includes_draft: whether ``verify`` holds one draft forward (True: the runtime
        profiler's spec cycle, the fitted MI355X profile). False: ``verify`` is the
        target's verify forward alone and every draft forward comes from ``draft_step``
        (an analytic profile that times the draft model from its own architecture).
    verify_chain: a chain drafter's cycle without its serial draft steps, by batch size and
        mean context: the target's verify over ``verify_window`` tokens per request and the
        draft extend after it (speculative/eagle_worker_v2.py ``_draft_extend_for_decode``:
        the drafter over the verified window, logits on one row per request). The runtime
        profiler times it beside ``verify``, whose draft forward is a block drafter's (over
        twice the window, logits on the drafts' rows). A chain drafter's cycle reads this
        grid instead of ``verify`` where it is given (the window and context rules are
        ``verify``'s); None: ``verify`` for both kinds.
    draft_step: one draft-model forward by the tokens it runs over (x: batch x tokens per
        request; a chain drafter's step with topk 1 runs over batch-size tokens) and mean
        context. This is where the draft model's own size enters. A chain drafter
        (eagle/mtp) runs ``speculative_num_steps - 1`` such steps per cycle over batch x
        ``speculative_eagle_topk`` tokens, besides the draft forward inside ``verify``.
    draft_step_tokens_per_request: the tokens per request of ``draft_step``'s rows: a row
        of ``x`` tokens is ``x / draft_step_tokens_per_request`` requests, each reading its
        KV once (the analytic writer: the window for a block drafter, 1 for a chain
        drafter's step). A draft forward of ``R`` requests with ``q`` tokens each then costs
        its token part at the grid's first context column and its context part at ``R``
        requests (:meth:`sim.cost_model.CostModel.draft_s`). None (measured and older
        profiles): the grid is read at the forward's tokens, whatever the requests.
    decode: one non-speculative decode forward, by batch size and mean context,
        graph-replayed at a captured batch size. None (a profile fitted on speculative runs
        only): plain decoding reads ``verify`` at window 1 with ``verify_window`` (its draft
        forward taken out where ``draft_step`` is given) and the run warns once
        (:meth:`sim.cost_model.CostModel.step_at`); without ``verify_window`` it is refused.
    eager_overhead_s: seconds one decode step or one speculative cycle adds when it runs
        eagerly (batch above cuda_graph_max_bs) instead of as a graph replay: mostly the
        host-side launch of its kernels (measured as eager minus graph at the same batch).
        Used instead of ``eager_factor`` when given.
    eager_draft_overhead_s: the same for each further serial draft forward of a chain
        drafter (its steps beyond the one inside ``verify``).
    eager_host_issue_s: host seconds to issue one eager decode step's or spec cycle's
        kernels one by one (no graph). The kernels run as they are issued, so an eager step
        lasts max(graph time + eager_overhead_s, eager_host_issue_s): host-bound at small
        batch or context, GPU-bound at large (measured: eager minus graph falls from ~12 ms
        at bs 32 / 512 context to ~0.8 ms at 8K context on an H200 proxy). None: not measured.
    eager_spec_issue_s: host seconds to issue one eager speculative cycle's kernels when
        they differ from ``eager_host_issue_s`` (a profile whose ``eager_host_issue_s`` is a
        plain decode step's, e.g. an analytic one): the target's verify forward plus the
        draft forward (SGLang's eager runner issues the draft worker's forward kernel by
        kernel too when the batch is above every captured size,
        model_executor/runner/eager_runner.py). A chain drafter's further serial steps add
        ``eager_draft_overhead_s`` each. None: ``eager_host_issue_s`` (measured on a cycle).
    eager_factor: old profiles: multiplier for decode/verify batches above
        cuda_graph_max_bs (used only when ``eager_overhead_s`` is not given).
    attention_width: how a decode/verify forward's attention spans the batch's contexts.
        ``per_request`` (default): ragged/paged attention (SGLang's FlashInfer/FA3
        backends, layers/attention/): each request reads its own KV, so the step costs the
        grid at the batch's mean context. ``padded_max``: dense attention over one width
        for the whole batch, the longest request's context plus the step's new tokens
        rounded up to ``attention_bucket`` (the runtime's proxy: runtime/layers.py
        AttnBatch, ``[B, C]`` with C the graph's context bucket, runtime/spec_cycle.py
        ``_prepare``), over every padded graph row: the step costs the grid at that width
        and the padded batch. The grid's columns were timed at uniform contexts, width
        ``round_up(context + window, attention_grid_align)``, so both readings agree on a
        uniform batch.
    attention_bucket: tokens the padded width is rounded up to (``padded_max`` only;
        the runtime's graph context buckets, runtime/engine.py: every 256 positions).
    attention_grid_align: the attention width each grid column ``c`` (a multiple of it) was
        timed at is ``round_up(c + window, attention_grid_align)`` (``padded_max`` only).
        The runtime's profiler captures its graphs at context buckets rounded up to
        CTX_ALIGN (runtime/profile_harness.py: ``_round_up(c + spec_window)``, 64), so
        column 1024 of its decode and verify grids ran attention over 1088 positions, not
        1025 / 1030: a step of width ``w`` is read at column ``w - round_up(window, 64)``.
        1 (default, older profiles): width context + window.
    attention_tile: the decode/verify attention kernel pays for whole tiles of this many KV
        positions: a width ``w`` costs as ``round_up(w, attention_tile)`` (``padded_max``
        only). Measured, not assumed: on an H200 the runtime's graph-replayed decode and
        spec cycle at widths 1024-1536 every 64 (benchmarks/decode_width_sweep.py,
        docs/measurements/h200-v14.md) cost 0.04 ms (batch 8) to 0.15-0.21 ms (batch 64) more
        at odd multiples of 64 than on the line through the multiples of 128, with real or
        padding positions alike: a 128-position tile. A grid column timed at
        ``round_up(c + W, attention_grid_align)`` then stands for the width that rounds up to
        the tile, and a step's width is read there too (:class:`sim.cost_model.CostModel`).
        1 (default): no tile.
    attention_padding_cost: what one padding position of a ``padded_max`` decode/verify
        attention costs, as a fraction of a position holding a request's own KV
        (``padded_max`` only). The dense ``[P, W]`` attention (P the graph batch, W the width)
        holds ``n (c_i + window)`` real positions; the rest, each request's tail up to W and
        the padded graph rows whole, gather the one padding slot (runtime/kv_cache.py
        ``PAD_SLOT`` through runtime/layers.py ``paged_attention``). The grid was timed with
        every position real (uniform contexts), so a step is read at the column of its width
        less ``(1 - attention_padding_cost) x padding positions / P``. Measured, not assumed:
        ``specsched profile``'s padding probe (runtime/profile_gpu.py ``padding_phase``), and
        from recorded loop steps within one graph batch and width, how the step's time moves
        with its padding positions (benchmarks/verify_step_costs.py ``--padding``). 1 (default): a
        padding position costs a real one (the 1b proxy's width sweep with half the width
        padding, docs/measurements/h200-v14.md; older profiles).
    forward_in_launch: the device runs each forward inside its launch call (torch on CPU
        runs the ops as the host issues them; runtime/engine.py on ``--device cpu``): the host
        is busy until the forward ends, so the overlap loop, which launches step N+1 before it
        processes step N's results (sim/loop.py), delivers step N's tokens after step N+1's
        forward, and never waits for a forward. False (default): a GPU, whose launch returns
        before its forward runs. ``specsched profile --device cpu`` writes true.
    extend_attention: how an extend (and a block drafter's injection) attends.
        ``ragged`` (default): per request over its own prefix and causal block (SGLang's
        extend kernels, FlashInfer/FA3 ragged prefill, layers/attention/): the batch's
        quadratic work is sum_i e_i (p_i + e_i / 2), which the grid's context axis
        carries. ``padded_max``: dense over ``[B, Q, C]`` (B requests, Q the longest
        extend, C the longest prefix + extend rounded up to ``extend_attention_bucket``),
        every key visited whatever the mask (runtime/runner.py ``_ragged``: queries padded
        to ``[B, Q]``, keys ``req_to_token[rows, :C]``, a position mask;
        runtime/layers.py ``paged_attention``): the work is B Q C. The grid is then read
        where its own measured layout does the same dense work per extend token (see
        ``extend_layout_len``), so a batch of unequal lengths, or one long prompt, costs
        what the dense kernel does.
    extend_layout_len: the per-request extend length of the extend grid's measured
        batches (``padded_max`` only, required there): row ``x`` was timed as
        ``ceil(x / extend_layout_len)`` requests of near-equal length at one prefix
        (runtime/profile_harness.py ``extend_layout``), so its dense work per token is the
        column's context + half a request's extend length.
    extend_attention_bucket: tokens C is rounded up to (``padded_max`` only; the
        runtime's CTX_ALIGN, runtime/kv_cache.py: 64).
    extend_after_step: a pure extend's device time when the forward before it on the stream
        was a decode step (``decode``) or a verify cycle (``verify``), as a ratio to the
        extend grid's (timed behind the same extend back to back), by extend tokens. The
        GPU's clock follows the power its recent work drew: dense extends back to back held
        an H100 at its power cap, its clock 3-9 % below the idle-spin phase's
        (docs/measurements/h100-v50.md), while on an H200 an extend-sized stack took x1.085
        its idle-spin time after ~50 ms of verify-sized work and x1.034 after two of itself
        (docs/measurements/h200-v32.md); so it is measured per GPU (runtime/profile_gpu.py
        ``extend_after_phase``), never assumed. Applied to an extend queued behind the
        decode or verify forward (the state the profiler times); one after another extend
        or a mixed step, one launched onto a drained stream, or any with no such table, is
        priced by the grid alone (sim/engine.py ``_launch``).
    extend_split: extends of several requests of unequal extend length, each timed whole
        as the extend grid's rows are (``padded_max`` only; ignored under ``ragged``): the
        end of one prompt and the start of the next in one chunk, as chunked prefill makes
        them (runtime/profile_gpu.py ``split_phase``). An empirical term of the runtime's
        dense attention, mechanism unknown: on an H200 such extends took 3-10 % (0.7-2.2 ms
        at 512 tokens) longer than the grid read at their dense keys per token, equal
        lengths did not, and the missing time tracked neither the padded query rows' count
        nor their share in probes of one short and one long request
        (docs/measurements/h200-extend-layouts.md). It grew with the keys' width ``C`` and
        came about once per request whose queries are padded (three requests, two of them
        padded: 2-2.5 times a two-request split's), while nearly equal lengths added nearly
        nothing (docs/measurements/h200-v40.md). So the table is kept as measured, and the
        cost model reads from it the time padded requests add beyond the dense reading in
        proportion to their padded shares ``(Q - e_i) / Q``, by tokens and width
        (:meth:`sim.cost_model.CostModel.unequal_extend_s`). None (analytic, hand-written
        and older profiles): not measured, the dense reading alone, as before.
    mixed_forward: how a mixed step (``enable_mixed_chunk``) runs its running requests.
        ``one_extend``: in the chunk's extend forward, one-token extend rows at their
        context, the weights read once (SGLang 0.5.23 schedule_batch.py
        ``mix_with_running``; its ragged extend kernels then read each row's KV once).
        ``extend_then_decode``: the chunk's extend forward, then the running rows' own
        decode (or verify) step, graph-replayed where the rows fit, one after the other on
        the forward stream (the runtime: runtime/engine.py ``_launch_call``), so the step
        costs the extend plus the decode step. None (default): ``extend_then_decode`` for a
        ``padded_max`` extend attention (only the runtime's profiles have it), else
        ``one_extend``. Read as :attr:`mixed_split`. Why it matters: round 43 on an H100
        (docs/measurements/h100-v43.md) measured the runtime's mixed steps at the extend
        plus a decode step (~47 ms at ~1020 tokens and 1-10 running rows), where pricing the
        rows as padded extend rows gave 5-7x that.
    dp_attention_sync_s: seconds a DP-attention lock-step forward adds to its slowest rank's
        cost (server.enable_dp_attention with dp_size > 1; sim/dp_attention.py): the
        cross-rank gathers of one forward (the scheduler's mlp-sync all-gather,
        scheduler_components/dp_attn.py ``prepare_mlp_sync_batch_raw``, and the gather /
        scatter around the MoE layers). 0: not measured.

    Every grid above is extrapolated as :class:`GridInterp` says; a run that leaves a
    grid's measured range gets one warning line per grid and axis.
    """

    model_config = _STRICT

    extend: Grid
    draft_inject_per_token_s: Seconds = 0.0
    draft_inject: Grid | None = None
    verify: Grid | None = None
    verify_window: int | None = Field(None, ge=2, le=64)
    verify_includes_draft: bool = True
    verify_chain: Grid | None = None
    draft_step: Grid | None = None
    draft_step_tokens_per_request: int | None = Field(None, ge=1, le=64)
    decode: Grid | None = None
    eager_overhead_s: Seconds | None = None
    eager_draft_overhead_s: Seconds = 0.0
    eager_host_issue_s: Seconds | None = None
    eager_spec_issue_s: Seconds | None = None
    eager_factor: float = Field(1.0, ge=1.0, le=1000.0, allow_inf_nan=False)
    attention_width: Literal["per_request", "padded_max"] = "per_request"
    attention_bucket: int = Field(1, ge=1, le=1_000_000)
    attention_grid_align: int = Field(1, ge=1, le=1_000_000)
    attention_tile: int = Field(1, ge=1, le=1_000_000)
    attention_padding_cost: float = Field(1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    forward_in_launch: bool = False
    extend_attention: Literal["ragged", "padded_max"] = "ragged"
    extend_layout_len: int | None = Field(None, ge=1, le=10_000_000)
    extend_attention_bucket: int = Field(1, ge=1, le=1_000_000)
    extend_split: list[ExtendSplit] | None = None
    extend_after_step: Annotated[dict[Literal["decode", "verify"], AfterStepRatios], Field(min_length=1)] | None = None
    dp_attention_sync_s: Seconds = 0.0
    mixed_forward: Literal["one_extend", "extend_then_decode"] | None = None

    @property
    def mixed_split(self) -> bool:
        """True when a mixed step runs the chunk's extend and then the running rows' decode
        as two forwards (``mixed_forward``, its default by ``extend_attention``)."""
        if self.mixed_forward is None:
            return self.extend_attention == "padded_max"
        return self.mixed_forward == "extend_then_decode"

    @model_validator(mode="after")
    def _extend_layout(self) -> GpuProfile:
        if self.extend_attention == "padded_max" and self.extend_layout_len is None:
            raise ValueError("extend_attention padded_max needs extend_layout_len (the per-request extend length "
                             "of the extend grid's measured batches)")
        return self


class LeadTable(BaseModel):
    """Seconds by extend tokens: ``seconds[i]`` at ``tokens[i]`` (tokens strictly increasing,
    at least one point); read by :meth:`at` (linear between points, end values outside).

    Raises (pydantic ValidationError) on lengths that differ, an empty table, or tokens
    that do not increase."""

    model_config = _STRICT

    tokens: list[AxisPoint]
    seconds: list[Seconds]

    @model_validator(mode="after")
    def _shape(self) -> LeadTable:
        _check_token_table(self.tokens, self.seconds, "seconds")
        return self

    def at(self, tokens: float) -> float:
        """Seconds at ``tokens`` (numpy.interp: linear, clamped to the end values)."""
        return float(np.interp(tokens, self.tokens, self.seconds))


class HostProfile(BaseModel):
    """Host seconds.

    ingest_per_request_s: tokenizer + IPC per request before the scheduler sees it (a FIFO).
    ingest_per_token_s: the same FIFO's time per prompt token: the HTTP server renders the
    chat template over the whole message history and tokenizes it for every request, on its
    one event loop, so a turn of a long multi-turn conversation waits for its whole history to
    be encoded (SGLang entrypoints/openai/serving_chat.py ``_render_and_encode_chat_template``;
    managers/tokenizer_manager.py ``_tokenize_texts`` for plain prompts). 0: not modelled.
    schedule_*: building a batch. launch_s / launch_per_req_s: preparing inputs and
    launching/replaying (the part that runs after the publish wait), per step and per
    request; an extend-only launch pays them too, for its call's host work outside the
    extend's issue (sim.cost_model.CostModel.host says why). launch_per_extend_s + launch_per_extend_token_s x tokens: issuing an eager
    extend's kernels (prefill runs without a graph); the kernels run as they are issued,
    so this host time overlaps the forward it issues (the extend ends no earlier than the
    issue does; sim.engine applies it at the launch), and the GPU time of the forward is
    gpu.extend. Measured host issue time is nearly flat in tokens (kernel count, not
    size), hence the per-launch term. launch_per_inject_s + launch_per_inject_token_s x
    tokens: the same for a block drafter's prompt injection (DSpark prefill: the inject
    launch after the extend), charged at the inject launch; 0 in profiles whose extend
    terms hold both issues (a plain-decoding run then pays the injection's issue too:
    docs/measurements/h200-v3-repredict.md). launch_per_extend_eager_s /
    launch_per_inject_eager_s (analytic CUDA profiles; None elsewhere): the issue of an
    extend (injection) that runs eagerly where the two above are the piecewise prefill
    graph's, used for an extend the graph cannot take (sim.cost_model.CostModel.issue).
    launch_tail_s / launch_tail_per_req_s: the
    rest of a graph-replayed decode/verify launch call after its forward is queued (the
    loop's launch returns only after recording its events, advancing the host's length
    bounds and starting the result copy, runtime/engine.py ``_launch``; SGLang's
    ``run_batch`` likewise returns after the replay is queued): the GPU runs meanwhile, but
    the host cannot process the previous step's results (and deliver its tokens) before
    the call returns. The whole call's host time (GPU kept busy) minus the publish-wait
    stall. 0: not measured (results are processed right after the forward is queued).
    process_*: processing a step's results.
    decode_schedule_s / decode_schedule_per_req_s, decode_process_s / decode_process_per_req_s:
        ``Scheduler.schedule()`` and ``Scheduler.process_result`` of a plain-decoding server
        (no speculative algorithm; decode plans), per step and per request. schedule_* and
        process_* are timed on a scheduler of DSpark requests with verify plans, whose
        bookkeeping per request (draft windows, accept lengths, KV of the window) a decode
        plan does not run: 3.4x and 1.15x the decode's at batch 64 on one host
        (docs/measurements/h200-nooverlap.md). Under overlap both hide behind the forward;
        without overlap (``enable_overlap_schedule`` false) they are on the critical path
        of every decode step. The simulator charges them in place of schedule_* / process_*
        to every plan of a server without speculative decoding
        (sim.cost_model.CostModel.host); None: not measured (schedule_* / process_*, as
        before). runtime/profile_host.py ``host_phase``.
    decode_launch_s / decode_launch_per_req_s: the publish-wait stall of a plain decode
        launch (launch_* measured on decode plans of a plain-decoding server: no accept draw,
        one position per request instead of the draft window; runtime/profile_host.py
        ``stall_phase``, modes dqueued / dblock), charged in place of launch_* to every plan
        of a server without speculative decoding. Without overlap it is on every decode
        step's critical path: round 38's poisson-nospec no_overlap decode steps took ~0.84 ms
        beyond the overlapped arm's where the verify launch's terms charged ~1.44 ms
        (docs/measurements/h200-v38.md). None: not measured (launch_*, as before).
    result_path_s / result_path_per_req_s and recv_path_s / recv_path_per_req_s: the rest of
        the loop's host path from a step's results to the next schedule pass, per step and
        per request: beyond ``Scheduler.process_result`` (process_*) and
        ``Scheduler.schedule()`` (schedule_*), the result copy's wait past the forward's end
        and its timing reads up to the delivery's stamp (result_path_*), then the delivery's
        recording, the receive and the pass's bookkeeping (recv_path_*)
        (runtime/engine.py ``LoopHost``: ``_results``, ``_deliver``, ``_recv``, ``_pass``;
        SGLang 0.5.23 managers/scheduler.py ``event_loop_overlap`` /
        ``event_loop_normal``: ``process_batch_result`` (scheduler_components/
        batch_result_processor.py: the ``copy_done`` wait, the output processing;
        output_streamer.py ``stream_output``), then ``ingest_requests``
        (request_receiver.py ``recv_requests``) and ``get_next_batch_to_run``). Measured as the
        profiler's no-overlap stall loop (each forward launched onto an idle stream after
        the path, run by the engine's own code) less its publish-wait loop, less the
        scheduler's own process and schedule times, split at the delivery's host stamp
        (runtime/profile_host.py ``stall_phase``, runtime.profile_fit.Fits.result_path_total).
        The simulator charges result_path_* with process_* (before the delivery) and
        recv_path_* with schedule_* (sim.cost_model.CostModel.host): host time between the
        results and the next pass, on the critical path only when the GPU has nothing
        queued. 0: not measured.
    sync_wakeup_s: wake-up after a host block that really waited.
    extend_idle_lead_s: how much later an extend launched onto an idle GPU stream ends than
    its device time (gpu.extend, timed with the GPU kept busy) says: its kernels reach the
    GPU only as the host issues them, so the first ones trail the launch (idle-queue wall
    minus kept-busy device time at the same tokens); hidden when the stream is busy with a
    previous forward for at least this long. 0: not measured.
    extend_idle_lead_by_tokens: the same lead measured per extend size (optional; profiles
    from `specsched profile` on a GPU since round 6): when present the simulator reads the
    lead at an extend's total tokens from this table (linear between points, the end
    values outside), and extend_idle_lead_s (the median of the table) is informational.
    It was timed over the extend AND its injection (extend, ``prepare_inject``, inject:
    idle wall less both device times), so it holds the injection's preparation and issue
    too: the simulator charges it to an extend launched with its injection right behind it
    (sim.cost_model.CostModel.idle_lead_s).
    extend_own_idle_lead_by_tokens: the extend's own idle lead, by extend tokens: its span
        launched onto an idle stream (a timing event right before the call, one right after
        it, as runtime/engine.py ``_launch_call`` marks each forward) less its device time
        with the GPU kept busy, clamped >= 0 (runtime/profile_gpu.py ``_idle_lead``,
        runtime.profile_fit.span_lead_fit). The simulator charges it to the extend of a
        DSpark prefill whose slot-expansion block launches the injection apart
        (``server.prefill_slot_expansion_sync``); elsewhere extend_idle_lead_by_tokens
        (sim.cost_model.CostModel.idle_lead_s says why). None: not measured (the combined
        lead everywhere, as before).
    inject_unprepared_idle_lead_by_tokens: the injection's own idle lead when its launch
        prepares it (no slot-expansion block: ``prepare_inject(sync=False)`` + inject right
        after the extend), by extend tokens, from the same idle-stream sequence, less its
        kept-busy device time, clamped >= 0. Recorded, not charged (charging it predicted
        worse, sim.cost_model.CostModel.idle_lead_s). None: not measured.
    cross_queue_penalty_s: added to every graph-replayed forward when a wait is queued from
    a separate schedule stream (0 on CUDA; measured non-zero on HIP).
    slot_expansion_s: with ``server.prefill_slot_expansion_sync`` (a DSpark prefill whose
    slot expansion calls ``repeat_interleave`` without ``output_size``; SGLang 0.5.23
    passes it, speculative/dspark_components/dspark_kv_inject.py ``place_prefill``), the
    host seconds after the extend drained and the host woke (host.sync_wakeup_s) before
    the injection's launch starts issuing: the expansion's second blocking round trip and
    the injection batch's index construction, run with the GPU idle. Measured as the GPU
    idle gap between the extend's end and the injection's start in the loop's own sequence,
    less the wake-up (runtime/profile_gpu.py ``_slot_expansion``,
    runtime.profile_fit.slot_expansion_fit; profiles made up to round 15 also subtracted
    the injection's preparation: 0.1-0.3 ms where the loop idles 0.8-1.8 ms). 0: not measured.
    inject_prepare_s: host seconds of the injection's preparation (``prepare_inject`` with
        the host-known total: per-token positions and slots) held inside
        launch_per_inject_s, which the profiler times as preparation + injection. With
        ``server.prefill_slot_expansion_sync`` the loop prepares the injection inside the
        slot-expansion block (``prepare_inject(sync=True)``; runtime/engine.py
        ``_host_block`` keeps the batch and the inject launch reuses it; the gap it leaves
        is slot_expansion_s), so the injection's launch issues launch_per_inject_s less
        this (sim.cost_model.CostModel.issue). Measured with the GPU kept busy in the
        profiler's slot-expansion phase (runtime/profile_gpu.py ``_slot_expansion``; the
        median over the extend grid's tokens, runtime.profile_fit.inject_prepare_fit).
        0: not measured (the launch pays all of launch_per_inject_s).
    inject_idle_lead_by_tokens: seconds a block drafter's injection launched onto an idle
        stream (after a slot-expansion block: the extend has drained) takes beyond its
        device time, by extend tokens: its first kernels trail the host's issue, as an
        extend's do (extend_idle_lead_by_tokens). Measured as the injection's span from an
        idle stream in the loop's own slot-expansion sequence (runtime/profile_gpu.py
        ``_slot_expansion``, a timing event after the injection) less its device time with
        the GPU kept busy (gpu.draft_inject at prefix 0), clamped >= 0. The simulator
        starts the injection's device work this long after its launch when the stream is
        idle (sim.cost_model.CostModel.idle_lead_s); queued behind its extend (no block) it
        hides. On H200 round 15 the loop's injection ran 0.4-0.5 ms longer after the block
        than behind its extend (docs/measurements/h200-v15.md). None: not measured (no lead).
    reference_work_s: the host speed these terms were measured at: the thread CPU seconds
    of a fixed reference work (runtime/host_reference.py ``reference_work``), median of
    samples taken between the profiler's measurements. A measured run records the same
    work's time (summary.json ``host_speed``); their ratio is the run's host speed against
    the profile's, which a scenario's ``host.speed_factor`` conditions a prediction on
    (sim/host_speed.py). The simulator reads it only to condition a prediction on a run's
    reference work (scenario ``host.reference_work_s``). None: not measured.
    reference_work_by_term: per host term (dotted key of sim.host_speed.SCALED_TERMS, e.g.
    ``host.launch_s``, ``gpu.eager_host_issue_s``), the reference-work seconds at which it
    was measured: the median of the samples of the profiling phase that measured it, or
    the profile's fast level for a term taken as a lower quartile or minimum over points.
    A scenario's ``host.reference_work_s`` scales each term by the run's reference over
    this (terms left out: over reference_work_s). None: every term at reference_work_s.
    launch_reference_work_s: the launch path's speed these terms were measured at: the
    thread CPU seconds of the launch reference work (runtime/host_reference.py
    ``LaunchReferenceWork``: small torch ops and host-to-device copies), sampled beside
    reference_work_s. A scenario's ``host.launch_reference_work_s`` conditions the launch
    path's terms (sim/host_speed.py ``LAUNCH_PATH_TERMS``) on it, since that path did not
    follow the Python reference work across H200 machines (docs/measurements/h200-v39.md).
    None: not measured.
    launch_reference_work_by_term: per launch-path term, the launch reference work's
    seconds at which it was measured (as reference_work_by_term). None: every launch-path
    term at launch_reference_work_s.
    """

    model_config = _STRICT

    ingest_per_request_s: Seconds = 0.0
    ingest_per_token_s: Seconds = 0.0
    schedule_s: Seconds = 0.0
    schedule_per_req_s: Seconds = 0.0
    launch_s: Seconds = 0.0
    launch_per_req_s: Seconds = 0.0
    launch_tail_s: Seconds = 0.0
    launch_tail_per_req_s: Seconds = 0.0
    launch_per_extend_s: Seconds = 0.0
    launch_per_extend_token_s: Seconds = 0.0
    launch_per_inject_s: Seconds = 0.0
    launch_per_inject_token_s: Seconds = 0.0
    launch_per_extend_eager_s: Seconds | None = None
    launch_per_inject_eager_s: Seconds | None = None
    process_s: Seconds = 0.0
    process_per_req_s: Seconds = 0.0
    decode_schedule_s: Seconds | None = None
    decode_schedule_per_req_s: Seconds | None = None
    decode_process_s: Seconds | None = None
    decode_process_per_req_s: Seconds | None = None
    decode_launch_s: Seconds | None = None
    decode_launch_per_req_s: Seconds | None = None
    result_path_s: Seconds = 0.0
    result_path_per_req_s: Seconds = 0.0
    recv_path_s: Seconds = 0.0
    recv_path_per_req_s: Seconds = 0.0
    sync_wakeup_s: Seconds = 0.0
    extend_idle_lead_s: Seconds = 0.0
    extend_idle_lead_by_tokens: LeadTable | None = None
    extend_own_idle_lead_by_tokens: LeadTable | None = None
    cross_queue_penalty_s: Seconds = 0.0
    slot_expansion_s: Seconds = 0.0
    inject_prepare_s: Seconds = 0.0
    inject_idle_lead_by_tokens: LeadTable | None = None
    inject_unprepared_idle_lead_by_tokens: LeadTable | None = None
    reference_work_s: Seconds | None = None
    reference_work_by_term: dict[str, Annotated[float, Field(gt=0.0, le=MAX_SECONDS, allow_inf_nan=False)]] | None = None
    launch_reference_work_s: Seconds | None = None
    launch_reference_work_by_term: dict[str, Annotated[float, Field(gt=0.0, le=MAX_SECONDS,
                                                                    allow_inf_nan=False)]] | None = None

    @model_validator(mode="after")
    def _known_terms(self) -> HostProfile:
        from specsched.sim.host_speed import HOST_OPTIONAL_GROUPS, LAUNCH_PATH_TERMS, SCALED_TERMS

        bad = sorted(set(self.reference_work_by_term or ()) - set(SCALED_TERMS))
        if bad:
            raise ValueError(f"reference_work_by_term: unknown host term {bad[0]!r}; allowed: {', '.join(SCALED_TERMS)}")
        bad = sorted(set(self.launch_reference_work_by_term or ()) - LAUNCH_PATH_TERMS)
        if bad:
            raise ValueError(f"launch_reference_work_by_term: {bad[0]!r} is not a launch-path term; allowed: "
                             f"{', '.join(sorted(LAUNCH_PATH_TERMS))}")
        # the plain-decoding server's terms come together, group by group (sim.host_speed.HOST_OPTIONAL_GROUPS)
        for group in HOST_OPTIONAL_GROUPS:
            given = [f for f in group if getattr(self, f) is not None]
            if given and len(given) != len(group):
                missing = sorted(set(group) - set(given))
                raise ValueError(f"{missing[0]}: missing while {given[0]} is given; the plain-decoding server's "
                                 f"terms come together ({', '.join(group)}) or not at all")
        return self


class Profile(BaseModel):
    """A device profile: GPU and host costs plus where each came from.

    ``hardware``: the device (platform, GPU, TP, memory, weights and KV bytes) from which
    :mod:`sim.defaults` derives SGLang's defaults. ``analytic``: for profiles written by
    ``specsched profile --analytic``, the inputs (model shape, GPU figures, TP, dtype,
    efficiency factors) that regenerate it (:func:`sim.analytic.writer.regenerate`).

    YAML keys: ``name``, ``device`` (free text: GPU, count, parallelism, model),
    ``description``, ``provenance`` (dotted key -> where the value came from: a
    measurement and its command, a datasheet, a fit, or "assumed" with the reason),
    ``gpu`` (:class:`GpuProfile`) and ``host`` (:class:`HostProfile`); ``kv_transfer``
    (:class:`sim.disagg_config.KVTransferCost`) for prefill-decode disaggregated scenarios. A minimal
    speculative profile needs ``gpu.extend`` and ``gpu.verify`` (plus ``gpu.verify_window``
    so the window moves the cost, and ``gpu.draft_step`` for chain drafters); a plain
    decoding one ``gpu.extend`` and ``gpu.decode``. Unknown keys are refused.
    """

    model_config = _STRICT

    name: str
    device: str
    description: str = ""
    provenance: dict[str, str] = {}
    gpu: GpuProfile
    host: HostProfile = HostProfile()
    hardware: Hardware | None = None
    analytic: dict[str, Any] | None = None
    kv_transfer: KVTransferCost | None = None
    path: str = ""


ANALYTIC_METHODS = ("analytic", "roofline")
"""How ``provenance.method`` begins for a profile whose costs are estimated, not measured:
``specsched profile --analytic`` writes "analytic roofline (sim/analytic/roofline.py) ..."
(sim/analytic/writer.py); a hand-derived roofline profile says "roofline ..."."""


def analytic_costs(profile: Profile) -> bool:
    """Whether ``profile``'s costs are an analytic estimate (a roofline from a model's shapes
    and a GPU's datasheet), not measured on a device nor fitted to a server's runs: it has an
    ``analytic`` block or its ``provenance.method`` begins with one of
    :data:`ANALYTIC_METHODS`, and no ``calibrate.from`` provenance (``specsched calibrate
    --from`` fitted it to measured runs; a fit to server logs alone, ``calibrate.from_logs``,
    fits the decode step only and leaves it analytic). A profile that says nothing of its
    method (a measured one written by hand) is not taken for analytic."""
    prov = profile.provenance or {}
    if "calibrate.from" in prov:
        return False
    method = str(prov.get("method", "")).strip().lower()
    return profile.analytic is not None or method.startswith(ANALYTIC_METHODS)


def analytic_profiles_note(scenarios: Iterable[Any]) -> str | None:
    """One ``note:`` line naming the profiles of ``scenarios`` (validated scenarios: their
    ``profile`` and ``path``) whose costs are an analytic estimate (:func:`analytic_costs`), for
    the commands that print tables of many runs (``compare``, ``sweep``), as ``run``'s report
    says it of its own; None when none is. A profile that does not load is left to the run,
    which names what is wrong with it.

    Raises:
        nothing: a profile that fails to load is skipped."""
    names: dict[str, None] = {}
    for profile, path in dict.fromkeys((str(sc.profile), sc.path or None) for sc in scenarios):   # each loaded once
        try:
            if analytic_costs(load_profile(profile, path)):
                names[profile] = None
        except ConfigError:
            continue
    if not names:
        return None
    return (f"note: profile {', '.join(names)}: costs are an analytic estimate (a roofline from the model's shapes "
            "and the GPU's datasheet), not measured: the figures are estimates, not calibrated predictions")


def standalone_drafter_note(scenario: Any, profile: Profile) -> str | None:
    """One ``note:`` line when ``scenario`` runs SGLang's STANDALONE drafter (a separate draft
    model, speculative/standalone_worker_v2.py) on an analytic profile written without
    ``--draft-model``: its draft steps are then priced as ``draft_layers`` layers of the
    target's own shape (the EAGLE head the profile assumed), not as a whole draft model with
    its own embedding, layers and LM head; None otherwise."""
    a = profile.analytic
    if not isinstance(a, dict) or a.get("draft_model"):
        return None
    srv = scenario.server
    servers = [srv] + ([srv.role_server(r) for r in ("prefill", "decode")] if srv.disaggregation is not None else [])
    if not any(x.speculative_algorithm.value == "standalone" for x in servers):
        return None
    return (f"note: profile {profile.name} has no draft model (written without --draft-model): speculative_algorithm "
            f"standalone's draft steps are priced as {a.get('draft_layers', 1)} target-shaped layer(s), an EAGLE head, "
            "not a separate draft model; write the profile with specsched profile --analytic ... --draft-model NAME")


def drafter_kind_note(scenario: Any, profile: Profile) -> str | None:
    """One ``warning:`` line when an analytic profile was written for one kind of drafter
    (``analytic.drafter``: ``block``, DSpark/DFlash, one draft forward over the whole window;
    ``chain``, EAGLE/EAGLE-3/MTP/STANDALONE, one token per request a draft step) and
    ``scenario`` runs the other: its draft forwards are then read from the other kind's
    (sim/cost_model.py ``draft_s``), on that kind's draft head, without a word; None
    otherwise (a measured profile, no speculation, or the same kind)."""
    a = profile.analytic
    kind = a.get("drafter") if isinstance(a, dict) else None
    if kind not in ("block", "chain"):
        return None
    srv = scenario.server
    servers = [srv] + ([srv.role_server(r) for r in ("prefill", "decode")] if srv.disaggregation is not None else [])
    other = sorted({x.speculative_algorithm.value for x in servers if x.speculative_algorithm.enabled
                    and ("block" if x.speculative_algorithm.is_block else "chain") != kind})
    if not other:
        return None
    want = "chain" if kind == "block" else "block"
    names = {"block": "DSpark/DFlash", "chain": "EAGLE/MTP/STANDALONE"}
    return (f"warning: profile {profile.name} prices a {kind} drafter ({names[kind]}), but speculative_algorithm "
            f"{', '.join(other)} runs a {want} drafter ({names[want]}): its draft forwards are read from the {kind} "
            f"drafter's; a profile for it: specsched profile --analytic ... --drafter {want}")


def context_length_note(scenario: Any, profile: Profile) -> str | None:
    """One ``warning:`` line when a server's ``context_length`` (SGLang's ``--context-length``)
    is above the model's own (the profile's ``hardware.context_len``, from the config's
    ``max_position_embeddings`` and rope scaling): SGLang 0.5.23 stops at start with "User-specified
    context_length (N) is greater than the derived context_length (M)" unless
    ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` is set, and with it serves the longer
    prompts with a warning that the outputs may be wrong (configs/model_config.py
    ``ModelConfig._derive_context_length``). The run takes the value as given (as with the
    variable set) and said nothing; None otherwise (no such server, or a profile that does not
    know the model's length)."""
    hw = profile.hardware
    model = getattr(hw, "context_len", None) if hw is not None else None
    if not model:
        return None
    srv = scenario.server
    servers = [("server.context_length", srv)]
    if srv.disaggregation is not None:
        servers += [(f"server.disaggregation.{r}.server.context_length", srv.role_server(r)) for r in ("prefill", "decode")]
    over = {key: x.context_length for key, x in servers if x.context_length is not None and x.context_length > model}
    if not over:
        return None
    if len(set(over.values())) == 1 and "server.context_length" in over:
        over = {"server.context_length": over["server.context_length"]}
    said = ", ".join(f"{k} {v}" for k, v in over.items())
    return (f"warning: {said} is above the model's context length {model} (profile {profile.name}'s "
            f"hardware.context_len): SGLang 0.5.23 refuses it at start unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "
            "is set, and then warns that outputs past the model's length may be wrong (configs/model_config.py "
            "ModelConfig._derive_context_length); the run takes it as given")


def resolve_profile_path(name_or_path: str, relative_to: str | Path | None = None) -> Path:
    """A profile given as a path (absolute, or relative to the scenario file / cwd) or as a
    name in the bundled ``profiles/`` folder."""
    p = Path(name_or_path).expanduser()   # profile: ~/profiles/x.yaml in a YAML file (the shell would expand it)
    candidates = [p]
    if relative_to is not None:
        candidates.append(Path(relative_to).resolve().parent / p)
    bundled = profiles_dir()
    candidates += [bundled / p, bundled / f"{name_or_path}.yaml", *in_bundled_folder(p, "profiles", bundled)]
    for c in candidates:
        if c.is_file() or (c is p and is_input_file(c)):   # a pipe only as given
            return c
    return p


def _local_profile_file(name: str, relative_to: str | Path | None) -> str | None:
    """``profiles/NAME.yaml`` under the current directory or the scenario file's folder (the
    file ``specsched profile --analytic`` writes without ``--out``), as a path relative to
    the folder it was found in; None where there is none or ``name`` is already a path."""
    if not name or Path(name).name != name or name.endswith((".yaml", ".yml")):
        return None
    rel = Path("profiles") / f"{name}.yaml"
    folders = [Path.cwd()] + ([Path(relative_to).resolve().parent] if relative_to is not None else [])
    return next((rel.as_posix() for d in folders if (d / rel).is_file()), None)


def refuse_replacing_non_profile(out: str | Path) -> None:
    """Refuse, before any work, an ``--out`` that holds a file that is no profile (no
    ``gpu``): ``specsched profile`` and ``calibrate --from`` wrote their profile over a user's
    scenario or result file without a word. An older profile there is replaced
    (:func:`sim.atomic.refuse_replacing_foreign`).

    Raises:
        ConfigError: naming ``--out`` and how to go on.
    """
    from specsched.sim.atomic import refuse_replacing_foreign

    refuse_replacing_foreign(out, lambda data: isinstance(data, dict) and "gpu" in data,
                             "is not a profile (it has no gpu)", "the profile")


def _suffixed_profile_file(name: str, relative_to: str | Path | None) -> str | None:
    """``NAME.yaml`` (or ``.yml``) in the current directory or the scenario file's folder, for
    a profile named without its suffix; None where there is none or ``name`` already has one."""
    if not name or name.endswith((".yaml", ".yml")):
        return None
    folders = [Path.cwd()] + ([Path(relative_to).resolve().parent] if relative_to is not None else [])
    return next((f"{name}{suf}" for d in folders for suf in (".yaml", ".yml") if (d / f"{name}{suf}").is_file()), None)


MODEL_CONFIG_KEYS = frozenset({"hidden_size", "num_attention_heads", "num_hidden_layers", "architectures",
                               "model_type", "text_config"})
"""Keys of a Hugging Face ``config.json`` that no profile or scenario has."""


def model_config_refusal(path: str | Path, raw: Any) -> ConfigError | None:
    """The one-line refusal for a model's ``config.json`` given where a profile or a scenario
    goes (it has :data:`MODEL_CONFIG_KEYS` and no ``gpu``, ``workload`` or ``server``), naming
    the command that makes a profile of it; None for any other file."""
    if not isinstance(raw, dict) or {"gpu", "workload", "server"} & raw.keys() or not MODEL_CONFIG_KEYS & raw.keys():
        return None
    return ConfigError(str(path), "<file>", str(path),
                       "a model's config.json, not a profile or a scenario; make a profile of it: specsched "
                       f"profile --analytic --model {path} --gpu GPU --tp N --out P.yaml, then --set profile=P.yaml")


def load_profile(name_or_path: str, relative_to: str | Path | None = None) -> Profile:
    """Load and validate a profile.

    Raises:
        ConfigError: file missing, or a missing/unknown/out-of-range key.
    """
    path = resolve_profile_path(name_or_path, relative_to)
    if not is_input_file(path):
        local = _local_profile_file(name_or_path, relative_to)
        if local is not None:   # where `specsched profile` writes without --out: a name is a bundled one
            raise ConfigError(str(relative_to or "<scenario>"), "profile", name_or_path,
                              f"no bundled profile of that name, but {local} is there (where specsched profile "
                              f"writes without --out): give it as a path, profile: {local}")
        beside = _suffixed_profile_file(name_or_path, relative_to)
        if beside is not None:   # `profile: l70` for the l70.yaml written here: a bare name is a bundled one
            raise ConfigError(str(relative_to or "<scenario>"), "profile", name_or_path,
                              f"no bundled profile of that name, but {beside} is there: give it as a path, "
                              f"profile: {beside}")
        raise ConfigError(str(relative_to or "<scenario>"), "profile", name_or_path,
                          f"no such profile file; bundled: {', '.join(sorted(q.stem for q in profiles_dir().glob('*.yaml')))}"
                          "; or write one: specsched profile --analytic --model M --gpu G --tp N --out FILE")
    raw = read_yaml(path, "a YAML profile")
    refusal = model_config_refusal(path, raw)
    if refusal is not None:
        raise refusal
    if "gpu" not in raw and {"workload", "server"} & raw.keys():
        # a scenario given where a profile goes: say so, not "gpu = <missing>"
        raise ConfigError(str(path), "<file>", name_or_path,
                          "a scenario YAML (it has workload/server), not a profile; give a profile: a bundled "
                          "name, a file written by specsched profile, or the scenario's own 'profile' value")
    raw["path"] = str(path)
    try:
        return Profile.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(path), e, raw, Profile) from None
