"""Everything device-specific the runtime touches, in one object: :class:`Device`.

The overlap loop (:mod:`sim.loop`) is written as operations on an abstract device: launch
a forward, record an event, make a stream wait on an event, block the host on an event,
copy results. :class:`Device` is the torch implementation of that device for three
backends:

- ``"cuda"``: NVIDIA (measured on an H200).
- ``"hip"``: ROCm builds of PyTorch keep the ``torch.cuda`` API and the ``"cuda"`` device
  string; HIP is detected with ``torch.version.hip`` (hip-vs-cuda.md item 1). Not run
  here: correct by construction, following the notes below.

Verified: CPU (CI); CUDA on one H200 (torch 2.11 + CUDA 13): the runtime tests, graph
capture/replay of decode and speculative cycles, and the step paths under
``torch.cuda.set_sync_debug_mode("error")``. HIP: never run.
- ``"cpu"``: CI. Streams and events are no-op objects with the same API (CPU ops run
  synchronously, so every event is complete when recorded); graphs run eagerly on the
  same static buffers; host waits are still *counted*, so a test can assert where the
  loop would block.

Design points forced by HIP (the HIP-vs-CUDA notes summarised in docs/runtime.md):

- Few streams, created once (item 4): HIP maps each priority onto GPU_MAX_HW_QUEUES
  hardware queues (default 4) and PyTorch hands out its 32 pooled streams round-robin, so
  extra streams silently share queues and serialize. :class:`Device` creates exactly
  ``schedule``, ``forward`` and ``copy`` at construction and never another.
- On HIP the result copy stays on the forward stream (SGLang does the same in its overlap
  path, managers/scheduler.py ``event_loop_overlap``): ``stream("copy")`` *is* the forward
  stream there.
- No ``schedule.wait_stream(forward)`` barrier on HIP (item 3: hangs and ~20 % throughput
  loss with MTP, sglang PR #26646): :meth:`Device.wait_stream` refuses that pair on HIP.
- Every cross-stream read is paired with an event (item 5: MI355X really runs streams in
  parallel and exposes races latent on CUDA): :meth:`Device.copy_to_host` always makes the
  copy stream wait on an event of the producer.
- Never re-record an event that may still have a pending wait (item 6, sglang #31072
  hang): events come from an :class:`EventRing` that refuses to hand out a slot whose last
  record is incomplete or has a queued wait not yet passed.
- The publish wait is a switch (item 2): :meth:`Device.host_block` (``event.synchronize()``,
  SGLang on HIP) vs :meth:`Device.stream_wait` (queued ``Event.wait()``, SGLang on CUDA);
  the loop chooses which op to issue, the device only executes it.
- Timing-enabled events cost more on HIP (item 9): they exist only in measurement mode.
- Graph capture (``torch.cuda.CUDAGraph``, which is HIP graphs on ROCm) always warms up
  first (item 7) and is keyed by batch-size bucket so replay cost can be measured per
  bucket (item 10).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from specsched.runtime.events import (  # noqa: F401  (re-exported)
    EventRing,
    EventRingExhausted,
    NullEvent,
    NullStream,
    RingEvent,
    StaleEventError,
)
from specsched.runtime.graphs import GraphCache, default_bs_buckets, pick_bucket  # noqa: F401  (re-exported)

Backend = Literal["cuda", "hip", "cpu"]
StreamName = Literal["schedule", "forward", "copy"]
STREAM_NAMES: tuple[str, ...] = ("schedule", "forward", "copy")


def detect_backend(device: str | torch.device | None = None) -> Backend:
    """The backend of a torch device.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``, or None for the
            default (the first GPU if ``torch.cuda.is_available()``, else the CPU).

    Returns:
        ``"hip"`` for a GPU on a ROCm build (``torch.version.hip`` set), ``"cuda"`` for
        a GPU on a CUDA build, ``"cpu"`` otherwise.

    Raises:
        ValueError: a device type other than cpu/cuda (mps, xpu, meta...).
    """
    dev = _resolve(device)
    if dev.type == "cpu":
        return "cpu"
    if dev.type == "cuda":
        return "hip" if getattr(torch.version, "hip", None) else "cuda"
    raise ValueError(f"unsupported device type {dev.type!r}: the runtime runs on cpu or cuda/hip")


CPU_THREADS = 1
"""Torch intra-op threads on CPU for ``specsched profile`` (its default) and for the
runtime's measured loop (``measure``, ``validate``): a measurement and the profile it is
compared with run the same way. One, because on a loaded box OpenMP threads spinning against
other processes made tiny steps 10-100x slower and their timings noise."""


def serve_threads(is_gpu: bool, cpu_threads: int | None = None) -> int:
    """Intra-op CPU threads for torch while serving: 1 on a GPU, as SGLang 0.5.23 sets
    (model_executor/model_runner.py ``ModelRunner.load_model``: ``torch.set_num_threads(1)``
    off CPU), so the loop's small host-side tensor ops never fan out to OpenMP workers that
    spin beside the thread issuing kernels; on CPU, where the forward itself runs,
    ``cpu_threads`` (``validate``: the count its profile was made with), else the
    profiler's :data:`CPU_THREADS`. The runtime's loop and the profiler apply the same rule."""
    return 1 if is_gpu else (cpu_threads or CPU_THREADS)


def _resolve(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(split_device(device)[0] if isinstance(device, str) else device)


FORCE_BACKEND_ENV = "SPECSCHED_BACKEND"
"""Environment variable that forces the backend of every :class:`Device` built without an
explicit ``backend`` (``hip``: run the whole test suite in cpu-as-hip / cuda-as-hip mode)."""


def split_device(spec: str) -> tuple[str, Backend | None]:
    """``"cuda-as-hip"`` -> ``("cuda", "hip")``; ``"cpu"`` -> ``("cpu", None)``.

    The ``-as-hip`` suffix runs the HIP code paths (stream layout, waits, guards) on a CPU
    or an NVIDIA device (:class:`Device`'s ``backend`` override).

    Raises:
        ValueError: a suffix other than ``-as-hip``.
    """
    if "-as-" not in spec:
        return spec, None
    dev, _, forced = spec.partition("-as-")
    if forced != "hip":
        raise ValueError(f"device {spec!r}: only '<device>-as-hip' forces a backend, e.g. cuda-as-hip or cpu-as-hip")
    return dev, "hip"



# ------------------------------------------------------------------------------- results
@dataclass(slots=True)
class HostCopy:
    """Device tensors being copied to (pinned) host memory.

    Attributes:
        tensors: name -> host tensor (pinned on GPU backends); valid only after ``done``
            completed (use :meth:`Device.wait_copy`).
        done: the copy-done event, recorded on the copy stream after the copies.
    """

    tensors: dict[str, torch.Tensor]
    done: RingEvent


# -------------------------------------------------------------------------------- device
class Device:
    """The runtime's device: backend, streams, event ring, waits, copies, timing, graphs.

    Args:
        device: torch device (None: first GPU if available, else CPU).
        measure: measurement mode: :meth:`timed` records timing-enabled events (GPU) or
            host time stamps (CPU). Off: :meth:`timed` does nothing and ring events are
            created without timing (cheaper on HIP, hip-vs-cuda.md item 9).
        ring_size: events in the ring (> the loop's in-flight depth; the overlap loop
            keeps about 4 per step in flight for 2 steps, so the default 64 is ample).
        dtype: compute dtype of models on this device (default bf16 on GPU, float32 on CPU).
        backend: force the code paths of a backend: ``"hip"`` on a CPU or NVIDIA device
            runs every HIP branch (cpu-as-hip, cuda-as-hip); also given as a device suffix
            (``"cuda-as-hip"``) or the :data:`FORCE_BACKEND_ENV` variable. Applied before
            streams are made.

    Attributes:
        torch_device: the ``torch.device``.
        backend: ``"cuda"``, ``"hip"`` or ``"cpu"``.
        dtype: default model dtype.
        ring: the :class:`EventRing`.
        graphs: a :class:`GraphCache` on this device.
        sync_counts: host syncs by kind (``publish``, ``results``, ``slot_expansion``,
            ``timing``, ``device_synchronize``, ``graph_capture``, ... as given by callers).
        sync_seconds: host seconds spent blocked, by kind.
        queued_waits: queued (non-blocking) stream waits by ``"<stream>"``.
        event_records: event records by kind (``ring``: done/copy-done events; ``timing``:
            timing marks; ``h2d`` / ``d2h``: the pinned host allocator's record per
            non-blocking copy). Each is a barrier packet with a cache flush on HIP
            (hip-vs-cuda.md item 9), so the count per step is reported and kept low.
        allow_schedule_barrier: let the schedule stream wait on forward work on HIP (see
            :meth:`_check_barrier`); set only by an arm that measures that barrier.
        native_backend / label: the device's own backend; ``<native>-as-hip`` when forced.

    Raises:
        ValueError: unsupported device type.
        RuntimeError: a GPU device was asked for but ``torch.cuda.is_available()`` is False.
    """

    def __init__(
        self,
        device: str | torch.device | None = None,
        *,
        measure: bool = False,
        ring_size: int = 64,
        dtype: torch.dtype | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.torch_device = _resolve(device)
        self.native_backend: Backend = detect_backend(self.torch_device)
        if backend is None and isinstance(device, str):
            backend = split_device(device)[1]
        if backend is None:
            backend = os.environ.get(FORCE_BACKEND_ENV) or None  # type: ignore[assignment]
        backend = backend or self.native_backend
        if backend not in ("cuda", "hip", "cpu"):
            raise ValueError(f"backend {backend!r}: allowed cuda, hip, cpu")
        if backend != self.native_backend and backend != "hip":
            raise ValueError(f"backend {backend!r} cannot run on a {self.native_backend} device; only 'hip' can be forced")
        # the override is applied before any stream or event exists: every HIP branch
        # (stream layout, single-stream copies, the barrier guard) runs from the start
        self.backend: Backend = backend
        self.allow_schedule_barrier = False
        self.event_records: Counter[str] = Counter()
        if self.is_gpu and not torch.cuda.is_available():
            raise RuntimeError(f"device {self.torch_device} asked for but torch.cuda.is_available() is False")
        if self.is_gpu and self.torch_device.index is None:
            self.torch_device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = dtype or (torch.bfloat16 if self.is_gpu else torch.float32)
        self.measure = measure
        self._streams: dict[str, Any] = self._make_streams()
        self.ring = EventRing(ring_size, self._make_event, name=f"{self.backend} events")
        self.graphs = GraphCache(self)
        self.sync_counts: Counter[str] = Counter()
        self.sync_seconds: Counter[str] = Counter()
        self.queued_waits: Counter[str] = Counter()
        self._timing_free: list[Any] = []
        self._timing_pending: list[tuple[str, Any, Any]] = []

    # ------------------------------------------------------------------------ basics
    @property
    def is_gpu(self) -> bool:
        """True on a GPU (CUDA or HIP), whatever backend's code paths run."""
        return self.torch_device.type == "cuda"

    @property
    def forced(self) -> bool:
        """True when the backend's code paths were forced (cpu-as-hip, cuda-as-hip)."""
        return self.backend != self.native_backend

    @property
    def label(self) -> str:
        """``cuda``, ``hip``, ``cpu``, or ``<native>-as-hip`` when forced."""
        return f"{self.native_backend}-as-{self.backend}" if self.forced else self.backend

    @property
    def is_hip(self) -> bool:
        """True on ROCm/HIP."""
        return self.backend == "hip"

    @property
    def sglang_publish_wait(self) -> Literal["host_block", "stream_wait"]:
        """How SGLang waits for the previous forward's publish event on this backend
        (managers/overlap_utils.py): ``host_block`` on HIP (PR #26672), ``stream_wait``
        elsewhere. The loop's ``sync_mode`` decides what actually runs."""
        return "host_block" if self.is_hip else "stream_wait"

    def describe(self) -> str:
        """One line: backend, device name, torch version (for results' ``source``)."""
        if self.is_gpu:
            name = torch.cuda.get_device_name(self.torch_device)
            nb = self.native_backend
            ver = torch.version.hip if nb == "hip" else torch.version.cuda
            return f"{self.label}:{name} (torch {torch.__version__}, {nb} {ver})"
        return f"{self.label} (torch {torch.__version__})"

    def _make_streams(self) -> dict[str, Any]:
        if not self.is_gpu:
            s = {n: NullStream(n) for n in STREAM_NAMES}
            if self.is_hip:
                s["copy"] = s["forward"]  # the HIP layout: the result copy on the forward stream
            return s
        sched = torch.cuda.Stream(self.torch_device)
        fwd = torch.cuda.Stream(self.torch_device)
        copy = fwd if self.is_hip else torch.cuda.Stream(self.torch_device)
        return {"schedule": sched, "forward": fwd, "copy": copy}

    def _make_event(self, timing: bool | None = None) -> Any:
        if not self.is_gpu:
            return NullEvent()
        return torch.cuda.Event(enable_timing=self.measure if timing is None else timing)

    # ----------------------------------------------------------------------- streams
    def stream(self, name: str) -> Any:
        """The stream called ``name`` (``schedule``, ``forward`` or ``copy``; on HIP
        ``copy`` is the forward stream).

        Raises:
            KeyError: another name (streams are created once, at construction).
        """
        try:
            return self._streams[name]
        except KeyError:
            raise KeyError(f"no stream {name!r}: the device has {STREAM_NAMES} (created once)") from None

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[Any]:
        """Make stream ``name`` current for the block (``torch.cuda.stream``; CPU: no-op)."""
        s = self.stream(name)
        if self.is_gpu:
            with torch.cuda.stream(s):
                yield s
        else:
            yield s

    # ------------------------------------------------------------------------ events
    def record(self, stream: str = "forward") -> RingEvent:
        """Record a ring event on ``stream`` (marks all work queued there so far).

        Raises:
            EventRingExhausted: no event free (see :class:`EventRing`).
        """
        ev = self.ring.acquire(stream)
        ev.event.record(self.stream(stream))
        self.event_records["ring"] += 1
        if not self.is_gpu:
            self.ring.mark_complete(ev)
        return ev

    def stream_wait(self, stream: str, ev: RingEvent) -> None:
        """Queue a wait on ``ev`` in ``stream``; the host does not block (``Event.wait``).

        SGLang on CUDA (managers/overlap_utils.py publish wait); the MI355X fix queues it
        on the forward stream itself. Counted in :attr:`queued_waits`, not as a host sync.
        A wait on an event recorded on the same stream is carried by stream order and
        queues nothing.

        Raises:
            StaleEventError: ``ev``'s slot was re-recorded.
        """
        s = self.stream(stream)
        event = ev.event  # stale check first
        self._check_barrier(stream, ev)
        if s is not self.stream(ev.stream or stream):
            s.wait_event(event)
            if self.is_gpu:
                self.ring.note_wait(ev, stream)
        self.queued_waits[stream] += 1

    def host_block(self, ev: RingEvent, kind: str = "publish") -> float:
        """Block the host until ``ev`` completes (``event.synchronize()``); count it.

        SGLang on HIP blocks here on ``publish_ready`` (PR #26672). Returns the seconds
        the host spent blocked (tiny on CPU). Counted in :attr:`sync_counts` ``[kind]``
        on every backend, so CPU tests see where the loop blocks.
        """
        t0 = time.perf_counter()
        ev.event.synchronize()
        dt = time.perf_counter() - t0
        self.ring.mark_complete(ev)
        self.count_sync(kind, dt)
        return dt

    def is_complete(self, ev: RingEvent) -> bool:
        """Non-blocking status read of ``ev`` (``event.query()``; not a host sync)."""
        done = bool(ev.event.query())
        if done:
            self.ring.mark_complete(ev)
        return done

    def wait_stream(self, waiter: str, source: str) -> RingEvent:
        """Make ``waiter`` wait for all work queued on ``source`` so far, through a ring
        event (record on ``source``, queued wait on ``waiter``).

        Used for ``forward.wait_stream(schedule)`` (SGLang run_batch). Returns the event.

        Raises:
            ValueError: on HIP, ``waiter="schedule", source="forward"``: that barrier hung
                and cost ~20 % throughput with MTP (sglang PR #26646, made CUDA-only).
        """
        if self.is_hip and waiter == "schedule" and self.stream(source) is self.stream("forward"):
            self._check_barrier(waiter, None)
        ev = self.record(source)
        self.stream_wait(waiter, ev)
        return ev

    def _check_barrier(self, waiter: str, ev: RingEvent | None) -> None:
        """Refuse, on HIP, any queued wait of the schedule stream on forward-stream work:
        ``schedule.wait_stream(forward)`` and ``schedule.wait_event(forward_done)`` are the
        same barrier (torch builds wait_stream from record + wait_event), which hung and
        cost ~20 % with MTP on HIP (sglang PR #26646, made CUDA-only). Allowed only when
        :attr:`allow_schedule_barrier` is set by an arm that measures that barrier on
        purpose (the cross_queue_wait sync mode), whose results are labelled so.

        Raises:
            ValueError: the barrier on HIP without the explicit allowance.
        """
        if not self.is_hip or waiter != "schedule" or self.allow_schedule_barrier:
            return
        src = None if ev is None else self.stream(ev.stream) if ev.stream else None
        if ev is None or src is self.stream("forward"):
            raise ValueError("a queued wait of the schedule stream on forward-stream work is refused on HIP "
                             "(the barrier of sglang PR #26646); pair the read with an event on the reading "
                             "stream, or measure it on purpose with sync_mode cross_queue_wait")

    def count_sync(self, kind: str, seconds: float = 0.0) -> None:
        """Count one host sync of ``kind`` that took ``seconds`` (for syncs made outside
        this class, e.g. a repeat_interleave without output_size)."""
        self.sync_counts[kind] += 1
        self.sync_seconds[kind] += seconds

    def synchronize(self, kind: str = "device_synchronize") -> float:
        """Block the host until the whole device is idle (``torch.cuda.synchronize``);
        counted under ``kind``. Returns seconds blocked."""
        t0 = time.perf_counter()
        if self.is_gpu:
            torch.cuda.synchronize(self.torch_device)
        dt = time.perf_counter() - t0
        self.count_sync(kind, dt)
        return dt

    @property
    def host_syncs(self) -> int:
        """Total host syncs counted so far."""
        return sum(self.sync_counts.values())

    def reset_counters(self) -> None:
        """Zero :attr:`sync_counts`, :attr:`sync_seconds`, :attr:`queued_waits`."""
        self.sync_counts.clear()
        self.sync_seconds.clear()
        self.queued_waits.clear()
        self.event_records.clear()

    # ------------------------------------------------------------------------ copies
    def pinned_empty(self, shape: Sequence[int] | torch.Size, dtype: torch.dtype) -> torch.Tensor:
        """An uninitialized host tensor, page-locked on GPU backends (needed for truly
        asynchronous copies); a plain CPU tensor on CPU."""
        return torch.empty(tuple(shape), dtype=dtype, pin_memory=self.is_gpu)

    def h2d(self, data: Sequence[int] | Sequence[float] | torch.Tensor, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        """Host data to a device tensor without blocking the host.

        On GPU the data is staged in pinned memory and copied with ``non_blocking=True``
        on the *current* stream (a pageable ``copy_`` would synchronize the stream: a
        hidden host sync). PyTorch's caching host allocator keeps the staging block alive
        until the copy completes. Use the result on the same stream, or pair the
        cross-stream read with an event (hip-vs-cuda.md item 5).
        """
        if isinstance(data, torch.Tensor):
            host = data.to(dtype)
        else:
            host = torch.tensor(data, dtype=dtype)
        if not self.is_gpu:
            return host
        if not host.is_pinned():
            host = host.pin_memory()
        # the caching host allocator records an event per pinned block a non_blocking copy
        # uses (a barrier packet on HIP, hip-vs-cuda.md item 9): counted
        self.event_records["h2d"] += 1
        return host.to(self.torch_device, non_blocking=True)

    def copy_to_host(self, tensors: Mapping[str, torch.Tensor], after: RingEvent | None = None) -> HostCopy:
        """Start non-blocking device-to-host copies of ``tensors`` on the copy stream.

        The copy stream first waits on ``after`` (the producing forward's event; None:
        a fresh event recorded now on the forward stream), so the cross-stream read is
        paired with an event (hip-vs-cuda.md item 5). On HIP the copy stream is the
        forward stream and stream order suffices. The source tensors are marked as used
        by the copy stream (``record_stream``) so the caching allocator does not recycle
        them before the copy runs. Models SGLang's result copy + ``copy_done`` event
        (managers/scheduler.py ``event_loop_overlap``).

        Returns:
            :class:`HostCopy`; read its tensors only after :meth:`wait_copy`.
        """
        copy_name = "copy"
        separate = self.stream("copy") is not self.stream("forward")
        if self.is_gpu and separate:
            src_ev = after if after is not None else self.record("forward")
            self.stream_wait(copy_name, src_ev)
        out: dict[str, torch.Tensor] = {}
        with self.use(copy_name):
            for name, t in tensors.items():
                dst = self.pinned_empty(t.shape, t.dtype)
                dst.copy_(t, non_blocking=True)
                self.event_records["d2h"] += 1 if self.is_gpu else 0
                if self.is_gpu and separate:
                    t.record_stream(self.stream(copy_name))
                out[name] = dst
            done = self.record(copy_name)
        return HostCopy(out, done)

    def wait_copy(self, hc: HostCopy, kind: str = "results") -> dict[str, torch.Tensor]:
        """Block the host until ``hc``'s copies are done (counted as ``kind``) and return
        the host tensors. SGLang: process_batch_result waits on copy_done."""
        self.host_block(hc.done, kind)
        return hc.tensors

    # ------------------------------------------------------------------------ timing
    def timing_mark(self, stream: str = "forward") -> Any:
        """A time stamp of the work queued on ``stream`` so far: a timing-enabled event
        recorded there (GPU; read later with ``elapsed_time`` against another mark), or the
        host's perf_counter (CPU, where work is synchronous). Used around each launch in
        measurement mode (timing events cost more on HIP, hip-vs-cuda.md item 9)."""
        if self.is_gpu:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(self.stream(stream))
            self.event_records["timing"] += 1
            return ev
        return time.perf_counter()

    @contextlib.contextmanager
    def timed(self, name: str, stream: str = "forward") -> Iterator[None]:
        """Time the work queued on ``stream`` inside the block (measurement mode only).

        GPU: timing-enabled events recorded before and after (read later by
        :meth:`collect_timings`, so no host sync here). CPU: host time stamps. Off
        measurement mode: nothing is recorded.
        """
        if not self.measure:
            yield
            return
        start = self._timing_free.pop() if self._timing_free else self._make_event(True)
        end = self._timing_free.pop() if self._timing_free else self._make_event(True)
        start.record(self.stream(stream))
        try:
            yield
        finally:
            end.record(self.stream(stream))
            self._timing_pending.append((name, start, end))

    def collect_timings(self) -> list[tuple[str, float]]:
        """Wait for every pending timed region and return ``(name, milliseconds)`` in
        order; one host sync of kind ``timing`` per region on GPU."""
        out: list[tuple[str, float]] = []
        for name, start, end in self._timing_pending:
            t0 = time.perf_counter()
            end.synchronize()
            if self.is_gpu:
                self.count_sync("timing", time.perf_counter() - t0)
            out.append((name, float(start.elapsed_time(end))))
            self._timing_free += [start, end]
        self._timing_pending = []
        return out
