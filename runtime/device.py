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

Design points forced by HIP (shared/reference/hip-vs-cuda.md):

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
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

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


def _resolve(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# --------------------------------------------------------------------------- CPU stand-ins
class NullEvent:
    """A CPU event with the subset of ``torch.cuda.Event``'s API the runtime uses.

    CPU ops are synchronous, so the event is complete as soon as it is recorded.
    ``record`` stamps ``time.perf_counter()`` so that :meth:`elapsed_time` gives host
    milliseconds in measurement mode, like a timing-enabled GPU event.
    """

    __slots__ = ("_t",)

    def __init__(self) -> None:
        self._t: float | None = None

    def record(self, stream: Any = None) -> None:
        """Mark the event (no-op on CPU besides the time stamp)."""
        self._t = time.perf_counter()

    def wait(self, stream: Any = None) -> None:
        """Queue a wait (no-op on CPU: everything before it already ran)."""

    def query(self) -> bool:
        """Always True: a CPU event is complete once recorded."""
        return True

    def synchronize(self) -> None:
        """Return at once (the work it marks already ran)."""

    def elapsed_time(self, end: NullEvent) -> float:
        """Milliseconds between this event's record and ``end``'s.

        Raises:
            RuntimeError: either event was never recorded.
        """
        if self._t is None or end._t is None:
            raise RuntimeError("elapsed_time on an event that was never recorded")
        return (end._t - self._t) * 1e3


class NullStream:
    """A CPU stream with the subset of ``torch.cuda.Stream``'s API the runtime uses."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def wait_event(self, event: Any) -> None:
        """Queue a wait on ``event`` (no-op on CPU)."""

    def wait_stream(self, stream: Any) -> None:
        """Queue a wait on ``stream``'s current work (no-op on CPU)."""

    def synchronize(self) -> None:
        """Return at once."""

    def query(self) -> bool:
        """Always True."""
        return True

    def __repr__(self) -> str:
        return f"NullStream({self.name!r})"


# ------------------------------------------------------------------------------ event ring
class EventRingExhausted(RuntimeError):
    """Every event of the ring is still in flight: the ring is smaller than the loop's
    in-flight depth (raise ``ring_size``), or a queued wait was never followed by a record
    on the waiting stream, so the ring cannot prove that wait has passed."""


class StaleEventError(RuntimeError):
    """An :class:`RingEvent` handle was used after its ring slot was re-recorded."""


@dataclass(eq=False, slots=True)
class _Slot:
    index: int
    event: Any
    generation: int = 0
    stream: str | None = None
    seq: int = 0
    complete: bool = True
    waiters: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RingEvent:
    """A handle on one record of a ring slot.

    Attributes:
        slot: the ring slot (holds the backend event object).
        generation: which record of the slot this handle refers to; a handle whose
            generation differs from the slot's is stale (the slot was re-recorded).
    """

    slot: _Slot
    generation: int

    @property
    def event(self) -> Any:
        """The backend event (``torch.cuda.Event`` or :class:`NullEvent`).

        Raises:
            StaleEventError: the slot was re-recorded since this handle was issued.
        """
        if self.generation != self.slot.generation:
            raise StaleEventError(
                f"event slot {self.slot.index} was re-recorded (generation {self.slot.generation}, "
                f"handle {self.generation})"
            )
        return self.slot.event

    @property
    def stream(self) -> str | None:
        """Name of the stream the event was recorded on."""
        return self.slot.stream

    @property
    def stale(self) -> bool:
        """True once the slot has been re-recorded."""
        return self.generation != self.slot.generation


class EventRing:
    """A fixed ring of reusable events that never re-records an event still in flight.

    Models the fix for sglang #31072 (a hang from re-recording an event that another
    stream still had a pending ``wait`` on): events are handed out round-robin from a ring
    sized larger than the loop's in-flight depth, and :meth:`acquire` additionally *checks*
    each candidate slot, skipping any that is in flight. A slot is in flight while

    1. its last record has not completed (``event.query()`` is False), or
    2. a stream that queued a wait on it (:meth:`note_wait`) has not provably passed that
       wait: proven once a record made on the waiting stream *after* the wait has
       completed (streams execute in order).

    ``query()`` is a non-blocking status read (cudaEventQuery/hipEventQuery), not a host
    sync. If no slot is free, :meth:`acquire` raises rather than blocking the host (a
    hidden host block is exactly what this project measures).

    Args:
        size: number of events (>= 2).
        make_event: factory for one backend event (``torch.cuda.Event``, :class:`NullEvent`,
            or a test double with ``record(stream)``, ``query()``, ``synchronize()``).
        name: for error messages.

    Raises:
        ValueError: size < 2.
    """

    def __init__(self, size: int, make_event: Callable[[], Any], name: str = "events") -> None:
        if size < 2:
            raise ValueError(f"event ring size must be >= 2, got {size}")
        self.name = name
        self._slots = [_Slot(i, make_event()) for i in range(size)]
        self._next = 0
        self._records: Counter[str] = Counter()  # records made so far per stream
        self._completed: dict[str, int] = {}  # highest record seq per stream known complete

    @property
    def size(self) -> int:
        """Number of events in the ring."""
        return len(self._slots)

    def acquire(self, stream: str) -> RingEvent:
        """The next free event, about to be recorded on ``stream``.

        The caller must record the returned event on that stream right away (as
        :meth:`Device.record` does); the ring stamps the record's per-stream sequence number.

        Raises:
            EventRingExhausted: every slot is in flight.
        """
        n = len(self._slots)
        for k in range(n):
            slot = self._slots[(self._next + k) % n]
            if self._is_free(slot):
                self._next = (slot.index + 1) % n
                self._records[stream] += 1
                slot.generation += 1
                slot.stream = stream
                slot.seq = self._records[stream]
                slot.complete = False
                slot.waiters = []
                return RingEvent(slot, slot.generation)
        busy = ", ".join(self._describe(s) for s in self._slots)
        raise EventRingExhausted(f"{self.name}: all {n} events in flight ({busy}); enlarge the ring")

    def note_wait(self, ev: RingEvent, waiting_stream: str) -> None:
        """Remember that ``waiting_stream`` queued a wait on ``ev`` (after its records so far)."""
        _ = ev.event  # stale check
        ev.slot.waiters.append((waiting_stream, self._records[waiting_stream]))

    def mark_complete(self, ev: RingEvent) -> None:
        """Record that the host observed ``ev`` complete (after a synchronize)."""
        if not ev.stale:
            self._set_complete(ev.slot)

    def is_free(self, ev_or_index: RingEvent | int) -> bool:
        """Whether a slot could be handed out now (see the class docstring)."""
        slot = ev_or_index.slot if isinstance(ev_or_index, RingEvent) else self._slots[ev_or_index]
        return self._is_free(slot)

    def in_flight(self) -> list[int]:
        """Indices of the slots that are in flight now."""
        return [s.index for s in self._slots if not self._is_free(s)]

    # internals
    def _set_complete(self, slot: _Slot) -> None:
        slot.complete = True
        if slot.stream is not None and slot.seq > self._completed.get(slot.stream, 0):
            self._completed[slot.stream] = slot.seq

    def _done(self, slot: _Slot) -> bool:
        if not slot.complete and slot.event.query():
            self._set_complete(slot)
        return slot.complete

    def _passed(self, stream: str, seq: int) -> bool:
        if self._completed.get(stream, 0) > seq:
            return True
        for s in self._slots:
            if s.stream == stream and s.seq > seq and self._done(s):
                return True
        return False

    def _is_free(self, slot: _Slot) -> bool:
        if not self._done(slot):
            return False
        slot.waiters = [w for w in slot.waiters if not self._passed(*w)]
        return not slot.waiters

    def _describe(self, s: _Slot) -> str:
        state = "running" if not s.complete else f"waits pending on {[w[0] for w in s.waiters]}"
        return f"#{s.index} on {s.stream}: {state}"


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
        dev = self.device
        if not dev.is_gpu:
            fn()  # the warm-up: same code path, same buffers
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
        with torch.cuda.graph(graph, pool=self._pool, stream=fwd):
            fn()
        self._graphs[key] = graph
        dev.synchronize("graph_capture")

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
    ) -> None:
        self.torch_device = _resolve(device)
        self.backend: Backend = detect_backend(self.torch_device)
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
        """True on CUDA and HIP."""
        return self.backend != "cpu"

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
            ver = torch.version.hip if self.is_hip else torch.version.cuda
            return f"{self.backend}:{name} (torch {torch.__version__}, {self.backend} {ver})"
        return f"cpu (torch {torch.__version__})"

    def _make_streams(self) -> dict[str, Any]:
        if not self.is_gpu:
            return {n: NullStream(n) for n in STREAM_NAMES}
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
        if self.is_hip and waiter == "schedule" and source == "forward":
            raise ValueError("schedule.wait_stream(forward) is refused on HIP (sglang PR #26646); pair the read with an event instead")
        ev = self.record(source)
        self.stream_wait(waiter, ev)
        return ev

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
