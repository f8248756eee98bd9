"""Graph capture and replay by batch-size bucket (SGLang's CudaGraphRunner,
model_executor/cuda_graph_runner.py) and piecewise graphs with eager breaks (SGLang's
BreakableCUDAGraph): :class:`GraphCache`, the bucket helpers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from specsched.sim.gc_pause import collector_paused as _collector_paused

if TYPE_CHECKING:
    from specsched.runtime.device import Device


# -------------------------------------------------------------------------------- graphs
def pick_bucket(n: int, buckets: Sequence[int]) -> int | None:
    """The smallest bucket >= ``n`` (buckets sorted or not), or None if ``n`` exceeds all.

    Raises:
        ValueError: n < 1.
    """
    if n < 1:
        raise ValueError(f"bucket for n={n}: must be >= 1")
    fits = [b for b in buckets if b >= n]
    return min(fits) if fits else None


def default_bs_buckets(max_bs: int) -> list[int]:
    """Batch-size buckets like SGLang's default ``cuda_graph_bs`` list
    (model_executor/cuda_graph_runner.py): 1, 2, 4, 8, 12, then every 8 up to ``max_bs``."""
    base = [1, 2, 4, 8, 12, *range(16, max_bs + 1, 8)]
    out = sorted({b for b in base if b <= max_bs} | {max_bs})
    return out



collector_paused = partial(_collector_paused, collect=True)
"""Collect garbage once, then keep Python's cyclic collector off until the block ends
(:func:`sim.gc_pause.collector_paused` with ``collect``).

