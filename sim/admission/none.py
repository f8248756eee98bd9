"""``none``: never delay admission (SGLang without the min-free-slots delayer)."""

from __future__ import annotations

from specsched.sim.admission.base import AdmissionState


class NoDelay:
    """Admit whenever the prefill budgets allow."""

    name = "none"
    stateless = True

    def should_delay(self, state: AdmissionState) -> bool:
        return False

    def on_prefill_admitted(self, num_admitted: int) -> None:
        return None
