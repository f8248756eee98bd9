"""Waiting-queue order (SGLang's SchedulePolicy, managers/schedule_policy.py).

fcfs keeps arrival order (the default). lof: longest output first. random: a seeded
shuffle. Prefix-aware policies (lpm, dfs-weight) fall back to fcfs without a radix cache,
and the reference runs flush the cache, so they are not modelled.
"""

from __future__ import annotations

import random as _random

from specsched.sim.request import Req


class SchedulePolicy:
    """Orders the waiting queue for one prefill pass.

    Args:
        name: ``fcfs``, ``lof`` or ``random``.
        seed: seeds the ``random`` policy (ignored otherwise).
    """

    def __init__(self, name: str, seed: int = 0) -> None:
        if name not in ("fcfs", "lof", "random"):
            raise ValueError(f"unknown schedule_policy {name!r}; allowed: fcfs, lof, random")
        self.name = name
        self._rng = _random.Random(seed)

    def order(self, waiting: list[Req]) -> list[Req]:
        """Return the waiting requests in admission order (a new list)."""
        if self.name == "lof":
            return sorted(waiting, key=lambda r: -r.max_new_tokens)
        if self.name == "random":
            out = list(waiting)
            self._rng.shuffle(out)
            return out
        return list(waiting)