A capture must issue nothing but the captured stream's work. An automatic collection
that runs mid-capture can free a dead cycle holding CUDA objects (an earlier engine's
or profiler's graphs, events or pool memory); their destructors call the driver and
invalidate the capture (``cudaErrorStreamCaptureInvalidated``: seen on an H200 at the
first capture after the profiler). torch 2.9+ no longer collects in
``torch.cuda.graph.__enter__`` (only under ``force_cudagraph_gc``). SGLang 0.5.23 does
the same around its capture loops (model_executor/runner/base_cuda_graph_runner.py
``freeze_gc``: collect, then freeze the survivors for the capture). Nested uses are
free: only the outermost collects and re-enables.
"""

class GraphCache:
    """Captured forwards keyed by a hashable key (e.g. ``("verify", bs_bucket, ctx_bucket)``).

    Models SGLang's CudaGraphRunner (model_executor/cuda_graph_runner.py) and
    mini-sglang's engine/graph.py: one graph per batch-size bucket, captured largest first
    into one shared memory pool, inputs and outputs in static buffers that the caller owns
    (the captured function reads its inputs from, and writes its outputs to, tensors that
    outlive the graph). On CUDA/HIP, :meth:`capture` warms the function up ``warmup`` times
    on the forward stream before capturing (hip-vs-cuda.md item 7: HIP may accept a syncing
    op during capture that CUDA rejects; validate on CUDA and with
    :class:`runtime.sync_checker.SyncChecker`). On CPU the function is kept and
    :meth:`replay` runs it eagerly on the same static buffers.

    Args:
        device: the owning :class:`Device`.
        warmup: eager runs before each capture (>= 1 recommended).
    """

    def __init__(self, device: Device, warmup: int = 2) -> None:
        self.device = device
        self.warmup = warmup
        self._graphs: dict[Hashable, Any] = {}
        self._pool: Any = None
        self.replays: Counter[Hashable] = Counter()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._graphs

    def keys(self) -> list[Hashable]:
        """Keys captured so far, in capture order."""
        return list(self._graphs)

    def capture(self, key: Hashable, fn: Callable[[], None]) -> None:
        """Warm up and capture ``fn`` (no arguments, no result: static buffers only).

        The function must not allocate outputs the caller reads (write into static
        buffers) and must not sync the host. Capturing twice under one key replaces the
        graph.

        Raises:
            RuntimeError: from torch if ``fn`` does something illegal during capture
                (a host sync on CUDA, for instance).
        """
        from specsched.runtime.sync_checker import SyncChecker, cuda_sync_debug

        dev = self.device
        if not dev.is_gpu:
            # the warm-up: same code path, same buffers; a host sync in it is refused here as
            # CUDA's capture refuses it (HIP may accept one silently, hip-vs-cuda.md items 7, 14)
            with SyncChecker(raise_on_sync=True):
                fn()
            self._graphs[key] = fn
            return
        fwd = dev.stream("forward")
        fwd.wait_stream(torch.cuda.current_stream(dev.torch_device))  # static buffers were filled there
        with torch.cuda.stream(fwd):
            for _ in range(self.warmup):
                fn()
        dev.synchronize("graph_capture")
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        # under set_sync_debug_mode("error") on every backend (ROCm before 7.0 could accept a
        # syncing op during capture that CUDA rejects)
        with collector_paused(), cuda_sync_debug("error"), torch.cuda.graph(graph, pool=self._pool, stream=fwd):
            fn()
        self._graphs[key] = graph
        dev.synchronize("graph_capture")

    def capture_pieces(self, key: Hashable, pieces: Sequence[Callable[[], None]]) -> None:
        """Warm up and capture ``pieces`` as one graph each, to be replayed in order with an
        eager call between consecutive pieces (:meth:`replay_pieces`).

        Models SGLang 0.5.23's breakable graphs (runner_backend_utils/breakable_cuda_graph/
        breakable_cuda_graph.py ``BreakableCUDAGraphCapture``): one segment graph per piece,
        all in this cache's shared memory pool, the eager breaks outside any graph. The
        pieces are warmed up ``warmup`` times in order (without the breaks: they only write
        static buffers the next piece reads, whose values do not change what is captured),
        then captured in order. Each piece must read and write static buffers only. CPU: the
        pieces are kept and run eagerly, once here under the sync checker.

        Raises:
            ValueError: no pieces.
            RuntimeError: from torch if a piece does something illegal during capture.
        """
        from specsched.runtime.sync_checker import SyncChecker, cuda_sync_debug

        if not pieces:
            raise ValueError(f"capture_pieces({key!r}): no pieces")
        dev = self.device
        if not dev.is_gpu:
            with SyncChecker(raise_on_sync=True):
                for fn in pieces:
                    fn()
            self._graphs[key] = list(pieces)
            return
        fwd = dev.stream("forward")
        fwd.wait_stream(torch.cuda.current_stream(dev.torch_device))
        with torch.cuda.stream(fwd):
            for _ in range(self.warmup):
                for fn in pieces:
                    fn()
        dev.synchronize("graph_capture")
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graphs = []
        # capture_begin/capture_end as SGLang's segments do: the torch.cuda.graph context
        # would synchronize, collect garbage and empty the cache around every piece
        with collector_paused(), torch.cuda.stream(fwd), cuda_sync_debug("error"):
            for fn in pieces:
                g = torch.cuda.CUDAGraph()
                g.capture_begin(pool=self._pool)
                try:
                    fn()
                finally:
                    g.capture_end()
                graphs.append(g)
        self._graphs[key] = graphs
        dev.synchronize("graph_capture")

    def replay_pieces(self, key: Hashable, between: Callable[[int], None]) -> None:
        """Replay the pieces captured under ``key`` on the current stream, calling
        ``between(i)`` eagerly after piece ``i`` (every piece but the last): SGLang's
        ``BreakableCUDAGraph.replay`` (segment, break, segment, ...).

        Raises:
            KeyError: nothing captured under ``key``.
        """
        pieces = self._graphs[key]
        self.replays[key] += 1
        last = len(pieces) - 1
        gpu = self.device.is_gpu
        for i, p in enumerate(pieces):
            if gpu:
                p.replay()
            else:
                p()
            if i < last:
                between(i)

    def replay(self, key: Hashable) -> None:
        """Launch the graph captured under ``key`` on the current stream (CPU: run ``fn``).

        Raises:
            KeyError: nothing captured under ``key``.
        """
        g = self._graphs[key]
        self.replays[key] += 1
        if self.device.is_gpu:
            g.replay()
        else:
            g()
