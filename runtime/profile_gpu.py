"""GPU phases of ``specsched profile``: extend and draft injection, the verify/decode
grids, eager vs graph, and the cross-queue wait (see :mod:`runtime.profiler`'s docstring
for what each measures)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from specsched.runtime.profile_fit import attention_padding_fit, attention_tile_fit, issue_estimate
from specsched.runtime.profile_harness import (
    MIN_REPEATS,
    Harness,
    _GpuBusy,
    _iqr_rel,
    extend_layout,
)

LEAD_GIVE_UP = 3
"""Repeats of :meth:`GpuPhases._behind_same` that may find the lead drained before one is kept."""

SPLIT_SPIN_REPEATS = 5
"""Kept-busy repeats of an unequal split (:meth:`GpuPhases.split_phase`) where its lead is
timed: they size the lead; its own repeats (at most 9) give the time."""

IDLE_LEAD_KEYS = ("device", "wall", "ext_device", "ext_span", "inj_device", "inj_span")
"""What :meth:`GpuPhases._idle_lead` returns per repeat (seconds; see its docstring)."""


class GpuPhases(Harness):
    """The device-time measurements of a profiling run."""

    def _first_spin(self, fn: Callable[[], object]) -> float:
        """Seconds of spin that outlast the host's issue of ``fn``: twice one synchronized
        call's wall, plus 2 ms."""
        t0 = time.perf_counter()
        fn()
        self.dev.synchronize("profile")
        return 2.0 * (time.perf_counter() - t0) + 0.002

    def _kept_busy(self, fn: Callable[[], object], spin: float) -> tuple[tuple[float, float] | None, float]:
        """One call of ``fn`` queued behind a ``spin``-second ``torch.cuda._sleep`` (GPU only).

        Returns ``((device s, host issue s), spin)``; or ``(None, doubled spin)`` when the
        GPU caught up with the host during the call (then the events hold issue gaps, not
        device time alone; retried by the caller, counted in ``spin_retries``)."""
        device_s, host_s, ran_dry = self._timed_call(fn, self.busy.occupy(spin))
        if ran_dry:
            return None, min(2 * spin, 1.0)
        return (device_s, host_s), spin

    @staticmethod
    def _timed_call(fn: Callable[[], object], marker: Any = None) -> tuple[float, float, bool]:
        """One call of ``fn`` between two timing events (GPU only): (seconds between the
        events, host seconds of the call, whether ``marker``, an event queued before it, had
        completed once the call was issued; False without one)."""
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        h0 = time.perf_counter()
        fn()
        h1 = time.perf_counter()
        b.record()
        ran_dry = marker is not None and marker.query()
        b.synchronize()
        return a.elapsed_time(b) / 1e3, h1 - h0, ran_dry

    def _device_and_host(self, label: str, group: str, fn: Callable[[], object],
                         repeats: int | None = None) -> tuple[list[float], list[float]]:
        """Device seconds and host seconds of ``fn`` measured apart, as the loop uses them.

        The GPU is kept busy (a ``torch.cuda._sleep`` spin queued first, longer than the
        host needs to issue ``fn``), so the whole forward is queued before the GPU reaches
        it: timing events around the call then hold its device time alone, and
        ``perf_counter`` around the call its host launch time (which a busy loop overlaps
        with the previous forward). A call that found the spin finished is repeated with a
        doubled spin (at most ``4 n`` tries, counted per ``group`` in ``spin_retries``); when
        none was queued whole, :meth:`_issued_as_run` times the calls instead. CPU: the
        forward runs inline, device = host time, host launch 0. ``repeats``: at most this many
        (default the run's ``repeats``).
        """
        dev = self.dev
        n = self._warm_and_plan(label, fn, repeats or self.repeats)
        gpu_t: list[float] = []
        host_t: list[float] = []
        with dev.use("forward"):
            if not dev.is_gpu:
                for _ in range(n):
                    t0 = time.perf_counter()
                    fn()
                    gpu_t.append(time.perf_counter() - t0)
                    host_t.append(0.0)
            else:
                spin = self._first_spin(fn)
                tries = 0
                while len(gpu_t) < n and tries < 4 * n:
                    tries += 1
                    timed, spin = self._kept_busy(fn, spin)
                    if timed is not None:
                        gpu_t.append(timed[0])
                        host_t.append(timed[1])
                    else:   # per group: the provenance of each phase states its own
                        self.spin_retries[group] = self.spin_retries.get(group, 0) + 1
            if not gpu_t:
                gpu_t, host_t = self._issued_as_run(label, fn, n)
        self.reps.setdefault(group, []).append(n)
        self._tick()
        return gpu_t, host_t

    def _behind_same(self, label: str, group: str, fn: Callable[[], object], device_s: float) -> list[float]:
        """Device seconds of ``fn`` timed right behind :attr:`extend_lead_s` seconds of the
        same call run back to back (:meth:`_behind` with ``fn`` as its own lead)."""
        return self._behind(label, group, fn, fn, device_s, "itself")

    def _behind(self, label: str, group: str, fn: Callable[[], object], lead: Callable[[], object],
                lead_s: float, lead_words: str) -> list[float]:
        """Device seconds of ``fn`` timed right behind :attr:`extend_lead_s` seconds of
        ``lead`` run back to back (GPU only; empty list on CPU, with no lead, or when the
        host cannot keep ahead of the GPU).

        Why: a busy loop launches an extend while the GPU is still running the previous
        forwards, and dense work leaves the GPU slower for the next one: on an H200 an
        extend-sized stack of products took x1.034 after two of the same, x1.085 after
        ~50 ms of verify-sized ones, x1.000 after the profiler's idle spin
        (docs/measurements/h200-v32.md, benchmarks/sustained_clock_probe.py).

        Per repeat, with no synchronize between repeats (the GPU stays loaded):
        ``k = ceil(extend_lead_s / lead_s)`` calls of ``lead``, an event (the marker), then ``fn``
        between two timing events. The timed call holds device time alone only if the GPU
        was still running the lead when the call's last kernel was issued (the marker not
        complete then); a repeat that found it complete is dropped. No spin: the lead's
        thousands of kernels would fill the driver's queue of pending launches, and a host
        blocked on a full queue behind a spin can never get ahead of it (the first version
        spun for the whole device call that way). A call whose issue outlasts its device
        time cannot be timed so: after :data:`LEAD_GIVE_UP` dropped repeats with none kept,
        nothing is returned (the idle-spin times stand, the label goes into ``lead_dry``).
        At most ``2 n`` repeats, ``n`` the budget's repeats capped at 9.

        Args:
            lead_s: one ``lead`` call's device seconds (sizes ``k``).
            lead_words: what the lead is, for the progress line.
        """
        dev = self.dev
        if not dev.is_gpu or self.extend_lead_s <= 0:
            return []
        n = min(9, self._warm_and_plan(f"{label} behind {self.extend_lead_s * 1e3:g} ms of {lead_words}", fn,
                                       self.repeats))
        k = max(1, math.ceil(self.extend_lead_s / max(lead_s, 1e-6)))
        out: list[float] = []
        dropped = 0
        with dev.use("forward"):
            for _ in range(2 * n):
                if len(out) >= n or (not out and dropped >= LEAD_GIVE_UP):
                    break
                for _ in range(k):
                    lead()
                t, _, ran_dry = self._timed_call(fn, self._marker())
                if ran_dry:
                    dropped += 1
                    self.spin_retries[group] = self.spin_retries.get(group, 0) + 1
                else:
                    out.append(t)
            dev.synchronize("profile")
        if not out:
            self.lead_dry.append(label)
        self.reps.setdefault(group, []).append(len(out))
        self._tick()
        return out

    @staticmethod
    def _marker() -> Any:
        """An event recorded now on the current stream (query() is False until the GPU reaches it)."""
        ev = torch.cuda.Event()
        ev.record()
        return ev

    def _issued_as_run(self, label: str, fn: Callable[[], object], n: int) -> tuple[list[float], list[float]]:
        """``n`` calls timed with the GPU idle before each: events around the call hold the
        forward's device time *with* the host's issue gaps in it, ``perf_counter`` its issue.

        The fallback of :meth:`_device_and_host` when no call could be queued whole behind
        the spin: seen for the 8b preset's eager cycle (about 1,700 kernels), where every try
        found the spin finished. The host most likely stalls once the driver's queue of
        pending launches is full, so it cannot issue past a busy GPU. Device time and issue
        then cannot be taken apart; an eager cycle that long runs host-bound in the loop
        anyway (max(device, issue)). The label is listed in the profile's method provenance."""
        self.queue_full.append(label)
        gpu_t: list[float] = []
        host_t: list[float] = []
        for _ in range(n):
            self.dev.synchronize("profile")
            device_s, host_s, _ = self._timed_call(fn)
            gpu_t.append(device_s)
            host_t.append(host_s)
        return gpu_t, host_t

    def _idle_issue(self, fn: Callable[[], object], n: int) -> list[float]:
        """Host seconds of ``n`` calls of ``fn``, each issued onto an idle stream
        (synchronize, perf_counter around the call, synchronize): the issue with the
        kernels running as they arrive, as an eager step runs in the loop
        (profile_fit.issue_estimate). Empty on CPU (the call runs inline)."""
        dev = self.dev
        out: list[float] = []
        if not dev.is_gpu:
            return out
        with dev.use("forward"):
            for _ in range(n):
                dev.synchronize("profile")
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            dev.synchronize("profile")
        return out

    def _idle_lead(self, tokens: int, ext: Callable[[], object], inj: Callable[[], object]) -> dict[str, list[float]]:
        """The extend and its unprepared injection from an idle stream, each forward's lead apart.

        The sequence is the loop's DSpark prefill without a slot-expansion block
        (runtime/engine.py ``_launch_call``: the extend launch, then the inject launch, which
        prepares its batch, ``prepare_inject(sync=False)`` + inject), with a timing event
        before the extend (e0), between the two launches (e1: where the engine's inject
        launch records its start mark) and after the inject (e2). Per repeat:

        - kept busy (a ``torch.cuda._sleep`` spin queued first, so every event measures
          device time alone; a call that found the spin finished is repeated with a doubled
          spin): ``device`` (the legacy pair's events around the call), ``ext_device``
          (e0 -> e1), ``inj_device`` (e1 -> e2);
        - from an idle stream (synchronize, ``perf_counter``, the sequence, synchronize):
          ``wall`` (perf_counter around call + synchronize, host.extend_idle_lead_by_tokens
          as before: extend + injection), ``ext_span`` (e0 -> e1: e0 runs as soon as it is
          recorded on the idle stream, e1 when the extend's last kernel ends, so the span
          from the launch call's start to the extend's end, as the loop's own step marks
          time an extend launched onto an idle stream) and ``inj_span`` (e1 -> e2: the
          injection's span behind its extend, preparation included, as the engine's marks
          time it).

        The extend's own lead is ``ext_span - ext_device`` (host.extend_own_idle_lead_by_tokens)
        and the injection's ``inj_span - inj_device``
        (host.inject_unprepared_idle_lead_by_tokens): the simulator charges each to its own
        launch (sim.cost_model.CostModel.idle_lead_s), as ``end = max(launch + lead, stream
        free) + device``. Events, not the host's wall, time the split: the wall ends with a
        synchronize wake-up the loop pays at its next block (host.sync_wakeup_s, charged
        there), and a host stamp cannot mark where the extend's device work ends. The old
        combined lead (wall - device) let the extend pay its injection's preparation and
        issue: on H200 round 18 a host_block extend then ended 0.4-0.8 ms after its own
        issue (docs/measurements/h200-v18.md "where the time goes", finding 2). The three
        extra events add a few microseconds to ``wall``. CPU: no issue/device split,
        nothing measured (empty lists)."""
        dev = self.dev
        marks: dict[str, Any] = {}

        def both() -> None:
            marks["e0"] = self._timing_event()
            ext()
            marks["e1"] = self._timing_event()
            inj()
            marks["e2"] = self._timing_event()

        n = self._warm_and_plan(f"idle lead {tokens} tok", both, self.repeats)
        out: dict[str, list[float]] = {k: [] for k in IDLE_LEAD_KEYS}
        with dev.use("forward"):
            if dev.is_gpu:
                spin = self._first_spin(both)
                tries = 0
                while len(out["device"]) < n and tries < 4 * n:
                    tries += 1
                    timed, spin = self._kept_busy(both, spin)
                    if timed is None:
                        continue
                    e0, e1, e2 = marks["e0"], marks["e1"], marks["e2"]
                    ext_dev, inj_dev = e0.elapsed_time(e1) / 1e3, e1.elapsed_time(e2) / 1e3
                    dev.synchronize("profile")
                    t0 = time.perf_counter()
                    both()
                    dev.synchronize("profile")
                    out["wall"].append(time.perf_counter() - t0)
                    out["device"].append(timed[0])
                    out["ext_device"].append(ext_dev)
                    out["inj_device"].append(inj_dev)
                    out["ext_span"].append(marks["e0"].elapsed_time(marks["e1"]) / 1e3)
                    out["inj_span"].append(marks["e1"].elapsed_time(marks["e2"]) / 1e3)
        self.reps.setdefault("idle_lead", []).append(n)
        self._tick()
        return out

    def _slot_expansion(self, tokens: int, ext: Callable[[], object], rows: list[int], pre: list[int],
                        lens: list[int], hold: dict[str, Any]) -> tuple[list[float], list[float], list[float]]:
        """The loop's DSpark prefill under ``prefill_slot_expansion_sync``, timed as the loop
        incurs it (runtime/engine.py: the extend launch, ``HostBlock(slot_expansion)`` =
        ``prepare_inject(sync=True)``, the inject launch): per repeat, from an idle stream,
        the extend, a timing event, ``prepare_inject(sync=True)`` (its first
        ``repeat_interleave`` waits for the extend to drain), a timing event, the inject.
        The events' difference is the GPU idle gap between the extend's end and the
        injection's start. Then, with the GPU kept busy, the host time of
        ``prepare_inject(sync=False)`` alone (reported in the provenance; the gap keeps it:
        :func:`runtime.profile_fit.slot_expansion_fit`). A third event after the inject
        gives the injection's span launched onto the drained stream, as the loop's is
        (``host.inject_idle_lead_by_tokens``: :func:`runtime.profile_fit.span_lead_fit`).

        Returns:
            (gap seconds, sync-free preparation host seconds, idle-stream injection span
            seconds), one triple per repeat. CPU: the gap and span are host times (events
            are host stamps).
        """
        dev, r = self.dev, self.runner

        def seq() -> tuple[Any, Any, Any]:
            ext()
            end = self._timing_event()
            prep = r.prepare_inject(rows, pre, lens, sync=True)
            start = self._timing_event()
            r.inject(prep, hold["e"].tokens)
            return end, start, self._timing_event()

        n = self._warm_and_plan(f"slot expansion {tokens} tok", seq, self.repeats)
        gaps: list[float] = []
        preps: list[float] = []
        spans: list[float] = []
        with dev.use("forward"):
            for _ in range(n):
                dev.synchronize("profile")
                end, start, done = seq()
                dev.synchronize("profile")
                gaps.append(end.elapsed_time(start) / 1e3 if dev.is_gpu else start - end)
                spans.append(start.elapsed_time(done) / 1e3 if dev.is_gpu else done - start)
                self.busy.occupy(0.005)
                t0 = time.perf_counter()
                r.prepare_inject(rows, pre, lens, sync=False)
                preps.append(time.perf_counter() - t0)
            dev.synchronize("profile")
        self.reps.setdefault("slot_expansion", []).append(n)
        self._tick()
        return gaps, preps, spans

    def extend_phase(self) -> None:
        r = self.runner
        self.busy = _GpuBusy(self.dev)
        self.ext_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.inj_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        # behind an idle spin, whatever extend_lead_s is: the ratio to the loaded times goes
        # into provenance
        self.ext_spin_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.inj_spin_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.ext_host = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.inj_host = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.ext_layouts: list[str] = []
        self.ext_spread = 0.0
        # (tokens, median idle wall, median kept-busy device) at the prefix-0 column
        self.idle_lead_pts: list[tuple[int, float, float]] = []
        # (tokens, median idle-stream span, median kept-busy device) of the extend alone and of
        # its unprepared injection behind it, from the same sequence (_idle_lead), at prefix 0
        self.extend_own_pts: list[tuple[int, float, float]] = []
        self.inject_unprepared_pts: list[tuple[int, float, float]] = []
        # (tokens, median slot-expansion gap, median sync-free preparation) at prefix 0
        self.slot_pts: list[tuple[int, float, float]] = []
        # (tokens, median idle-stream injection span after the block, kept-busy device) at prefix 0
        self.inject_idle_pts: list[tuple[int, float, float]] = []
        # per token count at prefix 0: the injection's issue on an idle stream (median)
        self.inj_idle: list[float | None] = [None] * len(self.ext_x)
        # every host term of this phase comes from the prefix-0 column (j == 0): its host-speed
        # samples keep the phase's label, the other columns' get their own (runtime/host_reference.py)
        base = self.speed.label
        for j, col in enumerate(self.ext_cols):
            self.speed.label = base if j == 0 else f"{base} prefix columns"
            for i, t in enumerate(self.ext_x):
                lens, p = extend_layout(t, col, self.prompt)
                n = len(lens)
                pre = [p] * n
                with self.dev.use("forward"):
                    rows = [r.add_request() for _ in range(n)]
                    if p:
                        r.pool.reserve(rows, pre)
                toks = torch.randint(0, self.cfg.vocab_size - 1, (t,), generator=self.gen)
                hold: dict[str, Any] = {}

                def ext(rows=rows, pre=pre, lens=lens, toks=toks, hold=hold) -> None:
                    hold["e"] = r.extend(rows, pre, lens, toks)

                def inj(rows=rows, pre=pre, lens=lens, hold=hold) -> None:
                    r.inject(r.prepare_inject(rows, pre, lens, sync=False), hold["e"].tokens)

                te, he = self._device_and_host(f"extend {t} tok @ctx {col:g}", "extend", ext)
                ti, hi = self._device_and_host(f"inject {t} tok @ctx {col:g}", "inject", inj)
                self.ext_spin_s[i][j] = statistics.median(te)
                self.inj_spin_s[i][j] = statistics.median(ti)
                # with a lead (extend_lead_s > 0, GPU): each behind that much of itself
                le = self._behind_same(f"extend {t} tok @ctx {col:g}", "extend_lead", ext, self.ext_spin_s[i][j])
                li = self._behind_same(f"inject {t} tok @ctx {col:g}", "inject_lead", inj, self.inj_spin_s[i][j])
                te, ti = le or te, li or ti
                self.ext_s[i][j] = statistics.median(te)
                self.inj_s[i][j] = statistics.median(ti)
                self.ext_host[i][j] = statistics.median(he)
                self.inj_host[i][j] = statistics.median(hi)
                self.ext_spread = max(self.ext_spread, _iqr_rel(te) if len(te) >= 4 else 0.0)
                if j == 0:
                    idle = self._idle_issue(inj, min(len(hi), 5))
                    if idle:
                        self.inj_idle[i] = statistics.median(idle)
                        # kept busy or idle: each can only be inflated (profile_fit.issue_estimate)
                        self.inj_host[i][j] = issue_estimate(hi, idle)
                    gaps, preps, spans = self._slot_expansion(t, ext, rows, pre, lens, hold)
                    self.slot_pts.append((t, statistics.median(gaps), statistics.median(preps)))
                    if self.dev.is_gpu:  # CPU: the forward runs inline, no idle-stream lead
                        self.inject_idle_pts.append((t, statistics.median(spans), self.inj_s[i][j]))
                    lead = self._idle_lead(t, ext, inj)
                    if lead["device"]:
                        med = {k: statistics.median(v) for k, v in lead.items()}
                        self.idle_lead_pts.append((t, med["wall"], med["device"]))
                        self.extend_own_pts.append((t, med["ext_span"], med["ext_device"]))
                        self.inject_unprepared_pts.append((t, med["inj_span"], med["inj_device"]))
                self.ext_layouts.append(f"{t}: {n} x {lens[0]}{'' if len(set(lens)) == 1 else '/' + str(lens[-1])} @ prefix {p}")
                with self.dev.use("forward"):
                    for row in rows:
                        r.free_request(row)
        # no host term comes from the splits: their host-speed samples keep the columns' label
        self.speed.label = f"{base} prefix columns"
        self.split_phase()
        self.speed.label = base

    def split_phase(self) -> None:
        """Extends of two requests of unequal length (``gpu.extend_split``), timed as the
        grid's rows are (kept busy, then behind the lead), with the runtime's own extend
        (``ModelRunner.extend``, as the loop launches a multi-request chunk). For each
        token count of :func:`runtime.profile_harness.split_layouts` (256, 512, 1024, 2048
        within the grid's rows) the chunk chunked prefill makes: the last eighth of one prompt
        at the prefix column's prefix, then the first seven eighths of the next at prefix 0,
        at the first and the last prefix column. The grid holds one request per row below
        ``extend_layout_len``, so without these no profile sees what padded query rows cost
        (docs/measurements/h200-extend-layouts.md)."""
        r = self.runner
        self.split_s: list[tuple[list[int], list[int], float]] = []
        # behind a lead (GPU) the kept-busy times only size the lead (and stand in if it runs
        # dry): a few repeats do; the grid's rows take the run's repeats for their host terms
        lead = self.dev.is_gpu and self.extend_lead_s > 0
        spin_n = min(self.repeats, SPLIT_SPIN_REPEATS) if lead else self.repeats
        for lens, pre in self.split_layouts:
            with self.dev.use("forward"):
                rows = [r.add_request() for _ in lens]
                for row, p in zip(rows, pre, strict=True):
                    if p:
                        r.pool.reserve([row], [p])
            toks = torch.randint(0, self.cfg.vocab_size - 1, (sum(lens),), generator=self.gen)

            def ext(rows=rows, pre=pre, lens=lens, toks=toks) -> None:
                r.extend(rows, pre, lens, toks)

            label = "extend split " + "+".join(f"{e}@{p}" for e, p in zip(lens, pre, strict=True))
            te, _ = self._device_and_host(label, "extend_split", ext, spin_n)
            le = self._behind_same(label, "extend_split_lead", ext, statistics.median(te))
            self.split_s.append((list(lens), list(pre), statistics.median(le or te)))
            with self.dev.use("forward"):
                for row in rows:
                    r.free_request(row)

    def grid_phase(self) -> None:
        with self.dev.use("forward"):
            self.grid_rows, self.grid_rows_t = self._new_rows(self.max_bs, self.grid_ctx)
        self.grid: dict[str, list[list[float]]] = {}
        self.grid_spread = {}
        for kind in ("spec", "decode"):
            g = [[0.0] * len(self.contexts) for _ in self.bs]
            spread = 0.0
            for j, c in enumerate(self.contexts):
                for i, b in enumerate(self.bs):
                    with self.dev.use("forward"):
                        rows_t = self.dev.h2d(self.grid_rows[:b])
                    fn = self._step_fn(kind, self.grid_rows[:b], rows_t, c, graph=True)
                    ts = self._measure(f"{kind} bs {b} @ctx {c}", kind, fn)
                    g[i][j] = statistics.median(ts)
                    spread = max(spread, _iqr_rel(ts) if len(ts) >= 4 else 0.0)
            self.grid[kind], self.grid_spread[kind] = g, spread
        self._draft_step_grid()

    def _draft_step_grid(self) -> None:
        """``gpu.draft_step``: the serial one-token draft step a chain drafter (EAGLE/MTP,
        topk 1) runs ``speculative_num_steps - 1`` times per cycle (speculative/eagle_worker_v2.py
        ``draft_forward``), as the cycle runs it: what a chain cycle's ``W - 2`` steps add to
        it, per step. Calls of the cycle with its steps and without them alternate
        (``spec_cycle(as_chain=True)``, ``draft_steps`` True / False), and each pair's
        difference is taken, so the machine's drift between them cancels too; the median
        difference over ``W - 2``. The per-call work around a forward (KV reservation, the
        graph's input and output copies), which a cycle pays once, cancels: a step called
        alone charged it once per step (CPU, tiny: 0.81 ms against 0.70 inside the cycle).
        At window 2 (no serial step) the step is called alone (:meth:`ModelRunner.draft_step`).
        The cycles without their steps, their median per point, are ``gpu.verify_chain``
        (none at window 2)."""
        g = [[0.0] * len(self.contexts) for _ in self.bs]
        # the chain cycle without its steps (target verify + draft extend over W tokens),
        # timed here anyway: gpu.verify_chain
        bare = [[0.0] * len(self.contexts) for _ in self.bs]
        spread = bare_spread = 0.0
        steps = self.W - 2
        for j, c in enumerate(self.contexts):
            for i, b in enumerate(self.bs):
                rows = self.grid_rows[:b]
                with self.dev.use("forward"):
                    rows_t = self.dev.h2d(rows)
                if steps < 1:
                    ts = self._measure(f"draft_step bs {b} @ctx {c}", "draft_step",
                                       self._step_fn("draft_step", rows, rows_t, c, graph=True))
                    g[i][j] = statistics.median(ts)
                    spread = max(spread, _iqr_rel(ts) if len(ts) >= 4 else 0.0)
                    continue
                pair = (self._step_fn("chain_spec", rows, rows_t, c, graph=True),
                        self._step_fn("chain_no_steps", rows, rows_t, c, graph=True))
                ran: list[int] = []

                def alternate(pair=pair, ran=ran) -> object:
                    ran.append(len(ran) % 2)
                    return pair[ran[-1]]()

                ts = self._measure(f"chain cycle with / without its {steps} draft steps bs {b} @ctx {c}",
                                   "draft_step", alternate, repeats=2 * self.repeats)
                kinds = ran[-len(ts):]
                diffs = [ts[k] - ts[k + 1] for k in range(len(ts) - 1) if kinds[k] == 0 and kinds[k + 1] == 1]
                d = statistics.median(diffs)
                g[i][j] = max(d, 0.0) / steps
                without = [t for t, k in zip(ts, kinds, strict=True) if k == 1]
                bare[i][j] = statistics.median(without)
                self.reps.setdefault("chain_verify", []).append(len(without))
                bare_spread = max(bare_spread, _iqr_rel(without) if len(without) >= 4 else 0.0)
                if len(diffs) >= 4:   # relative to the median difference d; a non-positive d is all noise
                    spread = max(spread, min(_iqr_rel(diffs), 9.99) if d > 0 else 9.99)
        self.draft_step_alone = steps >= 1 and not any(v > 0 for row in g for v in row)
        if self.draft_step_alone:
            # no point's difference resolved the step (the cycles' noise above it: a loaded
            # host, a drafter far smaller than its target): a grid of zeros is no profile (every
            # value 0 s, refused when written), so the step is called alone at every point, as at
            # window 2; that charges the per-call work once per step (high by the 0.81 / 0.70 ms
            # above on CPU). The differences' spread stays: `specsched profile` warns of it.
            for j, c in enumerate(self.contexts):
                for i, b in enumerate(self.bs):
                    rows = self.grid_rows[:b]
                    with self.dev.use("forward"):
                        rows_t = self.dev.h2d(rows)
                    ts = self._measure(f"draft_step bs {b} @ctx {c} (alone)", "draft_step_alone",
                                       self._step_fn("draft_step", rows, rows_t, c, graph=True))
                    g[i][j] = statistics.median(ts)
        self.grid["draft_step"], self.grid_spread["draft_step"] = g, spread
        if steps >= 1:
            self.grid["chain_verify"], self.grid_spread["chain_verify"] = bare, bare_spread

    def extend_after_phase(self) -> None:
        """Extends timed right behind decode steps and behind verify cycles
        (``gpu.extend_after_step``): for each ``--extend-tokens`` count, the extend grid's
        point of the first column (prefix 0, or the small prefix that puts a short extend on
        the column, as :meth:`extend_phase` lays it out) behind :attr:`extend_lead_s` of graph-replayed decode steps, then of spec
        cycles, at batch :attr:`tile_bs` and the middle grid context; the profile gives each
        as a ratio to the extend grid's own point (timed behind itself, :meth:`_behind_same`;
        :meth:`runtime.profile_fit.Fits.after_step_ratios`).

        Why: the GPU's clock under a lead depends on the lead's power draw. Dense extends back
        to back held an H100 at its 700 W cap, its clock 3-9 % below the idle-spin phase's
        (docs/measurements/h100-v50.md), and if decode steps keep it up an extend after them
        runs faster than the grid says; on an H200 an extend-sized stack took x1.085 its
        idle-spin time after ~50 ms of verify-sized work and x1.034 after two of itself
        (docs/measurements/h200-v32.md). A loop runs
        most extends behind decode or verify steps (a freed slot admits one request between
        them), so which lead the extend follows is measured, not assumed
        (docs/measurements/h100-v53-holdout/README.md). GPU with a lead only."""
        # by lead ("decode", "verify"): (tokens, median device seconds behind that lead); the
        # ratios are taken against the final extend grid (profile_fit.Fits.after_step_ratios)
        self.after_step_s: dict[str, list[tuple[int, float]]] = {}
        self.after_lead = ""   # the leads, in words (provenance)
        if not self.dev.is_gpu or self.extend_lead_s <= 0:
            return
        r, b = self.runner, self.tile_bs
        ctx = self.contexts[len(self.contexts) // 2]
        i_bs, j_ctx = self.bs.index(b), self.contexts.index(ctx)
        rows = self.grid_rows[:b]
        with self.dev.use("forward"):
            rows_t = self.dev.h2d(rows)
        leads = {kind: (self._step_fn(kind, rows, rows_t, ctx, graph=True), self.grid[kind][i_bs][j_ctx])
                 for kind in ("decode", "spec")}
        self.after_lead = (f"graph-replayed decode steps ({leads['decode'][1] * 1e3:.3f} ms each) and spec cycles "
                           f"({leads['spec'][1] * 1e3:.3f} ms each) at batch {b}, every request at {ctx} tokens")
        for t in self.after_tokens:
            # the grid point's own layout (its prefix puts a short extend on the column)
            lens, p = extend_layout(t, self.ext_cols[0], self.prompt)
            pre = [p] * len(lens)
            with self.dev.use("forward"):
                ext_rows = [r.add_request() for _ in lens]
                if p:
                    r.pool.reserve(ext_rows, pre)
            toks = torch.randint(0, self.cfg.vocab_size - 1, (t,), generator=self.gen)

            def ext(ext_rows=ext_rows, pre=pre, lens=lens, toks=toks) -> None:
                r.extend(ext_rows, pre, lens, toks)

            for kind, (lead, lead_s) in leads.items():
                name = "verify" if kind == "spec" else kind
                words = f"{name} steps at batch {b} @ctx {ctx}"
                ts = self._behind(f"after-{name} extend {t} tok", "extend_after", ext, lead, lead_s, words)
                if ts:
                    self.after_step_s.setdefault(name, []).append((t, statistics.median(ts)))
            with self.dev.use("forward"):
                for row in ext_rows:
                    r.free_request(row)

    def tile_phase(self) -> None:
        """The attention kernel's KV tile (``gpu.attention_tile``): the graph-replayed decode
        step and spec cycle at batch :attr:`tile_bs`, every request at context ``w - W``, so
        each step runs at exactly width ``w`` (its own graph context bucket), for the
        widths :attr:`tile_widths` (a multiple of 256 and the next four multiples of 64).
        A kernel that pays whole tiles of ``T`` positions costs the same at ``w`` and
        ``round_up(w, T)`` (on an H200: 1088 as 1152, benchmarks/decode_width_sweep.py);
        :func:`runtime.profile_fit.attention_tile_fit` reads the tile off these times."""
        b = self.tile_bs
        rows = self.grid_rows[:b]
        with self.dev.use("forward"):
            rows_t = self.dev.h2d(rows)
        self.tile_t: dict[str, list[float]] = {}
        self.tile_iqr: dict[str, list[float]] = {}
        for kind in ("decode", "spec"):
            med, iqr = [], []
            for w in self.tile_widths:
                fn = self._step_fn(kind, rows, rows_t, w - self.W, graph=True)
                ts = self._measure(f"{kind} bs {b} @width {w} (tile probe)", "tile", fn)
                med.append(statistics.median(ts))
                iqr.append(_iqr_rel(ts) * med[-1] if len(ts) >= 4 else float("nan"))
            self.tile_t[kind], self.tile_iqr[kind] = med, iqr
        self.tile, self.tile_scores = attention_tile_fit(self.tile_widths, self.tile_t, self.tile_iqr)

    def padding_phase(self) -> None:
        """What a padding position of the dense decode/verify attention costs
        (``gpu.attention_padding_cost``): at batch :attr:`tile_bs`, graph-replayed decode steps
        and spec cycles with every request at the largest grid context ``L`` (``full``), every
        request at the one below it ``S`` (``short``), and one request at ``L`` with the rest at
        ``S`` (``half``: ``full``'s width, ``short``'s real positions but one request's). Each
        layout's rows are fresh, their KV reserved to their own length as the engine reserves
        it, so the half layout's short rows read the padding slot for the rest of the width as
        the loop's mixed batches do (runtime/kv_cache.py ``PAD_SLOT``).
        :func:`runtime.profile_fit.attention_padding_fit` reads the cost off the three; with
        fewer than two grid contexts the probe is skipped (cost 1, as before it existed)."""
        self.padding_cost, self.padding_per_kind = 1.0, {}
        self.padding_t: dict[str, list[float]] = {}
        if len(self.contexts) < 2:
            return
        b, big, small = self.tile_bs, self.contexts[-1], self.contexts[-2]
        layouts = {"full": [big] * b, "short": [small] * b, "half": [big] + [small] * (b - 1)}
        noise: dict[str, list[float]] = {"decode": [], "spec": []}
        self.padding_t = {"decode": [], "spec": []}
        for name, lens in layouts.items():
            with self.dev.use("forward"):
                rows, rows_t = self._padding_rows(lens)
                fns = {kind: self._step_fn(kind, rows, rows_t, lens, graph=True) for kind in ("decode", "spec")}
            for kind, fn in fns.items():
                ts = self._measure(f"{kind} bs {b} {name} {lens[0]}/{lens[-1]} (padding probe)", "padding", fn)
                self.padding_t[kind].append(statistics.median(ts))
                noise[kind].append(_iqr_rel(ts) * statistics.median(ts) / 2 if len(ts) >= 4 else float("nan"))
            with self.dev.use("forward"):
                for row in rows:
                    self.runner.free_request(row)
        mean_half = sum(layouts["half"]) / b
        self.padding_lens = (float(big), float(small), mean_half)
        self.padding_cost, self.padding_per_kind = attention_padding_fit(
            {k: self.padding_lens for k in self.padding_t}, self.padding_t, noise)

    def eager_phase(self) -> None:
        """Eager spec cycles (no graph) at the largest grid batch sizes x every context, their
        device time and their host issue time measured apart (:meth:`_device_and_host`):
        an eager cycle's kernels run as the host issues them, so the loop's eager cycle is
        max(device, issue). Measuring the issue at every point (not inferring it from the
        points the host happened to bound) spreads its samples over the whole phase: round
        4's host-bound points, all measured first, caught a slow-host period (24.8 ms against
        14.8-15.2 ms for the same issue later in the phase and 14.4-16 ms in round 3)."""
        self.eager_ratios: list[tuple[int, int, float, float]] = []
        self.eager_issue: list[tuple[int, int, float]] = []
        self.eager_issue_parts: list[tuple[int, int, float, float]] = []  # (bs, ctx, kept busy, idle)
        # the host's level at each point: the reference work sampled right before and right
        # after it (and between its calls at the sampler's cadence), their median
        self.eager_issue_refs: list[float] = []
        sp = self.speed
        for c in self.contexts:
            for b in self.eager_bs:
                with self.dev.use("forward"):
                    rows_t = self.dev.h2d(self.grid_rows[:b])
                fn = self._step_fn("spec", self.grid_rows[:b], rows_t, c, graph=False)
                i0 = len(sp.seconds)
                sp.sample()
                dev_t, host_t = self._device_and_host(f"eager spec bs {b} @ctx {c}", "eager", fn)
                idle_t = self._idle_issue(fn, min(len(host_t), 5))
                sp.sample()
                self.eager_issue_refs.append(float(statistics.median(sp.seconds[i0:])))
                te = statistics.median(dev_t)
                tg = self.grid["spec"][self.bs.index(b)][self.contexts.index(c)]
                self.eager_ratios.append((b, c, te, te / tg if tg > 0 else 1.0))
                self.eager_issue.append((b, c, issue_estimate(host_t, idle_t)))
                self.eager_issue_parts.append((b, c, statistics.median(host_t),
                                               statistics.median(idle_t) if idle_t else float("nan")))
        self.eager_factor = max(1.0, float(statistics.median(r[3] for r in self.eager_ratios)))

    def cross_queue_phase(self) -> None:
        dev, c = self.dev, self.contexts[0]
        # this phase measures the schedule-stream barrier on purpose (refused on HIP otherwise)
        dev.allow_schedule_barrier = True
        self.cq: list[tuple[int, float, float, float, float]] = []
        for b in self.cq_bs:
            with dev.use("forward"):
                rows_t = dev.h2d(self.grid_rows[:b])
            step = self._step_fn("spec", self.grid_rows[:b], rows_t, c, graph=True)

            def with_wait(step=step) -> None:
                # the engine's cross_queue_wait: StreamWait(prev, "schedule"), then at the
                # launch forward.wait_stream(schedule), then the graph replay
                ev = dev.record("forward")
                dev.stream_wait("schedule", ev)
                dev.wait_stream("forward", "schedule")
                step()

            half = max(MIN_REPEATS, -(-self.repeats // 2))
            # blocks A B A B: slow drift hits both variants alike; within a block every step
            # has the wait pending while the previous graph runs, as in the engine
            plain: list[float] = []
            waited: list[float] = []
            for k in range(2):
                plain += self._measure(f"spec bs {b} no cross-queue wait ({k + 1}/2)", "cross_queue", step, half)
                waited += self._measure(f"spec bs {b} with cross-queue wait ({k + 1}/2)", "cross_queue", with_wait, half)
            m0, m1 = statistics.median(plain), statistics.median(waited)
            self.cq.append((b, m0, m1, _iqr_rel(plain), _iqr_rel(waited)))
        self.cq_penalty = max(0.0, float(statistics.median(m1 - m0 for _, m0, m1, _, _ in self.cq)))
        dev.allow_schedule_barrier = False
