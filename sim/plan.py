"""The batch plan: the immutable record of one forward, shared by the cost model, the
simulated device, the runtime and the calibration (vLLM's ``SchedulerOutput`` idea).

SGLang builds a ``ScheduleBatch`` per forward (managers/schedule_batch.py) whose
``forward_mode`` is EXTEND (prefill, possibly chunked), DECODE, TARGET_VERIFY (speculative
verify) or MIXED (enable_mixed_chunk). Here that label is derived from the token counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from specsched.sim.frozen_slots import become, writable_twin


class ForwardMode(StrEnum):
    """What a forward does. EXTEND = prefill (maybe chunked); DECODE = one token per request;
    VERIFY = a speculative cycle (draft forward(s) + target verify of the window);
    MIXED = extend plus decode requests riding in it (enable_mixed_chunk)."""

    EXTEND = "extend"
    DECODE = "decode"
    VERIFY = "verify"
    MIXED = "mixed"


@dataclass(frozen=True, slots=True, init=False)
class BatchPlan:
    """One forward's composition.

    Attributes:
        step: 0-based index of the forward in the run.
        mode: see :class:`ForwardMode`.
        rids: every request in the forward, extend requests first (tuple of int).
        extend_lens: tokens computed per request in ``rids`` order: the (chunked) extend
            length for extend requests, 1 for decode, the verify window for verify.
        prefix_lens: context (KV tokens already present) per request before this forward.
        num_extend: how many leading entries of ``rids`` are extend (prefill) requests.
        chunked_rid: the request cut by chunked prefill in this batch (its prefill goes on), or None.
        new_rids: extend requests whose prefill completes in this forward (they sample
            their first token here).
        spec_window: verify window (gamma + 1 positions) for VERIFY/MIXED, else 1.
        committed_before: output tokens the scheduler had committed per request when it
            built the plan (exact for extend requests; one step stale for decode ones).
        max_new_tokens: each request's output target.
        resync_rids: decode rows whose device count restarts at ``committed_before``: a
            decode server's retracted request, resumed from its KV backup without an extend
            (the tokens of its forward in flight at the retraction were discarded; see
            :meth:`sim.scheduler_disagg.Disagg._resume_retracted`). Usually empty.
        batch_size: len(rids), including requests that finished one step earlier and ride
            along (the overlap one-step lag).
        num_extend_tokens: prompt tokens computed by this forward (extend requests only:
            the sum of the first ``num_extend`` extend lengths). A field, set once: an extend
            launch reads it four times (its issue, idle lead and step record), where a
            property summed the slice at every read.
    """

    step: int
    mode: ForwardMode
    rids: tuple[int, ...]
    extend_lens: tuple[int, ...]
    prefix_lens: tuple[int, ...]
    num_extend: int = 0
    chunked_rid: int | None = None
    new_rids: tuple[int, ...] = ()
    spec_window: int = 1
    committed_before: tuple[int, ...] = ()
    max_new_tokens: tuple[int, ...] = ()
    resync_rids: tuple[int, ...] = ()
    batch_size: int = field(init=False)
    num_extend_tokens: int = field(init=False)

    def __init__(self, step: int, mode: ForwardMode, rids: tuple[int, ...], extend_lens: tuple[int, ...],
                 prefix_lens: tuple[int, ...], num_extend: int = 0, chunked_rid: int | None = None,
                 new_rids: tuple[int, ...] = (), spec_window: int = 1, committed_before: tuple[int, ...] = (),
                 max_new_tokens: tuple[int, ...] = (), resync_rids: tuple[int, ...] = ()) -> None:
        # one C call for the fields, not one a field (sim/frozen_slots.py); frozen once built
        become(self, "__class__", _PlanFields)
        self.step = step
        self.mode = mode
        self.rids = rids
        self.extend_lens = extend_lens
        self.prefix_lens = prefix_lens
        self.num_extend = num_extend
        self.chunked_rid = chunked_rid
        self.new_rids = new_rids
        self.spec_window = spec_window
        self.committed_before = committed_before
        self.max_new_tokens = max_new_tokens
        self.resync_rids = resync_rids
        self.batch_size = len(rids)
        self.num_extend_tokens = sum(extend_lens[:num_extend]) if num_extend else 0
        self.__class__ = BatchPlan

    @property
    def decode_rids(self) -> tuple[int, ...]:
        """Requests decoding/verifying in this forward."""
        return self.rids[self.num_extend :]

    @property
    def is_prefill(self) -> bool:
        return self.mode is EXTEND or self.mode is MIXED


# the members as module names (a member read through the enum class costs ~0.1 us, see
# sim/request.py); per-forward paths use these
EXTEND, DECODE, VERIFY, MIXED = ForwardMode.EXTEND, ForwardMode.DECODE, ForwardMode.VERIFY, ForwardMode.MIXED


_PlanFields = writable_twin(BatchPlan)


def decode_plan(step: int, spec: bool, window: int, rids: list[int], prefix_lens: list[int],
                committed_before: list[int], max_new_tokens: list[int], resync_rids: tuple[int, ...] = ()) -> BatchPlan:
    """The one builder of decode/verify plans (SGLang ``prepare_for_decode``), used by the
    step-by-step scheduler and by the collapsed decode path alike.

    Args:
        step: the forward's index. spec: a verify (True) or a plain decode (False).
        window: tokens computed per request (verify window, or 1).
        rids, prefix_lens, committed_before, max_new_tokens: per request, in batch order
            (lists of int: context tokens, output tokens committed, output target).
        resync_rids: see :attr:`BatchPlan.resync_rids`.
    """
    # positional (the field order of BatchPlan): about a third cheaper than keywords
    return BatchPlan(step, VERIFY if spec else DECODE, tuple(rids), (window,) * len(rids),
                     tuple(prefix_lens), 0, None, (), window, tuple(committed_before), tuple(max_new_tokens),
                     resync_rids)


class StepOutput:
    """What a forward produced, per request: output tokens committed (0 for a request that
    rides along after finishing, or whose chunked prefill is not complete).

    Attributes:
        committed: int array, shape (plan.batch_size,), aligned with ``plan.rids``: tokens
            committed by this forward for each request (>= 0).

    The simulator's device builds it from a Python list (:meth:`from_list`) and the
    scheduler reads it back as one (:meth:`counts`): a forward holds a handful of requests,
    where building and reading a numpy array is most of the cost. The array is made the
    first time ``committed`` is read. Treat both as read-only.
    """

    __slots__ = ("_array", "_list")

    def __init__(self, committed: np.ndarray) -> None:
        self._array = committed
        self._list: list[int] | None = None

    @classmethod
    def from_list(cls, counts: list[int]) -> StepOutput:
        """Build from per-request counts (a list of int, aligned with ``plan.rids``)."""
        out = cls.__new__(cls)
        out._array = None
        out._list = counts
        return out

    @classmethod
    def from_mapping(cls, plan: BatchPlan, counts: dict[int, int]) -> StepOutput:
        """Build from rid -> count (missing rids commit 0)."""
        return cls(np.array([counts.get(r, 0) for r in plan.rids], dtype=np.int64))

    @property
    def committed(self) -> np.ndarray:
        if self._array is None:
            self._array = np.array(self._list, dtype=np.int64)
        return self._array

    def counts(self) -> list[int]:
        """``committed`` as a list of int (the same values; do not modify it)."""
        if self._list is None:
            self._list = self._array.tolist()
        return self._list

    def __repr__(self) -> str:
        return f"StepOutput({self.counts()!r})"
