"""``min_free_slots_waiting_aware``: delay only while free < min(threshold, waiting).

The change measured on MI355X (reference/mi355x-dspark-measurements.md, "waiting-aware
rule"): with at least ``threshold`` requests waiting it behaves as the legacy rule; with
fewer waiting it admits as soon as they all fit, so a burst's last few requests are not
held for a whole decode. Unit case: 254 running of 256 (2 free): 2 waiting are admitted,
3 waiting still wait.
"""

from __future__ import annotations

from typing import Any

from specsched.sim.admission.base import AdmissionState, resolve_threshold


class MinFreeSlotsWaitingAware:
    """Hold new prefills while free slots < min(threshold, number waiting)."""

    name = "min_free_slots_waiting_aware"

    stateless = True

    def __init__(self, max_running_requests: int, min_free_slots: int | None = None,
                 dflash_family: bool = True) -> None:
        self.threshold = resolve_threshold(max_running_requests, min_free_slots, dflash_family)

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> MinFreeSlotsWaitingAware:
        """The policy for one run: threshold from max_running_requests and min_free_slots;
        automatic only for the DFlash family (sglang 0.5.23 ``resolve_min_free_slots``)."""
        return cls(server.max_running_requests, server.min_free_slots,
                   server.speculative_algorithm.is_block)

    def should_delay(self, state: AdmissionState) -> bool:
        if self.threshold <= 1 or state.running_bs == 0:
            return False
        return state.num_allocatable_reqs < min(self.threshold, state.waiting_bs)

    def on_prefill_admitted(self, num_admitted: int) -> None:
        return None
