"""Admission-delay policies, one module each, selected by ``server.admission_delay``: a
shipped name, or a user class named ``module.path:Class`` / ``file.py:Class``
(docs/policies.md). Shipped and user policies have the same interface
(:mod:`sim.admission.base`)."""

from __future__ import annotations

from pathlib import Path

from specsched.sim.admission.base import (
    REQUIRED_METHODS,
    AdmissionDelayBase,
    AdmissionPolicy,
    AdmissionState,
    auto_threshold,
    resolve_threshold,
)
from specsched.sim.admission.demand_observed import DemandObserved
from specsched.sim.admission.min_free_slots import MinFreeSlots
from specsched.sim.admission.min_free_slots_waiting_aware import MinFreeSlotsWaitingAware
from specsched.sim.admission.none import NoDelay
from specsched.sim.policy_loader import is_policy_spec, load_policy_class
from specsched.sim.server_args import ServerArgs

SHIPPED: dict[str, type] = {
    "none": NoDelay,
    "min_free_slots": MinFreeSlots,
    "min_free_slots_waiting_aware": MinFreeSlotsWaitingAware,
    "demand_observed": DemandObserved,
}
"""Shipped policies by ``server.admission_delay`` name."""


def policy_class(spec: str, scenario_path: str | None = None) -> type:
    """The class for ``server.admission_delay`` = ``spec`` (a shipped name or a class spec).

    Raises:
        PolicyLoadError: a class spec that does not import or lacks the interface.
        KeyError: an unknown shipped name (config validation rejects those first).
    """
    if not is_policy_spec(spec):
        return SHIPPED[spec]
    base = Path(scenario_path).parent if scenario_path else None
    return load_policy_class(spec, REQUIRED_METHODS, base)


def make_policy(server: ServerArgs, seed: int = 0, scenario_path: str | None = None) -> AdmissionPolicy:
    """Build the policy named by ``server.admission_delay`` (fresh state per run).

    Args:
        server: server arguments; ``admission_delay_params`` go to the class's
            ``from_server`` as keywords.
        seed: the run's seed (for a policy that draws random numbers).
        scenario_path: the scenario file (a relative policy file resolves next to it).

    Raises:
        ConfigError: the class does not import, lacks the interface, or rejects the params
            (names the key ``server.admission_delay`` / ``server.admission_delay_params``).
    """
    # the one builder, as the queue order's
    from specsched.sim.policy_loader import make_named_policy

    return make_named_policy(server, "admission_delay", SHIPPED, REQUIRED_METHODS, "policies", seed, scenario_path)


__all__ = [
    "SHIPPED",
    "AdmissionDelayBase",
    "AdmissionPolicy",
    "AdmissionState",
    "MinFreeSlots",
    "MinFreeSlotsWaitingAware",
    "NoDelay",
    "auto_threshold",
    "make_policy",
    "policy_class",
    "resolve_threshold",
]
