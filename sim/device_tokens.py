"""The device's view of committed tokens: what a forward actually commits.

In SGLang's overlap scheduler the GPU resolves sequence lengths itself (the FutureMap,
managers/overlap_utils.py), one step ahead of the host's view. Both executors (the SimPy
engine and the runtime) keep this device-side count so that a plan built on stale host
lengths still commits the right number of tokens: a request that finished one step earlier
rides along and commits 0, and a verify commits min(accept length, remaining output).
"""

from __future__ import annotations

import numpy as np

from sim.acceptance import AcceptanceModel
from sim.plan import BatchPlan, ForwardMode, StepOutput


class DeviceTokens:
    """Per-request committed-token counts on the device, and the accept draws.

    Args:
        acceptance: the run's seeded accept-length model.
    """

    def __init__(self, acceptance: AcceptanceModel) -> None:
        self.acceptance = acceptance
        self.committed: dict[int, int] = {}
        self.cycles: dict[int, int] = {}

    def step(self, plan: BatchPlan) -> StepOutput:
        """Commit one forward's tokens and return them per request.

        Extend requests whose prefill completes commit 1 token (the sampled first token,
        counted from the host's committed count: a re-prefill after retraction restarts
        there). Decode commits 1, verify min(draw, remaining); finished requests commit 0.
        """
        out = [0] * plan.batch_size
        new = set(plan.new_rids)
        committed, cycles, draw = self.committed, self.cycles, self.acceptance.draw
        verify = plan.mode is not ForwardMode.DECODE and plan.spec_window > 1
        for i, rid in enumerate(plan.rids):
            cap = plan.max_new_tokens[i]
            if i < plan.num_extend:
                if rid in new:
                    self.committed[rid] = min(plan.committed_before[i] + 1, cap)
                    out[i] = self.committed[rid] - plan.committed_before[i]
                continue
            have = committed.get(rid)
            if have is None:
                have = plan.committed_before[i]
            remaining = cap - have
            if remaining <= 0:
                continue
            if not verify:
                n = 1
            else:
                c = cycles.get(rid, 0)
                cycles[rid] = c + 1
                n = draw(rid, c)
                if n > remaining:
                    n = remaining
            committed[rid] = have + n
            out[i] = n
        return StepOutput(np.array(out, dtype=np.int64))
