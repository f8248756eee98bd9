"""Several schedulers of one server's arguments read as one, for a run's summary and records.

DP attention's ranks (:class:`sim.dp_attention.DPGroup`) and data-parallel replicas
(:mod:`sim.dp_replicas`) are each several :class:`sim.scheduler.Scheduler` objects that a
run's summary (:func:`sim.scheduler.run_counts`) and its pass records read as "the scheduler":
:class:`SchedulerSums` gives those figures over all of them, :class:`GroupKV` their KV pool's.
"""

from __future__ import annotations

from typing import Any

from specsched.sim.prefill_adder import KVRefusals


class GroupKV:
    """The KV figures of several schedulers of one server arguments (DP-attention ranks, or
    data-parallel replicas: sim/dp_replicas.py) for the records: ``used`` summed over them,
    ``peak`` and ``swa_peak`` each the largest one's (taken apart: the largest full peak and
    the largest SWA peak may be different schedulers'), ``capacity`` and ``swa_capacity`` one
    scheduler's (they all have the same)."""

    def __init__(self, schedulers: list[Any]) -> None:
        self._schedulers = schedulers

    @property
    def used(self) -> int:
        return sum(s.kv.used for s in self._schedulers)

    @property
    def peak(self) -> int:
        return max(s.kv.peak for s in self._schedulers)

    @property
    def capacity(self) -> int:
        return self._schedulers[0].kv.capacity

    @property
    def swa_capacity(self) -> int:
        return self._schedulers[0].kv.swa_capacity

    @property
    def swa_peak(self) -> int:
        return max(s.kv.swa_peak for s in self._schedulers)


class SchedulerSums:
    """What :func:`sim.scheduler.run_counts` reads of "the scheduler", over the schedulers of
    :attr:`schedulers` (a subclass provides them): retractions, preemptions, delayed passes, the
    passes the KV pool stopped and cache tokens summed, the requests aborted out of memory of all, the radix cache on where
    any has it."""

    @property
    def schedulers(self) -> list[Any]:
        raise NotImplementedError

    @property
    def num_retractions(self) -> int:
        return sum(s.num_retractions for s in self.schedulers)

    @property
    def oom_aborted(self) -> dict[int, int]:
        return {rid: n for s in self.schedulers for rid, n in s.oom_aborted.items()}

    @property
    def num_preemptions(self) -> int:
        return sum(s.num_preemptions for s in self.schedulers)

    @property
    def num_delayed_passes(self) -> int:
        return sum(s.num_delayed_passes for s in self.schedulers)

    @property
    def kv_refusals(self) -> KVRefusals:
        return KVRefusals.over(s.kv_refusals for s in self.schedulers)

    @property
    def cache_hit_tokens(self) -> int:
        return sum(s.cache_hit_tokens for s in self.schedulers)

    @property
    def prefix_cache_on(self) -> bool:
        return any(s.prefix_cache_on for s in self.schedulers)

    @property
    def cache_input_tokens(self) -> int:
        return sum(s.cache_input_tokens for s in self.schedulers)
