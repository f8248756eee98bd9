"""``none``: never delay admission (SGLang without the min-free-slots delayer)."""

from __future__ import annotations

from typing import Any

from specsched.sim.admission.base import AdmissionState


class NoDelay:
    """Admit whenever the prefill budgets allow."""

    name = "none"
    stateless = True

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> NoDelay:
        """The policy for one run (no parameters)."""
        return cls()

    def should_delay(self, state: AdmissionState) -> bool:
        return False

    def on_prefill_admitted(self, num_admitted: int) -> None:
        return None
