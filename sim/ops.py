"""The operations the overlap loop issues; an executor (sim or runtime) performs them.

See docs/architecture.md for the table of what each does on each side. Each op is a small
dataclass with slots; the executor sends a result back into the loop generator where noted.
Executors only read an op, and only until they send its result back: the loop
(:func:`sim.loop.scheduler_loop`) reuses one object per op it issues every iteration and
sets its fields before each yield (about eight an iteration; building each took a Python
``__init__`` call, docs/performance.md), so an op kept past its result may hold a later
pass's fields. Ops are not frozen dataclasses: a frozen one's ``__init__``
(``object.__setattr__`` per field) takes twice as long, and the loop sets their fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from specsched.sim.plan import BatchPlan
from specsched.sim.scheduler import Delivery


@dataclass(slots=True)
class Recv:
    """Take the requests that reached the scheduler. Result: list of :class:`sim.request.Req`."""


@dataclass(slots=True)
class FastForward:
    """The top of an iteration with ``plan``'s forward in flight (``handle``; launched,
    results pending). The simulator may run a stretch of decode iterations at once here
    (:meth:`sim.scheduler.Scheduler.decode_stretch`). Result: the ``(plan, handle)`` then in
    flight, or None when nothing was collapsed. Issued only when the loop is built with
    ``fast_forward=True``."""

    plan: BatchPlan
    handle: Any


@dataclass(slots=True)
class WaitForWork:
    """Nothing runs or waits: sleep until a request arrives (or the run ends)."""


@dataclass(slots=True)
class HostWork:
    """CPU work of the scheduler: ``kind`` is ``schedule`` (build a batch), ``launch``
    (prepare inputs and launch/replay), or ``process`` (process a step's results)."""

    kind: Literal["schedule", "launch", "process"]
    plan: BatchPlan


@dataclass(slots=True)
class Launch:
    """Enqueue a forward on the forward stream. ``part``: ``main`` (the plan's forward:
    extend, decode, or draft + verify) or ``inject`` (DSpark prefill: draft KV injection of
    the prompt's target hidden states). Result: a handle (executor-specific) with the
    forward's completion (publish) event."""

    plan: BatchPlan
    part: Literal["main", "inject"] = "main"


@dataclass(slots=True)
class HostBlock:
    """The host blocks until ``handle``'s forward completes (event.synchronize()).
    ``reason``: ``publish`` (overlap publish wait) or ``slot_expansion`` (repeat_interleave
    without output_size)."""

    handle: Any
    reason: Literal["publish", "slot_expansion"]


@dataclass(slots=True)
class StreamWait:
    """Queue a wait for ``handle``'s publish event. ``from_stream``: ``forward`` (the
    scheduler on the forward stream: stream order carries it) or ``schedule`` (a separate
    schedule stream: a cross-queue wait)."""

    handle: Any
    from_stream: Literal["forward", "schedule"]


@dataclass(slots=True)
class Results:
    """Wait for ``handle``'s result copy and return its :class:`sim.plan.StepOutput`."""

    handle: Any


@dataclass(slots=True)
class Deliver:
    """Tokens reach the clients now."""

    deliveries: list[Delivery]
