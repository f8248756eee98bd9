"""Device profiles measured with the runtime's own code paths: ``specsched profile``.

:func:`profile_device` runs microbenchmarks of the runtime (the proxy model of
:mod:`runtime.model` driven the way :mod:`runtime.engine` drives it, on the streams,
events and graphs of :mod:`runtime.device`) and returns a profile as a plain dict that
validates as :class:`sim.profile.Profile`; :func:`write_profile` writes it atomically.
GPU times come from timing events around each call on the forward stream (median of the
repeats after warm-up; host ``perf_counter`` stamps on CPU); host times from
``time.perf_counter``. Every field's method, shapes, repeats, date and versions go into
``provenance``.

What each field measures (``W`` = spec window, ``c`` = committed context per request):

- ``gpu.extend``: :meth:`ModelRunner.extend` of ``x`` tokens, split into
  ``ceil(x / prompt_len)`` requests of about equal length, all at one prefix ``p``. The
  context axis is the one :meth:`sim.cost_model.CostModel.gpu` queries for an extend:
  mean prefix + half the per-request extend length. Two columns: prefix 0 and prefix
  ``max(contexts)``, each plus ``prompt_len / 2``; every row's prefix is chosen so that its
  batch sits exactly on its column (small batches get a slightly larger prefix).
- ``gpu.draft_inject_per_token_s``: slope of a line through
  ``prepare_inject(sync=False) + inject`` seconds vs tokens (the prefix-0 layouts above).
- ``gpu.verify`` / ``gpu.decode``: one :meth:`ModelRunner.spec_cycle` (forced accept,
  ``graph=True``) / :meth:`ModelRunner.decode` (``graph=True``) by batch size x context,
  committed lengths put back to ``c`` before every step (as :func:`runtime.microbench.bench`).
  Graph buckets sit exactly on the grid's batch sizes and on attention width
  ``round_up(c + W, 64)``; grid points above ``cuda_graph_max_bs`` are graph-replayed too,
  because the simulator multiplies by ``eager_factor`` there.
- ``gpu.eager_factor``: median over (batch, context) of eager / graph spec-cycle time at
  the largest grid batch sizes (those above ``cuda_graph_max_bs`` when there are any).
- ``host.schedule_*`` / ``host.process_*``: intercept + slope (``numpy.polyfit``) of the
  median host time of :meth:`sim.scheduler.Scheduler.schedule` / ``process_result`` with
  ``bs`` running speculative requests.
- ``host.launch_*``: host time of the engine's verify launch (accept draw, forced-accept
  list, ``spec_cycle(graph=True)``, timing events, ring event, result copy) with the GPU
  kept busy by a ``torch.cuda._sleep`` kernel queued first, so the call never waits on
  the device; fitted like the scheduler costs.
- ``host.sync_wakeup_s``: ``Device.host_block`` (``event.synchronize()``) right after a
  tiny kernel minus the same on an already-completed event.
- ``host.cross_queue_penalty_s``: graph-replayed spec cycles with the engine's
  cross-queue wait (schedule stream waits on the previous forward, forward stream waits
  on the schedule stream) minus without; clamped at 0.
- ``host.ingest_per_request_s``: 0, the runtime has no tokenizer or IPC.

A time budget (``budget_s``) trims repeats (never below 3) if the measurements run long;
on an H200 the 1b preset with ``max_bs`` 64 takes well under it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from specsched.runtime.device import Device, default_bs_buckets
from specsched.runtime.microbench import time_calls
from specsched.runtime.model import CTX_ALIGN, PRESETS, LlamaProxy, ModelRunner, draft_preset
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.admission import make_policy
from specsched.sim.config import AcceptanceConfig, ServerArgs
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.errors import ConfigError
from specsched.sim.plan import ForwardMode
from specsched.sim.profile import Profile
from specsched.sim.request import Req
from specsched.sim.results import atomic_write_text
from specsched.sim.scheduler import Scheduler
from tqdm.auto import tqdm

STALL_STEPS = 40
"""Verify launches per timed loop of the stall phase (lengths grow by up to W each)."""
WARMUP = 3
"""Untimed calls before every measurement (the first captures the graph)."""
MIN_REPEATS = 3
"""The time budget never trims a measurement below this many repeats."""
DEFAULT_BUDGET_S = 210.0
"""Default total time budget (seconds) of :func:`profile_device`."""
HOST_BATCH_SIZES = (1, 4, 16, 64, 256)
"""Batch sizes of the scheduler host-cost fits (plus ``max_bs``)."""
HOST_PROMPT = 1024
"""Prompt length of the scheduler's requests in the host-cost fits."""
GPU_DEFAULTS = {"max_bs": 64, "contexts": [1024, 4096], "extend_tokens": [256, 1024, 4096, 16384]}
CPU_DEFAULTS = {"max_bs": 8, "contexts": [64, 256], "extend_tokens": [16, 64, 256]}


