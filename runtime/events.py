"""Events and streams of :class:`runtime.device.Device`: the CPU stand-ins (no-op streams,
always-complete events with the same API) and the :class:`EventRing`, which never
re-records an event that may still have a pending wait (sglang #31072 hang,
hip-vs-cuda.md item 6)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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
