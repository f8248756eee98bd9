"""Fitting of ``specsched profile``'s measurements into a profile's numbers: least-squares
lines (clamped at 0: costs), the injection slope, and the verify grid with the engine's
per-verify excess added."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

import numpy as np
from specsched.runtime.host_reference import SLOW_RATIO
from specsched.runtime.kv_cache import CTX_ALIGN, round_up
from specsched.runtime.runner import CTX_BUCKET_STEP
from specsched.sim.profile import GpuProfile, HostProfile


def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of a least-squares line, both clamped at 0 (costs).

    A negative slope (noise on a flat cost) becomes 0 with the mean as the intercept; a
    negative intercept becomes 0 with the slope refitted through the origin. One point:
    slope 0.
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xa) < 2 or np.ptp(xa) == 0:
        return max(0.0, float(ya.mean())), 0.0
    slope, icpt = np.polyfit(xa, ya, 1)
    if slope < 0:
        return max(0.0, float(ya.mean())), 0.0
    if icpt < 0:
        return 0.0, max(0.0, float((xa @ ya) / (xa @ xa)))
    return float(icpt), float(slope)


# tile sizes the probe can tell apart (widths a multiple of 256 and the next four multiples
# of 64); 1 is "no tile": the cost linear in the width
TILE_CANDIDATES = (128, 256)
# a tile is written only where its step model leaves at most this share of the linear
# model's residual (relative to each kind's spread of times), ...
TILE_RESIDUAL_SHARE = 0.25
# ... and where 64 positions of the linear slope exceed this many times the points' noise
# (half the inter-quartile range of the repeats)
TILE_SIGNAL_TO_NOISE = 2.0


def _step_rss(widths: np.ndarray, t: np.ndarray, tile: int) -> float | None:
    """Residual sum of squares of ``t`` ~ a + s round_up(width, tile), relative to the
    spread of ``t`` around its mean; None where the rounded widths are all equal."""
    x = -(-widths // tile) * tile
    if np.ptp(x) == 0:
        return None
    coef = np.polyfit(x, t, 1)
    tss = float(((t - t.mean()) ** 2).sum())
    return float(((np.polyval(coef, x) - t) ** 2).sum()) / tss if tss > 0 else 0.0


def attention_tile_fit(widths: Sequence[int], times: dict[str, Sequence[float]],
                       noise: dict[str, Sequence[float]] | None = None) -> tuple[int, dict[int, float]]:
    """``gpu.attention_tile`` from step times at several attention widths.

    A kernel that walks the KV in tiles of ``T`` positions costs a step of width ``w`` as
    one of ``round_up(w, T)``: on an H200 the runtime's graph-replayed decode at batch 64
    ran width 1088 (17 x 64) in 4.594 ms and 1152 in 4.585 ms, 1216 in 4.877 and 1280 in
    4.857 (benchmarks/decode_width_sweep.py, docs/measurements/h200-v14/width-sweep.csv).
    Each candidate tile (1 and :data:`TILE_CANDIDATES`) is fitted as a line in the rounded
    width per kind, and scored by its residual over each kind's spread, summed over the
    kinds.

    Args:
        widths: attention widths (positions), e.g. 2304, 2368, ..., 2560: a multiple of the
            largest candidate, then steps of 64.
        times: per kind (``decode``, ``spec``), median seconds at each width.
        noise: per kind, each point's noise in seconds (half the repeats' inter-quartile
            range; NaN where unknown). None: no noise guard.

    Returns:
        ``(tile, scores)``: the tile (1: none found), and each candidate's summed relative
        residual. A tile is chosen only where its score is at most
        :data:`TILE_RESIDUAL_SHARE` of the linear model's and 64 positions of the linear
        slope exceed :data:`TILE_SIGNAL_TO_NOISE` times the median noise (a CPU's flat or
        noisy times give 1).
    """
    w = np.asarray(widths, dtype=np.int64)
    scores: dict[int, float] = {}
    for tile in (1, *TILE_CANDIDATES):
        parts = [_step_rss(w, np.asarray(t, dtype=float), tile) for t in times.values()]
        if any(p is None for p in parts):
            continue
        scores[tile] = float(sum(parts))
    if 1 not in scores or len(scores) < 2:
        return 1, scores
    best = min((t for t in scores if t != 1), key=scores.__getitem__)
    if scores[best] > TILE_RESIDUAL_SHARE * scores[1]:
        return 1, scores
    if noise is not None:
        for kind, t in times.items():
            slope = float(np.polyfit(w, np.asarray(t, dtype=float), 1)[0])
            pts = [v / 2 for v in noise.get(kind, ()) if np.isfinite(v)]
            if pts and slope * 64 <= TILE_SIGNAL_TO_NOISE * float(np.median(pts)):
                return 1, scores
    return best, scores


PADDING_SIGNAL_TO_NOISE = 4.0
"""A padding probe is read only where the padding positions it moves, priced as real ones,
exceed this many times the probe's noise (half the repeats' inter-quartile range, summed over
its three points); a flat or noisy device (a CPU) keeps ``attention_padding_cost`` at 1."""


def attention_padding_fit(lens: dict[str, Sequence[float]], times: dict[str, Sequence[float]],
                          noise: dict[str, Sequence[float]] | None = None) -> tuple[float, dict[str, float]]:
    """``gpu.attention_padding_cost`` from the padding probe (profile_gpu.padding_phase).

    The runtime's decode/verify attention is dense over one width for the batch (runtime/
    layers.py ``paged_attention`` over ``req_to_token[rows, :C]``): a request shorter than the
    batch's longest reads the padding slot (runtime/kv_cache.py ``PAD_SLOT``) for the rest of
    the width. Those reads hit one cached slot, so they cost less than a real position's KV
    (0.72-0.74 of one on an H200 with the 8b proxy, docs/measurements/h200-v29.md). Per kind,
    three graph-replayed steps at one batch: every request at the long length ``L``
    (``full``), every request at the short length ``S`` (``short``), and one request at ``L``
    with the rest at ``S`` (``half``: the width of ``full``, the real positions near
    ``short``'s). With ``s = (t_full - t_short) / (L - S)`` a real position's cost per request,
    the half layout's saving ``t_full - t_half`` is ``s (1 - f) (L - m)`` (``m`` its mean
    length), so ``f = 1 - (t_full - t_half) / (s (L - m))`` (the simulator's reading,
    sim/cost_model.py ``CostModel.step_s``).

    Args:
        lens: per kind, the probe's per-request mean lengths ``(L, S, m)`` in tokens.
        times: per kind, median seconds of ``(full, short, half)``.
        noise: per kind, each point's noise in seconds (NaN where unknown); None: no guard.

    Returns:
        ``(f, per_kind)``: the mean over the kinds that passed the noise guard, clipped to
        [0, 1] (1 when none did), and each kind's own estimate (unclipped; NaN where the guard
        or a degenerate probe left it out).
    """
    per: dict[str, float] = {}
    for kind, (t_full, t_short, t_half) in times.items():
        big, small, mean = lens[kind]
        real = t_full - t_short  # seconds that (big - small) real positions per request cost
        moved = real * (big - mean) / (big - small) if big > small else 0.0
        guard = sum(x for x in noise[kind] if x == x) if noise is not None else 0.0
        if moved <= 0.0 or moved <= PADDING_SIGNAL_TO_NOISE * guard:
            per[kind] = float("nan")
            continue
        per[kind] = 1.0 - (t_full - t_half) / moved
    kept = [v for v in per.values() if v == v]
    if not kept:
        return 1.0, per
    return float(min(1.0, max(0.0, statistics.fmean(kept)))), per


def with_issue_excess(grid: Sequence[Sequence[float]], bs: Sequence[int], launch_bs: Sequence[int],
                      excess: Sequence[float]) -> list[list[float]]:
    """``grid`` (seconds, ``[len(bs)][contexts]``) plus, per batch size, the engine's excess of
    an issued cycle over its bare replay (``excess`` at ``launch_bs``, interpolated over batch
    size: :meth:`Fits.verify_grid`)."""
    return [[v + float(np.interp(b, launch_bs, excess)) for v in row] for b, row in zip(bs, grid, strict=True)]


def grid_widths(contexts: Sequence[float], window: int) -> list[int]:
    """The attention width each grid column's spec cycle ran at: ``round_up(context + window,
    CTX_ALIGN)`` positions (the profiler's graph context buckets, runtime.profile_harness.Harness)."""
    return [round_up(int(c) + window) for c in contexts]


def verify_excess_fit(launch_bs: Sequence[int], loop_s: Sequence[float], bs: Sequence[int], widths: Sequence[int],
                      spec_grid: Sequence[Sequence[float]], loop_width: int) -> list[float]:
    """Per launch batch size, the seconds a verify as the engine issues it (the stall
    phase's queued loop, per cycle: ``loop_s``) takes beyond the bare graph-replayed spec
    cycle at the same attention width, clamped at 0.

    ``spec_grid[i][j]`` is the bare cycle of ``bs[i]`` requests at the grid column that ran
    attention over ``widths[j]`` positions (``round_up(context + window, CTX_ALIGN)``). The
    loop runs at ``loop_width`` (runtime.profile_harness.launch_loop_width: rows from just
    past the last column, growing, in a bucket of their own), wider than the last column,
    so the bare cycle is read there on the line through the grid's last two columns (KV
    read grows linearly with width; inside the grid, interpolated). Reading it at the last
    column instead put those extra positions' attention into the excess, which is then
    added at every context: on the 8b preset (320 positions: 8576 against 8256) the 8b's
    batch-8 excess, 0.406 ms, was all width, and 1.23 of batch 32's 1.53 ms
    (docs/measurements/h200-v26.md, "The verify excess")."""
    out = []
    for b, loop in zip(launch_bs, loop_s, strict=True):
        row = spec_grid[list(bs).index(b)]
        if len(widths) < 2:
            bare = row[-1]
        elif loop_width <= widths[-1]:
            bare = float(np.interp(loop_width, widths, row))
        else:
            slope = (row[-1] - row[-2]) / (widths[-1] - widths[-2])
            bare = row[-1] + slope * (loop_width - widths[-1])
        out.append(max(0.0, float(loop) - float(bare)))
    return out


def verify_excess_from_provenance(profile) -> tuple[list[int], list[float], int] | None:
    """(launch batch sizes, their recorded excess in seconds, the loop's context start) read
    back from the provenance of ``gpu.verify`` ("... interpolated over batch size: bs 1
    +79.92 us, bs 8 +406 us, ...") and of the host launch terms ("lengths grow from context
    8257"); None when the text has no excess or no start (a CPU profile), or says the excess
    was already taken at the loop's own width."""
    prov = getattr(profile, "provenance", None) or {}
    text = " ".join(str(prov.get("gpu.verify", "")).split())
    _, sep, tail = text.partition("interpolated over batch size: ")
    if "loop's own attention width" in text:
        return None  # already fitted at the loop's width
    start = re.search(r"lengths grow from context (\d+)", " ".join(" ".join(str(v).split()) for v in prov.values()))
    if not sep or start is None:
        return None
    unit = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
    pts = re.findall(r"bs (\d+) \+(\d+(?:\.\d+)?(?:e[-+]?\d+)?) (ms|us|s)\b", tail)
    if not pts:
        return None
    return [int(b) for b, _, _ in pts], [float(v) * unit[u] for _, v, u in pts], int(start.group(1))


def refit_verify_excess(profile, repeats: int = 20):
    """``profile`` with ``gpu.verify`` refitted by :func:`verify_excess_fit`: the recorded
    excess (:func:`verify_excess_from_provenance`) taken off every grid point (the bare
    cycles), the loop's per-cycle time put back (bare at the last column + excess) and
    compared with the bare cycle at the loop's own width
    (runtime.profile_harness.launch_loop_width, ``repeats`` the profiler's: any up to
    STALL_STEPS gives the same width). A recorded excess of 0 stays 0. A new
    :class:`sim.profile.Profile`; None when the provenance has no excess to refit."""
    from specsched.runtime.profile_harness import launch_loop_width  # torch: only when refitting

    got = verify_excess_from_provenance(profile)
    g = profile.gpu
    if got is None or g.verify is None:
        return None
    launch_bs, old, start = got
    window = g.verify_window or 1
    xs = [int(x) for x in g.verify.x]
    if any(b not in xs for b in launch_bs):
        return None
    bare = [[float(v) - float(np.interp(x, launch_bs, old)) for v in row] for x, row in zip(xs, g.verify.seconds, strict=True)]
    widths = grid_widths(g.verify.context_len, window)
    loops = [bare[xs.index(b)][-1] + e if e > 0 else 0.0 for b, e in zip(launch_bs, old, strict=True)]
    new = verify_excess_fit(launch_bs, loops, xs, widths, bare, launch_loop_width(start, window, repeats))
    data = profile.model_dump(mode="python")
    data["gpu"]["verify"]["seconds"] = [[v + float(np.interp(x, launch_bs, new)) for v in row]
                                        for x, row in zip(xs, bare, strict=True)]
    return type(profile).model_validate(data)


class Fits:
    """Turns a finished run's measurements (attributes set by the phases) into the
    profile's ``gpu`` and ``host`` sections."""

    def _inject_slope(self, j: int) -> tuple[float, float]:
        col = [row[j] for row in self.inj_s]
        if len(self.ext_x) < 2:
            return 0.0, col[0] / self.ext_x[0]
        slope, icpt = np.polyfit(self.ext_x, col, 1)
        return float(icpt), max(0.0, float(slope))

    def verify_grid(self) -> list[list[float]]:
        """``gpu.verify`` seconds: the graph-replayed spec-cycle grid plus, per batch size,
        the excess of a verify as the engine issues it (KV reserve of the next window, accept
        draws, events, result copy) over the bare replay at the same attention width,
        measured by the stall phase's queued loop and interpolated over batch size
        (:func:`verify_excess_fit`: the loop runs in a context bucket of its own,
        ``launch_bucket``, above the grid's last column)."""
        spec_grid = self.grid["spec"]
        widths = grid_widths(self.contexts, self.W)
        excess = verify_excess_fit(self.launch_bs, self.loop_med, self.bs, widths, spec_grid, self.launch_bucket)
        self.verify_excess = excess
        return with_issue_excess(spec_grid, self.bs, self.launch_bs, excess)

    def verify_chain_grid(self) -> list[list[float]] | None:
        """``gpu.verify_chain``: the chain cycle without its serial draft steps (the target
        verify and the draft extend over the window; profile_gpu ``_draft_step_grid``),
        with the same per-batch issue excess as ``gpu.verify`` (the engine issues either
        cycle the same way); None where it was not timed (window 2). Call after
        :meth:`verify_grid`."""
        bare = self.grid.get("chain_verify")
        return None if bare is None else with_issue_excess(bare, self.bs, self.launch_bs, self.verify_excess)

    def after_step_ratios(self) -> dict[str, list[tuple[int, float]]]:
        """``gpu.extend_after_step``: by lead, (tokens, the extend's seconds behind that lead
        over the extend grid's point of the first column), against the grid as kept (a
        re-levelled extend phase replaces it after these were timed). A point whose grid
        time is not the behind-itself one (the host could not keep ahead of the extend back
        to back, ``lead_dry``: the idle-spin time stands there) is left out: its ratio
        would compare against another state."""
        col = self.ext_cols[0]
        out: dict[str, list[tuple[int, float]]] = {}
        for kind, pts in self.after_step_s.items():
            kept = [(t, s / self.ext_s[self.ext_x.index(t)][0]) for t, s in pts
                    if f"extend {t} tok @ctx {col:g}" not in self.lead_dry]
            if kept:
                out[kind] = kept
        return out

    def sections(self) -> tuple[dict, dict]:
        """``(gpu, host)`` sections of the profile."""
        inj_slope = self._inject_slope(0)[1]
        spec_grid, dec_grid = self.verify_grid(), self.grid["decode"]
        chain = self.verify_chain_grid()

        def step_grid(seconds: list[list[float]]) -> dict:
            # the batch-size x context grids (verify, decode, draft_step, verify_chain)
            return {"x": [float(b) for b in self.bs], "context_len": [float(c) for c in self.contexts],
                    "seconds": seconds}

        gpu = {
            "extend": {"x": [float(t) for t in self.ext_x], "context_len": [float(c) for c in self.ext_cols],
                       "seconds": self.ext_s},
            "draft_inject_per_token_s": inj_slope,
            "draft_inject": {"x": [float(t) for t in self.ext_x], "context_len": [float(c) for c in self.ext_cols],
                             "seconds": self.inj_s},
            "verify": step_grid(spec_grid),
            "decode": step_grid(dec_grid),
            "draft_step": step_grid(self.grid["draft_step"]),
            # each row of the draft-step grid is one request's one token (topk 1)
            "draft_step_tokens_per_request": 1,
            **({"verify_chain": step_grid(chain)} if chain is not None else {}),
            "verify_window": self.W,
            "verify_includes_draft": True,
            "eager_overhead_s": self.eager_overhead,
            "eager_host_issue_s": self.eager_host_issue,
            "eager_draft_overhead_s": 0.0,
            "eager_factor": self.eager_factor,
            "attention_width": "padded_max",
            "attention_bucket": CTX_BUCKET_STEP,
            # the grids' graphs ran at round_up(c + W, CTX_ALIGN) (profile_harness ctx_buckets)
            "attention_grid_align": self.grid_align,
            # the kernel's KV tile, read off the tile probe (profile_gpu.tile_phase)
            "attention_tile": self.tile,
            # what a padding position of that attention costs, read off the padding probe
            # (profile_gpu.padding_phase)
            "attention_padding_cost": self.padding_cost,
            # the extend attention's layout (runtime/runner.py _ragged: [B, Q, C] dense), and
            # the per-request length of the extend grid's batches (extend_layout)
            "extend_attention": "padded_max",
            # a mixed step runs the chunk's extend, then the running rows' own decode
            # (runtime/engine.py _launch_call), not one extend over all rows
            "mixed_forward": "extend_then_decode",
            "extend_layout_len": self.prompt,
            "extend_attention_bucket": CTX_ALIGN,
            # unequal two-request extends timed whole (profile_gpu.split_phase)
            "extend_split": [{"extend_lens": lens, "prefix_lens": pre, "seconds": sec}
                             for lens, pre, sec in self.split_s] or None,
            # extends behind decode / verify steps over the grid's own (profile_gpu.extend_after_phase)
            "extend_after_step": {kind: {"tokens": [float(t) for t, _ in pts], "ratios": [r for _, r in pts]}
                                  for kind, pts in self.after_step_ratios().items()} or None,
        }
        host = {
            "ingest_per_request_s": 0.0,
            "schedule_s": self.sched_fit[0], "schedule_per_req_s": self.sched_fit[1],
            "launch_s": max(0.0, self.stall_fit[0] - self.sync_wakeup), "launch_per_req_s": max(0.0, self.stall_fit[1]),
            "launch_tail_s": self.tail_fit[0], "launch_tail_per_req_s": self.tail_fit[1],
            "launch_per_extend_s": self.extend_host_fit()[0],
            "launch_per_extend_token_s": self.extend_host_fit()[1],
            "launch_per_inject_s": self.inject_host_fit()[0],
            "launch_per_inject_token_s": self.inject_host_fit()[1],
            "process_s": self.proc_fit[0], "process_per_req_s": self.proc_fit[1],
            "decode_schedule_s": self.decode_sched_fit[0], "decode_schedule_per_req_s": self.decode_sched_fit[1],
            "decode_process_s": self.decode_proc_fit[0], "decode_process_per_req_s": self.decode_proc_fit[1],
            "decode_launch_s": max(0.0, self.decode_stall_fit[0] - self.sync_wakeup),
            "decode_launch_per_req_s": max(0.0, self.decode_stall_fit[1]),
            "result_path_s": self.result_path_fit[0], "result_path_per_req_s": self.result_path_fit[1],
            "recv_path_s": self.recv_path_fit[0], "recv_path_per_req_s": self.recv_path_fit[1],
            "sync_wakeup_s": self.sync_wakeup,
            "extend_idle_lead_s": self.idle_lead_fit()[0],
            "extend_idle_lead_by_tokens": self.idle_lead_fit()[1],
            "cross_queue_penalty_s": self.cq_penalty,
            "slot_expansion_s": self.slot_expansion_fit(),
            "inject_prepare_s": inject_prepare_fit(getattr(self, "slot_pts", [])),
            "inject_idle_lead_by_tokens": span_lead_fit(getattr(self, "inject_idle_pts", [])),
            "extend_own_idle_lead_by_tokens": span_lead_fit(getattr(self, "extend_own_pts", [])),
            "inject_unprepared_idle_lead_by_tokens": span_lead_fit(getattr(self, "inject_unprepared_pts", [])),
        }
        # fields the profile schema of this checkout knows (older schemas refuse unknown keys)
        gpu = {k: v for k, v in gpu.items() if k in GpuProfile.model_fields}
        host = {k: v for k, v in host.items() if k in HostProfile.model_fields and v is not None}
        return gpu, host

    @property
    def tail_points(self) -> list[float]:
        """Per launch batch size: the whole verify launch call's host time (GPU kept busy; on CPU less the forward it runs inline)
        minus its part before the forward is queued (the publish-wait stall less the
        wake-up), clamped >= 0: what the call goes on doing while the GPU runs."""
        return [max(0.0, m - max(0.0, st - self.sync_wakeup))
                for m, st in zip(self.launch_med, self.stall_med, strict=True)]

    @property
    def result_path_total(self) -> list[float]:
        """Per launch batch size ``b``: the no-overlap stall loop's wall per cycle less the
        publish-wait loop's (``serial_excess``: the whole result path between a forward's
        end and the next launch, the wake-up paid in both), less the scheduler's own
        ``process_result`` and ``schedule()`` at ``b`` (host.process_* and host.schedule_*,
        which the simulator charges apart), clamped >= 0. Empty for a run without the
        serial loop."""
        return [max(0.0, ex - (self.proc_fit[0] + self.proc_fit[1] * b) - (self.sched_fit[0] + self.sched_fit[1] * b))
                for b, ex in zip(self.launch_bs, getattr(self, "serial_excess", []), strict=False)]

    @property
    def recv_path_points(self) -> list[float]:
        """Per launch batch size ``b``: the part of :attr:`result_path_total` after the
        delivery's stamp, host-stamped in the serial loop (``serial_parts[2]``: Deliver to the
        pass's stamp, the delivery's recording, Recv, ``schedule()``, the stamp) less
        ``schedule()`` at ``b``, clamped to [0, the total]."""
        return [min(tot, max(0.0, parts[2] - (self.sched_fit[0] + self.sched_fit[1] * b)))
                for b, tot, parts in zip(self.launch_bs, self.result_path_total, getattr(self, "serial_parts", []),
                                         strict=False)]

    @property
    def result_path_points(self) -> list[float]:
        """Per launch batch size: :attr:`result_path_total` less :attr:`recv_path_points`, the
        part before the delivery's stamp (the copy-done wait past the forward's end, the
        timing reads, the delivery's arrays)."""
        return [t - r for t, r in zip(self.result_path_total, self.recv_path_points, strict=False)]

    @property
    def result_path_fit(self) -> tuple[float | None, float | None]:
        """``host.result_path_s`` and ``result_path_per_req_s``: a line over the launch batch
        sizes through :attr:`result_path_points` (:func:`fit_line`, clamped >= 0); (None,
        None) without the serial loop (the fields are then left out)."""
        pts = self.result_path_points
        return fit_line(self.launch_bs, pts) if pts else (None, None)

    @property
    def recv_path_fit(self) -> tuple[float | None, float | None]:
        """``host.recv_path_s`` and ``recv_path_per_req_s``: the same through
        :attr:`recv_path_points`."""
        pts = self.recv_path_points
        return fit_line(self.launch_bs, pts) if pts else (None, None)

    @property
    def tail_fit(self) -> tuple[float, float]:
        """``host.launch_tail_s`` and ``launch_tail_per_req_s``: a line over the launch batch
        sizes through :attr:`tail_points` (:func:`fit_line`, clamped >= 0)."""
        return fit_line(self.launch_bs, self.tail_points)

    @property
    def grid_align(self) -> int:
        """``gpu.attention_grid_align``: CTX_ALIGN when every grid context is a multiple of
        it (each column then ran attention over ``round_up(c + W, CTX_ALIGN)``), else 1."""
        return CTX_ALIGN if all(c % CTX_ALIGN == 0 for c in self.contexts) else 1

    @property
    def eager_overhead(self) -> float:
        """``gpu.eager_overhead_s``: what an eager step adds to the graph time when the GPU,
        not the host's kernel issue, bounds it: the smallest eager-minus-graph difference
        over the eager points (large batch and context), clamped >= 0."""
        return eager_fit(self.eager_ratios, [h for _, _, h in self.eager_issue])[0]

    @property
    def eager_host_issue(self) -> float | None:
        """``gpu.eager_host_issue_s``: the host time to issue one eager cycle's kernels at the
        host's fast level, :func:`fast_level_issue` over the eager points' issue times
        (:meth:`GpuPhases.eager_phase`); None on CPU (the call runs inline)."""
        return eager_fit(self.eager_ratios, [h for _, _, h in self.eager_issue])[1]

    def extend_host_fit(self) -> tuple[float, float]:
        """``host.launch_per_extend_s`` and ``launch_per_extend_token_s``: intercept and
        slope of the host time to issue an extend (GPU kept busy) against the extend
        tokens, at the prefix-0 column (0, 0 on CPU, where the forward runs inline and its
        time is all in gpu.extend). The draft injection's issue is separate
        (:meth:`inject_host_fit`): a plain-decoding run has none. See :func:`extend_issue_fit`."""
        return extend_issue_fit(self.ext_x, [self.ext_host[i][0] for i in range(len(self.ext_x))])

    def idle_lead_fit(self) -> tuple[float, dict | None]:
        """``host.extend_idle_lead_s`` and ``host.extend_idle_lead_by_tokens`` from the
        measured (tokens, idle wall, kept-busy device) points (:func:`idle_lead_fit`)."""
        return idle_lead_fit(getattr(self, "idle_lead_pts", []))

    def slot_expansion_fit(self) -> float:
        """``host.slot_expansion_s`` from the slot-expansion points (:func:`slot_expansion_fit`)."""
        return slot_expansion_fit(getattr(self, "slot_pts", []), self.sync_wakeup)

    def inject_host_fit(self) -> tuple[float, float]:
        """``host.launch_per_inject_s`` and ``launch_per_inject_token_s``: the same fit of
        the host time to issue ``prepare_inject(sync=False) + inject`` after the extend."""
        return extend_issue_fit(self.ext_x, [self.inj_host[i][0] for i in range(len(self.ext_x))])


def eager_fit(points: list[tuple[int, int, float, float]],
              issues: Sequence[float] | None = None) -> tuple[float, float | None]:
    """(floor, host issue) from eager points (batch, context, eager seconds, eager / graph).

    Eager kernels run as the host issues them, so an eager step lasts
    max(graph + floor, host issue). The floor is the smallest eager - graph difference.
    ``issues``: the host issue time measured at each point (GPU kept busy, so the eager
    seconds are device time alone): the issue is :func:`fast_level_issue` of them (None when
    all are 0: a CPU run, where the call is inline). Without them (profiles recorded before
    the issue was measured apart) the eager times mix device and host, and the issue is
    inferred as the median eager time of the points whose difference exceeds twice the floor.
    """
    if not points:
        return 0.0, None
    diffs = [te - te / r for _, _, te, r in points]
    floor = max(0.0, min(diffs))
    if issues is not None:
        return floor, fast_level_issue(issues)
    host_bound = [te for (_, _, te, _), d in zip(points, diffs, strict=True) if d > 2 * floor]
    return floor, (float(statistics.median(host_bound)) if host_bound else None)


def fast_level_issue(issues: Sequence[float]) -> float | None:
    """``gpu.eager_host_issue_s`` from the host issue times of the eager points: the lower
    quartile of the points on the host's fast level, those within
    :data:`runtime.host_reference.SLOW_RATIO` of the fastest point. None when none is > 0
    (CPU: the call runs inline).

    The issue does not depend on the point's shape (the same kernels are launched: the
    runtime's loop issued its eager cycles at batch 17-48 in about 100 reference works each,
    on the H200 machines of rounds 28-29 and both host levels, docs/measurements/h200-v29-eager.md), and a point's figure can only
    be inflated, by a slow-host period covering it. A rented H200 host runs at two levels
    1.5-1.8x apart (docs/measurements/h200-v10.md), and the profile states this term at its
    fast level (runtime.host_reference.FAST_TERMS), so the estimate must come from the fast
    points whatever their share. The lower quartile of all points did so only while at
    least a quarter sat on the fast level: round 28's profile had 3 of 15 there (28-30 ms,
    the rest 42-56 ms), its lower quartile 42.2 ms came from the slow level yet was scaled
    as the fast level's, and the loop's eager cycle ran 28.6 ms on a fast host and 51.7 ms
    on a slow one (docs/measurements/h200-v28.md). The lower quartile within the fast level
    still discounts a point inflated by less than the level ratio.
    """
    pos = [float(h) for h in issues if h > 0]
    if not pos:
        return None
    fastest = min(pos)
    return float(np.percentile([h for h in pos if h <= SLOW_RATIO * fastest], 25))


def issue_in_reference_works(issues: Sequence[float], refs: Sequence[float]) -> float | None:
    """The eager issue in reference works: the median over points of each point's issue time
    over the reference work sampled at it (runtime/profile_gpu.py ``eager_phase``), points
    with both > 0. A cross-check of :func:`fast_level_issue` that needs no level split:
    the issue is host work, so it reads the same number of reference works on either level
    (the loop's eager launch about 100 on the H200 machines of rounds 28-29,
    docs/measurements/h200-v29-eager.md); times the fast level it is the fast level's issue.
    None without such points (CPU, or a profile made before the samples)."""
    r = [h / ref for h, ref in zip(issues, refs, strict=True) if h > 0 and ref > 0]
    return float(statistics.median(r)) if r else None


def eager_issue_points_from_provenance(profile) -> list[tuple[int, int, float, float]]:
    """The eager points (batch, context, kept-busy seconds, idle-stream seconds) read back from
    the provenance text of ``gpu.eager_host_issue_s`` ("kept busy / idle: bs 8 ctx 512: 42.12
    ms / 42.7 ms, ..."; an idle median not measured reads nan), so a profile made before
    :func:`fast_level_issue` can be refitted (benchmarks/repredict_h200.py
    ``--refit-eager-issue``). Empty when the text has none."""
    text = (getattr(profile, "provenance", None) or {}).get("gpu.eager_host_issue_s", "")
    _, sep, tail = text.partition("kept busy / idle: ")
    if not sep:
        return []
    num = r"(?:\d+(?:\.\d+)?(?:e[-+]?\d+)?|nan)"
    return [(int(b), int(c), float(h) * 1e-3, float(i) * 1e-3)
            for b, c, h, i in re.findall(rf"bs (\d+) ctx (\d+): ({num}) ms / ({num}) ms", tail)]


def refit_eager_issue(profile):
    """``profile`` with ``gpu.eager_host_issue_s`` refitted by :func:`fast_level_issue` from the
    points its own provenance records (:func:`eager_issue_points_from_provenance`; per point
    :func:`issue_estimate` of its two medians), a new :class:`sim.profile.Profile`; None when
    the provenance has no points."""
    pts = eager_issue_points_from_provenance(profile)
    if not pts:
        return None
    issues = [issue_estimate([h], [i] if i == i else []) for _, _, h, i in pts]
    data = profile.model_dump(mode="python")
    data["gpu"]["eager_host_issue_s"] = fast_level_issue(issues)
    return type(profile).model_validate(data)


def issue_estimate(kept_busy: Sequence[float], idle: Sequence[float]) -> float:
    """Host seconds to issue one eager call, from two timings of the same issue.

    ``kept_busy``: perf_counter around the call with a spin kernel queued first;
    ``idle``: perf_counter around the call on an idle stream (kernels run as they
    arrive). Each can only be inflated, never shortened: behind a long spin the launch
    queue (about a thousand pending kernels on CUDA) fills with an eager cycle's several
    hundred kernels and the host blocks until the spin ends (an H200 gave 15-28 ms per
    point in two modes, against 16.3 ms per eager verify in the loop, docs/measurements/
    h200-v7.md); on an idle stream a device-bound call's kernels pile up the same way.
    So the smaller median is the issue. ``idle`` empty: the kept-busy median. Raises
    ``statistics.StatisticsError`` when ``kept_busy`` is empty.
    """
    busy = float(statistics.median(kept_busy))
    return min(busy, float(statistics.median(idle))) if idle else busy


def extend_issue_fit(tokens: list[int] | list[float], seconds: list[float]) -> tuple[float, float]:
    """Intercept (s per launch) and slope (s per token) of an eager extend's host issue time.

    Theil-Sen (median of pairwise slopes; scipy.stats.theilslopes), robust to a first
    point inflated by warm-up; both clamped >= 0 (the slope first, the intercept refit as
    the median residual when the slope is clamped). The issue time is mostly kernel
    launches, nearly flat in tokens, so the intercept carries it.

    Points spanning less than a doubling of tokens (e.g. an extend grid of 960-1,024) say
    nothing about the per-token slope: their pairwise slopes are the issue's noise over a few
    tokens, and one fitted there (70.9 us per token on an H100, docs/measurements/h100-v47.md)
    priced an 8,192-token extend's issue at 0.58 s. Such points give their median as the
    intercept and no slope."""
    x = np.asarray(tokens, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.size == 0:
        return 0.0, 0.0
    if x.size == 1 or x.max() < 2.0 * x.min():
        return max(0.0, float(np.median(y))), 0.0
    from scipy.stats import theilslopes

    slope, intercept, _, _ = theilslopes(y, x)
    slope = max(0.0, float(slope))
    if slope == 0.0:
        intercept = float(np.median(y))
    else:
        intercept = float(np.median(y - slope * x))
    return max(0.0, intercept), slope


def slot_expansion_fit(points: Sequence[tuple[int, float, float]], wakeup: float) -> float:
    """``host.slot_expansion_s`` from ``points`` = (extend tokens, median GPU idle gap between
    the extend's end and the injection's start under ``prepare_inject(sync=True)``, median
    host seconds of ``prepare_inject(sync=False)`` with the GPU kept busy).

    The simulator holds the host this long after the slot-expansion block ends (extend end
    + ``wakeup``), the GPU idle, and then launches the injection, whose kernels start at the
    launch (sim/engine.py: a launch's issue, host.launch_per_inject_s, bounds the forward's
    end, never its start). So the whole gap less the wake-up: per point ``gap - wakeup``,
    clamped >= 0, and the median over points (the gap is host work, nearly flat in tokens).
    The preparation is reported (provenance) but not subtracted: the loop prepares the
    injection inside the block (runtime/engine.py ``_host_block`` keeps the
    ``prepare_inject(sync=True)`` batch, the inject launch reuses it), so none of it moves
    into the launch. Until round 15 it was subtracted, on the premise that the launch's
    issue held it: the simulator then idled the GPU 0.21 ms there where every loop of
    rounds 13 and 15 idled 0.8-1.8 ms (burst66: 1.70 ms, 16 prefill chunks, TTFT -5..-6 %;
    docs/measurements/h200-v15.md "burst66 TTFT"), while the loop's inject launch call, which
    holds no preparation, still took about host.launch_per_inject_s (1.92 against 2.03 ms).
    No points: 0.0.
    """
    if not points:
        return 0.0
    return float(statistics.median(max(0.0, float(g) - wakeup) for _, g, _ in points))


def inject_prepare_fit(points: Sequence[tuple[int, float, float]]) -> float:
    """``host.inject_prepare_s`` from the slot-expansion ``points`` = (extend tokens, gap
    seconds, preparation seconds): the median preparation, ``prepare_inject(sync=False)``
    timed with the GPU kept busy (nearly flat in tokens: index construction of a few
    requests). host.launch_per_inject_s is timed over preparation + injection; under
    ``prefill_slot_expansion_sync`` the loop prepares inside the block and its inject launch
    reuses the batch (runtime/engine.py ``_host_block``), so the simulator's inject launch
    after a block issues launch_per_inject_s less this. On H200 round 18 the loop's inject
    launch call took 0.94 ms after the block against 1.60 ms without it (sharegpt-lengths,
    same host level; the preparation measured 0.66-1.14 ms at the profile's slower level).
    No points: 0.0."""
    if not points:
        return 0.0
    return float(statistics.median(max(0.0, float(q)) for _, _, q in points))


def refit_inject_prepare(profile):
    """``profile`` with ``host.inject_prepare_s`` taken from the preparation medians its own
    provenance records (:func:`slot_expansion_points_from_provenance`, :func:`inject_prepare_fit`),
    for a profile made before the field existed; its per-term reference (if any) is
    host.slot_expansion_s's, the phase that measured both. None when the provenance has no
    points."""
    pts = slot_expansion_points_from_provenance(profile)
    if not pts:
        return None
    data = profile.model_dump(mode="python")
    data["host"]["inject_prepare_s"] = inject_prepare_fit(pts)
    by_term = data["host"].get("reference_work_by_term")
    if by_term and "host.slot_expansion_s" in by_term:
        by_term["host.inject_prepare_s"] = by_term["host.slot_expansion_s"]
    return type(profile).model_validate(data)


def slot_expansion_points_from_provenance(profile) -> list[tuple[int, float, float]]:
    """The slot-expansion points (tokens, gap seconds, preparation seconds) read back from the
    provenance text of ``host.slot_expansion_s`` ("medians (tokens: gap / preparation): 256:
    1.338 ms / 1.123 ms, ..."), so a profile made before :func:`slot_expansion_fit` changed
    can be refitted (benchmarks/ttft_timeline.py, benchmarks/repredict_h200.py). Empty when
    the text has none (not measured, or an older profile)."""
    text = (getattr(profile, "provenance", None) or {}).get("host.slot_expansion_s", "")
    _, sep, tail = text.partition("medians (tokens: gap / preparation): ")
    if not sep:
        return []
    num = r"\d+(?:\.\d+)?(?:e[-+]?\d+)?"
    return [(int(t), float(g) * 1e-3, float(q) * 1e-3)
            for t, g, q in re.findall(rf"(\d+): ({num}) ms / ({num}) ms", tail.split(". ")[0])]


LEAD_NEIGHBOURHOOD = 2 ** 0.5
"""Lead-table grid points whose token counts lie within this factor of each other share one
lead (:func:`neighbourhood_median`)."""


def neighbourhood_median(tokens: Sequence[float], seconds: Sequence[float],
                         ratio: float = LEAD_NEIGHBOURHOOD) -> list[float]:
    """Each point's lead replaced by the median of the leads of the grid points whose token
    count lies within ``ratio`` of its own (itself included), in the order given.

    Why: an idle-stream lead is the difference of two medians of 10-30 ms spans taken from
    3-15 repeats, so point to point it scatters by 0.3-0.5 ms within one profile (an H100's
    extend lead read 0.95, 1.49 and 1.22 ms at 480, 512 and 576 tokens), while the host work it
    stands for (the launch call's start to the forward's first kernel) moves slowly with the
    token count. A scenario whose chunks all sit on one grid point (``chunked_prefill_size``
    512) otherwise reads that point's noise into every extend: re-predicted from the same
    runs, the H100 small-chunk cell's host_block arm went from +13.2 % to +4.4 % on its median
    TTFT (docs/measurements/lead-smoothing.md). A window relative in tokens keeps a real rise
    (on the profiler's grid the 4K and 8K points, a factor of 2 from any other, are left as
    measured; 2K shares its lead with 1.5K-1.8K only) and leaves a sparse grid untouched.

    Args:
        tokens: the grid, tokens > 0 (any order).
        seconds: one lead per grid point.
        ratio: the neighbourhood's width as a factor of tokens, >= 1.

    Raises:
        ValueError: lengths differ, a token count <= 0, a token count or lead not finite, or
            ``ratio`` < 1 (or NaN).
    """
    t = np.asarray(tokens, dtype=float)
    s = np.asarray(seconds, dtype=float)
    if (t.shape != s.shape or not np.isfinite(t).all() or not np.isfinite(s).all() or (t <= 0).any()
            or not ratio >= 1):
        raise ValueError(f"neighbourhood_median: {len(t)} tokens, {len(s)} leads, ratio {ratio} "
                         "(needs one finite lead per token count, token counts finite and > 0, ratio >= 1)")
    return [float(np.median(s[(t >= x / ratio) & (t <= x * ratio)])) for x in t]


def span_lead_fit(points: Sequence[tuple[int, float, float]]) -> dict | None:
    """A forward's idle-stream lead table from ``points`` = (extend tokens, median span of the
    forward launched onto an idle or drained stream between two timing events, its median
    kept-busy device seconds): per point span - device, clamped >= 0 (an idle stream cannot
    finish sooner than a busy one: a negative difference is timing noise), duplicates
    averaged, then each point the median over its neighbourhood (:func:`neighbourhood_median`),
    as a table by tokens ascending (sim.profile.LeadTable). No points (CPU): None.

    ``host.inject_idle_lead_by_tokens`` (the injection launched onto the drained stream
    after a slot-expansion block), ``host.extend_own_idle_lead_by_tokens`` (the extend alone)
    and ``host.inject_unprepared_idle_lead_by_tokens`` (the injection its launch prepares,
    right behind its extend; both from runtime/profile_gpu.py ``_idle_lead``)."""
    if not points:
        return None
    by: dict[float, list[float]] = {}
    for t, span, dev in points:
        by.setdefault(float(t), []).append(max(0.0, float(span) - float(dev)))
    toks = sorted(by)
    return {"tokens": toks, "seconds": neighbourhood_median(toks, [float(np.mean(by[t])) for t in toks])}


def refit_slot_expansion(profile):
    """``profile`` with ``host.slot_expansion_s`` refitted by :func:`slot_expansion_fit` from
    the points its own provenance records (:func:`slot_expansion_points_from_provenance`), a
    new :class:`sim.profile.Profile`; None when the provenance has no points."""
    pts = slot_expansion_points_from_provenance(profile)
    if not pts:
        return None
    data = profile.model_dump(mode="python")
    data["host"]["slot_expansion_s"] = slot_expansion_fit(pts, profile.host.sync_wakeup_s)
    return type(profile).model_validate(data)


def idle_lead_fit(points: Sequence[tuple[int, float, float]]) -> tuple[float, dict | None]:
    """(scalar lead, per-token table) from ``points`` = (extend tokens, median idle-queue wall
    seconds, median kept-busy device seconds) of an extend + injection.

    The lead at each point is wall minus device, clamped >= 0 (a negative difference is
    timing noise: an idle stream cannot finish sooner than a busy one), then the median over
    its neighbourhood (:func:`neighbourhood_median`). The table
    (``{"tokens": [...], "seconds": [...]}``, tokens ascending, duplicates averaged) is what
    the simulator reads (sim.profile.LeadTable); the scalar is its median, for readers of
    older schemas. No points (a CPU run: the forward is inline): (0.0, None)."""
    if not points:
        return 0.0, None
    by_t: dict[int, list[float]] = {}
    for t, wall, dev in points:
        by_t.setdefault(int(t), []).append(max(0.0, float(wall) - float(dev)))
    tokens = sorted(by_t)
    secs = neighbourhood_median(tokens, [float(np.mean(by_t[t])) for t in tokens])
    return float(statistics.median(secs)), {"tokens": [float(t) for t in tokens], "seconds": secs}
