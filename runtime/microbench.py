"""Microbenchmarks of the runtime's forwards: the raw data for GPU profiles.

A benchmark fakes the prefill (reserves each request's context and sets its committed
length, since KV *values* do not change the cost), then times decode steps or speculative
cycles at a fixed context: before every step the committed lengths are put back on the
device (a tiny queued kernel), so every step sees the same context.

Two numbers per configuration:

- ``gpu_ms``: median forward-stream time per step, from timing events (measurement mode).
- ``wall_ms``: host wall time per step over a run of back-to-back launches ended by one
  synchronize: max(GPU, host launch cost) once the queue is full.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import torch
from specsched.runtime.device import Device
from specsched.runtime.model import (
    PRESETS,
    LlamaProxy,
    ModelRunner,
    draft_preset,
    verify_cycle_cost,
)


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One configuration's timings (milliseconds per step).

    Attributes:
        preset: target preset name.
        kind: ``decode`` or ``spec`` (draft + verify cycle).
        batch: requests per step.
        context: committed tokens per request before the step.
        window: verify window (1 for decode).
        graph: replayed as a captured graph (else eager).
        gpu_ms: median forward-stream time per step.
        wall_ms: host wall time per step, queue kept full.
        est_ms: roofline estimate (:func:`runtime.model.verify_cycle_cost`).
        device: :meth:`Device.describe`.
    """

    preset: str
    kind: str
    batch: int
    context: int
    window: int
    graph: bool
    gpu_ms: float
    wall_ms: float
    est_ms: float
    device: str

    def as_dict(self) -> dict:
        return asdict(self)


def prefilled_runner(
    preset: str, *, batch: int, context: int, window: int, device: Device, drafter: bool = True, seed: int = 0
) -> tuple[ModelRunner, list[int]]:
    """A runner on ``device`` with ``batch`` requests holding ``context`` tokens each.

    Args:
        preset: a key of :data:`runtime.model.PRESETS` (its ``-draft`` pair is the drafter).
        batch: requests.
        context: committed tokens per request (KV reserved, values left at zero).
        window: verify window (1: no drafter, decode only).
        device: where to run (its ``dtype`` is the model dtype).
        drafter: build the drafter when ``window > 1``.
        seed: weight seed.

    Returns:
        (runner, rows). A single context bucket covers ``context + window``. Built on the
        device's forward stream (the runner's constructor syncs once).
    """
    with device.use("forward"):
        return _prefilled(preset, batch, context, window, device, drafter, seed)


def _prefilled(preset: str, batch: int, context: int, window: int, device: Device, drafter: bool, seed: int) -> tuple[ModelRunner, list[int]]:
    dev = device.torch_device
    target = LlamaProxy(PRESETS[preset], seed=seed, device=dev, dtype=device.dtype)
    d = None
    if window > 1 and drafter:
        d = LlamaProxy(PRESETS[draft_preset(preset)], seed=seed + 1, device=dev, dtype=device.dtype)
    max_ctx = context + 2 * window
    runner = ModelRunner(target, device, max_reqs=batch, max_context=max_ctx, num_slots=batch * max_ctx + 1,
                         drafter=d, spec_window=window, ctx_buckets=[max_ctx], bs_buckets=[batch])
    rows = [runner.add_request() for _ in range(batch)]
    runner.pool.reserve(rows, [max_ctx] * batch)
    rows_t = device.h2d(rows)
    runner.pool.seq_lens.index_fill_(0, rows_t, context)
    runner.pool.last_token[rows_t] = torch.randint(0, PRESETS[preset].vocab_size - 1, (batch,), device=dev)
    runner.observe_lengths(rows, [context] * batch)
    return runner, rows


@torch.no_grad()
def bench(
    runner: ModelRunner,
    rows: list[int],
    kind: Literal["decode", "spec"],
    *,
    context: int,
    forced_accept: int | None = 2,
    graph: bool = True,
    iters: int = 20,
    warmup: int = 3,
    preset: str = "",
) -> BenchResult:
    """Time ``iters`` steps of ``kind`` at a fixed ``context`` (see module docstring).

    Args:
        runner, rows: from :func:`prefilled_runner`.
        kind: ``decode`` or ``spec``.
        context: the committed length restored before every step.
        forced_accept: accepted drafts forced per request (spec; None: real matching).
        graph: replay captured graphs (captured during warm-up).
        iters, warmup: timed and untimed steps.
        preset: recorded in the result.
    """
    dev = runner.device
    was = dev.measure
    dev.measure = True
    forced = [forced_accept] * len(rows) if (kind == "spec" and forced_accept is not None) else None
    with dev.use("forward"):
        rows_t = dev.h2d(rows)  # made and read on the forward stream

    def step() -> None:
        runner.pool.seq_lens.index_fill_(0, rows_t, context)
        runner.observe_lengths(rows, [context] * len(rows))
        if kind == "decode":
            runner.decode(rows, graph=graph)
        else:
            runner.spec_cycle(rows, forced, graph=graph)

    with dev.use("forward"):
        for _ in range(warmup):
            step()
        dev.synchronize("bench")
        dev.collect_timings()
        for _ in range(iters):
            with dev.timed(kind):
                step()
        timings = [ms for _, ms in dev.collect_timings()]
        dev.synchronize("bench")
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        dev.synchronize("bench")
        wall = (time.perf_counter() - t0) * 1e3 / iters
    dev.measure = was
    w = runner.window if kind == "spec" else 1
    cfg = runner.target.cfg
    est = verify_cycle_cost(cfg, runner.drafter.cfg if (kind == "spec" and runner.drafter is not None) else None,
                            len(rows), w, context, dtype_bytes=torch.finfo(runner.target.dtype).bits // 8)["est_ms"]
    return BenchResult(preset or cfg.name, kind, len(rows), context, w, graph, statistics.median(timings), wall, est, dev.describe())


def time_calls(dev: Device, fn: Callable[[], object], *, repeats: int, warmup: int = 0,
               stream: str = "forward") -> list[float]:
    """Seconds of ``stream`` work per call of ``fn`` (used by :mod:`runtime.profiler`).

    ``warmup`` untimed calls first (graph captures happen there), then ``repeats`` calls
    back to back, each between two timing events on ``stream`` (GPU; host time stamps on
    CPU); the events are read after the last call, so the calls queue as they do in the
    loop. A call that leaves the GPU idle (host-bound) is timed with its idle gaps. Runs
    with ``stream`` current, in measurement mode (restored afterwards).
    """
    was = dev.measure
    dev.measure = True
    try:
        with dev.use(stream):
            for _ in range(warmup):
                fn()
            dev.collect_timings()
            for _ in range(repeats):
                with dev.timed("call", stream):
                    fn()
            return [ms / 1e3 for _, ms in dev.collect_timings()]
    finally:
        dev.measure = was