# ------------------------------------------------------------------------------ helpers
def _round_up(n: int, k: int = CTX_ALIGN) -> int:
    return -(-n // k) * k


def _sig(v: Any) -> Any:
    """Six significant digits (floats only, recursively): timings are not better than that."""
    if isinstance(v, float):
        return float(f"{v:.6g}")
    if isinstance(v, dict):
        return {k: _sig(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_sig(x) for x in v]
    return v


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms"


def _us(s: float) -> str:
    return f"{s * 1e6:.4g} us"


def grid_batch_sizes(max_bs: int) -> list[int]:
    """Batch sizes of the verify/decode grids: powers of two up to ``max_bs``, and ``max_bs``.

    Every one of them is also a bucket of :func:`runtime.device.default_bs_buckets` (the
    engine's graph buckets), so the grid measures bucket sizes without padding.

    Raises:
        ValueError: max_bs < 1.
    """
    if max_bs < 1:
        raise ValueError(f"max_bs must be >= 1, got {max_bs}")
    out, b = [], 1
    while b < max_bs:
        out.append(b)
        b *= 2
    return [*out, max_bs]


def extend_layout(tokens: int, context: float, prompt_len: int) -> tuple[list[int], int]:
    """The extend batch measured for grid point (``tokens``, ``context``).

    ``n = ceil(tokens / prompt_len)`` requests of near-equal lengths, all at prefix
    ``p = round(context - tokens / (2 n))`` (>= 0), so that the cost model's extend context,
    mean prefix + tokens / (2 n), equals ``context`` (within 0.5 token) when ``context >=
    tokens / (2 n)``.

    Returns:
        (extend lengths, prefix).

    Raises:
        ValueError: tokens or prompt_len < 1.
    """
    if tokens < 1 or prompt_len < 1:
        raise ValueError(f"tokens and prompt_len must be >= 1, got {tokens}, {prompt_len}")
    n = -(-tokens // prompt_len)
    q, r = divmod(tokens, n)
    lens = [q + 1 if i < r else q for i in range(n)]
    return lens, max(0, round(context - tokens / (2 * n)))


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


def _iqr_rel(times: Sequence[float]) -> float:
    if len(times) < 4:
        return float("nan")
    q1, q3 = np.percentile(times, [25, 75])
    m = statistics.median(times)
    return float((q3 - q1) / m) if m > 0 else float("nan")


class _Budget:
    """Splits what is left of the total time evenly over the measurements still to run."""

    def __init__(self, total_s: float, tasks: int) -> None:
        self.t0 = time.perf_counter()
        self.total = total_s
        self.left = tasks
        self.trimmed: list[str] = []

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def repeats(self, label: str, per_call_s: float, want: int) -> int:
        share = (self.total - self.elapsed) / max(self.left, 1)
        n = want if per_call_s <= 0 else int(share / per_call_s)
        n = max(MIN_REPEATS, min(want, n))
        if n < want:
            self.trimmed.append(f"{label}: {n}")
        return n

    def done(self) -> None:
        self.left -= 1


class _GpuBusy:
    """Keeps the GPU busy for a while: a ``torch.cuda._sleep`` (spin) kernel of calibrated
    length on the current stream. Unavailable on CPU (and if torch lacks ``_sleep``)."""

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self.cycles_per_s: float | None = None
        if not dev.is_gpu or not hasattr(torch.cuda, "_sleep"):
            return
        with dev.use("forward"):
            torch.cuda._sleep(1000)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            cycles = 10_000_000
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            b.synchronize()
            self.cycles_per_s = cycles / (a.elapsed_time(b) / 1e3)

    @property
    def available(self) -> bool:
        return self.cycles_per_s is not None

    def occupy(self, seconds: float) -> Any:
        """Queue ``seconds`` of spinning on the current stream; returns an event recorded
        after it (query() is False while the GPU still spins), or None when unavailable."""
        if self.cycles_per_s is None:
            return None
        torch.cuda._sleep(int(seconds * self.cycles_per_s))
        ev = torch.cuda.Event()
        ev.record()
        return ev


def _verify_scheduler(bs: int, window: int, seed: int) -> tuple[Scheduler, DeviceTokens]:
    """A scheduler holding ``bs`` running DSpark requests (prompt :data:`HOST_PROMPT`, output
    long enough never to finish) and the device-token counter that commits their steps;
    the next ``schedule()`` returns a verify plan of all ``bs``."""
    server = ServerArgs(
        max_running_requests=bs, max_total_num_tokens=10**9, chunked_prefill_size=bs * HOST_PROMPT,
        max_prefill_tokens=bs * HOST_PROMPT, speculative_algorithm="dspark",
        speculative_num_draft_tokens=window,
    )
    sched = Scheduler(server, make_policy(server), seed)
    tokens = DeviceTokens(AcceptanceModel(AcceptanceConfig(mean_accept_length=(1 + window) / 2), window, seed))
    for rid in range(bs):
        sched.add_request(Req(rid, HOST_PROMPT, 100_000))
    for _ in range(8):
        plan = sched.schedule()
        if plan is None:
            break
        sched.process_result(plan, tokens.step(plan))
        if plan.mode is ForwardMode.VERIFY and plan.batch_size == bs:
            return sched, tokens
    raise RuntimeError(f"could not bring {bs} requests to a full verify batch (running {len(sched.running)})")


def _env(dev: Device) -> dict[str, str]:
    env = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "device": dev.describe(),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "hip": str(getattr(torch.version, "hip", None)),
        "python": platform.python_version(),
        "host": f"{platform.machine()} {platform.processor() or platform.system()}, {os.cpu_count()} CPUs",
        "torch_threads": str(torch.get_num_threads()),
    }
    if dev.is_gpu:
        env["cudnn"] = str(torch.backends.cudnn.version())
        env["sdpa_enabled"] = (f"flash={torch.backends.cuda.flash_sdp_enabled()}, "
                               f"mem_efficient={torch.backends.cuda.mem_efficient_sdp_enabled()}, "
                               f"math={torch.backends.cuda.math_sdp_enabled()}")
    return env


# ----------------------------------------------------------------------------- profiler
class _Profiler:
    """State of one profiling run (see :func:`profile_device`)."""

    def __init__(self, *, device: str | None, preset: str, spec_window: int, max_bs: int,
                 contexts: Sequence[int], extend_tokens: Sequence[int], cuda_graph_max_bs: int,
                 repeats: int, progress: bool, budget_s: float, batch_sizes: Sequence[int] | None,
                 prompt_len: int | None, forced_accept: int, seed: int) -> None:
        if preset not in PRESETS or preset.endswith("-draft"):
            raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(k for k in PRESETS if not k.endswith('-draft'))}")
        if spec_window < 2:
            raise ValueError(f"spec_window must be >= 2 (a speculative cycle), got {spec_window}")
        if max_bs < 1 or cuda_graph_max_bs < 1 or repeats < 1:
            raise ValueError("max_bs, cuda_graph_max_bs and repeats must be >= 1")
        if not contexts or min(contexts) < 1:
            raise ValueError(f"contexts must be non-empty and >= 1, got {list(contexts)}")
        if not extend_tokens or min(extend_tokens) < 1:
            raise ValueError(f"extend_tokens must be non-empty and >= 1, got {list(extend_tokens)}")
        self.t_start = time.perf_counter()
        self.preset, self.W, self.repeats, self.seed = preset, spec_window, repeats, seed
        self.graph_max_bs = cuda_graph_max_bs
        self.contexts = sorted({int(c) for c in contexts})
        self.ext_x = sorted({int(t) for t in extend_tokens})
        self.bs = sorted({int(b) for b in batch_sizes}) if batch_sizes else grid_batch_sizes(max_bs)
        if self.bs[0] < 1:
            raise ValueError(f"batch sizes must be >= 1, got {self.bs}")
        self.max_bs = self.bs[-1]
        self.prompt = int(prompt_len) if prompt_len else min(1024, self.ext_x[-1])
        self.forced = min(max(forced_accept, 0), spec_window - 1)
        self.ext_prefixes = [0] if self.contexts[-1] == 0 else [0, self.contexts[-1]]
        self.ext_cols = [p + self.prompt / 2 for p in self.ext_prefixes]
        cands = [b for b in self.bs if b > cuda_graph_max_bs] or self.bs
        self.eager_bs = cands[-3:]
        self.launch_bs = sorted({self.bs[0], self.bs[len(self.bs) // 2], self.bs[-1]})
        self.cq_bs = sorted({self.bs[0], self.bs[-1]})
        self.host_bs = sorted({*HOST_BATCH_SIZES, self.max_bs})
        # the launch measurement lets lengths grow (as in the engine) inside its own context
        # bucket, above every grid bucket, so no capture happens while it is timed
        self.launch_steps = max(WARMUP + repeats + 2, WARMUP + STALL_STEPS + 2)
        self.launch_ctx = _round_up(self.contexts[-1] + spec_window) + 1
        self.launch_bucket = _round_up(self.launch_ctx + spec_window * (self.launch_steps + 2))

        n_tasks = (2 * len(self.ext_x) * len(self.ext_cols) + 2 * len(self.bs) * len(self.contexts)
                   + len(self.eager_bs) * len(self.contexts) + 4 * len(self.cq_bs) + len(self.launch_bs)
                   + 1 + len(self.host_bs))
        self.budget = _Budget(budget_s, n_tasks)
        self.bar = tqdm(total=n_tasks, desc="profile", unit="bench", disable=not progress, leave=False)
        self.reps: dict[str, list[int]] = {}

        self.dev = Device(device, measure=True, ring_size=256)
        dev = self.dev
        if dev.is_gpu:
            torch.cuda.reset_peak_memory_stats(dev.torch_device)
        self.cfg, self.dcfg = PRESETS[preset], PRESETS[draft_preset(preset)]
        ext_rows = max(-(-t // self.prompt) for t in self.ext_x)
        max_ctx = max(self.launch_bucket, self.ext_prefixes[-1] + self.prompt + 2, self.contexts[-1] + spec_window + 1)
        ext_need = max(-(-t // self.prompt) * (self.ext_prefixes[-1] + self.prompt + 2) for t in self.ext_x)
        grid_need = self.max_bs * (self.contexts[-1] + spec_window)
        launch_need = self.launch_bs[-1] * self.launch_bucket
        slots = max(ext_need, grid_need, launch_need) + 1  # each phase frees its rows
        ctx_buckets = sorted({_round_up(c + spec_window) for c in self.contexts} | {self.launch_bucket})
        self._progress("build models")
        with dev.use("forward"):
            target = LlamaProxy(self.cfg, seed=seed, device=dev.torch_device, dtype=dev.dtype)
            drafter = LlamaProxy(self.dcfg, seed=seed + 1, device=dev.torch_device, dtype=dev.dtype)
            self.runner = ModelRunner(target, dev, max_reqs=max(2 * self.max_bs, ext_rows), max_context=max_ctx,
                                      num_slots=slots, drafter=drafter, spec_window=spec_window,
                                      bs_buckets=default_bs_buckets(self.max_bs), ctx_buckets=ctx_buckets)
        self.kv_bytes = self.runner.kv.nbytes + (self.runner.draft_kv.nbytes if self.runner.draft_kv else 0)
        self.gen = torch.Generator().manual_seed(seed)
        self.env = _env(dev)
        self.env_line = "; ".join(f"{k} {v}" for k, v in self.env.items() if k in ("date", "torch", "cuda", "hip")) + f"; {self.env['device']}"

    # ------------------------------------------------------------------ plumbing
    def _progress(self, label: str) -> None:
        self.bar.set_postfix_str(label, refresh=True)

    def _tick(self) -> None:
        self.bar.update(1)
        self.budget.done()

    def _warm_and_plan(self, label: str, fn: Callable[[], object], want: int) -> int:
        """Warm ``fn`` up, time one call from an idle queue, and return how many repeats
        the time budget allows (at most ``want``)."""
        self._progress(label)
        dev = self.dev
        with dev.use("forward"):
            for _ in range(WARMUP):
                fn()
            dev.synchronize("profile")
            t0 = time.perf_counter()
            fn()
            dev.synchronize("profile")
            est = time.perf_counter() - t0
        return self.budget.repeats(label, est, want)

    def _measure(self, label: str, group: str, fn: Callable[[], object], repeats: int | None = None) -> list[float]:
        """Warm up, estimate one call, then time budget-limited repeats: seconds per call."""
        n = self._warm_and_plan(label, fn, repeats or self.repeats)
        times = time_calls(self.dev, fn, repeats=n)
        self.reps.setdefault(group, []).append(n)
        self._tick()
        return times

    def _latency(self, label: str, group: str, fn: Callable[[], object]) -> list[float]:
        """Seconds from the host issuing ``fn`` on an idle queue to the device finishing it
        (synchronize, perf_counter, call, synchronize): an eager forward issued after a host
        block costs its host launch time when that exceeds its GPU time, as in the loop."""
        dev = self.dev
        n = self._warm_and_plan(label, fn, self.repeats)
        with dev.use("forward"):
            times = []
            for _ in range(n):
                dev.synchronize("profile")
                t0 = time.perf_counter()
                fn()
                dev.synchronize("profile")
                times.append(time.perf_counter() - t0)
        self.reps.setdefault(group, []).append(n)
        self._tick()
        return times

    def _reps_text(self, group: str) -> str:
        r = self.reps.get(group, [])
        if not r:
            return "no repeats"
        lo, hi = min(r), max(r)
        return f"median of {lo} repeats" if lo == hi else f"median of {lo}-{hi} repeats (time budget)"

    def _timing_event(self) -> Any:
        """As the engine records around each launch (runtime.device.Device.timing_mark)."""
        return self.dev.timing_mark()

    def _new_rows(self, n: int, context: int) -> tuple[list[int], torch.Tensor]:
        """``n`` fresh rows holding ``context`` committed tokens (KV reserved, values zero)."""
        r, pool = self.runner, self.runner.pool
        rows = [r.add_request() for _ in range(n)]
        pool.reserve(rows, [context] * n)
        rows_t = self.dev.h2d(rows)
        pool.seq_lens.index_fill_(0, rows_t, context)
        pool.last_token[rows_t] = torch.randint(0, self.cfg.vocab_size - 1, (n,), generator=self.gen).to(self.dev.torch_device)
        pool.prev_accept.index_fill_(0, rows_t, -1)
        pool.prev_start.index_fill_(0, rows_t, 0)
        r.observe_lengths(rows, [context] * n)
        return rows, rows_t

    def _step_fn(self, kind: str, rows: list[int], rows_t: torch.Tensor, context: int, graph: bool) -> Callable[[], object]:
        runner, pool = self.runner, self.runner.pool
        forced = [self.forced] * len(rows)
        ctx = [context] * len(rows)

        def step() -> object:
            pool.seq_lens.index_fill_(0, rows_t, context)
            runner.observe_lengths(rows, ctx)
            if kind == "decode":
                return runner.decode(rows, graph=graph)
            return runner.spec_cycle(rows, forced, graph=graph)

        return step

    # -------------------------------------------------------------------- phases
    def extend_phase(self) -> None:
        r = self.runner
        self.ext_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.inj_s = [[0.0] * len(self.ext_cols) for _ in self.ext_x]
        self.ext_layouts: list[str] = []
        self.ext_spread = 0.0
        for j, col in enumerate(self.ext_cols):
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

                te = self._latency(f"extend {t} tok @ctx {col:g}", "extend", ext)
                ti = self._latency(f"inject {t} tok @ctx {col:g}", "inject", lambda inj=inj, ext=ext: (ext(), self.dev.synchronize("profile"), inj()))
                # the inject call above also re-ran the extend: time the extend alone and subtract
                ti = [max(0.0, a - statistics.median(te)) for a in ti]
                self.ext_s[i][j] = statistics.median(te)
                self.inj_s[i][j] = statistics.median(ti)
                self.ext_spread = max(self.ext_spread, _iqr_rel(te) if len(te) >= 4 else 0.0)
                self.ext_layouts.append(f"{t}: {n} x {lens[0]}{'' if len(set(lens)) == 1 else '/' + str(lens[-1])} @ prefix {p}")
                with self.dev.use("forward"):
                    for row in rows:
                        r.free_request(row)

    def grid_phase(self) -> None:
        with self.dev.use("forward"):
            self.grid_rows, self.grid_rows_t = self._new_rows(self.max_bs, self.contexts[-1] + self.W)
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

    def eager_phase(self) -> None:
        self.eager_ratios: list[tuple[int, int, float, float]] = []
        for c in self.contexts:
            for b in self.eager_bs:
                with self.dev.use("forward"):
                    rows_t = self.dev.h2d(self.grid_rows[:b])
                fn = self._step_fn("spec", self.grid_rows[:b], rows_t, c, graph=False)
                te = statistics.median(self._measure(f"eager spec bs {b} @ctx {c}", "eager", fn))
                tg = self.grid["spec"][self.bs.index(b)][self.contexts.index(c)]
                self.eager_ratios.append((b, c, te, te / tg if tg > 0 else 1.0))
        self.eager_factor = max(1.0, float(statistics.median(r[3] for r in self.eager_ratios)))

    def cross_queue_phase(self) -> None:
        dev, c = self.dev, self.contexts[0]
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

    def launch_phase(self) -> None:
        dev, runner = self.dev, self.runner
        busy = _GpuBusy(dev)
        self.busy_available = busy.available
        busy_s = 0.005
        self.launch_med: list[float] = []
        self.launch_idle = 0
        self.launch_total = 0
        for b in self.launch_bs:
            self._progress(f"launch host time bs {b}")
            sched, tokens = _verify_scheduler(b, self.W, self.seed)
            plan = sched.schedule()
            assert plan is not None and plan.mode is ForwardMode.VERIFY and plan.batch_size == b
            with dev.use("forward"):
                rows, _ = self._new_rows(b, self.launch_ctx)

            def launch(rows=rows, tokens=tokens, plan=plan) -> Any:
                return self._engine_verify_launch(rows, tokens, plan)[1]

            times: list[float] = []
            with dev.use("forward"):
                for _ in range(WARMUP):
                    dev.wait_copy(launch(), "profile")
                t0 = time.perf_counter()
                dev.wait_copy(launch(), "profile")
                est = time.perf_counter() - t0 + busy_s
                n = self.budget.repeats(f"launch bs {b}", est, self.repeats)
                for _ in range(n):
                    marker = busy.occupy(busy_s)
                    t0 = time.perf_counter()
                    hc = launch()
                    times.append(time.perf_counter() - t0)
                    self.launch_total += 1
                    if marker is not None and marker.query():  # the GPU ran dry during the call
                        self.launch_idle += 1
                        busy_s = min(2 * busy_s, 0.2)
                    dev.wait_copy(hc, "profile")
                for row in rows:
                    runner.free_request(row)
            self.reps.setdefault("launch", []).append(n)
            self.launch_med.append(statistics.median(times))
            self._tick()
        self.launch_busy_s = busy_s
        self.launch_fit = fit_line(self.launch_bs, self.launch_med)
        self.stall_phase()

    def _engine_verify_launch(self, rows: list[int], tokens: DeviceTokens, plan: Any) -> tuple[Any, Any]:
        """What runtime.engine.RuntimeEngine._launch does for a VERIFY plan: draw the
        accepts, replay the spec-cycle graph between two timing marks, record the ring
        event and start the result copy. Returns (ring event, host copy)."""
        dev = self.dev
        output = tokens.step(plan)
        forced = np.maximum(output.committed - 1, 0).tolist()
        self._timing_event()
        out = self.runner.spec_cycle(rows, forced, graph=True)
        self._timing_event()
        done = dev.record("forward")
        return done, dev.copy_to_host({"committed": out.committed}, after=done)

    def stall_phase(self) -> None:
        """Two loops of the engine's verify launch with lengths growing as in the engine (so
        every step also reserves the next window's KV slots, as the runtime does):

        - queued: the previous step's result copy is processed after the next launch
          (overlap, stream_wait): its wall per cycle is a verify as the engine issues it;
          the excess over the bare graph replay of the grid is added to ``gpu.verify``;
        - block: the host blocks on the previous forward's event before each launch
          (host_block): block - queued is the publish-wait stall the simulator models as
          ``host.launch_s + host.sync_wakeup_s``.
        """
        dev, runner = self.dev, self.runner
        self.stall_med: list[float] = []
        self.loop_med: list[float] = []
        n = STALL_STEPS
        for b in self.launch_bs:
            self._progress(f"publish-wait stall bs {b}")
            sched, tokens = _verify_scheduler(b, self.W, self.seed)
            plan = sched.schedule()
            walls: dict[str, list[float]] = {}
            for mode in ("queued", "block", "queued", "block"):
                with dev.use("forward"):
                    rows, _ = self._new_rows(b, self.launch_ctx)

                    def launch(rows=rows, tokens=tokens, plan=plan) -> Any:
                        return self._engine_verify_launch(rows, tokens, plan)

                    for _ in range(WARMUP):
                        launch()
                    dev.synchronize("profile")
                    prev = None
                    t0 = time.perf_counter()
                    for _ in range(n):
                        if mode == "block" and prev is not None:
                            dev.host_block(prev[0], "profile")
                        cur = launch()
                        if prev is not None:
                            dev.wait_copy(prev[1], "profile")
                        prev = cur
                    dev.wait_copy(prev[1], "profile")
                    walls.setdefault(mode, []).append((time.perf_counter() - t0) / n)
                    dev.synchronize("profile")
                    for row in rows:
                        runner.free_request(row)
            self.loop_med.append(min(walls["queued"]))
            self.stall_med.append(max(0.0, min(walls["block"]) - min(walls["queued"])))
            self._tick()
        self.stall_fit = fit_line(self.launch_bs, self.stall_med)

    def sync_phase(self) -> None:
        self._progress("event-sync wake-up")
        dev = self.dev
        n = max(50, 5 * self.repeats)
        done_t, tiny_t = [], []
        with dev.use("forward"):
            x = torch.zeros(1, device=dev.torch_device)
            for _ in range(n):
                ev = dev.record("forward")
                dev.synchronize("profile")
                done_t.append(dev.host_block(ev, "profile"))
                x.add_(1)
                ev = dev.record("forward")
                tiny_t.append(dev.host_block(ev, "profile"))
        self.sync_n = n
        self.sync_done, self.sync_tiny = statistics.median(done_t), statistics.median(tiny_t)
        self.sync_wakeup = max(0.0, self.sync_tiny - self.sync_done)
        self._tick()

    def host_phase(self) -> None:
        self.sched_med, self.proc_med = [], []
        n = max(50, 5 * self.repeats)
        self.host_n = n
        for b in self.host_bs:
            self._progress(f"scheduler host time bs {b}")
            sched, tokens = _verify_scheduler(b, self.W, self.seed)
            ts, tp = [], []
            for k in range(WARMUP + n):
                t0 = time.perf_counter()
                plan = sched.schedule()
                t1 = time.perf_counter()
                assert plan is not None and plan.batch_size == b
                out = tokens.step(plan)
                t2 = time.perf_counter()
                sched.process_result(plan, out)
                t3 = time.perf_counter()
                if k >= WARMUP:
                    ts.append(t1 - t0)
                    tp.append(t3 - t2)
            self.sched_med.append(statistics.median(ts))
            self.proc_med.append(statistics.median(tp))
            self._tick()
        self.sched_fit = fit_line(self.host_bs, self.sched_med)
        self.proc_fit = fit_line(self.host_bs, self.proc_med)

    # --------------------------------------------------------------------- result
    def run(self) -> dict:
        try:
            self.extend_phase()
            self.grid_phase()
            self.eager_phase()
            self.cross_queue_phase()
            with self.dev.use("forward"):
                for row in self.grid_rows:
                    self.runner.free_request(row)
            self.launch_phase()
            self.sync_phase()
            self.host_phase()
        finally:
            self.bar.close()
        self.total_s = time.perf_counter() - self.t_start
        return self.assemble()

    def _inject_slope(self, j: int) -> tuple[float, float]:
        col = [row[j] for row in self.inj_s]
        if len(self.ext_x) < 2:
            return 0.0, col[0] / self.ext_x[0]
        slope, icpt = np.polyfit(self.ext_x, col, 1)
        return float(icpt), max(0.0, float(slope))

    def assemble(self) -> dict:
        dev, W, env = self.dev, self.W, self.env_line
        cfg, dcfg = self.cfg, self.dcfg
        icpt0, inj_slope = self._inject_slope(0)
        inj_long = self._inject_slope(len(self.ext_cols) - 1)[1]
        gname = (torch.cuda.get_device_name(dev.torch_device) if dev.is_gpu else "cpu")
        slug = re.sub(r"[^a-z0-9]+", "-", gname.lower()).strip("-")
        name = f"{slug}-proxy-{self.preset}-w{W}"
        model = (f"target {self.preset} ({cfg.num_layers} layers, hidden {cfg.hidden_size}, {cfg.num_heads}/"
                 f"{cfg.num_kv_heads} heads, MLP {cfg.intermediate_size}, vocab {cfg.vocab_size}), drafter "
                 f"{draft_preset(self.preset)} ({dcfg.num_layers} layers), {str(dev.dtype).removeprefix('torch.')}, "
                 f"random weights (runtime.model.LlamaProxy), DSpark-style block drafter, window {W}")
        timing = ("CUDA/HIP timing events around each call on the forward stream" if dev.is_gpu
                  else "host perf_counter stamps around each call (CPU)")
        spec_grid, dec_grid = self.grid["spec"], self.grid["decode"]
        # a verify as the engine issues it (KV reserve of the next window, accept draws,
        # events, result copy) costs more than the bare graph replay of the grid: add the
        # excess measured by the stall phase's queued loop, interpolated over batch size
        last = len(self.contexts) - 1
        excess = [max(0.0, loop - spec_grid[self.bs.index(b)][last])
                  for b, loop in zip(self.launch_bs, self.loop_med, strict=True)]
        self.verify_excess = excess
        spec_grid = [[v + float(np.interp(b, self.launch_bs, excess)) for v in row]
                     for b, row in zip(self.bs, spec_grid, strict=True)]

        def grid_text(kind: str, what: str) -> str:
            g = self.grid[kind]
            pts = "; ".join(f"ctx {c}: " + ", ".join(f"bs {b} {_ms(g[i][j])}" for i, b in enumerate(self.bs))
                            for j, c in enumerate(self.contexts))
            return (f"{what}, timed by runtime.microbench.time_calls ({timing}), {self._reps_text(kind)} after "
                    f"{WARMUP} warm-ups (the first captures the graph). Batch sizes {self.bs} (graph buckets exactly "
                    f"there, no padding) x committed context {self.contexts}; committed lengths put back to the "
                    f"context before every step (one index_fill_ kernel, included; as runtime.microbench.bench). "
                    f"Attention width round_up(context + {W if kind == 'spec' else 1}, 64) (the engine pads to its "
                    f"power-of-two context buckets instead). Points above cuda_graph_max_bs={self.graph_max_bs} were "
                    f"graph-replayed too: the simulator applies gpu.eager_factor there. Largest (p75-p25)/median "
                    f"{self.grid_spread[kind] * 100:.1f} %. Values: {pts}. [{env}]")

        prov = {
            "model": model,
            "environment": "; ".join(f"{k}: {v}" for k, v in self.env.items()),
            "method": (f"runtime/profiler.py profile_device(preset={self.preset!r}, spec_window={W}, max_bs="
                       f"{self.max_bs}, contexts={self.contexts}, extend_tokens={self.ext_x}, prompt_len={self.prompt}, "
                       f"cuda_graph_max_bs={self.graph_max_bs}, repeats={self.repeats}, budget_s={self.budget.total:g}); "
                       f"total {self.total_s:.1f} s; KV buffers {self.kv_bytes / 2**30:.2f} GiB"
                       + (f"; peak GPU memory allocated {torch.cuda.max_memory_allocated(dev.torch_device) / 2**30:.2f} GiB, "
                          f"reserved {torch.cuda.max_memory_reserved(dev.torch_device) / 2**30:.2f} GiB" if dev.is_gpu else "")
                       + (f"; repeats trimmed by the time budget: {', '.join(self.budget.trimmed)}" if self.budget.trimmed else "")),
            "gpu.extend": (
                f"specsched.runtime.model.ModelRunner.extend (target forward, greedy first token) by total extend tokens "
                f"x = {self.ext_x}, timed as the latency from the host issuing it on an idle queue to the device finishing it (synchronize, perf_counter, call, synchronize: an eager forward issued after a host block costs its host launch time when that is longer), {self._reps_text('extend')} "
                f"after {WARMUP} warm-ups. Each batch: ceil(x / {self.prompt}) requests of near-equal length, all at one "
                f"prefix (KV reserved, values zero). context_len is the context sim.cost_model.CostModel.gpu queries "
                f"for an extend: mean prefix + half the per-request extend length; columns {self.ext_cols} = prefix "
                f"{self.ext_prefixes} + {self.prompt / 2:g}; each row's prefix is chosen to sit on its column "
                f"(tokens: requests x length @ prefix): {'; '.join(self.ext_layouts)}. Input ids from the host as "
                f"in the engine. Largest (p75-p25)/median {self.ext_spread * 100:.1f} %. [{env}]"),
            "gpu.draft_inject": (
                f"latency (host issue on an idle queue to device done, perf_counter around synchronize) of "
                f"ModelRunner.prepare_inject(sync=False) + ModelRunner.inject after the extend of the same layout "
                f"(extend latency subtracted), by tokens {self.ext_x} and the extend grid's context columns; "
                f"{self._reps_text('inject')}. The simulator uses this grid instead of the per-token slope. [{env}]"),
            "gpu.draft_inject_per_token_s": (
                f"slope of np.polyfit(tokens, seconds, 1) of runtime.model.ModelRunner.prepare_inject(sync=False) + "
                f"ModelRunner.inject (drafter {draft_preset(self.preset)} over the prompt tokens) on the prefix-0 "
                f"layouts of gpu.extend, tokens {self.ext_x}: {', '.join(_ms(r[0]) for r in self.inj_s)}; "
                f"intercept {_ms(icpt0)} not represented (the simulator's inject cost goes through the origin); "
                f"slope at the long-prefix column: {_us(inj_long)}/token. {self._reps_text('inject')}, {timing}. [{env}]"),
            "gpu.verify": grid_text("spec", (
                f"one runtime.model.ModelRunner.spec_cycle(rows, forced_accept=[{self.forced}] * bs, graph=True): "
                f"drafter forward over 2 x {W} positions per request + target verify of {W} + accept/commit"))
                + (" PLUS, per batch size, the excess of a verify as the engine issues it (queued loop of "
                   f"{STALL_STEPS} launches with lengths growing, so each also reserves the next window's KV "
                   "slots, draws accepts, records events and copies results) over the bare replay at the longest "
                   "context, interpolated over batch size: "
                   + ", ".join(f"bs {b} +{_us(e)}" for b, e in zip(self.launch_bs, self.verify_excess, strict=True))),
            "gpu.decode": grid_text("decode", "one runtime.model.ModelRunner.decode(rows, graph=True)"),
            "gpu.draft_step": ("not measured (left out): the runtime's proxy drafter is a block drafter, one parallel "
                               "draft forward already inside gpu.verify; chain drafters (eagle/mtp) are simulated only"),
            "gpu.eager_factor": (
                f"median over (bs, context) of spec_cycle(graph=False) / spec_cycle(graph=True) (the gpu.verify "
                f"point), at batch sizes {self.eager_bs} (the largest grid sizes{' above cuda_graph_max_bs' if self.eager_bs[0] > self.graph_max_bs else ''}) x "
                f"contexts {self.contexts}: "
                + ", ".join(f"bs {b} ctx {c}: eager {_ms(te)} = {r:.3f}x" for b, c, te, r in self.eager_ratios)
                + f"; clamped to >= 1. The simulator applies it above cuda_graph_max_bs={self.graph_max_bs}; eager "
                f"launch overhead shrinks relative to GPU time as the batch grows. {self._reps_text('eager')}, "
                f"{timing}. [{env}]"),
            "host.ingest_per_request_s": ("0: the runtime has no tokenizer or IPC; runtime.engine.RuntimeEngine "
                                          "hands each request to the scheduler directly at Recv"),
        }
        sched_txt = (f"np.polyfit over batch sizes {self.host_bs} of the median host time (perf_counter) of "
                     f"{{fn}} on a sim.scheduler.Scheduler holding bs running DSpark requests (window {W}, "
                     f"{HOST_PROMPT}-token prompts, admission none, verify plans), {self.host_n} calls per size after "
                     f"{WARMUP} warm-ups; medians {{meds}}; intercept and slope clamped >= 0. Host: {self.env['host']}, "
                     f"python {self.env['python']}. [{env}]")
        for key, fn, meds in (("schedule", "Scheduler.schedule()", self.sched_med),
                              ("process", "Scheduler.process_result(plan, output)", self.proc_med)):
            txt = sched_txt.format(fn=fn, meds=", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.host_bs, meds, strict=True)))
            prov[f"host.{key}_s"] = f"intercept of {txt}"
            prov[f"host.{key}_per_req_s"] = f"slope of {txt}"
        busy = (f"a torch.cuda._sleep kernel queued first on the forward stream keeps the GPU busy (finally "
                f"{_ms(self.launch_busy_s)} of spinning per call; {self.launch_idle} of {self.launch_total} calls found "
                f"it finished, i.e. the GPU idle, and doubled it)" if self.busy_available else
                "CPU: no device to keep busy, the call runs the work inline" if not dev.is_gpu else
                "torch.cuda._sleep unavailable: the GPU was not kept busy (the call may include waits)")
        launch_txt = (f"np.polyfit over batch sizes {self.launch_bs} of the median host time (perf_counter) of the "
                      f"engine's verify launch (runtime.engine.RuntimeEngine._launch for a VERIFY plan): "
                      f"DeviceTokens.step(plan) accept draws, the forced-accept list, ModelRunner.spec_cycle(rows, "
                      f"forced, graph=True) (KV reserve of the new window, h2d of rows and forced accepts, graph "
                      f"replay, output clones), two timing events, Device.record('forward') and "
                      f"Device.copy_to_host({{'committed'}}); lengths grow from context {self.launch_ctx} as in the "
                      f"engine; {busy}; {self._reps_text('launch')} after {WARMUP} warm-ups; medians "
                      + ", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.launch_bs, self.launch_med, strict=True))
                      + f"; intercept and slope clamped >= 0. [{env}]")
        stall_txt = ("np.polyfit over batch sizes " + str(self.launch_bs) + " of the publish-wait stall per verify: "
                     "the wall per cycle of a loop of the engine's verify launch that blocks the host on the previous "
                     "forward's event before each launch, minus the same loop with the previous result processed after "
                     "the next launch (overlap, queued), best of 2 alternating runs each; stalls "
                     + ", ".join(f"bs {b} {_us(m)}" for b, m in zip(self.launch_bs, self.stall_med, strict=True))
                     + f"; launch_s = intercept - host.sync_wakeup_s (clamped >= 0). The host time of the whole "
                     f"launch call, which also overlaps the GPU once the graph is queued, was: {launch_txt} [{env}]")
        prov["host.launch_s"] = f"intercept of {stall_txt}"
        prov["host.launch_per_req_s"] = f"slope of {stall_txt}"
        prov["host.sync_wakeup_s"] = (
            f"median host time of runtime.device.Device.host_block (event.synchronize() on a ring event) recorded "
            f"right after a tiny kernel (x.add_(1) on an idle GPU), {_us(self.sync_tiny)}, minus the same on an "
            f"already-completed event, {_us(self.sync_done)}; {self.sync_n} interleaved pairs; clamped >= 0"
            + (" (CPU: events are complete when recorded, so ~0)" if not dev.is_gpu else "") + f". [{env}]")
        prov["host.cross_queue_penalty_s"] = (
            f"median over batch sizes {self.cq_bs} (context {self.contexts[0]}) of the per-step GPU time of a "
            f"graph-replayed spec_cycle with the engine's cross_queue_wait sequence before each step "
            f"(Device.stream_wait('schedule', previous forward's event), then Device.wait_stream('forward', "
            f"'schedule')) minus without: "
            + ", ".join(f"bs {b}: {_ms(m1)} vs {_ms(m0)} (IQR/median {s1 * 100:.1f} % / {s0 * 100:.1f} %)"
                        for b, m0, m1, s0, s1 in self.cq)
            + f"; clamped at 0 (0 expected on CUDA). Blocks plain / wait / plain / wait of "
            f"{min(self.reps['cross_queue'])}-{max(self.reps['cross_queue'])} timed calls each after {WARMUP} "
            f"warm-ups, pooled per variant; {timing}. [{env}]")

        gpu = {
            "extend": {"x": [float(t) for t in self.ext_x], "context_len": [float(c) for c in self.ext_cols],
                       "seconds": self.ext_s},
            "draft_inject_per_token_s": inj_slope,
            "draft_inject": {"x": [float(t) for t in self.ext_x], "context_len": [float(c) for c in self.ext_cols],
                             "seconds": self.inj_s},
            "verify": {"x": [float(b) for b in self.bs], "context_len": [float(c) for c in self.contexts],
                       "seconds": spec_grid},
            "decode": {"x": [float(b) for b in self.bs], "context_len": [float(c) for c in self.contexts],
                       "seconds": dec_grid},
            "eager_factor": self.eager_factor,
        }
        host = {
            "ingest_per_request_s": 0.0,
            "schedule_s": self.sched_fit[0], "schedule_per_req_s": self.sched_fit[1],
            "launch_s": max(0.0, self.stall_fit[0] - self.sync_wakeup), "launch_per_req_s": max(0.0, self.stall_fit[1]),
            "process_s": self.proc_fit[0], "process_per_req_s": self.proc_fit[1],
            "sync_wakeup_s": self.sync_wakeup,
            "cross_queue_penalty_s": self.cq_penalty,
        }
        desc = (f"Measured by `specsched profile` (runtime/profiler.py) on {dev.describe()}: the runtime's "
                f"{self.preset} proxy ({model}), graphs for every grid batch size, host costs of this runtime's "
                f"Python. Times a runtime run (runtime.engine) of the same preset, not a production model.")
        return _sig({"name": name, "device": dev.describe(), "description": desc, "provenance": prov,
                     "gpu": gpu, "host": host})


def profile_device(*, device: str | None, preset: str, spec_window: int, max_bs: int, contexts: list[int],
                   extend_tokens: list[int], cuda_graph_max_bs: int, repeats: int, progress: bool,
                   budget_s: float = DEFAULT_BUDGET_S, batch_sizes: list[int] | None = None,
                   prompt_len: int | None = None, forced_accept: int = 2, seed: int = 0,
                   cpu_threads: int | None = 1) -> dict:
    """Measure a device profile with the runtime's own code paths (module docstring).

    Args:
        device: ``"cuda"``, ``"cpu"`` or None (GPU if available).
        preset: target preset of :data:`runtime.model.PRESETS` (its ``-draft`` is the drafter).
        spec_window: verify window W (>= 2).
        max_bs: largest batch of the verify/decode grids (see :func:`grid_batch_sizes`).
        contexts: committed contexts of the verify/decode grids; the largest is also the
            long prefix of the extend grid.
        extend_tokens: total extend tokens of the extend grid rows.
        cuda_graph_max_bs: the server's graph limit (chooses the eager-factor batch sizes
            and is recorded; every grid point is graph-replayed).
        repeats: timed calls per measurement (after :data:`WARMUP` warm-ups).
        progress: show a tqdm progress bar (stderr).
        budget_s: total time budget; repeats are trimmed (not below 3) when it runs short.
        batch_sizes: override the grid batch sizes.
        prompt_len: per-request extend length of the extend layouts (default
            ``min(1024, max(extend_tokens))``).
        forced_accept: accepted drafts forced per request in the timed spec cycles.
        seed: weight and token seed.
        cpu_threads: torch intra-op threads while profiling on CPU (restored afterwards;
            None: leave as is). 1 by default: on a loaded CI box OpenMP threads spinning
            against other processes made tiny steps ~100x slower and the timings noise.

    Returns:
        A plain dict (values to 6 significant digits) that validates with
        ``sim.profile.Profile.model_validate``; ``provenance`` covers every gpu/host field.

    Raises:
        ValueError: bad arguments or preset.
        RuntimeError: a GPU was asked for and none is available.
    """
    threads = torch.get_num_threads()
    on_cpu = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cpu")
    if on_cpu and cpu_threads:
        torch.set_num_threads(cpu_threads)
    try:
        p = _Profiler(device=device, preset=preset, spec_window=spec_window, max_bs=max_bs, contexts=contexts,
                      extend_tokens=extend_tokens, cuda_graph_max_bs=cuda_graph_max_bs, repeats=repeats,
                      progress=progress, budget_s=budget_s, batch_sizes=batch_sizes, prompt_len=prompt_len,
                      forced_accept=forced_accept, seed=seed)
        return p.run()
    finally:
        torch.set_num_threads(threads)


# -------------------------------------------------------------------------------- write
class _FlowListDumper(yaml.SafeDumper):
    """Lists on one line (flow style), mappings as blocks."""


_FlowListDumper.add_representer(
    list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def write_profile(d: dict, path: str | Path) -> Path:
    """Validate ``d`` as a :class:`sim.profile.Profile` and write it as YAML to ``path``
    atomically (a temporary sibling file, fsync, ``os.replace``): readers see the old file
    or the new one, never a partial one; on failure the old file is untouched and the
    temporary file removed. Lists are written in flow style; floats to 6 significant digits.

    Raises:
        pydantic.ValidationError: ``d`` is not a valid profile (nothing written).
    """
    Profile.model_validate(d)
    data = _sig({k: v for k, v in d.items() if k != "path"})
    header = (f"# Device profile written by `specsched profile` (runtime/profiler.py), "
              f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.\n"
              "# Every value's method, shapes, repeats and versions are in provenance.\n")
    text = header + yaml.dump(data, Dumper=_FlowListDumper, sort_keys=False, width=100, allow_unicode=True)
    out = atomic_write_text(path, text)
    return out


# ---------------------------------------------------------------------------------- CLI
def _int_list(s: str) -> list[int]:
    try:
        vals = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected comma-separated integers, e.g. 1024,4096") from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"{s!r}: expected integers >= 1")
    return vals


def _pos_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{s!r}: must be >= 1")
    return v


def _fmt_grid(title: str, g: dict) -> str:
    cols = g["context_len"]
    lines = [f"{title} (ms)   " + "".join(f"{'ctx ' + format(c, 'g'):>12}" for c in cols)]
    for x, row in zip(g["x"], g["seconds"], strict=True):
        lines.append(f"  {x:>12g}   " + "".join(f"{v * 1e3:>12.3f}" for v in row))
    return "\n".join(lines)


def cmd_profile(args: argparse.Namespace) -> int:
    """``specsched profile``: measure, write the profile, print a summary."""
    if args.device is None:
        raise ConfigError("<command line>", "--device", None, "required to measure (cuda or cpu); or use --analytic")
    defaults = GPU_DEFAULTS if args.device == "cuda" else CPU_DEFAULTS
    max_bs = args.max_bs or defaults["max_bs"]
    contexts = args.contexts or defaults["contexts"]
    ext = args.extend_tokens or defaults["extend_tokens"]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("<command line>", "--device", args.device, "torch.cuda.is_available() is False here; use --device cpu")
    if args.window < 2:
        raise ConfigError("<command line>", "--window", args.window, "must be >= 2 (a speculative cycle)")
    if args.preset not in PRESETS or args.preset.endswith("-draft"):
        raise ConfigError("<command line>", "--preset", args.preset,
                          f"allowed: {', '.join(k for k in PRESETS if not k.endswith('-draft'))}")
    t0 = time.perf_counter()
    d = profile_device(device=args.device, preset=args.preset, spec_window=args.window, max_bs=max_bs,
                       contexts=contexts, extend_tokens=ext, cuda_graph_max_bs=args.graph_max_bs,
                       repeats=args.repeats, progress=not args.no_progress, budget_s=args.budget,
                       prompt_len=args.prompt_len)
    if args.name:
        d["name"] = args.name
    out = Path(args.out) if args.out else Path("profiles") / f"{d['name']}.yaml"
    write_profile(d, out)
    g, h = d["gpu"], d["host"]
    print(f"{d['name']}: {d['device']}")
    print(_fmt_grid("extend", g["extend"]))
    print(_fmt_grid("verify", g["verify"]))
    print(_fmt_grid("decode", g["decode"]))
    print(f"draft inject {g['draft_inject_per_token_s'] * 1e6:.4f} us/token; eager factor {g['eager_factor']:.3f}")
    print("host: " + ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in h.items()))
    print(f"profiled in {time.perf_counter() - t0:.1f} s; wrote {out}")
    return 0


def register_profile_command(sub: Any) -> argparse.ArgumentParser:
    """Register ``specsched profile`` on an argparse subparsers object; returns its parser.

    ``specsched profile --device {cuda,cpu} [--preset 1b] [--window 6] [--max-bs 64]
    [--contexts 1024,4096] [--extend-tokens 256,1024,4096,16384] [--graph-max-bs 256]
    [--repeats 20] [--out profiles/<name>.yaml]``; on ``--device cpu`` the size defaults
    shrink (max-bs 8, contexts 64,256, extend tokens 16,64,256).
    """
    p = sub.add_parser("profile", help="measure a device profile with the runtime's microbenchmarks",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="where to measure (required unless --analytic)")
    p.add_argument("--preset", default="1b", help="model preset of runtime.model.PRESETS (default 1b)")
    p.add_argument("--window", type=int, default=6, help="speculative window W = gamma + 1 (default 6)")
    p.add_argument("--max-bs", type=_pos_int, default=None, help="largest grid batch size (default 64; cpu 8)")
    p.add_argument("--contexts", type=_int_list, default=None,
                   help="committed contexts of the verify/decode grids (default 1024,4096; cpu 64,256)")
    p.add_argument("--extend-tokens", type=_int_list, default=None,
                   help="extend grid token counts (default 256,1024,4096,16384; cpu 16,64,256)")
    p.add_argument("--prompt-len", type=_pos_int, default=None,
                   help="per-request extend length in the extend grid (default min(1024, max extend tokens))")
    p.add_argument("--graph-max-bs", type=_pos_int, default=256, help="the server's cuda_graph_max_bs (default 256)")
    p.add_argument("--repeats", type=_pos_int, default=20, help="timed calls per measurement (default 20)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                   help=f"total time budget in seconds; trims repeats if exceeded (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--name", default=None, help="profile name (default <gpu>-proxy-<preset>-w<window>)")
    p.add_argument("--out", default=None, help="output YAML (default profiles/<name>.yaml)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_profile)
    return p


if __name__ == "__main__":
    _ap = argparse.ArgumentParser(prog="python -m specsched.runtime.profiler")
    register_profile_command(_ap.add_subparsers(dest="cmd", required=True))
    _a = _ap.parse_args(["profile", *sys.argv[1:]])
    try:
        sys.exit(_a.func(_a))
    except ConfigError as _e:
        print(f"profile: error: {_e}", file=sys.stderr)
        sys.exit(2)
