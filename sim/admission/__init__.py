"""Admission-delay policies, one module each, selected by ``server.admission_delay``."""

from __future__ import annotations

from specsched.sim.admission.base import (
    AdmissionPolicy,
    AdmissionState,
    auto_threshold,
    resolve_threshold,
)
from specsched.sim.admission.min_free_slots import MinFreeSlots
from specsched.sim.admission.min_free_slots_waiting_aware import MinFreeSlotsWaitingAware
from specsched.sim.admission.none import NoDelay
from specsched.sim.config import AdmissionDelay, ServerArgs


def make_policy(server: ServerArgs) -> AdmissionPolicy:
    """Build the policy named by ``server.admission_delay`` (fresh state per run)."""
    kind = server.admission_delay
    if kind is AdmissionDelay.none:
        return NoDelay()
    if kind is AdmissionDelay.min_free_slots:
        return MinFreeSlots(server.max_running_requests, server.min_free_slots)
    if kind is AdmissionDelay.min_free_slots_waiting_aware:
        return MinFreeSlotsWaitingAware(server.max_running_requests, server.min_free_slots)
    if kind is AdmissionDelay.demand_observed:
        from specsched.sim.admission.demand_observed import DemandObserved

        return DemandObserved(server.max_running_requests, server.min_free_slots, server.max_delay_passes)
    raise ValueError(f"unknown admission_delay {kind!r}")


__all__ = [
    "AdmissionPolicy",
    "AdmissionState",
    "MinFreeSlots",
    "MinFreeSlotsWaitingAware",
    "NoDelay",
    "auto_threshold",
    "make_policy",
    "resolve_threshold",
]
