"""``demand_observed``: the stateful min-free-slots delay of SGLang PR #35954 (open).

Source: sgl-project/sglang PR #35954, managers/min_free_slots_delayer.py and its unit tests
test/registered/unit/managers/test_min_free_slots_delayer.py, as restated in
reference/sglang-scheduler-mechanics.md ("Min-free-slots delay").

The legacy delayer compares free slots with a threshold derived from max_running_requests,
so a burst that fills all but a few slots (253 running, 3 waiting of 256) waits for whole
decodes. This rule instead learns the running batch size the workload actually sustains
(the *target*) and only delays while the batch is at that target and fewer than
``threshold`` slots below it are open. One prefill pass:

1. nothing runs: reset the state (target 0, no delayed passes) and admit;
2. nothing waits: admit (nothing to delay; the state is left alone);
3. ``target = max(target, active_running_bs)``;
   ``refillable = min(num_allocatable_reqs, waiting_bs)``;
4. growing (``active + refillable > target``): admit;
5. threshold = auto formula applied to ``target`` (or ``min(explicit, target)``);
6. real contraction (``running_bs == active_running_bs``, i.e. no finished-but-unfiltered
   requests, and ``target - (active + refillable) >= threshold``): lower the target and admit;
7. ``target - running_bs >= threshold``: admit;
8. ``delayed_passes >= max_delay_passes`` (default: the current target): admit;
9. otherwise delay and count the pass.

Semantics chosen where the reference is silent (documented in the methods too):

- Small targets: the threshold is :func:`sim.admission.base.auto_threshold` applied to the
  target, *including* its cut-off, so a target below 8 gives 0 = no delay at that pass
  (the PR reuses the same formula; a batch that small gains little from batching draft
  prefills). An explicit threshold becomes ``min(explicit, target)``; a result <= 1 also
  means no delay at that pass. If the policy as configured is disabled
  (``resolve_threshold(max_running_requests, min_free_slots) == 0``) it never delays.
- Growth does not raise the target: the target only follows observed ``active_running_bs``
  (step 3), so admitted requests raise it at the next pass once they run.
- A contraction sets the target to ``active + refillable``: the batch size reached once
  every request that can be admitted now is admitted.
- ``on_prefill_admitted`` resets the delayed-pass counter (nothing else). Admissions that
  step 4/6/7/8 allow reset it only if the prefill really admitted something; if it admitted
  nothing (e.g. the KV budget), the counter stays at the limit and the next pass admits too.
- Steps 1-2 are checked before the threshold gate, so a policy disabled by its threshold
  still resets on an empty batch.
"""

from __future__ import annotations

from typing import Any

from specsched.sim.admission.base import AdmissionState, auto_threshold, resolve_threshold


class DemandObserved:
    """Delay new prefills only while the batch sits at its observed target size.

    Args:
        max_running_requests: running-slot limit (requests); with no explicit threshold
            the policy is disabled when it is < 8, as for the legacy delayer.
        min_free_slots: explicit threshold (requests); None: the automatic formula
            applied to the target running batch size.
        max_delay_passes: consecutive delayed prefill passes (scheduler iterations) after
            which admission is forced; None: the current target running batch size.
        dflash_family: the speculative algorithm is DFLASH or DSPARK; otherwise, with no
            explicit threshold, the policy is disabled (sglang 0.5.23
            ``resolve_min_free_slots``).

    Attributes:
        target_running_bs: the learned target running batch size (requests); 0 after reset.
        delayed_passes: prefill passes delayed since the last admission or reset.
    """

    name = "demand_observed"
    stateless = False

    def __init__(
        self,
        max_running_requests: int,
        min_free_slots: int | None = None,
        max_delay_passes: int | None = None,
        dflash_family: bool = True,
    ) -> None:
        if max_running_requests < 1:
            raise ValueError(f"max_running_requests must be >= 1, got {max_running_requests}")
        if min_free_slots is not None and min_free_slots < 1:
            raise ValueError(f"min_free_slots must be >= 1 or None, got {min_free_slots}")
        if max_delay_passes is not None and max_delay_passes < 1:
            raise ValueError(f"max_delay_passes must be >= 1 or None, got {max_delay_passes}")
        self.max_running_requests = max_running_requests
        self.min_free_slots = min_free_slots
        self.max_delay_passes = max_delay_passes
        self.enabled = resolve_threshold(max_running_requests, min_free_slots, dflash_family) > 1
        self.target_running_bs = 0
        self.delayed_passes = 0

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> DemandObserved:
        """The policy for one run from max_running_requests, min_free_slots,
        max_delay_passes and the speculative algorithm (the automatic threshold applies only
        to the DFlash family, as sglang 0.5.23 ``resolve_min_free_slots`` decides for every
        min-free-slots rule)."""
        return cls(server.max_running_requests, server.min_free_slots, server.max_delay_passes,
                   server.speculative_algorithm.is_block)

    def threshold_for(self, target_running_bs: int) -> int:
        """Delay threshold (requests) in force for a target running batch size (requests).

        Auto: ``min(4, max(2, (target + 5) // 6))`` with :func:`auto_threshold`'s cut-off
        (0 = no delay below a target of 8): 8 -> 2, 12 -> 2, 13 -> 3, 24 -> 4. Explicit:
        ``min(min_free_slots, target)``, 0 when that is <= 1. Source: PR #35954 as restated
        in reference/sglang-scheduler-mechanics.md.
        """
        if self.min_free_slots is None:
            return auto_threshold(target_running_bs)
        t = min(self.min_free_slots, target_running_bs)
        return t if t > 1 else 0

    def reset(self) -> None:
        """Forget the target and the delayed-pass count (done when nothing runs)."""
        self.target_running_bs = 0
        self.delayed_passes = 0

    def should_delay(self, state: AdmissionState) -> bool:
        """True to skip prefill admission at this pass (the running batch decodes).

        ``state`` counts requests: running_bs (incl. finished-but-unfiltered),
        num_allocatable_reqs (free slots), waiting_bs, active_running_bs. Updates the target
        and, when it delays, the delayed-pass count. Rule: PR #35954 (module docstring).
        """
        if state.running_bs <= 0:
            self.reset()
            return False
        if state.waiting_bs <= 0 or not self.enabled:
            return False
        active = state.active_running_bs
        self.target_running_bs = max(self.target_running_bs, active)
        target = self.target_running_bs
        refillable = max(0, min(state.num_allocatable_reqs, state.waiting_bs))
        if active + refillable > target:
            return False  # growing: demand exceeds what we have seen
        threshold = self.threshold_for(target)
        if threshold <= 1:
            return False
        if state.running_bs == active and target - (active + refillable) >= threshold:
            self.target_running_bs = active + refillable  # real contraction
            return False
        if target - state.running_bs >= threshold:
            return False
        limit = self.max_delay_passes if self.max_delay_passes is not None else target
        if self.delayed_passes >= limit:
            return False
        self.delayed_passes += 1
        return True

    def on_prefill_admitted(self, num_admitted: int) -> None:
        """Record that a prefill batch admitted ``num_admitted`` (> 0) requests.

        Resets the delayed-pass counter, so ``max_delay_passes`` bounds consecutive delayed
        passes between admissions. The target is not changed here: it follows the observed
        active running batch at the next pass. Source: PR #35954 ``on_prefill_admitted``.
        """
        if num_admitted > 0:
            self.delayed_passes = 0
