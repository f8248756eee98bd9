"""The device's view of committed tokens: what a forward actually commits.

In SGLang's overlap scheduler the GPU resolves sequence lengths itself (the FutureMap,
managers/overlap_utils.py), one step ahead of the host's view. Both executors (the SimPy
engine and the runtime) keep this device-side count so that a plan built on stale host
lengths still commits the right number of tokens: a request that finished one step earlier
rides along and commits 0, and a verify commits min(accept length, remaining output).
"""

from __future__ import annotations

import numpy as np
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.plan import DECODE, BatchPlan, StepOutput


class DeviceTokens:
    """Per-request committed-token counts on the device, and the accept draws.

    Args:
        acceptance: the run's seeded accept-length model.

    Attributes:
        committed: rid -> output tokens committed on the device.
        cycles: rid -> verify cycles the request has consumed draws for.
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
        A row of ``plan.resync_rids`` (a decode server's request resumed from its KV backup,
        no extend) restarts from the host's count too: the tokens the device committed for
        it in the forward in flight at its retraction were discarded.

        An extend-only forward (a Poisson arrival's prefill) returns after its extend rows:
        the decode loop would run over no row. Its new requests are read from the plan's
        tuple (a set is built only above four): membership is the same either way.
        """
        bs = plan.batch_size
        out = [0] * bs
        committed = self.committed
        before, caps = plan.committed_before, plan.max_new_tokens
        n_ext = plan.num_extend
        if n_ext:
            new = plan.new_rids   # a tuple of a request or two: `in` it is the set's answer
            if len(new) > 4:
                new = set(new)
            for i, rid in enumerate(plan.rids[:n_ext]):
                if rid in new:
                    b = before[i]
                    c = b + 1 if b + 1 < caps[i] else caps[i]
                    committed[rid] = c
                    out[i] = c - b
            if n_ext == bs:
                return StepOutput.from_list(out)   # an extend-only forward: no decode rows
        cycles, made = self.cycles, self.acceptance.made
        verify = plan.mode is not DECODE and plan.spec_window > 1
        get = committed.get
        resync = plan.resync_rids
        for i in range(n_ext, bs):
            rid = plan.rids[i]
            have = get(rid)
            if have is None or (resync and rid in resync):
                have = before[i]
            remaining = caps[i] - have
            if remaining <= 0:
                continue
            if verify:
                c = cycles.get(rid, 0)
                cycles[rid] = c + 1
                n = made(rid, c)
                if n is None:
                    n = self._draw_rest(plan, i, c)
                if n > remaining:  # INV-9: 1..window, INV-3: never past the output target
                    n = remaining
            else:
                n = 1
            committed[rid] = have + n
            out[i] = n
        return StepOutput.from_list(out)

    def _draw_rest(self, plan: BatchPlan, i: int, c: int) -> int:
        """The draw of row ``i`` of a verify ``plan`` (cycle ``c``), which is not made yet:
        made now together with the next cycle's draw of every later row that lacks it, in
        one :meth:`sim.acceptance.AcceptanceModel.prepare` (whole blocks from each request's
        own generator: the same values as one draw a row; the first verify after a burst's
        prefills lacks a draw in every row). A later row that will not draw (finished)
        may get a block it never reads, which changes no value drawn."""
        rids = list(plan.rids[i:])
        get = self.cycles.get
        upto = [c + 1] + [get(rid, 0) + 1 for rid in rids[1:]]
        self.acceptance.prepare(rids, upto)
        return self.acceptance.draw(rids[0], c)

    def state(self, rids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(committed, cycles, known) of ``rids`` as int/int/bool arrays (``known``: the
        device has a committed count for the request)."""
        get_c, get_y = self.committed.get, self.cycles.get
        c = [get_c(r, -1) for r in rids]
        return (np.array(c, dtype=np.int64), np.array([get_y(r, 0) for r in rids], dtype=np.int64),
                np.array(c, dtype=np.int64) >= 0)

    def set_state(self, rids: list[int], committed: np.ndarray | list[int], cycles: np.ndarray | None) -> None:
        """Overwrite the counts of ``rids`` (after a collapsed decode run, :mod:`sim.decode_run`);
        ``cycles`` None leaves the verify cycles alone (no speculative decoding)."""
        if isinstance(committed, np.ndarray):
            committed = committed.tolist()
        if len(committed) != len(rids):
            raise ValueError(f"set_state: {len(committed)} counts for {len(rids)} requests")
        have = self.committed
        for i, rid in enumerate(rids):   # by index: zip(..., strict=True) builds a keyword dict per call
            have[rid] = committed[i]
        if cycles is not None:
            self.cycles.update(zip(rids, cycles.tolist(), strict=True))
