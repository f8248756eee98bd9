"""The interface every admission-delay policy implements.

SGLang calls the delayer once per prefill pass, after the early return (running batch full
or nothing waiting) and before the allocatable-slots check
(managers/scheduler.py ``_get_new_batch_prefill_raw``). A delay returns no prefill batch,
so the running batch decodes. The delayer is skipped while a chunked request is in progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class AdmissionState:
    """What the scheduler tells the delayer at one prefill pass.

    Attributes:
        running_bs: requests in the running batch, including finished ones not yet filtered
            (SGLang's ``running_bs``).
        num_allocatable_reqs: free slots: min(max_running_requests - running_bs, free
            request-pool rows).
        waiting_bs: requests in the waiting queue.
        active_running_bs: running requests that have not finished (``running_bs`` minus
            the finished-but-not-filtered ones).
    """

    running_bs: int
    num_allocatable_reqs: int
    waiting_bs: int
    active_running_bs: int


class AdmissionPolicy(Protocol):
    """An admission-delay policy: decides whether this prefill pass is skipped."""

    name: str
    stateless: bool
    """True when ``should_delay`` is a pure function of the :class:`AdmissionState` and the
    policy keeps no state between passes (``on_prefill_admitted`` does nothing). The
    collapsed decode path (:mod:`sim.decode_run`) then asks it once per distinct state;
    with a stateful policy a stretch ends whenever requests wait."""

    def should_delay(self, state: AdmissionState) -> bool:
        """True to skip prefill admission at this pass (the running batch decodes)."""
        ...

    def on_prefill_admitted(self, num_admitted: int) -> None:
        """Called after a prefill batch admitted ``num_admitted`` (> 0) new requests."""
        ...


def auto_threshold(max_running_requests: int) -> int:
    """SGLang's automatic threshold F = min(4, max(2, (max_running_requests + 5) // 6)).

    Source: managers/min_free_slots_delayer.py. Returns 0 (delay disabled) when
    max_running_requests < 8 or F <= 1.
    """
    if max_running_requests < 8:
        return 0
    f = min(4, max(2, (max_running_requests + 5) // 6))
    return f if f > 1 else 0


def resolve_threshold(max_running_requests: int, explicit: int | None) -> int:
    """The delay threshold in force: the automatic one, or an explicit value.

    Newer SGLang lets an explicit value win, capped at max_running_requests (older code
    capped it at the automatic value; managers/min_free_slots_delayer.py). 0 = disabled.
    """
    if explicit is None:
        return auto_threshold(max_running_requests)
    t = min(explicit, max_running_requests)
    return t if t > 1 else 0
