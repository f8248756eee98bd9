"""``min_free_slots``: the legacy min-free-slots delay.

Rule (managers/min_free_slots_delayer.py; reference/mi355x-dspark-measurements.md):
delay iff ``running_bs > 0 and num_allocatable_reqs < threshold`` with threshold
min(4, max(2, (max_running_requests + 5) // 6)), disabled when max_running_requests < 8
or the threshold <= 1. Stateless: it ignores how many requests wait, which is why a
256-request burst settles at 253 running and 3 waiting until a running request finishes.
"""

from __future__ import annotations

from typing import Any

from specsched.sim.admission.base import AdmissionState, resolve_threshold


class MinFreeSlots:
    """Hold new prefills until ``threshold`` running slots are free."""

    name = "min_free_slots"

    stateless = True

    def __init__(self, max_running_requests: int, min_free_slots: int | None = None,
                 dflash_family: bool = True) -> None:
        self.threshold = resolve_threshold(max_running_requests, min_free_slots, dflash_family)

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> MinFreeSlots:
        """The policy for one run: threshold from max_running_requests and min_free_slots;
        automatic only for the DFlash family (sglang 0.5.23 ``resolve_min_free_slots``)."""
        return cls(server.max_running_requests, server.min_free_slots,
                   server.speculative_algorithm.is_block)

    def should_delay(self, state: AdmissionState) -> bool:
        if self.threshold <= 1:
            return False
        return state.running_bs > 0 and state.num_allocatable_reqs < self.threshold

    def on_prefill_admitted(self, num_admitted: int) -> None:
        return None
