"""The simulator's fast-forward: timing and recording a collapsed decode stretch.

At the loop's ``FastForward`` op, :meth:`EngineStretch._fast_forward` asks the scheduler for
the decode stretch that starts there (:meth:`sim.scheduler.Scheduler.decode_stretch`), times
it (:mod:`sim.plain_timeline` for the closed form, :mod:`sim.host_timeline` otherwise) with
the cost model's seconds for each batch shape (memoized here), keeps the iterations whose
results come back before the next SimPy event, applies them through the scheduler
(``apply_stretch``) and records the rows the step-by-step path would have written
(:mod:`sim.stretch_records`). Identical results to ``fast_forward=False`` (INV-7,
tests/test_sim_speed_equivalence.py; docs/performance.md).

:class:`EngineStretch` is a mixin of :class:`sim.engine.SimEngine`: it holds no state of its
own; every attribute it reads or writes is the engine's, set in its ``__init__``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from specsched.sim import host_timeline, plain_timeline, stretch_records
from specsched.sim.decode_run import DecodeRun
from specsched.sim.ops import FastForward
from specsched.sim.plain_run import PlainRun
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.request import Req
from specsched.sim.server_args import SyncMode

if TYPE_CHECKING:
    from specsched.sim.engine import SimHandle

MAX_RUN_CELLS = 1 << 18
"""A fast-forward computes at most this many (iteration x request) cells at once."""
PLAIN_HORIZON = 1 << 62
"""A closed-form stretch (:mod:`sim.plain_run`) is not bounded ahead: it is timed until the next event."""


def mostly_running(iterations: list[int]) -> int:
    """The most iterations k of a stretch whose requests are expected to run ``iterations``
    iterations each (m of them, each >= 1) for which at least half its (iteration x
    request) cells still hold a running request: the largest k with ``sum(min(e, k) for e
    in iterations) >= m * k / 2``.

    Requests finish at different times: a burst's last admissions decode almost alone
    long after the others are done, and a stretch's grids cost the same per cell whether
    its request still runs or not, so past that point a fresh stretch of the requests
    left costs less. The estimate only decides where one stretch ends and the next
    begins, which no result depends on (a stretch of any length is exact, INV-7)."""
    m = len(iterations)
    done = 0   # the estimates below the segment [e_(j - 1), e_j] of the sorted estimates
    for j, e in enumerate(sorted(iterations)):
        # with j requests done the live cells are done + (m - j) k, which fall below
        # m k / 2 only once more than half are done, at k = 2 done / (2 j - m)
        if 2 * j > m and 2 * done < (2 * j - m) * e:
            return 2 * done // (2 * j - m)
        done += e
    return 2 * done // m


class EngineStretch:
    """The fast-forward of :class:`sim.engine.SimEngine` (a mixin: no state of its own)."""

    def _fast_forward(self, op: FastForward) -> tuple[tuple[Any, Any], float] | None:
        """Collapse the decode stretch that starts here, if any (module docstring).

        Returns the (plan, handle) left in flight and the host time the stretch ends at (the
        caller moves the host's clock there), or None when nothing was collapsed (the loop
        goes on step by step). Hands no control to SimPy: the stretch ends before the next
        event."""
        h = op.handle
        t0 = self._t
        t_next = self._next_arrival if self._solo else min(self.env.peek(), self._next_arrival)
        if t_next <= t0 or h.output is None:
            return None
        sched = self.sched
        batch = sched.decode_batch_reqs
        if not batch or self.cost.eager_issue_s(len(batch)) > 0:
            # an eager step keeps the host busy issuing it (CostModel.issue): step by step
            return None
        # a closed-form stretch (no speculative decoding) costs the same at any length
        # (its costs are keyed on the mean context: not under padded attention)
        plain = sched.window == 1 and not sched.spec and not self.cost.padded_attention
        horizon = PLAIN_HORIZON if plain else self._horizon(h, t0, t_next, batch)
        run = sched.decode_stretch(self.device, h.plan, h.output, horizon, stop_at_finish=self._finish_reacts,
                                   finishes_left=self._remaining, closed_form=plain)
        if run is None:
            return None
        if type(run) is PlainRun:
            rec = self.rec
            tm = plain_timeline.walk(run, t0, h.end, t_next, self._wake_s, self._plain_gpu, self._plain_host,
                                     self.host_blocked_s, rec.step_totals.busy_s, rec.full, tail=self._walk_tail,
                                     memo=self._seg_memo)
            n = tm.n
            if n < 1:
                return None
            plan, output = sched.apply_stretch(run, n)
            self.device.set_state(run.rid_list, run.outcome(n).device, None)
            b0 = self._blocked_since_launch
            self.host_blocked_s = tm.blocked            # every wait added in order (walk)
            self._blocked_since_launch = tm.rw_last
            self._finished_in_run(stretch_records.plain_run(rec, run, tm, b0, len(sched.waiting)))
            return self._stretch_applied(plan, output, tm.s_last, tm.e_last, tm.T[n], n)
        k = run.stop
        c, hs, hl, hp = self._run_costs(run, k)
        spec = self.server.speculative_algorithm.enabled
        publish_block = spec and self.server.sync_mode is SyncMode.host_block
        ht = None
        if self._has_tail:
            tails = [self._plain_tail(b) for b in range(int(run.batch_size[:k].max()) + 1)]
            ht = np.asarray(tails)[run.batch_size[:k]]
        tl = host_timeline.run_times(t0, h.end, hs, hl, hp, c, self.profile.host.sync_wakeup_s, publish_block, ht=ht)
        # every Recv of the stretch (at T_1 .. T_{n-1}) must come before the next event
        n = int(np.searchsorted(tl.T[:k], t_next, side="left"))
        if tl.T[n] == t_next:
            n -= 1
        if n < 1:
            return None
        plan, output = sched.apply_stretch(run, n)
        self.device.set_state(run.rids.tolist(), *run.device_after(n))
        self._record_run(run, tl, n)
        return self._stretch_applied(plan, output, float(tl.S[n - 1]), float(tl.E[n - 1]), float(tl.T[n]), n)

    def _plain_gpu(self, bs: int, ctx_sum: int, key: int) -> float:
        """GPU seconds of a decode of ``bs`` requests, contexts summing to ``ctx_sum``
        (``key``: the mean context in tens, rounded; see :meth:`_run_costs`)."""
        code = bs * (1 << 40) + key
        v = self._gpu_memo.get(code)
        if v is None:
            v = self._shape_cost(code, bs, ctx_sum, key * 10.0)
        return v

    @property
    def _has_tail(self) -> bool:
        h = self.profile.host
        return h.launch_tail_s > 0 or h.launch_tail_per_req_s > 0

    def _plain_tail(self, bs: int) -> float:
        """Host seconds of a decode/verify launch call of ``bs`` requests after its forward
        is queued (CostModel.launch_tail), memoized."""
        v = self._tail_memo.get(bs)
        if v is None:
            v = self._tail_memo[bs] = self.cost.launch_tail(self._shape_plan(bs, 0)) if bs > 0 else 0.0
        return v

    def _plain_host(self, bs: int) -> tuple[float, float, float]:
        """Host seconds (schedule, launch, process) of a decode pass of ``bs`` requests."""
        v = self._host_memo.get(bs)
        if v is None:
            plan = self._shape_plan(bs, 0)
            v = self._host_memo[bs] = tuple(self.cost.host(kind, plan) for kind in ("schedule", "launch", "process"))
        return v

    def _horizon(self, h: SimHandle, t0: float, t_next: float, batch: list[Req]) -> int:
        """How many iterations to compute: enough to reach the next event (or to finish
        every request of the decode ``batch``), within :data:`MAX_RUN_CELLS` and while most
        of the batch is expected to run (:meth:`_mostly_running`)."""
        cap = max(2, MAX_RUN_CELLS // max(len(batch), 1))
        if math.isfinite(t_next):
            dt = max(self._decode_dt or (h.end - h.start), 1e-9)
            k = int((t_next - t0) / (0.75 * dt)) + 2
        else:
            left = max((r.max_new_tokens - r.output_len for r in batch), default=1)
            k = left + 3
        return max(2, min(k, cap, self._mostly_running(batch)))

    def _mostly_running(self, batch: list[Req]) -> int:
        """:func:`mostly_running` of the iterations each request of ``batch`` is expected to
        take: its output left over its own mean accept length (1 token a pass without
        speculative decoding)."""
        if self.sched.spec:
            mean = self.acceptance.request_mean
            return mostly_running([max(1, math.ceil((r.max_new_tokens - r.output_len) / mean(r.rid))) for r in batch])
        return mostly_running([max(1, r.max_new_tokens - r.output_len) for r in batch])

    def _run_costs(self, run: DecodeRun, k: int) -> tuple[np.ndarray, ...]:
        """GPU seconds (c) and host seconds (hs, hl, hp) of a run's first k iterations,
        from the cost model, one call per distinct batch shape. A decode/verify forward's
        cost depends on (batch size, mean context rounded to 10 tokens) only (GridInterp's
        key); contexts are integer sums over the batch, so the rounding below is Python's
        round(x, -1) exactly (checked for every shape first seen)."""
        bs = run.batch_size[:k]
        cmax = None
        if self.cost.padded_attention:
            # the cost depends on (batch size, the grid column CostModel.step_column reads):
            # the padded width of the longest context, less the padding positions' discount
            # by the mean context when a padding position costs less than a real one
            cmax = ((run.inp + run.H[:k]) * run.member[:k]).max(axis=1)
            ctx = run.ctx_sum[:k]
            col = self.cost.step_column
            key = np.array([col(b, s / b, m) for b, s, m in zip(bs.tolist(), ctx.tolist(), cmax.tolist(),
                                                                  strict=True)]) / 10.0
            code = bs * (1 << 40) + key.astype(np.int64)
        else:
            ctx = run.ctx_sum[:k]
            key = np.rint(ctx / bs / 10.0)
            code = bs * (1 << 40) + key.astype(np.int64)
        # one cost per segment of equal shape, spread with np.repeat (no per-segment
        # numpy scalar indexing or slice assignment: a stretch has ~k/10 segments)
        seg = np.flatnonzero(code[1:] != code[:-1]) + 1
        seg = np.concatenate(([0], seg))
        memo = self._gpu_memo
        vals = []
        for i, cj in enumerate(code[seg].tolist()):
            v = memo.get(cj)
            if v is None:
                lo = int(seg[i])
                v = self._shape_cost(cj, int(bs[lo]), int(ctx[lo]), float(key[lo]) * 10.0,
                                     None if cmax is None else int(cmax[lo]))
            vals.append(v)
        c = np.repeat(np.array(vals, dtype=np.float64), np.diff(seg, append=k))
        pbs = run.process_batch_size[:k]
        tab = self._host_table(max(int(bs[0]), int(pbs[0])))   # batch sizes only shrink in a run
        hs, hl, hp = tab[0][bs], tab[1][bs], tab[2][pbs]
        if np.isnan(hs).any() or np.isnan(hp).any():
            self._fill_host_table(np.concatenate((bs, pbs)))
            hs, hl, hp = tab[0][bs], tab[1][bs], tab[2][pbs]
        return c, hs, hl, hp

    def _shape_cost(self, code: int, bs: int, ctx_sum: int, key: float, max_ctx: int | None = None) -> float:
        """GPU seconds of a decode/verify forward of ``bs`` requests whose contexts sum to
        ``ctx_sum`` (memoized under ``code``, which names the grid column ``key`` x 10 it is
        read at); under padded attention ``max_ctx`` is the longest request's context.
        Every shape of one code costs the same: CostModel.step_at of that column."""
        got = round(ctx_sum / bs, -1) if max_ctx is None else self.cost.step_column(bs, ctx_sum / bs, max_ctx)
        if got != key:
            raise AssertionError(f"context rounding differs at ({bs}, {ctx_sum}, {max_ctx})")
        cross = self.server.speculative_algorithm.enabled and self.server.sync_mode is SyncMode.cross_queue_wait
        # CostModel.gpu of the shape's plan (_shape_plan: the contexts in one row), without the plan
        v = self._gpu_memo[code] = self.cost.decode_launch_s(bs, ctx_sum, cross, max_ctx)
        return v

    def _shape_plan(self, bs: int, ctx_sum: int) -> BatchPlan:
        """A decode/verify plan of ``bs`` requests whose contexts sum to ``ctx_sum``."""
        w = self.server.spec_window
        mode = ForwardMode.VERIFY if self.server.speculative_algorithm.enabled else ForwardMode.DECODE
        shape = self._shapes.get(bs)
        if shape is None:
            shape = self._shapes[bs] = (tuple(range(bs)), (w,) * bs, (0,) * (bs - 1))
        return BatchPlan(step=0, mode=mode, rids=shape[0], extend_lens=shape[1],
                         prefix_lens=(ctx_sum,) + shape[2], spec_window=w)

    def _host_table(self, max_bs: int) -> list[np.ndarray]:
        """Host seconds of schedule / launch / process by batch size (NaN where not yet
        asked of the cost model; see :meth:`_fill_host_table`)."""
        tab = self._host_tab
        if tab is None or len(tab[0]) <= max_bs:
            n = max(2 * max_bs, 64)
            new = [np.full(n + 1, np.nan) for _ in range(3)]
            if tab is not None:
                for t, old in zip(new, tab, strict=True):
                    t[: len(old)] = old
            tab = self._host_tab = new
        return tab

    def _fill_host_table(self, sizes: np.ndarray) -> None:
        """Ask the cost model for the host seconds of batch sizes not in the table yet."""
        tab = self._host_tab
        # sorted(set()) is np.unique's list (np.unique imports numpy.ma, ~5 ms, on first use)
        for b in sorted(set(sizes[np.isnan(tab[0][sizes]) | np.isnan(tab[2][sizes])].tolist())):
            plan = self._shape_plan(b, 0)
            for t, kind in zip(tab, ("schedule", "launch", "process"), strict=True):
                t[b] = self.cost.host(kind, plan)

    def _record_run(self, run: DecodeRun, tl: host_timeline.Timeline, n: int) -> None:
        """Record the first n iterations of a collapsed run (the rows the step-by-step
        path would have written)."""
        pw, rw = tl.pw[:n], tl.rw[:n]
        b0 = self._blocked_since_launch
        if pw.any() or rw.any():
            terms = np.empty(2 * n + 1)
            terms[0] = self.host_blocked_s
            terms[1::2], terms[2::2] = pw, rw
            self.host_blocked_s = float(np.cumsum(terms)[-1])
        self._blocked_since_launch = float(rw[-1])
        self._finished_in_run(stretch_records.grid_run(self.rec, run, tl, n, b0, len(self.sched.waiting)))

    def _finished_in_run(self, rids: list[int]) -> None:
        for rid in rids:
            self._finish_events.pop(rid, None)   # nobody waits (the run stops at finishes clients react to)
        self._remaining -= len(rids)
