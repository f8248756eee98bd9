"""The interface every admission-delay policy implements, shipped or user-written.

SGLang calls the delayer once per prefill pass, after the early return (running batch full
or nothing waiting) and before the allocatable-slots check
(managers/scheduler.py ``_get_new_batch_prefill_raw``). A delay returns no prefill batch,
so the running batch decodes. The delayer is skipped while a chunked request is in progress.

A policy is a class with (docs/policies.md has a template):

- ``from_server(server, seed=0, **params)``: a classmethod building the instance for one
  run (fresh state); ``params`` are the scenario's ``server.admission_delay_params``.
- ``should_delay(state: AdmissionState) -> bool``: called at every prefill pass that could
  admit (something waits, a slot may be free, no chunked request in flight).
- ``on_prefill_admitted(num_admitted)``: called after a pass admitted requests.
- ``name`` (str) and ``stateless`` (bool): a stateless policy's answer depends only on the
  state it is shown, which lets the simulator's fast path reuse an answer.

:class:`AdmissionDelayBase` supplies ``from_server`` (calls ``cls(**params)`` and keeps the
server as ``self.server``), a no-op ``on_prefill_admitted`` and ``stateless = False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from specsched.sim.server_args import ServerArgs


@dataclass(frozen=True, slots=True)
class AdmissionState:
    """What the scheduler tells the delayer at one prefill pass.

    Attributes:
        running_bs: requests in the running batch, including finished ones not yet filtered
            (SGLang's ``running_bs``).
        num_allocatable_reqs: free slots: min(max_running_requests - running_bs, free
            request-pool rows).
        waiting_bs: requests in the waiting queue.
        active_running_bs: running requests that have not finished (``running_bs`` minus
            the finished-but-not-filtered ones).
    """

    running_bs: int
    num_allocatable_reqs: int
    waiting_bs: int
    active_running_bs: int


class AdmissionPolicy(Protocol):
    """An admission-delay policy: decides whether this prefill pass is skipped."""

    name: str
    stateless: bool

    @classmethod
    def from_server(cls, server: ServerArgs, seed: int = 0, **params: Any) -> AdmissionPolicy:
        """A fresh instance for one run of a server configured by ``server``."""
        ...

    def should_delay(self, state: AdmissionState) -> bool:
        """True to skip prefill admission at this pass (the running batch decodes)."""
        ...

    def on_prefill_admitted(self, num_admitted: int) -> None:
        """Called after a prefill batch admitted ``num_admitted`` (> 0) new requests."""
        ...


REQUIRED_METHODS = ("from_server", "should_delay", "on_prefill_admitted")
"""What a class named by ``server.admission_delay`` must have."""


class AdmissionDelayBase:
    """Convenience base for a user policy: subclass it and write ``should_delay``.

    ``from_server(server, seed, **params)`` calls ``cls(**params)`` (so ``__init__`` takes
    the policy's own parameters as keywords) and stores the server arguments as
    ``self.server`` (max_running_requests, speculative_algorithm, ...).
    """

    name: ClassVar[str] = "custom"
    stateless: ClassVar[bool] = False
    server: ServerArgs

    @classmethod
    def from_server(cls, server: ServerArgs, seed: int = 0, **params: Any) -> AdmissionDelayBase:
        obj = cls(**params)
        obj.server = server
        return obj

    def should_delay(self, state: AdmissionState) -> bool:
        raise NotImplementedError

    def on_prefill_admitted(self, num_admitted: int) -> None:
        return None


def auto_threshold(max_running_requests: int) -> int:
    """SGLang's automatic threshold F = min(4, max(2, (max_running_requests + 5) // 6)).

    Source: managers/min_free_slots_delayer.py. Returns 0 (delay disabled) when
    max_running_requests < 8 or F <= 1.
    """
    if max_running_requests < 8:
        return 0
    f = min(4, max(2, (max_running_requests + 5) // 6))
    return f if f > 1 else 0


def resolve_threshold(max_running_requests: int, explicit: int | None, dflash_family: bool = True,
                      explicit_rule: str = "wins") -> int:
    """The delay threshold in force: the automatic one, or an explicit value.

    Source: sglang 0.5.23 managers/min_free_slots_delayer.py ``resolve_min_free_slots``:
    unset, the automatic formula applies only to the DFlash family (``dflash_family``:
    DFLASH, DSPARK); other algorithms stay disabled. An explicit value, by ``explicit_rule``
    (sim/semantics.py ``min_free_slots_explicit``): ``wins`` (0.5.23) caps it at
    max_running_requests; ``capped_at_auto`` (older code) caps it at the automatic value
    (:func:`auto_threshold`, 0 below 8 running requests), so it can only lower it. 0 =
    disabled (as is any threshold <= 1).
    """
    if explicit is None:
        return auto_threshold(max_running_requests) if dflash_family else 0
    cap = auto_threshold(max_running_requests) if explicit_rule == "capped_at_auto" else max_running_requests
    t = min(explicit, cap)
    return t if t > 1 else 0


class ThresholdDelay:
    """Shared part of the stateless min-free-slots rules: the threshold and the hooks.

    The threshold is :func:`resolve_threshold` of max_running_requests, the explicit
    ``min_free_slots`` (capped by the preset's ``min_free_slots_explicit`` rule) and whether
    the algorithm is of the DFlash family (sglang 0.5.23 ``resolve_min_free_slots``:
    automatic only for DFLASH and DSPARK). Subclasses write
    ``should_delay``; their answer depends only on the state shown (``stateless``).

    Attributes:
        threshold: free request slots below which a pass may be delayed; 0 = disabled.
    """

    name: ClassVar[str] = "threshold"
    stateless: ClassVar[bool] = True

    def __init__(self, max_running_requests: int, min_free_slots: int | None = None,
                 dflash_family: bool = True, explicit_rule: str = "wins") -> None:
        self.threshold = resolve_threshold(max_running_requests, min_free_slots, dflash_family, explicit_rule)

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> ThresholdDelay:
        """The policy for one run from max_running_requests, min_free_slots, the
        speculative algorithm and the semantics preset's ``min_free_slots_explicit``."""
        return cls(server.max_running_requests, server.min_free_slots,
                   server.speculative_algorithm.is_block, server.rules.min_free_slots_explicit)

    def should_delay(self, state: AdmissionState) -> bool:
        raise NotImplementedError

    def on_prefill_admitted(self, num_admitted: int) -> None:
        return None
