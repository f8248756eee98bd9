"""``min_free_slots``: the legacy min-free-slots delay.

Rule (managers/min_free_slots_delayer.py; reference/mi355x-dspark-measurements.md):
delay iff ``running_bs > 0 and num_allocatable_reqs < threshold`` with threshold
min(4, max(2, (max_running_requests + 5) // 6)), disabled when max_running_requests < 8
or the threshold <= 1. Stateless: it ignores how many requests wait, which is why a
256-request burst settles at 253 running and 3 waiting until a running request finishes.
"""

from __future__ import annotations

from specsched.sim.admission.base import AdmissionState, ThresholdDelay


class MinFreeSlots(ThresholdDelay):
    """Hold new prefills until ``threshold`` running slots are free."""

    name = "min_free_slots"

    def should_delay(self, state: AdmissionState) -> bool:
        if self.threshold <= 1:
            return False
        return state.running_bs > 0 and state.num_allocatable_reqs < self.threshold
