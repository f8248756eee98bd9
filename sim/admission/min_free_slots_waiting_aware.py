"""``min_free_slots_waiting_aware``: delay only while free < min(threshold, waiting).

The change measured on MI355X (reference/mi355x-dspark-measurements.md, "waiting-aware
rule"): with at least ``threshold`` requests waiting it behaves as the legacy rule; with
fewer waiting it admits as soon as they all fit, so a burst's last few requests are not
held for a whole decode. Unit case: 254 running of 256 (2 free): 2 waiting are admitted,
3 waiting still wait.
"""

from __future__ import annotations

from specsched.sim.admission.base import AdmissionState, ThresholdDelay


class MinFreeSlotsWaitingAware(ThresholdDelay):
    """Hold new prefills while free slots < min(threshold, number waiting)."""

    name = "min_free_slots_waiting_aware"

    def should_delay(self, state: AdmissionState) -> bool:
        if self.threshold <= 1 or state.running_bs == 0:
            return False
        return state.num_allocatable_reqs < min(self.threshold, state.waiting_bs)
